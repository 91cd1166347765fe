// OAuth apps as data (docs/contract.md §5e), the proof. HTTP in; HTTP, events, audit rows
// and the fake provider's records out: one fake GitHub (expiring, refreshable tokens; grants revoked
// with `DELETE /applications/{client_id}/grant`) knows several client registrations and records which
// one each authorize, code exchange, refresh and revocation used — the default deployment app, a
// second deployment app from CONFIG_FILE, an organization's own app; a reconnect through another app,
// offboarding, a misconfigured app and its healing; and, last, a scan of everything this file saw and
// everything the database holds for every secret and token involved.
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { runValidationPass } from '../src/integrations/validator.ts';
import { type FakeClient, type FakeClientCall, type FakeProvider, randomString } from './fakes/common.ts';
import { type FakeGitHubUser, startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { openPage, press } from './helpers/connect-page.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { providerEnv, REDIRECT_URI } from './helpers/providers.ts';

const PRODUCT = 'http://127.0.0.1:4455';

let t: TestApp;
let gh: FakeProvider<FakeGitHubUser>;
/** The settings' client (the deployment app `github`) and the CONFIG_FILE one (`gh-second`). */
let client1: FakeClient;
let client2: FakeClient;
/** Every client secret this file ever gave the fake or the service (the scan looks for each). */
const secrets: string[] = [];
/** Every answer this file received (headers and body), GraphQL's included; a token read's own access token taken out. */
const answers: string[] = [];
let app: FastifyInstance;
let logins = 0;

beforeAll(async () => {
  // Random secrets: the scan looks for every 12-character slice of each, which a run of zeros would find anywhere.
  gh = await startFakeGitHub({ tokenExpiresIn: 28800, clientSecret: randomString(40) });
  client1 = gh.clients[0] as FakeClient;
  client2 = gh.registerClient({ clientId: 'Ov23liSecondDeployApp', clientSecret: randomString(40) });
  const limited = gh.registerClient();
  secrets.push(client1.clientSecret, client2.clientSecret, limited.clientSecret);
  t = await createTestApp({
    background: false,
    env: { ...providerEnv(gh), OAUTH_REDIRECT_ORIGINS: `http://127.0.0.1:8080,${PRODUCT}`, RATE_LIMIT_MAX: '0', OAUTH_STATUS_MAX_AGE: '3600' },
    // What CONFIG_FILE's `integrationOauthApps` gives (the settings' `integrationOauthProvider.github` comes from the env).
    overrides: {
      integrationOauthApps: [
        { id: 'gh-second', provider: 'github', name: 'Second', clientId: client2.clientId, clientSecret: client2.clientSecret },
        // One organization (not any of this file's) may use this one.
        { id: 'gh-limited', provider: 'github', clientId: limited.clientId, clientSecret: limited.clientSecret, organizations: ['01JNOTANORGANIZATIONOFTHIS0'] },
      ],
    },
  });
  // Every answer is kept for the scan at the end.
  const inject = t.fastify.inject.bind(t.fastify);
  const recording = async (options: InjectOptions | string): Promise<LightMyRequestResponse> => {
    const res = await inject(options as InjectOptions);
    let body = res.body;
    // The token read and a refresh hand out the access token: that is their job (docs/contract.md §5); nothing else of it may leak.
    if (/^\/v1\/integrations\/[^/]+\/(?:token|refresh)\b/.test(typeof options === 'string' ? options : String(options.url)) && res.statusCode === 200 && res.json().token) {
      const read = res.json();
      body = JSON.stringify({ ...read, token: { ...read.token, accessToken: '(the token read’s own)' } });
    }
    answers.push(JSON.stringify(res.headers), body);
    return res;
  };
  app = new Proxy(t.fastify, { get: (target, key) => (key === 'inject' ? recording : Reflect.get(target, key)) });
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

/** A person with an organization of their own, and a GitHub account at the fake. */
async function person(name: string): Promise<{ account: Account; login: string }> {
  const login = `${name}-${++logins}`;
  gh.addUser({ login, email: `${login}@example.com` });
  return { account: await registerAndLogin(app, login), login };
}

const get = (token: string, url: string) => app.inject({ method: 'GET', url, headers: bearer(token) });
const post = (token: string, url: string, payload?: Record<string, unknown>) => app.inject({ method: 'POST', url, headers: bearer(token), ...(payload ? { payload } : {}) });

/** The fake's record from `since` on. */
const callsSince = (since: number): FakeClientCall[] => gh.clientCalls.slice(since);

/**
 * Starts (with `app`, or without), checks the authorize URL's client id, approves as `login` and
 * finishes the callback: the answer and the integration id.
 */
async function connectThrough(token: string, login: string, client: FakeClient, appId?: string) {
  const started = await post(token, '/v1/integrations/oauth/start', { provider: 'github', redirectUri: REDIRECT_URI, ...(appId ? { app: appId } : {}) });
  expect(started.statusCode, started.body).toBe(200);
  const authUrl = new URL(started.json().authUrl);
  expect(authUrl.searchParams.get('client_id')).toBe(client.clientId);
  const approved = gh.authorize(authUrl.href, login);
  const tx = started.cookies.find((c) => c.name === 'oauth_tx')?.value ?? '';
  const res = await app.inject({
    method: 'POST',
    url: '/v1/integrations/oauth/callback',
    headers: { cookie: `oauth_tx=${tx}` },
    payload: { provider: 'github', code: approved.code, state: approved.state },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().integration.id as string;
}

/** The client id of the revocation request the fake received for `accessToken` (undefined: none yet). */
function revokedWith(accessToken: string): string | undefined {
  const request = gh.requests.find((r) => r.method === 'DELETE' && /^\/api\/applications\/[^/]+\/grant$/.test(r.path) && r.body.includes(accessToken));
  return request ? decodeURIComponent(request.path.split('/')[3] ?? '') : undefined;
}

/** Runs the revocation queue now (background work is off in this file) until nothing is left. */
async function revokeQueued(): Promise<void> {
  await expect.poll(async () => {
    await t.app.services.revocations.runOnce();
    return (await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM grant_revocations`))[0]?.n;
  }).toBe(0);
}

const tokenOf = (login: string) => gh.tokensOf(login)[0];

describe('the default deployment app (the settings)', () => {
  it('authorizes, exchanges, refreshes and revokes with client 1, and every read names app `github`', async () => {
    const { account, login } = await person('default');
    const since = gh.clientCalls.length;
    const id = await connectThrough(account.token, login, client1);
    const deploymentApp = { id: 'github', owner: 'deployment' };

    const listed = (await get(account.token, '/v1/integrations')).json().integrations;
    expect(listed).toEqual([expect.objectContaining({ id, provider: 'github', app: deploymentApp })]);
    const read = await get(account.token, '/v1/integrations/github/token');
    expect(read.statusCode, read.body).toBe(200);
    expect(read.json()).toMatchObject({ app: deploymentApp, token: { accessToken: tokenOf(login)?.accessToken } });
    const graphql = await post(account.token, '/query', { query: '{ integrations { id app { id owner } } }' });
    expect(graphql.json()).toEqual({ data: { integrations: [{ id, app: deploymentApp }] } });

    const refreshed = await post(account.token, '/v1/integrations/github/refresh');
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    const last = tokenOf(login)?.accessToken as string;
    expect((await app.inject({ method: 'DELETE', url: `/v1/integrations/${id}`, headers: bearer(account.token) })).statusCode).toBe(200);
    await revokeQueued();
    expect(callsSince(since)).toEqual([
      { endpoint: 'authorize', clientId: client1.clientId },
      { endpoint: 'token', clientId: client1.clientId },
      { endpoint: 'refresh', clientId: client1.clientId },
      { endpoint: 'revoke', clientId: client1.clientId },
    ]);
    expect(revokedWith(last)).toBe(client1.clientId);
    expect(gh.tokensOf(login)).toEqual([]);
  });
});

describe('a second deployment app from CONFIG_FILE', () => {
  it('start with `app: gh-second` authorizes, exchanges, refreshes and revokes with client 2', async () => {
    const { account, login } = await person('second');
    const since = gh.clientCalls.length;
    const id = await connectThrough(account.token, login, client2, 'gh-second');
    const second = { id: 'gh-second', owner: 'deployment' };
    expect((await get(account.token, '/v1/integrations')).json().integrations).toEqual([expect.objectContaining({ id, app: second })]);
    expect((await get(account.token, '/v1/integrations/github/token')).json().app).toEqual(second);
    expect((await post(account.token, '/query', { query: '{ integrations { app { id owner } } }' })).json().data.integrations).toEqual([{ app: second }]);

    // The stored grant is client 2's at the provider: client 1 cannot refresh it.
    const refreshed = await post(account.token, '/v1/integrations/github/refresh');
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    const last = tokenOf(login)?.accessToken as string;
    expect((await app.inject({ method: 'DELETE', url: `/v1/integrations/${id}`, headers: bearer(account.token) })).statusCode).toBe(200);
    await revokeQueued();
    expect(callsSince(since)).toEqual([
      { endpoint: 'authorize', clientId: client2.clientId },
      { endpoint: 'token', clientId: client2.clientId },
      { endpoint: 'refresh', clientId: client2.clientId },
      { endpoint: 'revoke', clientId: client2.clientId },
    ]);
    expect(revokedWith(last)).toBe(client2.clientId);
    expect(gh.tokensOf(login)).toEqual([]);
  });

  it('an app of another provider, an unknown one, or one listing other organizations is refused at start with 400 INVALID_INPUT, and not listed', async () => {
    const { account } = await person('refused');
    const providers = (await get(account.token, '/v1/providers')).json().providers;
    expect(providers.find((p: { id: string }) => p.id === 'github')?.apps).toEqual(['github', 'gh-second']);
    for (const appId of ['nope', 'slack', 'gh-limited', '01JAPPNOTKNOWN0000000000000']) {
      const res = await post(account.token, '/v1/integrations/oauth/start', { provider: 'github', redirectUri: REDIRECT_URI, app: appId });
      expect([res.statusCode, res.json().code], appId).toEqual([400, 'INVALID_INPUT']);
    }
  });
});

describe('a reconnect through another app', () => {
  it('replaces the grant: integration.connected says appChanged with the previous app, the old grant is revoked with the OLD client, the audit row says so', async () => {
    const { account, login } = await person('switch');
    const id = await connectThrough(account.token, login, client1);
    const old = tokenOf(login)?.accessToken as string;
    const since = gh.clientCalls.length;
    expect(await connectThrough(account.token, login, client2, 'gh-second')).toBe(id);
    await revokeQueued();
    expect(callsSince(since)).toEqual([
      { endpoint: 'authorize', clientId: client2.clientId },
      { endpoint: 'token', clientId: client2.clientId },
      { endpoint: 'revoke', clientId: client1.clientId },
    ]);
    expect(revokedWith(old)).toBe(client1.clientId);
    // Only the old app's grant went: the new one (client 2's) still works.
    const current = gh.tokensOf(login);
    expect(current).toHaveLength(1);
    expect((await get(account.token, '/v1/integrations/github/token')).json()).toMatchObject({ app: { id: 'gh-second', owner: 'deployment' }, token: { accessToken: current[0]?.accessToken } });

    const [event] = await queryRows<{ data: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT data FROM events WHERE organization_id = ${account.organizationId} AND type = 'integration.connected' ORDER BY id DESC LIMIT 1`,
    );
    expect(event?.data).toMatchObject({ integration: { id }, reconnected: true, accountChanged: false, app: { id: 'gh-second' }, appChanged: true, previousApp: { id: 'github' } });
    const [audit] = await queryRows<{ action: string; detail: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT action, detail FROM audit_logs WHERE organization_id = ${account.organizationId} AND target_id = ${id} AND action IN ('integration.connected', 'integration.reconnected') ORDER BY id DESC LIMIT 1`,
    );
    expect(audit).toMatchObject({ action: 'integration.reconnected', detail: { app: 'gh-second', appChanged: true, previousApp: 'github', accountChanged: false } });
  });
});

describe('a misconfigured app', () => {
  it("only that app's integrations: 502 PROVIDER_MISCONFIGURED naming the app, `warning` with configure; the other app's stays connected; the log names the app and no secret", async () => {
    const a = await person('misconf-a');
    const b = await person('misconf-b');
    const viaSecond = await connectThrough(a.account.token, a.login, client2, 'gh-second');
    await connectThrough(b.account.token, b.login, client1);
    const before = client2.clientSecret;
    const rotated = gh.rotateClientSecret(randomString(40), client2.clientId);
    secrets.push(rotated);
    const since = gh.clientCalls.length;

    const res = await post(a.account.token, '/v1/integrations/github/refresh');
    expect(res.statusCode, res.body).toBe(502);
    expect(res.json()).toMatchObject({ success: false, code: 'PROVIDER_MISCONFIGURED' });
    expect(res.json().error).toContain('gh-second');
    const status = (await get(a.account.token, '/v1/integrations/github/status')).json().status;
    expect(status).toMatchObject({ status: 'warning', connected: true, actions: ['configure'] });
    const [changed] = await queryRows<{ data: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT data FROM events WHERE type = 'integration.status_changed' AND data->'integration'->>'id' = ${viaSecond} ORDER BY id DESC LIMIT 1`,
    );
    expect(changed?.data).toMatchObject({ from: 'connected', to: 'warning' });

    const other = await post(b.account.token, '/v1/integrations/github/refresh');
    expect(other.statusCode, other.body).toBe(200);
    expect((await get(b.account.token, '/v1/integrations/github/status')).json().status).toMatchObject({ status: 'connected', actions: [] });
    expect(callsSince(since)).toEqual([
      { endpoint: 'refresh', clientId: client2.clientId },
      { endpoint: 'refresh', clientId: client1.clientId },
    ]);

    const lines = t.logs.lines.filter((line) => line.includes('rejected the client credentials of deployment app gh-second'));
    expect(lines.length).toBeGreaterThan(0);
    for (const secret of [before, rotated, client1.clientSecret]) expect(t.logs.text).not.toContain(secret);
    // A deployment app heals with a restart on the new settings; put the fake back for what follows.
    gh.rotateClientSecret(before, client2.clientId);
  });

  it("the same at a background refresh (only that app's integration) and at the callback of a flow through it", async () => {
    const c = await person('misconf-c');
    const d = await person('misconf-d');
    const viaSecond = await connectThrough(c.account.token, c.login, client2, 'gh-second');
    const viaDefault = await connectThrough(d.account.token, d.login, client1);
    const before = client2.clientSecret;
    secrets.push(gh.rotateClientSecret(randomString(40), client2.clientId));
    const since = gh.clientCalls.length;
    await t.database.db.execute(
      sql`UPDATE integrations SET token_expires_at = now() + interval '10 minutes', next_validation_at = now() - interval '1 second' WHERE id IN (${viaSecond}, ${viaDefault})`,
    );
    const result = await runValidationPass(t.app.services, { batchSize: 50 });
    expect(result.misconfigured).toBe(1);
    expect((await get(c.account.token, '/v1/integrations/github/status')).json().status).toMatchObject({ status: 'warning', actions: ['configure'] });
    expect((await get(d.account.token, '/v1/integrations/github/status')).json().status).toMatchObject({ status: 'connected', actions: [] });
    expect(
      callsSince(since)
        .map((call) => `${call.endpoint} ${call.clientId}`)
        .sort(),
    ).toEqual([`refresh ${client1.clientId}`, `refresh ${client2.clientId}`].sort());

    // A first connection through the app: nothing stored, the answer names the app.
    const e = await person('misconf-e');
    const started = await post(e.account.token, '/v1/integrations/oauth/start', { provider: 'github', redirectUri: REDIRECT_URI, app: 'gh-second' });
    const approved = gh.authorize(started.json().authUrl, e.login);
    const tx = started.cookies.find((cookie) => cookie.name === 'oauth_tx')?.value ?? '';
    const exchanged = gh.clientCalls.length;
    const res = await app.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers: { cookie: `oauth_tx=${tx}` }, payload: { provider: 'github', code: approved.code, state: approved.state } });
    expect(res.statusCode, res.body).toBe(502);
    expect(res.json().code).toBe('PROVIDER_MISCONFIGURED');
    expect(res.json().error).toContain('gh-second');
    expect(callsSince(exchanged)).toEqual([{ endpoint: 'token', clientId: client2.clientId }]);
    expect((await get(e.account.token, '/v1/integrations')).json().integrations).toEqual([]);
    gh.rotateClientSecret(before, client2.clientId);
  });
});

/** `account`'s organization registers `client` as an app of its own (POST /v1/apps); its id. */
async function ownApp(account: Account, client: FakeClient, extra: Record<string, unknown> = {}): Promise<string> {
  secrets.push(client.clientSecret);
  const res = await post(account.token, '/v1/apps', { provider: 'github', name: 'Our own GitHub app', clientId: client.clientId, clientSecret: client.clientSecret, ...extra });
  expect(res.statusCode, res.body).toBe(201);
  expect(res.json().app).toMatchObject({ provider: 'github', owner: 'organization', clientId: client.clientId });
  return res.json().app.id as string;
}

const patchApp = (token: string, id: string, payload: Record<string, unknown>) => app.inject({ method: 'PATCH', url: `/v1/apps/${id}`, headers: bearer(token), payload });

describe("an organization's own app", () => {
  it('start with its id authorizes, exchanges, refreshes and revokes with its client; the integration names it', async () => {
    const { account, login } = await person('own');
    const client = gh.registerClient();
    const appId = await ownApp(account, client);
    expect(appId).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    const since = gh.clientCalls.length;
    const id = await connectThrough(account.token, login, client, appId);
    const own = { id: appId, owner: 'organization' };
    expect((await get(account.token, '/v1/integrations')).json().integrations).toEqual([expect.objectContaining({ id, app: own })]);
    expect((await get(account.token, '/v1/integrations/github/token')).json().app).toEqual(own);
    expect((await post(account.token, '/query', { query: '{ integrations { app { id owner } } }' })).json().data.integrations).toEqual([{ app: own }]);

    expect((await post(account.token, '/v1/integrations/github/refresh')).statusCode).toBe(200);
    const last = tokenOf(login)?.accessToken as string;
    expect((await app.inject({ method: 'DELETE', url: `/v1/integrations/${id}`, headers: bearer(account.token) })).statusCode).toBe(200);
    await revokeQueued();
    expect(callsSince(since)).toEqual([
      { endpoint: 'authorize', clientId: client.clientId },
      { endpoint: 'token', clientId: client.clientId },
      { endpoint: 'refresh', clientId: client.clientId },
      { endpoint: 'revoke', clientId: client.clientId },
    ]);
    expect(revokedWith(last)).toBe(client.clientId);
    expect(gh.tokensOf(login)).toEqual([]);
    // Another organization cannot start through it.
    const stranger = await person('stranger');
    const refused = await post(stranger.account.token, '/v1/integrations/oauth/start', { provider: 'github', redirectUri: REDIRECT_URI, app: appId });
    expect([refused.statusCode, refused.json().code]).toEqual([400, 'INVALID_INPUT']);
  });
});

describe('the default switched after connecting', () => {
  it('the existing integration still refreshes and revokes with the app that made it; a new start without `app` uses the new default', async () => {
    const { account, login } = await person('switched-default');
    const id = await connectThrough(account.token, login, client1);
    const client = gh.registerClient();
    const appId = await ownApp(account, client);
    const patched = await patchApp(account.token, appId, { default: true });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().app).toMatchObject({ id: appId, default: true });
    const since = gh.clientCalls.length;

    expect((await post(account.token, '/v1/integrations/github/refresh')).statusCode).toBe(200);
    expect((await get(account.token, '/v1/integrations/github/token')).json().app).toEqual({ id: 'github', owner: 'deployment' });
    const started = await post(account.token, '/v1/integrations/oauth/start', { provider: 'github', redirectUri: REDIRECT_URI });
    expect(started.statusCode, started.body).toBe(200);
    expect(new URL(started.json().authUrl).searchParams.get('client_id')).toBe(client.clientId);

    const last = tokenOf(login)?.accessToken as string;
    expect((await app.inject({ method: 'DELETE', url: `/v1/integrations/${id}`, headers: bearer(account.token) })).statusCode).toBe(200);
    await revokeQueued();
    expect(callsSince(since)).toEqual([
      { endpoint: 'refresh', clientId: client1.clientId },
      { endpoint: 'revoke', clientId: client1.clientId },
    ]);
    expect(revokedWith(last)).toBe(client1.clientId);
  });
});

describe("a misconfigured organization's app, healed", () => {
  it("502 PROVIDER_MISCONFIGURED naming the app, `warning` with configure; PATCH with the provider's new secret and the next refresh brings it back, without a reconnect", async () => {
    const { account, login } = await person('own-misconf');
    const client = gh.registerClient();
    const appId = await ownApp(account, client);
    const id = await connectThrough(account.token, login, client, appId);
    const rotated = gh.rotateClientSecret(randomString(40), client.clientId);
    secrets.push(rotated);
    const since = gh.clientCalls.length;

    const res = await post(account.token, '/v1/integrations/github/refresh');
    expect(res.statusCode, res.body).toBe(502);
    expect(res.json().code).toBe('PROVIDER_MISCONFIGURED');
    expect(res.json().error).toContain(appId);
    expect((await get(account.token, '/v1/integrations/github/status')).json().status).toMatchObject({ status: 'warning', actions: ['configure'] });
    const lines = t.logs.lines.filter((line) => line.includes(`organization app ${appId}`));
    expect(lines.length).toBeGreaterThan(0);
    for (const secret of [client.clientSecret, rotated]) expect(t.logs.text).not.toContain(secret);

    const patched = await patchApp(account.token, appId, { clientSecret: rotated });
    expect(patched.statusCode, patched.body).toBe(200);
    const healed = await post(account.token, '/v1/integrations/github/refresh');
    expect(healed.statusCode, healed.body).toBe(200);
    expect((await get(account.token, '/v1/integrations/github/status')).json().status).toMatchObject({ status: 'connected', actions: [] });
    expect((await get(account.token, '/v1/integrations')).json().integrations).toEqual([expect.objectContaining({ id, app: { id: appId, owner: 'organization' } })]);
    expect(callsSince(since)).toEqual([
      { endpoint: 'refresh', clientId: client.clientId },
      { endpoint: 'refresh', clientId: client.clientId },
    ]);
  });
});

/** An end user's connection through a connect session on `appId` (the hosted page, then GitHub as `login`). */
async function connectEndUser(apiToken: string, endUser: string, appId: string, client: FakeClient, login: string): Promise<void> {
  const minted = await post(apiToken, '/v1/connect/sessions', { redirectUri: `${PRODUCT}/done`, allowedProviders: ['github'], endUser: { id: endUser }, app: appId });
  expect(minted.statusCode, minted.body).toBe(201);
  const page = await openPage(app, minted.json().session.url);
  const pressed = await press(app, page, 'github');
  expect(pressed.statusCode, pressed.body).toBe(303);
  const authUrl = new URL(pressed.headers.location as string);
  expect(authUrl.searchParams.get('client_id')).toBe(client.clientId);
  const back = new URL(gh.authorize(authUrl.href, login).location);
  const tx = pressed.cookies.find((c) => c.name === 'oauth_tx')?.value ?? '';
  const landed = await app.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}` } });
  expect(new URL(landed.headers.location as string).searchParams.get('status')).toBe('connected');
}

describe('offboarding', () => {
  it('revokes each grant with its own app’s client id, an organization app’s included, and deletes its apps', async () => {
    const { account, login } = await person('offboard');
    const [endUserA, endUserB] = [`offboard-a-${++logins}`, `offboard-b-${++logins}`];
    gh.addUser({ login: endUserA });
    gh.addUser({ login: endUserB });
    const client = gh.registerClient();
    const ownId = await ownApp(account, client);
    // The organization's own integration through gh-second; end users' through sessions on the default app and on its own app.
    await connectThrough(account.token, login, client2, 'gh-second');
    const apiToken = (await post(account.token, '/query', { query: 'mutation { createAPIToken(name: "backend") { token } }' })).json().data.createAPIToken.token;
    await connectEndUser(apiToken, 'cust-a', 'github', client1, endUserA);
    await connectEndUser(apiToken, 'cust-b', ownId, client, endUserB);
    const orgToken = tokenOf(login)?.accessToken as string;
    const tokenA = tokenOf(endUserA)?.accessToken as string;
    const tokenB = tokenOf(endUserB)?.accessToken as string;

    const res = await app.inject({ method: 'DELETE', url: `/v1/organizations/${account.organizationId}`, headers: bearer(account.token) });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true, deleted: { integrations: 3 } });
    await revokeQueued();
    expect(revokedWith(orgToken)).toBe(client2.clientId);
    expect(revokedWith(tokenA)).toBe(client1.clientId);
    expect(revokedWith(tokenB)).toBe(client.clientId);
    for (const who of [login, endUserA, endUserB]) expect(gh.tokensOf(who), who).toEqual([]);
    for (const table of ['integrations', 'oauth_apps', 'oauth_app_secrets', 'organization_default_apps', 'grant_revocations']) {
      const [row] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM ${sql.raw(table)} WHERE organization_id = ${account.organizationId}`);
      expect(row?.n, table).toBe(0);
    }
  });
});

describe('the secrets scan', () => {
  it('no client secret, access token or refresh token in any answer, GraphQL result, log line, event or stored column', async () => {
    const tokens = gh.issuedTokens();
    expect(tokens.length).toBeGreaterThan(10);
    // Whole values, and every 12-character slice of each client secret.
    const needles = new Set<string>([...tokens, ...secrets]);
    for (const secret of secrets) for (let i = 0; i + 12 <= secret.length; i++) needles.add(secret.slice(i, i + 12));
    const leaks = (where: string, text: string) => [...needles].filter((needle) => text.includes(needle)).map((needle) => `${where}: ${needle.slice(0, 6)}…`);

    const found: string[] = [];
    for (const [index, answer] of answers.entries()) found.push(...leaks(`answer ${index}`, answer));
    found.push(...leaks('logs', t.logs.text));
    const events = await queryRows<{ row: string }>(t.database.db, sql`SELECT e::text AS row FROM events e`);
    expect(events.length).toBeGreaterThan(0);
    found.push(...leaks('events', events.map((e) => e.row).join('\n')));
    const columns = await queryRows<{ table_name: string; column_name: string }>(
      t.database.db,
      sql`SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`,
    );
    expect(columns.length).toBeGreaterThan(100);
    for (const { table_name, column_name } of columns) {
      const values = await queryRows<{ v: string | null }>(t.database.db, sql.raw(`SELECT "${column_name}"::text AS v FROM "${table_name}"`));
      found.push(...leaks(`${table_name}.${column_name}`, values.map((v) => v.v ?? '').join('\n')));
    }
    expect(found).toEqual([]);
  });
});
