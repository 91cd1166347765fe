// What a browser does with a connect session's hosted page (docs/contract.md §5a), through inject:
// load the page (keeping the form cookie it sets), then press a provider's button — a form post
// carrying the page's nonce.
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';

/** A loaded hosted page: where its form posts, its nonce, and the form cookie that binds the nonce to this "browser". */
export interface HostedPage {
  res: LightMyRequestResponse;
  action: string;
  nonce: string;
  /** `form_binding=<value>`, for the Cookie header. */
  formCookie: string;
  popup: boolean;
}

/** The form of a hosted page's HTML: its action and nonce (null when the page has no form). */
export function formOf(html: string): { action: string; nonce: string; popup: boolean } | null {
  const action = /<form method="post" action="([^"]+)">/.exec(html)?.[1];
  const nonce = /<input type="hidden" name="nonce" value="([^"]+)">/.exec(html)?.[1];
  if (!action || !nonce) return null;
  return { action, nonce, popup: html.includes('<input type="hidden" name="popup" value="1">') };
}

/** Loads a session's hosted page (its link's path, `?popup=1` or not) and reads its form. */
export async function openPage(app: FastifyInstance, sessionUrl: string, options: { popup?: boolean } = {}): Promise<HostedPage> {
  const res = await app.inject({ url: `${new URL(sessionUrl).pathname}${options.popup ? '?popup=1' : ''}` });
  expect(res.statusCode, res.body).toBe(200);
  const form = formOf(res.body);
  expect(form, res.body).not.toBeNull();
  const binding = res.cookies.find((cookie) => cookie.name === 'form_binding');
  expect(binding?.path).toBe(form?.action);
  return { res, ...(form as { action: string; nonce: string; popup: boolean }), formCookie: `form_binding=${binding?.value}` };
}

/**
 * Presses `provider`'s button on a loaded page, as the browser that loaded it (same origin,
 * the form cookie, and the `oauth_tx` cookie when it has one).
 */
export async function press(app: FastifyInstance, page: HostedPage, provider: string, options: { tx?: string; headers?: Record<string, string>; body?: Record<string, string> } = {}) {
  const fields = { nonce: page.nonce, provider, ...(page.popup ? { popup: '1' } : {}), ...options.body };
  return app.inject({
    method: 'POST',
    url: page.action,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'sec-fetch-site': 'same-origin',
      cookie: [page.formCookie, ...(options.tx ? [`oauth_tx=${options.tx}`] : [])].join('; '),
      ...options.headers,
    },
    payload: new URLSearchParams(fields).toString(),
  });
}

/** Opens a session's page and presses `provider`'s button: the flow's start (a redirect to the provider). */
export async function startThroughPage(app: FastifyInstance, sessionUrl: string, provider: string, options: { tx?: string; popup?: boolean } = {}) {
  const page = await openPage(app, sessionUrl, { popup: options.popup ?? false });
  const started = await press(app, page, provider, options.tx ? { tx: options.tx } : {});
  expect(started.statusCode, started.body).toBe(303);
  return { started, tx: started.cookies.find((cookie) => cookie.name === 'oauth_tx')?.value ?? '', authUrl: started.headers.location as string };
}
