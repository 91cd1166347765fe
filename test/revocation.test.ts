// Revocation both ways (docs/contract.md §5b "Revocation the other way", §5 status): a delete ends
// the grant at the provider — asserted at the provider's fake, whose refresh token must no longer
// refresh — and a status check due for a live answer gives one, even right after a refresh.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeRfcProvider } from './fakes/providers/rfc.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv, refreshesAtProvider } from './helpers/providers.ts';

let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let acme: FakeProvider;
let plain: FakeProvider;
let users = 0;

/** A custom provider's definition lines for an RFC 6749/7009 fake. */
function definition(fake: FakeProvider): string[] {
  return [
    `  ${fake.id}:`,
    `    clientId: ${fake.clientId}`,
    `    clientSecret: ${fake.clientSecret}`,
    '    definition:',
    `      displayName: ${fake.id}`,
    `      authUrl: ${fake.url}/authorize`,
    `      tokenUrl: ${fake.url}/token`,
    `      apiUrl: ${fake.url}/api`,
    '      scopes: [read]',
    '      clientAuth: client_secret_basic',
    `      userInfo: { url: ${fake.url}/userinfo, id: sub, username: preferred_username }`,
    `      revokeUrl: ${fake.url}/revoke`,
  ];
}

beforeAll(async () => {
  // Two-minute tokens: every status check is due to refresh first (the five-minute read-ahead).
  gh = await startFakeGitHub({ tokenExpiresIn: 120 });
  slack = await startFakeSlack({ tokenExpiresIn: 43200 });
  acme = await startFakeRfcProvider({ id: 'acme' });
  plain = await startFakeRfcProvider({ id: 'plain', refresh: 'none' });
  const file = join(mkdtempSync(join(tmpdir(), 'tessera-revocation-')), 'providers.yaml');
  writeFileSync(file, `${['integrationOauthProvider:', ...definition(acme), ...definition(plain)].join('\n')}\n`);
  t = await createTestApp({ background: false, env: { ...providerEnv(gh), ...providerEnv(slack), CONFIG_FILE: file, OAUTH_STATUS_MAX_AGE: '1', RATE_LIMIT_MAX: '0' } });
}, 60_000);

afterAll(async () => {
  await t?.close();
  await Promise.all([gh, slack, acme, plain].map((fake) => fake?.close()));
});

/** A new owner connected to `fake` as a new user; the tokens the provider issued. */
async function connected(fake: FakeProvider): Promise<{ account: Account; id: string; login: string; tokens: { accessToken: string; refreshToken?: string } }> {
  const login = `${fake.id}-user-${++users}`;
  fake.addUser({ login, email: `${login}@example.com` });
  const account = await registerAndLogin(t.fastify, login);
  const res = await connect(t.fastify, account.token, fake, login);
  expect(res.statusCode, res.body).toBe(200);
  const [tokens] = fake.tokensOf(login);
  if (!tokens) throw new Error('the fake issued no token');
  return { account, id: res.json().integration.id, login, tokens };
}

async function deleteAndWait(fake: FakeProvider, c: { account: Account; id: string }): Promise<void> {
  const before = fake.stats.revocations;
  const res = await t.fastify.inject({ method: 'DELETE', url: `/v1/integrations/${c.id}`, headers: bearer(c.account.token) });
  expect(res.statusCode, res.body).toBe(200);
  await expect.poll(() => fake.stats.revocations - before, { timeout: 5000 }).toBe(1);
}

describe('deleting an integration revokes the grant at the provider', () => {
  it.each([
    ['GitHub (DELETE /applications/{client_id}/grant)', () => gh],
    ['Slack (auth.revoke, token rotation on)', () => slack],
    ['a custom provider (RFC 7009, with the refresh token)', () => acme],
  ])('%s: the refresh token no longer refreshes, and no token of the grant lives on', async (_name, fake) => {
    const c = await connected(fake());
    expect(c.tokens.refreshToken).toBeDefined();
    await deleteAndWait(fake(), c);
    expect(await refreshesAtProvider(fake(), c.tokens.refreshToken ?? '')).toBe(false);
    expect(fake().tokensOf(c.login)).toEqual([]);
  });

  it('a custom provider that issued no refresh token: the access token is sent, and it no longer calls', async () => {
    const c = await connected(plain);
    expect(c.tokens.refreshToken).toBeUndefined();
    await deleteAndWait(plain, c);
    const revoke = plain.requests.findLast((request) => request.path === '/revoke');
    expect(new URLSearchParams(revoke?.body).get('token')).toBe(c.tokens.accessToken);
    const call = await fetch(`${plain.apiUrl}/things`, { headers: { authorization: `Bearer ${c.tokens.accessToken}` } });
    expect(call.status).toBe(401);
  });
});

describe('a status check is a live answer', () => {
  it('right after a refresh, a grant revoked at the provider is reported invalid once OAUTH_STATUS_MAX_AGE has passed', async () => {
    const c = await connected(gh);
    const refreshed = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/github/refresh', headers: bearer(c.account.token) });
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    gh.revokeUser(c.login);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    // Within the refresh-coalescing window (decision 49): the refresh may be shared, the validation may not be skipped.
    const res = await t.fastify.inject({ url: '/v1/integrations/github/status', headers: bearer(c.account.token) });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().status).toMatchObject({ status: 'invalid', connected: false, actions: ['reconnect'] });
  });
});
