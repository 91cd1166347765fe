import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { runValidationPass } from '../src/integrations/validator.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv, startFlow } from './helpers/providers.ts';

// The provider rejecting this deployment's own client credentials (its client secret was reset at the
// provider, the setting is wrong) is a configuration fault, never a revocation (docs/contract.md §2, §5):
// at every point it can show — the callback, a refresh, a validation, a proxied call — the integration
// becomes `warning` with `["configure"]`, the answer is 502 PROVIDER_MISCONFIGURED, and the log line
// names the settings to check.

let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let ghSecret: string;
let slackSecret: string;
let logins = 0;

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  slack = await startFakeSlack({ tokenExpiresIn: 43200 });
  ghSecret = gh.clientSecret;
  slackSecret = slack.clientSecret;
  t = await createTestApp({ background: false, env: { ...providerEnv(gh), ...providerEnv(slack), OAUTH_STATUS_MAX_AGE: '3600', RATE_LIMIT_MAX: '0' } });
});
afterEach(() => {
  // The deployment's secret is right again: the next test connects normally.
  gh.rotateClientSecret(ghSecret);
  slack.rotateClientSecret(slackSecret);
});
afterAll(async () => {
  await t?.close();
  await gh?.close();
  await slack?.close();
});

interface Connected {
  account: Account;
  id: string;
  login: string;
}

async function connected(fake: FakeProvider = gh): Promise<Connected> {
  const login = `${fake.id}-misconf-${++logins}`;
  fake.addUser({ login, email: `${login}@example.com` });
  const account = await registerAndLogin(t.fastify, login);
  const res = await connect(t.fastify, account.token, fake, login);
  expect(res.statusCode, res.body).toBe(200);
  return { account, id: res.json().integration.id, login };
}

const get = (token: string, url: string) => t.fastify.inject({ method: 'GET', url, headers: bearer(token) });
const post = (token: string, url: string) => t.fastify.inject({ method: 'POST', url, headers: bearer(token) });

/** What the person and the product see of an integration whose provider refused our client credentials. */
async function expectConfigure(c: Connected, provider = 'github', source?: string) {
  const status = (await get(c.account.token, `/v1/integrations/${provider}/status`)).json().status;
  expect(status).toMatchObject({ status: 'warning', connected: true, actions: ['configure'], lastError: "provider rejected this deployment's client credentials" });
  expect(status.message).toMatch(/client id and secret/);
  const [event] = await queryRows<{ data: { to: string; from: string; source?: string } }>(
    t.database.db,
    sql`SELECT data FROM events WHERE type = 'integration.status_changed' AND data->'integration'->>'id' = ${c.id} ORDER BY id DESC LIMIT 1`,
  );
  expect(event?.data).toMatchObject({ from: 'connected', to: 'warning', ...(source ? { source } : {}) });
}

/** The log names the settings to fix, and no secret, old or new. */
function expectSettingsLogged(provider: string, ...secrets: string[]) {
  const lines = t.logs.lines.filter((line) => line.includes(`INTEGRATION_OAUTH_${provider.toUpperCase()}_CLIENT_SECRET`));
  expect(lines.length).toBeGreaterThan(0);
  for (const secret of secrets) expect(t.logs.text).not.toContain(secret);
}

const storedStatus = async (id: string) => (await queryRows<{ status: string }>(t.database.db, sql`SELECT status FROM integrations WHERE id = ${id}`))[0]?.status;

describe('a provider refusing our client credentials', () => {
  it('at a refresh: 502 PROVIDER_MISCONFIGURED, the integration `warning` with configure, and a refresh once fixed brings it back', async () => {
    const c = await connected();
    const rotated = gh.rotateClientSecret();
    const res = await post(c.account.token, '/v1/integrations/github/refresh');
    expect(res.statusCode).toBe(502);
    expect(res.json()).toMatchObject({ success: false, code: 'PROVIDER_MISCONFIGURED' });
    await expectConfigure(c, 'github', 'refresh');
    expectSettingsLogged('github', ghSecret, rotated);
    // The token is not dead: it is still handed out.
    expect((await get(c.account.token, '/v1/integrations/github/token')).statusCode).toBe(200);

    gh.rotateClientSecret(ghSecret);
    expect((await post(c.account.token, '/v1/integrations/github/refresh')).statusCode).toBe(200);
    expect((await get(c.account.token, '/v1/integrations/github/status')).json().status).toMatchObject({ status: 'connected', actions: [] });
  });

  it("at a refresh with Slack's own codes for it (bad_client_secret): the same", async () => {
    const c = await connected(slack);
    slack.rotateClientSecret();
    const res = await post(c.account.token, '/v1/integrations/slack/refresh');
    expect([res.statusCode, res.json().code]).toEqual([502, 'PROVIDER_MISCONFIGURED']);
    await expectConfigure(c, 'slack', 'refresh');
  });

  it('at a token read that refreshes first: the stored token, still valid, is served, and the integration shows configure', async () => {
    const c = await connected();
    await t.database.db.execute(sql`UPDATE integrations SET token_expires_at = now() + interval '2 minutes' WHERE id = ${c.id}`);
    gh.rotateClientSecret();
    const res = await get(c.account.token, '/v1/integrations/github/token');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().token.accessToken).toBe(gh.tokensOf(c.login)[0]?.accessToken);
    await expectConfigure(c);
  });

  it('at the callback: 502 PROVIDER_MISCONFIGURED, nothing stored, and the integration being reconnected shows configure', async () => {
    const c = await connected();
    const [before] = gh.tokensOf(c.login);
    gh.rotateClientSecret();
    const started = await startFlow(t.fastify, c.account.token, 'github');
    const approved = gh.authorize(started.authUrl, c.login);
    const res = await t.fastify.inject({
      method: 'POST',
      url: '/v1/integrations/oauth/callback',
      headers: { cookie: `oauth_tx=${started.txCookie}` },
      payload: { provider: 'github', code: approved.code, state: approved.state },
    });
    expect(res.statusCode).toBe(502);
    expect(res.json().code).toBe('PROVIDER_MISCONFIGURED');
    await expectConfigure(c, 'github', 'connect');
    expect(gh.tokensOf(c.login)[0]).toEqual(before);
    const [failed] = await queryRows<{ data: { code: string } }>(
      t.database.db,
      sql`SELECT data FROM events WHERE type = 'integration.connect_failed' AND organization_id = ${c.account.organizationId} ORDER BY id DESC LIMIT 1`,
    );
    expect(failed?.data.code).toBe('PROVIDER_MISCONFIGURED');
  });

  it("at the browser's callback: the redirect says PROVIDER_MISCONFIGURED, and a first connection stores nothing", async () => {
    const login = `github-misconf-${++logins}`;
    gh.addUser({ login });
    const account = await registerAndLogin(t.fastify, login);
    gh.rotateClientSecret();
    const started = await startFlow(t.fastify, account.token, 'github');
    const approved = gh.authorize(started.authUrl, login);
    const res = await t.fastify.inject({ method: 'GET', url: `/v1/integrations/oauth/callback?code=${approved.code}&state=${approved.state}`, headers: { cookie: `oauth_tx=${started.txCookie}` } });
    expect(res.statusCode).toBe(302);
    expect(Object.fromEntries(new URL(res.headers.location as string).searchParams)).toEqual({ status: 'error', provider: 'github', error: 'PROVIDER_MISCONFIGURED' });
    expect((await get(account.token, '/v1/integrations')).json().integrations).toEqual([]);
  });

  it('at a background validation whose 401 needs a refresh: `warning` with configure, never `invalid`', async () => {
    const c = await connected();
    gh.rotateClientSecret();
    // The provider now refuses the access token too: a 401 is not proof until a refresh was tried, and that one fails on our side.
    gh.revokeUser(c.login);
    await t.database.db.execute(sql`UPDATE integrations SET next_validation_at = now() - interval '1 second' WHERE id = ${c.id}`);
    const result = await runValidationPass(t.app.services, { batchSize: 50 });
    expect(result.misconfigured).toBe(1);
    expect(result.invalid).toBe(0);
    expect(await storedStatus(c.id)).toBe('warning');
    await expectConfigure(c);
  });

  it('at a background refresh of a token about to expire: the same', async () => {
    const c = await connected();
    gh.rotateClientSecret();
    await t.database.db.execute(sql`UPDATE integrations SET token_expires_at = now() + interval '10 minutes', next_validation_at = now() - interval '1 second' WHERE id = ${c.id}`);
    const result = await runValidationPass(t.app.services, { batchSize: 50 });
    expect(result.misconfigured).toBe(1);
    await expectConfigure(c, 'github', 'refresh');
  });

  it('at a proxied call whose 401 needs a refresh: 502 PROVIDER_MISCONFIGURED, `warning` with configure, never `invalid`', async () => {
    const c = await connected();
    gh.rotateClientSecret();
    gh.revokeUser(c.login);
    const res = await get(c.account.token, '/v1/integrations/github/proxy/user');
    expect(res.statusCode).toBe(502);
    expect(res.json()).toMatchObject({ success: false, code: 'PROVIDER_MISCONFIGURED' });
    expect(await storedStatus(c.id)).toBe('warning');
    await expectConfigure(c);
  });
});
