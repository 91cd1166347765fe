/**
 * The pages an end user sees when a product sends them through a connect session
 * (CONTRACT.md §5a): the hosted page listing the allowed providers, the pages for a session
 * that cannot be used, and the page that ends a flow started in a popup by connect.js. Server-
 * rendered HTML with every value escaped, no inline script or style (the CSP allows none),
 * plain links that work without JavaScript.
 */
import { Type } from 'typebox';
import type { TypedFastify } from '../http/typed.ts';
import { getOrganization } from '../organizations/organizations.ts';
import type { Services } from '../services.ts';
import { type FlowOutcome, outcomeParams, callbackRedirect } from '../integrations/connect/callback.ts';
import { beginFlow, OAUTH_COOKIE_PATH, OAUTH_TX_COOKIE, setTxCookie } from '../integrations/connect/start.ts';
import { type ConnectSessionRow, sessionBySecret, sessionStatus } from '../integrations/sessions/sessions.ts';
import type { StateRow } from '../integrations/state.ts';
import { HTML_HEADERS, staticFileRoutes } from './static-files.ts';

/** The pages' policy without COOP, so that connect.js keeps a handle on the popup it opened (no-store: the routes' `noStore`). */
export const CONNECT_PAGE_HEADERS = HTML_HEADERS;

const ASSETS = [
  { url: '/connect.js', file: 'connect.js', type: 'text/javascript; charset=utf-8' },
  { url: '/connect/assets/done.js', file: 'connect-done.js', type: 'text/javascript; charset=utf-8' },
  { url: '/connect/assets/connect.css', file: 'connect.css', type: 'text/css; charset=utf-8' },
] as const;

const SecretParams = Type.Object({ secret: Type.String({ maxLength: 64 }) });

/** Escapes text for an HTML text node or a quoted attribute. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

function page(title: string, body: string, extraHead = ''): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/connect/assets/connect.css">
${extraHead}</head>
<body>
<main class="card">
${body}
</main>
</body>
</html>
`;
}

/** Why a session cannot be used, in words a person understands, with its status code. */
const UNUSABLE = {
  unknown: { status: 404, title: 'This link does not work', text: 'The link is not valid. Ask the app that sent you here for a new one.' },
  expired: { status: 410, title: 'This link has expired', text: 'Connect links work for a limited time. Go back to the app and start again to get a new one.' },
  completed: { status: 410, title: 'This link has been used', text: 'An account was already connected with this link. Go back to the app; if you need to connect again, it can give you a new link.' },
  revoked: { status: 410, title: 'This link was cancelled', text: 'The app cancelled this link. Go back to the app and start again.' },
} as const;

/** A provider the session does not allow (a tampered link). */
const NOT_ALLOWED = {
  status: 400,
  html: page('This service is not available here', '<h1>This service is not available here</h1>\n<p>This link does not connect that service. Go back and choose one of those listed.</p>'),
};

function unusablePage(kind: keyof typeof UNUSABLE): { status: number; html: string } {
  const { status, title, text } = UNUSABLE[kind];
  return { status, html: page(title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(text)}</p>`) };
}

/** The hosted page of a usable session: the organization, and one link per allowed provider. */
async function hostedPage(services: Services, session: ConnectSessionRow, secret: string, popup: boolean): Promise<string> {
  const organization = await getOrganization(services.db, session.organizationId);
  const name = organization?.name ?? 'your organization';
  const links = session.allowedProviders
    .map((id) => services.providers.get(id))
    .filter((provider) => provider !== undefined)
    .map((provider) => {
      const href = `${startPath(secret)}?provider=${encodeURIComponent(provider.id)}${popup ? '&popup=1' : ''}`;
      return `<li><a class="provider" href="${escapeHtml(href)}">Connect ${escapeHtml(provider.displayName)}</a></li>`;
    })
    .join('\n');
  return page(
    `Connect an account · ${name}`,
    `<p class="eyebrow">${escapeHtml(name)}</p>
<h1>Connect an account</h1>
<p>Choose the service to connect. You will sign in there and approve access for <strong>${escapeHtml(name)}</strong>; you then come back here.</p>
<ul class="providers">
${links}
</ul>
<p class="fine">Your password stays with that service. You can remove access there at any time.</p>`,
  );
}

/**
 * The end of a flow started in a popup: hands the outcome to the window that opened it, for
 * the session's redirect origin only, and closes; without an opener it goes on to the
 * redirect URI like a full-page flow.
 */
export function flowDonePage(services: Services, state: StateRow, outcome: FlowOutcome): string {
  const result = outcomeParams(state, outcome);
  const provider = services.providers.get(state.provider)?.displayName ?? 'the service';
  const ok = 'integrationId' in outcome;
  const words = ok
    ? `${provider} is connected. You can close this window.`
    : outcome.error === 'ACCESS_DENIED'
      ? `You declined access at ${provider}, so nothing was connected. You can close this window.`
      : `Connecting ${provider} did not work (${outcome.error}). Close this window and try again.`;
  return page(
    ok ? 'Connected' : 'Not connected',
    `<h1>${ok ? 'Connected' : 'Not connected'}</h1>
<p id="result" data-result="${escapeHtml(JSON.stringify(result))}" data-origin="${escapeHtml(new URL(state.redirectUri).origin)}" data-redirect="${escapeHtml(callbackRedirect(state, outcome))}">${escapeHtml(words)}</p>`,
    '<script src="/connect/assets/done.js" defer></script>\n',
  );
}

/** `GET /connect/<secret>`, its providers' start links (`startPath`), and the assets of those pages and of connect.js. */
export function connectPageRoutes(app: TypedFastify, services: Services): void {
  assetRoutes(app);
  hostedPageRoute(app, services);
  startRoute(app, services);
}

/** connect.js and the pages' own script and style, read once; revalidated by ETag. */
function assetRoutes(app: TypedFastify): void {
  staticFileRoutes(app, ASSETS, { 'x-content-type-options': 'nosniff', 'cache-control': 'no-cache' });
}

/** The page a session's link opens, or the page saying why it cannot be used. */
function hostedPageRoute(app: TypedFastify, services: Services): void {
  app.get(
    '/connect/:secret',
    {
      config: { auth: 'public', noStore: true, errors: [] },
      schema: { summary: "A connect session's hosted page (HTML)", tags: ['connect'], params: SecretParams, querystring: Type.Object({ popup: Type.Optional(Type.String({ maxLength: 5 })) }), hide: true },
    },
    async (request, reply) => {
      reply.headers(CONNECT_PAGE_HEADERS).type('text/html; charset=utf-8');
      const session = await sessionBySecret(services.db, request.params.secret);
      const status = session ? sessionStatus(session) : 'unknown';
      if (!session || status !== 'pending') {
        const unusable = unusablePage(status === 'pending' ? 'unknown' : status);
        reply.code(unusable.status);
        return unusable.html;
      }
      return hostedPage(services, session, request.params.secret, request.query.popup === '1');
    },
  );
}

/**
 * Where a provider link of the hosted page starts the flow: under the `oauth_tx` cookie's path,
 * so that a browser already in a flow sends its cookie and the new flow shares it (a second
 * flow started does not break the first, as with `POST /v1/integrations/oauth/start`).
 */
export function startPath(secret: string): string {
  return `${OAUTH_COOKIE_PATH}/connect/${secret}/start`;
}

/** A provider link of the hosted page: starts the flow bound to this browser and to the session, if the session allows that provider. */
function startRoute(app: TypedFastify, services: Services): void {
  app.get(
    startPath(':secret'),
    {
      config: { auth: 'public', noStore: true, errors: [] },
      schema: {
        summary: "Starts a connect session's flow with one of its providers (a link of the hosted page)",
        tags: ['connect'],
        params: SecretParams,
        querystring: Type.Object({ provider: Type.String({ maxLength: 64 }), popup: Type.Optional(Type.String({ maxLength: 5 })) }),
        hide: true,
      },
    },
    async (request, reply) => {
      const session = await sessionBySecret(services.db, request.params.secret);
      const status = session ? sessionStatus(session) : 'unknown';
      const provider = services.providers.get(request.query.provider);
      if (!session || status !== 'pending' || !provider || !session.allowedProviders.includes(provider.id)) {
        reply.headers(CONNECT_PAGE_HEADERS).type('text/html; charset=utf-8');
        const unusable = session && status === 'pending' ? NOT_ALLOWED : unusablePage(status === 'pending' ? 'unknown' : status);
        reply.code(unusable.status);
        return unusable.html;
      }
      const flow = await beginFlow(
        services,
        services.db,
        { organizationId: session.organizationId, userId: null, connectSessionId: session.id, popup: request.query.popup === '1', provider, scopes: provider.scopes, redirectUri: session.redirectUri },
        request.cookies[OAUTH_TX_COOKIE],
      );
      setTxCookie(reply, services, flow.txValue);
      reply.code(302).header('location', flow.authUrl);
      return null;
    },
  );
}
