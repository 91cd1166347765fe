import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { type FakeProvider, providerEnv } from '../fakes/common.ts';

export { providerEnv };
import { bearer } from './identity.ts';

export const REDIRECT_URI = 'http://127.0.0.1:8080/app/integrations';


export interface Started {
  authUrl: string;
  state: string;
  txCookie: string;
}

/** POST /v1/integrations/oauth/start as `token`'s owner. */
export async function startFlow(app: FastifyInstance, token: string, provider: string, extra: Record<string, unknown> = {}): Promise<Started> {
  const res = await app.inject({ method: 'POST', url: '/v1/integrations/oauth/start', headers: bearer(token), payload: { provider, redirectUri: REDIRECT_URI, ...extra } });
  expect(res.statusCode, res.body).toBe(200);
  const cookie = res.cookies.find((c) => c.name === 'oauth_tx');
  return { authUrl: res.json().authUrl, state: res.json().state, txCookie: cookie?.value ?? '' };
}

/** The whole flow: start, approve at the fake as `login`, POST callback with the oauth_tx cookie. */
export async function connect(app: FastifyInstance, token: string, fake: FakeProvider, login: string) {
  const started = await startFlow(app, token, fake.id);
  const approved = fake.authorize(started.authUrl, login);
  return app.inject({
    method: 'POST',
    url: '/v1/integrations/oauth/callback',
    headers: { cookie: `oauth_tx=${started.txCookie}` },
    payload: { provider: fake.id, code: approved.code, state: approved.state },
  });
}

/**
 * Whether `refreshToken` still refreshes at the fake's own token endpoint — the provider's view
 * of whether the grant lives. The client authenticates both ways (HTTP Basic and the form), as
 * each fake reads the one its provider documents.
 */
export async function refreshesAtProvider(fake: FakeProvider, refreshToken: string): Promise<boolean> {
  const basic = Buffer.from(`${encodeURIComponent(fake.clientId)}:${encodeURIComponent(fake.clientSecret)}`).toString('base64');
  const res = await fetch(fake.tokenUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json', authorization: `Basic ${basic}` },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: fake.clientId, client_secret: fake.clientSecret }),
  });
  const body = (await res.json().catch(() => ({}))) as { access_token?: unknown };
  return res.status === 200 && typeof body.access_token === 'string';
}
