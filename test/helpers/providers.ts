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
