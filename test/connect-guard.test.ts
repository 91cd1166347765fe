// Security round 3 (docs/contract.md §5a), HTTP in, HTTP and stored rows out: a connect flow starts
// only from the hosted page's own form, and a connect session works only while the credential
// that minted it could still mint it. The real-browser half is test/connect-guard-browser.test.ts.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type HostedPage, openPage, press, startThroughPage } from './helpers/connect-page.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, login, registerAndLogin } from './helpers/identity.ts';
import { providerEnv } from './helpers/providers.ts';

const PRODUCT = 'http://127.0.0.1:4455';
const RETURN = `${PRODUCT}/integrations/done`;

let t: TestApp;
let gh: FakeProvider;
let owner: Account;
let apiToken: string;

const gql = (token: string, query: string) => graphqlData(t.fastify, token, query);
const count = async (query: ReturnType<typeof sql>) => (await queryRows<{ n: number }>(t.database.db, query))[0]?.n;
const states = () => count(sql`SELECT count(*)::int AS n FROM oauth_states`);

async function mint(token: string, body: Record<string, unknown> = {}) {
  const res = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(token), payload: { redirectUri: RETURN, allowedProviders: ['github'], ...body } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().session as { id: string; url: string };
}

/** A refused start: the hosted page again (HTML, 403), no redirect, no `oauth_tx`, no state stored. */
async function expectRefused(res: Awaited<ReturnType<typeof press>>, statesBefore: number | undefined, label: string) {
  expect(res.statusCode, label).toBe(403);
  expect(res.headers['content-type'], label).toMatch(/^text\/html/);
  expect(res.body, label).toContain('Connect an account');
  expect(res.body, label).toContain('Nothing was started.');
  expect(res.headers.location, label).toBeUndefined();
  expect(res.cookies.map((cookie) => cookie.name), label).not.toContain('oauth_tx');
  expect(await states(), label).toBe(statesBefore);
}

beforeAll(async () => {
  gh = await startFakeGitHub();
  gh.addUser({ login: 'enduser', email: 'end@example.com' });
  t = await createTestApp({ env: { ...providerEnv(gh), OAUTH_REDIRECT_ORIGINS: `http://127.0.0.1:8080,${PRODUCT}`, RATE_LIMIT_MAX: '0' } });
  owner = await registerAndLogin(t.fastify, 'guarded');
  apiToken = (await gql(owner.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

describe('a flow starts only from the hosted page’s own form', () => {
  it('starts when the person presses a button of the page: 303 to the provider, oauth_tx set, the nonce used up', async () => {
    const session = await mint(apiToken);
    const page = await openPage(t.fastify, session.url);
    const cookie = page.res.cookies.find((c) => c.name === 'form_binding');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: page.action });
    const before = await states();
    const started = await press(t.fastify, page, 'github');
    expect(started.statusCode, started.body).toBe(303);
    expect(started.headers.location).toMatch(new RegExp(`^${gh.authUrl}\\?`));
    expect(started.cookies.find((c) => c.name === 'oauth_tx')).toMatchObject({ httpOnly: true, path: '/v1/integrations/oauth' });
    expect(await states()).toBe((before ?? 0) + 1);
    // The same nonce again — a double press, a replay — starts nothing more.
    await expectRefused(await press(t.fastify, page, 'github'), (before ?? 0) + 1, 'used nonce');
    // What a browser sends for the page's own form: its Origin is `null` under the page's no-referrer policy.
    const browserLike = await press(t.fastify, await openPage(t.fastify, session.url), 'github', { headers: { origin: 'null' } });
    expect(browserLike.statusCode, browserLike.body).toBe(303);
  });

  it('shows the page again and starts nothing for a GET of the start, a link or a post that is not the page’s own', async () => {
    const session = await mint(apiToken);
    const other = await openPage(t.fastify, (await mint(apiToken)).url);
    const before = await states();
    const page = await openPage(t.fastify, session.url);
    const get = await t.fastify.inject({ url: `${page.action}?provider=github` });
    await expectRefused(get, before, 'GET of the start');
    const cases: [string, Partial<HostedPage>, { headers?: Record<string, string>; body?: Record<string, string> }][] = [
      ['no nonce', { nonce: '' }, {}],
      ['a made-up nonce', { nonce: 'A'.repeat(43) }, {}],
      ['no form cookie', { formCookie: '' }, {}],
      ["another browser's cookie", { formCookie: `form_binding=${'B'.repeat(43)}` }, {}],
      ["another page's nonce and cookie", { nonce: other.nonce, formCookie: other.formCookie }, {}],
      ['Sec-Fetch-Site: cross-site', {}, { headers: { 'sec-fetch-site': 'cross-site' } }],
      ['Sec-Fetch-Site: same-site', {}, { headers: { 'sec-fetch-site': 'same-site' } }],
      ['a foreign Origin', {}, { headers: { origin: 'https://evil.example' } }],
      ["the product's Origin", {}, { headers: { origin: PRODUCT } }],
      ['a text/plain body', {}, { headers: { 'content-type': 'text/plain' } }],
      ['an unexpected field', {}, { body: { extra: '1' } }],
    ];
    for (const [label, change, options] of cases) {
      await expectRefused(await press(t.fastify, { ...page, ...change }, 'github', options), before, label);
    }
    // None of those used the page's nonce up: the person's own press still starts.
    const started = await press(t.fastify, page, 'github');
    expect(started.statusCode, started.body).toBe(303);
  });

  it('a refused post shows a page whose own form works, and a nonce past its time is refused', async () => {
    const session = await mint(apiToken);
    const page = await openPage(t.fastify, session.url, { popup: true });
    await t.database.db.execute(sql`UPDATE form_nonces SET expires_at = now() - interval '1 second'`);
    const refused = await press(t.fastify, page, 'github');
    await expectRefused(refused, await states(), 'expired nonce');
    // The page shown again keeps the browser's cookie and the popup mode, with a fresh nonce.
    const again = /name="nonce" value="([^"]+)"/.exec(refused.body)?.[1] as string;
    expect(again).not.toBe(page.nonce);
    expect(refused.body).toContain('<input type="hidden" name="popup" value="1">');
    const started = await press(t.fastify, { ...page, nonce: again }, 'github');
    expect(started.statusCode, started.body).toBe(303);
    const back = new URL(gh.authorize(started.headers.location as string, 'enduser').location);
    const done = await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${started.cookies.find((c) => c.name === 'oauth_tx')?.value}` } });
    // Started from the popup's page: the callback answers with the page that tells the opener.
    expect(done.statusCode).toBe(200);
    expect(done.body).toContain('Connected');
  });

  it('lets one of two presses racing with one nonce start', async () => {
    const page = await openPage(t.fastify, (await mint(apiToken)).url);
    const answers = await Promise.all([press(t.fastify, page, 'github'), press(t.fastify, page, 'github'), press(t.fastify, page, 'github')]);
    expect(answers.map((res) => res.statusCode).sort()).toEqual([303, 403, 403]);
  });

  it('parses form bodies on the form’s route only: the JSON routes still answer 415', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const loginForm = await t.fastify.inject({ method: 'POST', url: '/v1/login', headers: form, payload: `email=${encodeURIComponent(owner.email)}&password=x` });
    expect(loginForm.statusCode).toBe(415);
    const mintForm = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: { ...form, ...bearer(apiToken) }, payload: `redirectUri=${encodeURIComponent(RETURN)}` });
    expect(mintForm.statusCode).toBe(415);
    expect(mintForm.json().code).toBe('UNSUPPORTED_MEDIA_TYPE');
  });
});

/** A person made owner or admin of `organization`'s organization, signed in there. */
async function manager(boss: Account, role: 'owner' | 'admin', name: string): Promise<Account> {
  const person = await registerAndLogin(t.fastify, name);
  await t.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${boss.organizationId}, ${person.userId}, ${role})`);
  const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(person.token), payload: { organizationId: boss.organizationId } });
  expect(switched.statusCode, switched.body).toBe(200);
  return { ...person, organizationId: boss.organizationId, token: switched.json().accessToken };
}

const sessionView = async (id: string, token: string) => (await t.fastify.inject({ url: `/v1/connect/sessions/${id}`, headers: bearer(token) })).json().session;

describe('a session lives only while the credential that minted it could still mint it', () => {
  /** Each way a minting credential loses its authority, and the credential to mint with before it does. */
  const losses: [string, (boss: Account, bossToken: string) => Promise<{ token: string; lose: () => Promise<void> }>][] = [
    ['an admin demoted to member', async (boss, bossToken) => {
      const admin = await manager(boss, 'admin', 'demoted-admin');
      return { token: admin.token, lose: async () => void (await gql(bossToken, `mutation { setMemberRole(email: "${admin.email}", role: "member") { role } }`)) };
    }],
    ['an owner demoted to member', async (boss, bossToken) => {
      const second = await manager(boss, 'owner', 'demoted-owner');
      return { token: second.token, lose: async () => void (await gql(bossToken, `mutation { setMemberRole(email: "${second.email}", role: "member") { role } }`)) };
    }],
    ['an admin removed from the organization', async (boss, bossToken) => {
      const admin = await manager(boss, 'admin', 'removed-admin');
      return { token: admin.token, lose: async () => void (await gql(bossToken, `mutation { removeMember(email: "${admin.email}") }`)) };
    }],
    ['an admin who logged out (the minting session)', async (boss) => {
      const admin = await manager(boss, 'admin', 'logged-out');
      return { token: admin.token, lose: async () => expect((await t.fastify.inject({ method: 'POST', url: '/v1/logout', headers: bearer(admin.token) })).statusCode).toBe(200) };
    }],
    ['an admin whose minting PAT expired', async (boss) => {
      const admin = await manager(boss, 'admin', 'pat-holder');
      const pat = (await gql(admin.token, `mutation { createPersonalAccessToken(name: "minting", organizationIds: ["${boss.organizationId}"]) { id token } }`)).createPersonalAccessToken;
      return { token: pat.token, lose: async () => void (await t.database.db.execute(sql`UPDATE personal_access_tokens SET expires_at = now() - interval '1 second' WHERE id = ${pat.id}`)) };
    }],
    ['an admin with a PAT, demoted to member', async (boss, bossToken) => {
      const admin = await manager(boss, 'admin', 'pat-demoted');
      const pat = (await gql(admin.token, `mutation { createPersonalAccessToken(name: "minting", organizationIds: ["${boss.organizationId}"]) { token } }`)).createPersonalAccessToken;
      return { token: pat.token, lose: async () => void (await gql(bossToken, `mutation { setMemberRole(email: "${admin.email}", role: "member") { role } }`)) };
    }],
    ['a revoked PAT', async (boss) => {
      const admin = await manager(boss, 'admin', 'pat-revoked');
      const pat = (await gql(admin.token, `mutation { createPersonalAccessToken(name: "minting", organizationIds: ["${boss.organizationId}"]) { id token } }`)).createPersonalAccessToken;
      return { token: pat.token, lose: async () => void (await gql(admin.token, `mutation { revokePersonalAccessToken(id: "${pat.id}") { id } }`)) };
    }],
    ['an expired API token', async (_boss, bossToken) => {
      const token = (await gql(bossToken, 'mutation { createAPIToken(name: "short-lived") { id token } }')).createAPIToken;
      return { token: token.token, lose: async () => void (await t.database.db.execute(sql`UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = ${token.id}`)) };
    }],
    ['a revoked API token', async (_boss, bossToken) => {
      const token = (await gql(bossToken, 'mutation { createAPIToken(name: "revoked") { id token } }')).createAPIToken;
      return { token: token.token, lose: async () => void (await gql(bossToken, `mutation { revokeAPIToken(id: "${token.id}") { id } }`)) };
    }],
  ];

  for (const [label, setUp] of losses) {
    it(`ends for ${label}: the page says so and its form starts nothing`, async () => {
      const boss = await registerAndLogin(t.fastify, 'boss');
      const bossApi = (await gql(boss.token, 'mutation { createAPIToken(name: "reader") { token } }')).createAPIToken.token;
      const { token, lose } = await setUp(boss, boss.token);
      const session = await mint(token);
      const page = await openPage(t.fastify, session.url);
      await lose();
      const shown = await t.fastify.inject({ url: new URL(session.url).pathname });
      expect(shown.statusCode).toBe(410);
      expect(shown.body).toContain('This link was cancelled');
      expect(shown.body).not.toContain('<form');
      const before = await states();
      const pressed = await press(t.fastify, page, 'github');
      expect(pressed.statusCode).toBe(410);
      expect(pressed.headers.location).toBeUndefined();
      expect(pressed.cookies.map((cookie) => cookie.name)).not.toContain('oauth_tx');
      expect(await states()).toBe(before);
      expect((await sessionView(session.id, bossApi)).status).toBe('revoked');
    });
  }

  for (const [label, setUp] of losses.filter(([name]) => /demoted to member|logged out|expired API/.test(name))) {
    it(`refuses at the callback a flow started before ${label}: nothing stored, the product told FORBIDDEN`, async () => {
      const boss = await registerAndLogin(t.fastify, 'boss');
      const bossApi = (await gql(boss.token, 'mutation { createAPIToken(name: "reader") { token } }')).createAPIToken.token;
      const { token, lose } = await setUp(boss, boss.token);
      const session = await mint(token);
      const { tx, authUrl } = await startThroughPage(t.fastify, session.url, 'github');
      const back = new URL(gh.authorize(authUrl, 'enduser').location);
      await lose();
      const res = await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}` } });
      expect(res.statusCode).toBe(302);
      expect(Object.fromEntries(new URL(res.headers.location as string).searchParams)).toEqual({ status: 'error', provider: 'github', error: 'FORBIDDEN', session: session.id });
      expect(await count(sql`SELECT count(*)::int AS n FROM integrations WHERE organization_id = ${boss.organizationId}`)).toBe(0);
      expect(await sessionView(session.id, bossApi)).toMatchObject({ status: 'revoked', error: 'FORBIDDEN' });
    });
  }

  it('refuses a demotion that lands while the flow is at the provider, in the transaction that would store the integration', async () => {
    const boss = await registerAndLogin(t.fastify, 'boss');
    const admin = await manager(boss, 'admin', 'mid-flight');
    const session = await mint(admin.token);
    const { tx, authUrl } = await startThroughPage(t.fastify, session.url, 'github');
    const back = new URL(gh.authorize(authUrl, 'enduser').location);
    const seen = gh.requests.length;
    gh.latencyMs = 300;
    try {
      const callback = t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}` } });
      // The state is claimed and the starter checked before the code exchange: demote while the provider answers it.
      await expect.poll(() => gh.requests.slice(seen).some((r) => r.method === 'POST'), { timeout: 5000, interval: 10 }).toBe(true);
      await gql(boss.token, `mutation { setMemberRole(email: "${admin.email}", role: "member") { role } }`);
      const res = await callback;
      expect(new URL(res.headers.location as string).searchParams.get('error')).toBe('FORBIDDEN');
    } finally {
      gh.latencyMs = 0;
    }
    expect(await count(sql`SELECT count(*)::int AS n FROM integrations WHERE organization_id = ${boss.organizationId}`)).toBe(0);
  });

  it('reads its grantor’s authority as it is now, but a product’s revocation of it sticks', async () => {
    const boss = await registerAndLogin(t.fastify, 'boss');
    const bossApi = (await gql(boss.token, 'mutation { createAPIToken(name: "reader") { token } }')).createAPIToken.token;
    const admin = await manager(boss, 'admin', 'back-again');
    const [kept, cancelled] = [await mint(admin.token), await mint(admin.token)];
    const role = (name: string) => gql(boss.token, `mutation { setMemberRole(email: "${admin.email}", role: "${name}") { role } }`);
    await role('member');
    const revoked = await t.fastify.inject({ method: 'DELETE', url: `/v1/connect/sessions/${cancelled.id}`, headers: bearer(bossApi) });
    expect(revoked.statusCode, revoked.body).toBe(200);
    expect(revoked.json().session.status).toBe('revoked');
    await role('admin');
    expect((await t.fastify.inject({ url: new URL(kept.url).pathname })).statusCode).toBe(200);
    expect((await t.fastify.inject({ url: new URL(cancelled.url).pathname })).statusCode).toBe(410);
    expect((await sessionView(cancelled.id, bossApi)).status).toBe('revoked');
  });

  it('keeps working while the credential still could mint it (another admin demoted; another session of the minter logged out)', async () => {
    const boss = await registerAndLogin(t.fastify, 'boss');
    const admin = await manager(boss, 'admin', 'steady');
    const bystander = await manager(boss, 'admin', 'bystander');
    const session = await mint(admin.token);
    await gql(boss.token, `mutation { setMemberRole(email: "${bystander.email}", role: "member") { role } }`);
    const otherSession = await login(t.fastify, admin.email, admin.password);
    expect((await t.fastify.inject({ method: 'POST', url: '/v1/logout', headers: bearer(otherSession.token) })).statusCode).toBe(200);
    const { tx, authUrl } = await startThroughPage(t.fastify, session.url, 'github');
    const back = new URL(gh.authorize(authUrl, 'enduser').location);
    const res = await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}` } });
    expect(new URL(res.headers.location as string).searchParams.get('status')).toBe('connected');
  });
});
