import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { addMembership } from '../src/organizations/organizations.ts';
import { createApiToken } from '../src/identity/access-tokens.ts';
import { readSecrets } from '../src/integrations/secrets.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv, REDIRECT_URI, startFlow } from './helpers/providers.ts';

let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let owner: Account;

beforeAll(async () => {
  gh = await startFakeGitHub();
  slack = await startFakeSlack();
  gh.addUser({ login: 'octo', email: 'octo@example.com', name: 'Octo Cat' });
  gh.addUser({ login: 'other', email: null });
  slack.addUser({ login: 'sam', email: 'sam@example.com' });
  t = await createTestApp({ env: { ...providerEnv(gh), ...providerEnv(slack), INTEGRATION_OAUTH_GITHUB_SCOPES: 'read:user,user:email,repo,gist' } });
  owner = await registerAndLogin(t.fastify, 'connector');
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
  await slack?.close();
});

async function secretRows(integrationId: string) {
  return queryRows<{ name: string; key_id: string; envelope: string }>(
    t.database.db,
    sql`SELECT name, key_id, envelope FROM integration_secrets WHERE integration_id = ${integrationId} ORDER BY name`,
  );
}

async function integrationCount(organizationId: string, provider: string): Promise<number> {
  const [row] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM integrations WHERE organization_id = ${organizationId} AND provider = ${provider}`);
  return row?.n ?? 0;
}

describe('start', () => {
  it('builds the GitHub authorize URL with client id, callback, scopes, state and a PKCE challenge', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/start', headers: bearer(owner.token), payload: { provider: 'github', redirectUri: REDIRECT_URI } });
    expect(res.statusCode).toBe(200);
    const { authUrl, state } = res.json();
    const url = new URL(authUrl);
    expect(`${url.origin}${url.pathname}`).toBe(gh.authUrl);
    expect(url.searchParams.get('client_id')).toBe(gh.clientId);
    expect(url.searchParams.get('redirect_uri')).toBe('http://127.0.0.1:8080/v1/integrations/oauth/callback');
    expect(url.searchParams.get('scope')).toBe('read:user user:email repo gist');
    expect(url.searchParams.get('state')).toBe(state);
    expect(state).toMatch(/^[A-Za-z0-9_-]{32,}$/);
    expect(url.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(res.body).not.toContain(gh.clientSecret);
    const cookie = res.cookies.find((c) => c.name === 'oauth_tx');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/v1/integrations/oauth', maxAge: 300 });
  });

  it('asks Slack for user scopes, comma-separated, without PKCE', async () => {
    const { authUrl } = await startFlow(t.fastify, owner.token, 'slack');
    const url = new URL(authUrl);
    expect(url.searchParams.get('user_scope')).toBe('channels:read,chat:write,users:read');
    expect(url.searchParams.has('code_challenge')).toBe(false);
  });

  it('takes requested scopes within the configured set, and refuses others', async () => {
    const { authUrl } = await startFlow(t.fastify, owner.token, 'github', { scopes: ['repo'] });
    expect(new URL(authUrl).searchParams.get('scope')).toBe('repo');
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/start', headers: bearer(owner.token), payload: { provider: 'github', redirectUri: REDIRECT_URI, scopes: ['admin:org'] } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'INVALID_INPUT', details: [{ path: 'body.scopes' }] });
  });

  it('refuses unknown or unconfigured providers with 400 PROVIDER_NOT_CONFIGURED', async () => {
    for (const provider of ['gitlab', 'GitHub', 'x'.repeat(40)]) {
      const res = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/start', headers: bearer(owner.token), payload: { provider, redirectUri: REDIRECT_URI } });
      expect(res.statusCode, provider).toBe(400);
      expect(res.json()).toMatchObject({ code: 'PROVIDER_NOT_CONFIGURED', error: 'Provider Not Configured' });
    }
    const partial = await createTestApp({ env: { INTEGRATION_OAUTH_GITHUB_CLIENT_ID: 'only-id' } });
    try {
      const account = await registerAndLogin(partial.fastify, 'partial');
      const res = await partial.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/start', headers: bearer(account.token), payload: { provider: 'github', redirectUri: REDIRECT_URI } });
      expect(res.json().code).toBe('PROVIDER_NOT_CONFIGURED');
      const providers = await partial.fastify.inject({ method: 'GET', url: '/v1/providers', headers: bearer(account.token) });
      expect(providers.json()).toEqual({ success: true, providers: [] });
    } finally {
      await partial.close();
    }
  });

  it('refuses bad redirect URIs with 400 INVALID_REDIRECT_URI', async () => {
    const bad = [
      'http://example.com/app',
      'https://evil.example/app',
      'http://user:pass@127.0.0.1:8080/app',
      'http://127.0.0.1:8080/app#frag',
      'http://127.0.0.1:8080/app#',
      'javascript:alert(1)',
      '/relative/path',
      'http://127.0.0.1:9999/other-port',
      '//127.0.0.1:8080/app',
    ];
    for (const redirectUri of bad) {
      const res = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/start', headers: bearer(owner.token), payload: { provider: 'github', redirectUri } });
      expect(res.statusCode, redirectUri).toBe(400);
      expect(res.json().code, redirectUri).toBe('INVALID_REDIRECT_URI');
    }
  });

  it('needs an owner or admin, and a user rather than an API token', async () => {
    const member = await registerAndLogin(t.fastify, 'member');
    await addMembership(t.database.db, owner.organizationId, member.userId, 'member');
    const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(member.token), payload: { organizationId: owner.organizationId } });
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/start', headers: bearer(switched.json().accessToken), payload: { provider: 'github', redirectUri: REDIRECT_URI } });
    expect(res.statusCode).toBe(403);
    const sid = JSON.parse(Buffer.from(owner.token.split('.')[1] ?? '', 'base64url').toString()).sid;
    const api = await createApiToken({ db: t.database.db, actor: { principal: { kind: 'jwt', userId: owner.userId, organizationId: owner.organizationId, role: 'owner', credentialId: sid, systemAdmin: false, viaCookie: false }, requestId: null } }, { name: 'svc' });
    const byToken = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/start', headers: bearer(api.token), payload: { provider: 'github', redirectUri: REDIRECT_URI } });
    expect(byToken.statusCode).toBe(403);
  });

  it('lists configured providers without secrets', async () => {
    const res = await t.fastify.inject({ method: 'GET', url: '/v1/providers', headers: bearer(owner.token) });
    expect(res.json()).toEqual({
      success: true,
      providers: [
        { id: 'github', displayName: 'GitHub', defaultScopes: ['read:user', 'user:email', 'repo', 'gist'], authMode: 'oauth2', apps: ['github'] },
        { id: 'slack', displayName: 'Slack', defaultScopes: ['channels:read', 'chat:write', 'users:read'], authMode: 'oauth2', apps: ['slack'] },
      ],
    });
    expect(res.body).not.toContain(gh.clientSecret);
  });
});

describe('callback', () => {
  it('creates the integration with the exact name, kind and description, and six encrypted secrets', async () => {
    const account = await registerAndLogin(t.fastify, 'fresh');
    const res = await connect(t.fastify, account.token, gh, 'octo');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    const body = res.json();
    expect(body).toEqual({
      success: true,
      message: 'Successfully connected GitHub integration',
      integration: { id: expect.stringMatching(/^[0-9A-Z]{26}$/), name: 'GitHub Integration (octo)', provider: 'github' },
    });
    const [row] = await queryRows<Record<string, unknown>>(t.database.db, sql`SELECT * FROM integrations WHERE id = ${body.integration.id}`);
    expect(row).toMatchObject({
      organization_id: account.organizationId,
      provider: 'github',
      name: 'GitHub Integration (octo)',
      description: 'OAuth integration with github for octo',
      status: 'connected',
      scopes: ['read:user', 'user:email', 'repo', 'gist'],
    });
    const rows = await secretRows(body.integration.id);
    // Classic GitHub tokens carry no refresh token and no expiry: those are absent, not empty.
    expect(rows.map((r) => r.name)).toEqual(['github_access_token', 'github_provider_email', 'github_provider_user_id', 'github_provider_username']);
    const [token] = gh.tokensOf('octo').slice(-1);
    const raw = JSON.stringify(rows);
    for (const plain of [token?.accessToken ?? 'missing', 'octo@example.com', '"octo"']) expect(raw).not.toContain(plain);
    const secrets = await readSecrets(t.database.db, t.config.keyring, { organizationId: account.organizationId, integrationId: body.integration.id, provider: 'github' });
    expect(secrets).toEqual({
      access_token: token?.accessToken,
      provider_user_id: expect.stringMatching(/^\d+$/),
      provider_username: 'octo',
      provider_email: 'octo@example.com',
    });
  });

  it('stores all six secrets when the provider issues a refresh token and an expiry', async () => {
    const expiring = await startFakeGitHub({ tokenExpiresIn: 28800 });
    expiring.addUser({ login: 'ex', email: 'ex@example.com' });
    const app = await createTestApp({ env: providerEnv(expiring) });
    try {
      const account = await registerAndLogin(app.fastify, 'six');
      const res = await connect(app.fastify, account.token, expiring, 'ex');
      const id = res.json().integration.id;
      const secrets = await readSecrets(app.database.db, app.config.keyring, { organizationId: account.organizationId, integrationId: id, provider: 'github' });
      expect(Object.keys(secrets).sort()).toEqual(['access_token', 'expires_at', 'provider_email', 'provider_user_id', 'provider_username', 'refresh_token']);
      expect(secrets.refresh_token).toMatch(/^ghr_/);
      expect(Date.parse(secrets.expires_at ?? '') - Date.now()).toBeGreaterThan(28000 * 1000);
    } finally {
      await app.close();
      await expiring.close();
    }
  });

  it('connects Slack as the user, reading the user token under authed_user', async () => {
    const account = await registerAndLogin(t.fastify, 'slacker');
    const res = await connect(t.fastify, account.token, slack, 'sam');
    expect(res.json().integration.name).toBe('Slack Integration (sam)');
    const secrets = await readSecrets(t.database.db, t.config.keyring, { organizationId: account.organizationId, integrationId: res.json().integration.id, provider: 'slack' });
    expect(secrets.access_token).toMatch(/^xoxp-/);
    expect(secrets.provider_user_id).toMatch(/^T[A-Z0-9]+:U[A-Z0-9]+$/);
  });

  it('keeps the id and replaces the secrets on reconnect', async () => {
    const account = await registerAndLogin(t.fastify, 'reconnect');
    const first = (await connect(t.fastify, account.token, gh, 'octo')).json().integration.id;
    const before = await secretRows(first);
    const second = await connect(t.fastify, account.token, gh, 'other');
    expect(second.json().integration).toEqual({ id: first, name: 'GitHub Integration (other)', provider: 'github' });
    const after = await secretRows(first);
    expect(after.map((r) => r.envelope)).not.toEqual(expect.arrayContaining(before.map((r) => r.envelope)));
    expect(after.map((r) => r.name)).toEqual(['github_access_token', 'github_provider_user_id', 'github_provider_username']);
    expect(await integrationCount(account.organizationId, 'github')).toBe(1);
    const audit = await queryRows<{ action: string; detail: { accountChanged?: boolean } }>(t.database.db, sql`SELECT action, detail FROM audit_logs WHERE target_id = ${first} ORDER BY id`);
    expect(audit.map((a) => a.action)).toEqual(['integration.connected', 'integration.reconnected']);
    expect(audit[1]?.detail.accountChanged).toBe(true);
  });

  it('answers the browser GET callback with a 302 to the redirect URI', async () => {
    const account = await registerAndLogin(t.fastify, 'browser');
    const started = await startFlow(t.fastify, account.token, 'github');
    const approved = gh.authorize(started.authUrl, 'octo');
    const callback = new URL(approved.location);
    const res = await t.fastify.inject({ method: 'GET', url: `${callback.pathname}${callback.search}`, headers: { cookie: `oauth_tx=${started.txCookie}` } });
    expect(res.statusCode).toBe(302);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    const location = new URL(res.headers.location as string);
    expect(`${location.origin}${location.pathname}`).toBe(REDIRECT_URI);
    expect(Object.fromEntries(location.searchParams)).toEqual({ status: 'connected', provider: 'github', integration: expect.stringMatching(/^[0-9A-Z]{26}$/) });
  });

  it('redirects a declined consent with ACCESS_DENIED and burns the state', async () => {
    const account = await registerAndLogin(t.fastify, 'declines');
    const started = await startFlow(t.fastify, account.token, 'github');
    const denied = new URL(gh.deny(started.authUrl).location);
    const res = await t.fastify.inject({ method: 'GET', url: `${denied.pathname}${denied.search}`, headers: { cookie: `oauth_tx=${started.txCookie}` } });
    expect(res.statusCode).toBe(302);
    expect(Object.fromEntries(new URL(res.headers.location as string).searchParams)).toEqual({ status: 'error', provider: 'github', error: 'ACCESS_DENIED' });
    const again = await t.fastify.inject({ method: 'GET', url: `${denied.pathname}${denied.search}`, headers: { cookie: `oauth_tx=${started.txCookie}` } });
    expect(again.statusCode).toBe(400);
    expect(again.json().code).toBe('INVALID_OAUTH_STATE');
    expect(await integrationCount(account.organizationId, 'github')).toBe(0);
  });

  it('answers an unusable state on the GET callback with 400, not a redirect', async () => {
    const res = await t.fastify.inject({ method: 'GET', url: '/v1/integrations/oauth/callback?code=x&state=not-a-real-state-value-at-all-0123456789' });
    expect(res.statusCode).toBe(400);
    expect(res.headers.location).toBeUndefined();
    expect(res.json()).toMatchObject({ code: 'INVALID_OAUTH_STATE', error: 'Invalid OAuth State Parameter' });
  });
});

describe('state protection', () => {
  async function callback(payload: Record<string, string>, headers: Record<string, string> = {}) {
    return t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers, payload });
  }

  it('refuses a replayed state', async () => {
    const account = await registerAndLogin(t.fastify, 'replay');
    const started = await startFlow(t.fastify, account.token, 'github');
    const approved = gh.authorize(started.authUrl, 'octo');
    const cookie = { cookie: `oauth_tx=${started.txCookie}` };
    expect((await callback({ provider: 'github', code: approved.code, state: approved.state }, cookie)).statusCode).toBe(200);
    const replay = await callback({ provider: 'github', code: approved.code, state: approved.state }, cookie);
    expect(replay.statusCode).toBe(400);
    expect(replay.json().code).toBe('INVALID_OAUTH_STATE');
  });

  it('refuses a tampered state', async () => {
    const account = await registerAndLogin(t.fastify, 'tampered');
    const started = await startFlow(t.fastify, account.token, 'github');
    const approved = gh.authorize(started.authUrl, 'octo');
    const raw = Buffer.from(approved.state, 'base64url');
    raw[5] = (raw[5] ?? 0) ^ 1;
    const res = await callback({ provider: 'github', code: approved.code, state: raw.toString('base64url') }, { cookie: `oauth_tx=${started.txCookie}` });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('INVALID_OAUTH_STATE');
    // The genuine state still works: the forgery did not consume it.
    expect((await callback({ provider: 'github', code: approved.code, state: approved.state }, { cookie: `oauth_tx=${started.txCookie}` })).statusCode).toBe(200);
  });

  it('refuses a state used for another provider', async () => {
    const account = await registerAndLogin(t.fastify, 'crossprov');
    const started = await startFlow(t.fastify, account.token, 'github');
    const approved = gh.authorize(started.authUrl, 'octo');
    const res = await callback({ provider: 'slack', code: approved.code, state: approved.state }, { cookie: `oauth_tx=${started.txCookie}` });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('INVALID_OAUTH_STATE');
  });

  it('refuses a callback without the browser binding, or from another user', async () => {
    const account = await registerAndLogin(t.fastify, 'unbound');
    const attacker = await registerAndLogin(t.fastify, 'attacker');
    for (const headers of [{}, { cookie: 'oauth_tx=forged-value-forged-value-forged-value-1234' }, bearer(attacker.token)]) {
      const started = await startFlow(t.fastify, account.token, 'github');
      const approved = gh.authorize(started.authUrl, 'octo');
      const res = await callback({ provider: 'github', code: approved.code, state: approved.state }, headers);
      expect(res.statusCode).toBe(400);
      expect(res.json().code).toBe('INVALID_OAUTH_STATE');
    }
    expect(await integrationCount(account.organizationId, 'github')).toBe(0);
  });

  it('accepts the starting user’s credentials instead of the cookie, but not bound to another organization', async () => {
    const account = await registerAndLogin(t.fastify, 'creds');
    const started = await startFlow(t.fastify, account.token, 'github');
    const approved = gh.authorize(started.authUrl, 'octo');
    const other = (await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(account.token), payload: { name: 'Elsewhere' } })).json().organization.id;
    const switched = (await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(account.token), payload: { organizationId: other } })).json().accessToken;
    const changed = await callback({ provider: 'github', code: approved.code, state: approved.state }, { ...bearer(switched), cookie: `oauth_tx=${started.txCookie}` });
    expect(changed.statusCode).toBe(400);
    expect(changed.json().code).toBe('INVALID_OAUTH_STATE');

    const second = await startFlow(t.fastify, account.token, 'github');
    const approved2 = gh.authorize(second.authUrl, 'octo');
    const ok = await callback({ provider: 'github', code: approved2.code, state: approved2.state }, bearer(account.token));
    expect(ok.statusCode, ok.body).toBe(200);
  });

  it('refuses an expired state and purges expired rows', async () => {
    const quick = await createTestApp({ env: { ...providerEnv(gh), OAUTH_STATE_EXPIRY: '1' } });
    try {
      const account = await registerAndLogin(quick.fastify, 'expiry');
      const started = await startFlow(quick.fastify, account.token, 'github');
      const approved = gh.authorize(started.authUrl, 'octo');
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const res = await quick.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers: { cookie: `oauth_tx=${started.txCookie}` }, payload: { provider: 'github', code: approved.code, state: approved.state } });
      expect(res.statusCode).toBe(400);
      expect(res.json().code).toBe('INVALID_OAUTH_STATE');
      await startFlow(quick.fastify, account.token, 'github');
      await new Promise((resolve) => setTimeout(resolve, 1100));
      await startFlow(quick.fastify, account.token, 'github');
      const [row] = await queryRows<{ n: number }>(quick.database.db, sql`SELECT count(*)::int AS n FROM oauth_states WHERE expires_at < now()`);
      expect(row?.n).toBe(0);
    } finally {
      await quick.close();
    }
  });

  it('lets only one of two concurrent callbacks with one state through', async () => {
    const account = await registerAndLogin(t.fastify, 'race');
    const started = await startFlow(t.fastify, account.token, 'github');
    const approved = gh.authorize(started.authUrl, 'octo');
    const payload = { provider: 'github', code: approved.code, state: approved.state };
    const results = await Promise.all([callback(payload, { cookie: `oauth_tx=${started.txCookie}` }), callback(payload, { cookie: `oauth_tx=${started.txCookie}` })]);
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 400]);
    expect(await integrationCount(account.organizationId, 'github')).toBe(1);
  });
});

describe('provider failures store nothing', () => {
  it('answers a refused code with 400 OAUTH_EXCHANGE_FAILED', async () => {
    const account = await registerAndLogin(t.fastify, 'badcode');
    const started = await startFlow(t.fastify, account.token, 'github');
    const approved = gh.authorize(started.authUrl, 'octo');
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers: { cookie: `oauth_tx=${started.txCookie}` }, payload: { provider: 'github', code: `${approved.code}-wrong`, state: approved.state } });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('OAUTH_EXCHANGE_FAILED');
    expect(await integrationCount(account.organizationId, 'github')).toBe(0);
    // The state was burnt by the failed exchange.
    const retry = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers: { cookie: `oauth_tx=${started.txCookie}` }, payload: { provider: 'github', code: approved.code, state: approved.state } });
    expect(retry.json().code).toBe('INVALID_OAUTH_STATE');
  });

  it('answers 502 when the token endpoint is down or answers garbage', async () => {
    const account = await registerAndLogin(t.fastify, 'down');
    for (const mode of ['down', 'garbage'] as const) {
      const started = await startFlow(t.fastify, account.token, 'slack');
      const approved = slack.authorize(started.authUrl, 'sam');
      slack.mode.token = mode;
      try {
        const res = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers: { cookie: `oauth_tx=${started.txCookie}` }, payload: { provider: 'slack', code: approved.code, state: approved.state } });
        expect(res.statusCode, mode).toBe(502);
        expect(res.json().code).toBe('PROVIDER_ERROR');
        expect(res.body).not.toMatch(/<html|unavailable/i);
      } finally {
        slack.mode.token = 'ok';
      }
    }
    expect(await integrationCount(account.organizationId, 'slack')).toBe(0);
  });

  it('answers 409 TOKEN_VALIDATION_FAILED when the new token does not validate', async () => {
    const account = await registerAndLogin(t.fastify, 'novalid');
    const started = await startFlow(t.fastify, account.token, 'github');
    const approved = gh.authorize(started.authUrl, 'octo');
    gh.mode.api = 'forbidden';
    try {
      const res = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers: { cookie: `oauth_tx=${started.txCookie}` }, payload: { provider: 'github', code: approved.code, state: approved.state } });
      expect(res.statusCode).toBe(409);
      expect(res.json()).toMatchObject({ code: 'TOKEN_VALIDATION_FAILED', error: 'Token Validation Failed' });
    } finally {
      gh.mode.api = 'ok';
    }
    expect(await integrationCount(account.organizationId, 'github')).toBe(0);
  });
});

describe('secret hygiene', () => {
  it('keeps the client secret out of every response and log line, and records connect events and audit rows', async () => {
    const account = await registerAndLogin(t.fastify, 'hygiene');
    const res = await connect(t.fastify, account.token, gh, 'octo');
    const id = res.json().integration.id;
    expect(t.logs.text).not.toContain(gh.clientSecret);
    expect(t.logs.text).not.toContain(slack.clientSecret);
    for (const token of [...gh.tokensOf('octo'), ...slack.tokensOf('sam')]) expect(t.logs.text).not.toContain(token.accessToken);
    const events = await queryRows<{ type: string; data: Record<string, unknown> }>(t.database.db, sql`SELECT type, data FROM events WHERE organization_id = ${account.organizationId} ORDER BY id`);
    expect(events.map((e) => e.type)).toEqual(['organization.created', 'integration.connected']);
    expect(JSON.stringify(events)).not.toMatch(/gh[ou]_|xox/);
    expect(events[1]?.data).toMatchObject({ integration: { id, provider: 'github' } });
  });
});
