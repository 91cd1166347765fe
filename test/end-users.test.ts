// Connections per end user and replacing an account (docs/contract.md §5d), HTTP in; HTTP, events,
// audit and the fakes' records out: one organization (a product's customer) whose people each
// connect their own GitHub account through connect sessions, beside the organization's own.
import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { integrations } from '../src/db/schema.ts';
import { currentAccounts } from '../src/integrations/integrations.ts';
import type { FakeProvider } from './fakes/common.ts';
import type { FakeGitHubUser } from './fakes/github.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { openPage, startThroughPage } from './helpers/connect-page.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv } from './helpers/providers.ts';

const PRODUCT = 'http://127.0.0.1:4455';
const RETURN = `${PRODUCT}/integrations/done`;

let t: TestApp;
let gh: FakeProvider<FakeGitHubUser>;
let slack: FakeProvider;
let owner: Account;
let apiToken: string;
/** The organization's own GitHub integration, connected by the owner as `orgbot`. */
let orgLevel: string;

/**
 * Starts a session's flow from its hosted page as a browser does; the `oauth_tx` value and the
 * provider's authorize URL. (The hosted page's start is changing to a form post: only this
 * function knows how it starts.)
 */
async function mint(endUser: Record<string, unknown> | undefined, allowedProviders = ['github']) {
  const res = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(apiToken), payload: { redirectUri: RETURN, allowedProviders, ...(endUser ? { endUser } : {}) } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().session as { id: string; url: string };
}

/** A new session for `endUser` (none: the organization's own), completed at `fake` as `login`; the integration id. */
async function connectThroughSession(endUser: Record<string, unknown> | undefined, login: string, fake: FakeProvider = gh): Promise<string> {
  const session = await mint(endUser, [fake.id]);
  const { tx, authUrl } = await startThroughPage(t.fastify, session.url, fake.id);
  const back = new URL(fake.authorize(authUrl, login).location);
  const res = await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}` } });
  const landed = new URL(res.headers.location as string);
  expect(landed.searchParams.get('status'), landed.href).toBe('connected');
  return landed.searchParams.get('integration') as string;
}

const get = (url: string, headers: Record<string, string> = {}) => t.fastify.inject({ url, headers: { ...bearer(apiToken), ...headers } });
const tokenOf = async (query = '', headers: Record<string, string> = {}) => (await get(`/v1/integrations/github/token${query}`, headers)).json();
/** Who GitHub says the proxied call was made as. */
const proxiedLogin = async (query: string) => (await get(`/v1/integrations/github/proxy/user${query}`)).json().login;
const events = (type: string) =>
  queryRows<{ data: Record<string, unknown> }>(t.database.db, sql`SELECT data FROM events WHERE organization_id = ${owner.organizationId} AND type = ${type} ORDER BY id`);
const users = new Map<string, FakeGitHubUser>();
function newUser(login: string): FakeGitHubUser {
  const user = gh.addUser({ login, email: `${login}@example.com` });
  users.set(login, user);
  return user;
}
const githubId = (login: string) => String(users.get(login)?.id);

beforeAll(async () => {
  [gh, slack] = await Promise.all([startFakeGitHub({ tokenExpiresIn: 28800 }), startFakeSlack()]);
  newUser('orgbot');
  t = await createTestApp({ env: { ...providerEnv(gh), ...providerEnv(slack), OAUTH_REDIRECT_ORIGINS: `http://127.0.0.1:8080,${PRODUCT}`, RATE_LIMIT_MAX: '0'} });
  owner = await registerAndLogin(t.fastify, 'customer');
  apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "product backend") { token } }')).createAPIToken.token;
  const res = await connect(t.fastify, owner.token, gh, 'orgbot');
  expect(res.statusCode, res.body).toBe(200);
  orgLevel = res.json().integration.id;
});

afterAll(async () => {
  await t?.close();
  await Promise.all([gh?.close(), slack?.close()]);
});

describe('two end users connecting the same provider with different accounts', () => {
  let alice: string;
  let bob: string;

  beforeAll(async () => {
    newUser('alice');
    newUser('bob');
    alice = await connectThroughSession({ id: 'cust-a', email: 'a@customer.example', displayName: 'Ann' }, 'alice');
    bob = await connectThroughSession({ id: 'cust-b' }, 'bob');
  });

  it('are two integrations, each its end user’s, beside the organization’s own', async () => {
    expect(new Set([alice, bob, orgLevel]).size).toBe(3);
    const listed = (await get('/v1/integrations')).json().integrations as { id: string; provider: string; endUser: unknown; name: string }[];
    expect(listed.filter((i) => [alice, bob, orgLevel].includes(i.id)).map(({ id, endUser, name }) => ({ id, endUser, name }))).toEqual([
      { id: orgLevel, endUser: null, name: 'GitHub Integration (orgbot)' },
      { id: alice, endUser: { id: 'cust-a', email: 'a@customer.example', displayName: 'Ann' }, name: 'GitHub Integration (alice)' },
      { id: bob, endUser: { id: 'cust-b' }, name: 'GitHub Integration (bob)' },
    ]);
    const connected = (await events('integration.connected')).map((e) => e.data);
    expect(connected).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ integration: expect.objectContaining({ id: orgLevel }), provider: 'github', endUser: null, accountChanged: false }),
        expect.objectContaining({ integration: expect.objectContaining({ id: alice }), provider: 'github', endUser: { id: 'cust-a', email: 'a@customer.example', displayName: 'Ann' }, reconnected: false }),
        expect.objectContaining({ integration: expect.objectContaining({ id: bob }), provider: 'github', endUser: { id: 'cust-b' }, reconnected: false }),
      ]),
    );
  });

  it('reads each one’s token with endUser, and the organization’s own without it — on either read path', async () => {
    // Without X-Organization-ID the credential check folds into the read's one statement; with it, the read follows authentication.
    const readPaths: Record<string, string>[] = [{}, { 'x-organization-id': owner.organizationId }];
    for (const headers of readPaths) {
      const a = await tokenOf('?endUser=cust-a', headers);
      expect(a.token.accessToken).toBe(gh.tokensOf('alice')[0]?.accessToken);
      expect(a.endUser).toEqual({ id: 'cust-a', email: 'a@customer.example', displayName: 'Ann' });
      expect((await tokenOf('?endUser=cust-b', headers)).token.accessToken).toBe(gh.tokensOf('bob')[0]?.accessToken);
      const own = await tokenOf('', headers);
      expect(own.token.accessToken).toBe(gh.tokensOf('orgbot')[0]?.accessToken);
      expect(own.endUser).toBeNull();
      const none = await get('/v1/integrations/github/token?endUser=cust-nobody', headers);
      expect([none.statusCode, none.json().code]).toEqual([404, 'INTEGRATION_NOT_FOUND']);
    }
    // The owner's session (deferred check, one statement) reads the same.
    const owners = await t.fastify.inject({ url: '/v1/integrations/github/token?endUser=cust-b', headers: bearer(owner.token) });
    expect(owners.json().token.accessToken).toBe(gh.tokensOf('bob')[0]?.accessToken);
    const audited = await queryRows<{ target_id: string }>(t.database.db, sql`SELECT target_id FROM audit_logs WHERE request_id = ${owners.headers['x-request-id'] as string}`);
    expect(audited).toEqual([{ target_id: bob }]);
    expect((await get('/v1/integrations/github/token?endUser=')).json().code).toBe('INVALID_INPUT');
  });

  it('calls the provider as that end user’s account through the proxy, which never forwards endUser', async () => {
    expect(await proxiedLogin('?endUser=cust-a')).toBe('alice');
    expect(await proxiedLogin('?endUser=cust-b')).toBe('bob');
    expect(await proxiedLogin('')).toBe('orgbot');
    const res = await get('/v1/integrations/github/proxy/user/repos?per_page=5&endUser=cust-a&sort=updated');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()[0].full_name).toBe('alice/hello-world');
    const call = gh.requests.filter((r) => r.path === '/api/user/repos').at(-1);
    expect(call?.query).toEqual({ per_page: '5', sort: 'updated' });
    expect(call?.headers.authorization).toBe(`token ${gh.tokensOf('alice')[0]?.accessToken}`);
    expect(gh.requests.some((r) => JSON.stringify(r.query).includes('endUser') || r.path.includes('cust-'))).toBe(false);
    expect((await get('/v1/integrations/github/proxy/user?endUser=cust-nobody')).statusCode).toBe(404);
    expect((await get('/v1/integrations/github/proxy/user?endUser=cust-a&endUser=cust-b')).json().code).toBe('INVALID_INPUT');
  });

  it('answers status and refresh for the end user named, leaving the others as they were', async () => {
    const status = await get('/v1/integrations/github/status?endUser=cust-a');
    expect(status.json().status).toMatchObject({ provider: 'github', status: 'connected' });
    expect((await get('/v1/integrations/github/status?endUser=cust-nobody')).json().code).toBe('INTEGRATION_NOT_FOUND');
    const before = { a: (await tokenOf('?endUser=cust-a')).token.accessToken, own: (await tokenOf()).token.accessToken, refreshes: gh.stats.refreshes };
    const refreshed = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/github/refresh?endUser=cust-b', headers: bearer(apiToken) });
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    expect(gh.stats.refreshes).toBe(before.refreshes + 1);
    expect(refreshed.json().token.accessToken).toBe(gh.tokensOf('bob')[0]?.accessToken);
    expect((await tokenOf('?endUser=cust-b')).token.accessToken).toBe(refreshed.json().token.accessToken);
    expect((await tokenOf('?endUser=cust-a')).token.accessToken).toBe(before.a);
    expect((await tokenOf()).token.accessToken).toBe(before.own);
    const missing = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/github/refresh?endUser=cust-nobody', headers: bearer(apiToken) });
    expect(missing.json().code).toBe('INTEGRATION_NOT_FOUND');
  });

  it('lists by provider and by end user, over REST and GraphQL', async () => {
    const ids = async (query: string) => ((await get(`/v1/integrations${query}`)).json().integrations as { id: string }[]).map((i) => i.id);
    expect(await ids('?endUser=cust-a')).toEqual([alice]);
    expect(await ids('?provider=github&endUser=cust-b')).toEqual([bob]);
    expect(await ids('?provider=slack&endUser=cust-b')).toEqual([]);
    expect(await ids('?provider=github')).toEqual(expect.arrayContaining([orgLevel, alice, bob]));
    // Timestamps as the API writes them everywhere (Date#toISOString: UTC, milliseconds truncated), whatever formats them.
    await t.database.db.execute(sql`UPDATE integrations SET updated_at = '2026-11-25 21:00:00.123999+00' WHERE id = ${alice}`);
    const [stored] = await t.database.db.select().from(integrations).where(eq(integrations.id, alice));
    const [listed] = (await get('/v1/integrations?endUser=cust-a')).json().integrations;
    expect(listed).toMatchObject({ createdAt: stored?.createdAt.toISOString(), updatedAt: '2026-11-25T21:00:00.123Z' });
    expect((await get('/v1/integrations?endUser=')).json().code).toBe('INVALID_INPUT');
    const graph = await graphqlData(t.fastify, owner.token, '{ mine: integrations(endUser: "cust-a") { id endUser { id email displayName } } github: integrations(provider: "github") { id endUser { id } } }');
    expect(graph.mine).toEqual([{ id: alice, endUser: { id: 'cust-a', email: 'a@customer.example', displayName: 'Ann' } }]);
    expect(graph.github).toEqual(expect.arrayContaining([{ id: orgLevel, endUser: null }, { id: bob, endUser: { id: 'cust-b' } }]));
  });

  it('names the end user in integration.status_changed', async () => {
    newUser('dora');
    const dora = await connectThroughSession({ id: 'cust-d' }, 'dora');
    gh.revokeUser('dora');
    const res = await get('/v1/integrations/github/proxy/user?endUser=cust-d');
    expect(res.json().code).toBe('TOKEN_VALIDATION_FAILED');
    const changed = (await events('integration.status_changed')).map((e) => e.data).filter((d) => (d.integration as { id: string }).id === dora);
    expect(changed).toEqual([expect.objectContaining({ provider: 'github', endUser: { id: 'cust-d' }, to: 'invalid' })]);
    // Only cust-d's integration went invalid, and each status route says so for its own.
    expect((await get('/v1/integrations/github/status?endUser=cust-d')).json().status).toMatchObject({ status: 'invalid', actions: ['reconnect'] });
    expect((await get('/v1/integrations/github/status')).json().status.status).toBe('connected');
    expect((await get('/v1/integrations/github/token?endUser=cust-d')).json().code).toBe('TOKEN_VALIDATION_FAILED');
    expect(await proxiedLogin('?endUser=cust-a')).toBe('alice');
    expect(await proxiedLogin('')).toBe('orgbot');
  });
});

describe('reconnecting and replacing an account', () => {
  it('keeps the id when the same end user reconnects through a new session, and revokes nothing for the same account', async () => {
    newUser('erin');
    const first = await connectThroughSession({ id: 'cust-e', displayName: 'Erin' }, 'erin');
    const revocations = gh.stats.revocations;
    const again = await connectThroughSession({ id: 'cust-e', displayName: 'Erin E.' }, 'erin');
    expect(again).toBe(first);
    const [event] = (await events('integration.connected')).map((e) => e.data).filter((d) => (d.integration as { id: string }).id === first).slice(-1);
    expect(event).toMatchObject({ reconnected: true, accountChanged: false, endUser: { id: 'cust-e', displayName: 'Erin E.' } });
    expect(event).not.toHaveProperty('previousAccount');
    // The end user's description is the latest session's.
    expect((await get('/v1/integrations?endUser=cust-e')).json().integrations[0].endUser).toEqual({ id: 'cust-e', displayName: 'Erin E.' });
    expect(gh.stats.revocations).toBe(revocations);
    expect(gh.tokensOf('erin').length).toBeGreaterThan(0);
    expect(await proxiedLogin('?endUser=cust-e')).toBe('erin');
  });

  it('replaces the grant when another account connects: the previous one revoked at the provider, named in the event and the audit', async () => {
    newUser('fred');
    newUser('gail');
    const id = await connectThroughSession({ id: 'cust-f' }, 'fred');
    const fredToken = (await tokenOf('?endUser=cust-f')).token.accessToken;
    const revocations = gh.stats.revocations;
    expect(await connectThroughSession({ id: 'cust-f' }, 'gail')).toBe(id);

    const [event] = (await events('integration.connected')).map((e) => e.data).filter((d) => (d.integration as { id: string }).id === id).slice(-1);
    expect(event).toMatchObject({ provider: 'github', endUser: { id: 'cust-f' }, reconnected: true, accountChanged: true, previousAccount: { id: githubId('fred'), username: 'fred' } });
    const [audit] = await queryRows<{ action: string; detail: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT action, detail FROM audit_logs WHERE organization_id = ${owner.organizationId} AND target_id = ${id} ORDER BY id DESC LIMIT 1`,
    );
    expect(audit).toMatchObject({ action: 'integration.reconnected', detail: { accountChanged: true, previousAccount: { id: githubId('fred'), username: 'fred' }, endUser: 'cust-f' } });

    // After the commit, fred's grant is revoked at GitHub: his token no longer works there.
    await expect.poll(() => gh.stats.revocations, { timeout: 5000 }).toBe(revocations + 1);
    expect(gh.tokensOf('fred')).toEqual([]);
    const direct = await fetch(`${gh.apiUrl}/user`, { headers: { authorization: `token ${fredToken}` } });
    expect(direct.status).toBe(401);
    expect(await proxiedLogin('?endUser=cust-f')).toBe('gail');
    // Nobody else's connection was touched.
    expect(await proxiedLogin('')).toBe('orgbot');
    expect(await proxiedLogin('?endUser=cust-a')).toBe('alice');
  });

  it('connects the organization’s own through a session without an end user, never an end user’s', async () => {
    const before = (await tokenOf('?endUser=cust-a')).token.accessToken;
    expect(await connectThroughSession(undefined, 'orgbot')).toBe(orgLevel);
    expect((await tokenOf('?endUser=cust-a')).token.accessToken).toBe(before);
    expect(await proxiedLogin('')).toBe('orgbot');
  });

  it('tells the hosted page which account each provider has now, for that end user', async () => {
    const accounts = await currentAccounts(t.app.services, owner.organizationId, 'cust-f');
    expect(Object.fromEntries(accounts)).toEqual({ github: { id: githubId('gail'), username: 'gail' } });
    expect(Object.fromEntries(await currentAccounts(t.app.services, owner.organizationId, null))).toEqual({ github: { id: githubId('orgbot'), username: 'orgbot' } });
    expect((await currentAccounts(t.app.services, owner.organizationId, 'cust-nobody')).size).toBe(0);
    const elsewhere = await registerAndLogin(t.fastify, 'elsewhere');
    expect((await currentAccounts(t.app.services, elsewhere.organizationId, 'cust-f')).size).toBe(0);

    // The page itself says so before the person leaves for the provider — for that end user only.
    const theirs = await openPage(t.fastify, (await mint({ id: 'cust-f' }, ['github', 'slack'])).url);
    expect(theirs.res.body).toMatch(/Connected now as <strong>gail<\/strong>\. Continuing replaces that account\./);
    expect(theirs.res.body).not.toMatch(/orgbot/);
    const fresh = await openPage(t.fastify, (await mint({ id: 'cust-nobody' }, ['github'])).url);
    expect(fresh.res.body).not.toMatch(/Connected now as/);
  });
});

describe('deleting an end user’s integrations', () => {
  it('deletes every integration of that end user, revoking each grant, and nothing else', async () => {
    newUser('hank');
    slack.addUser({ login: 'hank-slack', email: 'hank@example.com' });
    const github = await connectThroughSession({ id: 'cust-h' }, 'hank');
    const slackId = await connectThroughSession({ id: 'cust-h' }, 'hank-slack', slack);
    const revocations = { github: gh.stats.revocations, slack: slack.stats.revocations };

    const res = await t.fastify.inject({ method: 'DELETE', url: '/v1/integrations?endUser=cust-h', headers: bearer(apiToken) });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true, deleted: 2 });
    expect((await get('/v1/integrations?endUser=cust-h')).json().integrations).toEqual([]);
    expect((await get('/v1/integrations/github/token?endUser=cust-h')).statusCode).toBe(404);
    await expect.poll(() => [gh.stats.revocations, slack.stats.revocations], { timeout: 5000 }).toEqual([revocations.github + 1, revocations.slack + 1]);
    expect(gh.tokensOf('hank')).toEqual([]);

    const deleted = (await events('integration.deleted')).map((e) => e.data);
    expect(deleted).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ integration: expect.objectContaining({ id: github }), provider: 'github', endUser: { id: 'cust-h' } }),
        expect.objectContaining({ integration: expect.objectContaining({ id: slackId }), provider: 'slack', endUser: { id: 'cust-h' } }),
      ]),
    );
    const audit = await queryRows<{ target_id: string }>(t.database.db, sql`SELECT target_id FROM audit_logs WHERE request_id = ${res.headers['x-request-id'] as string} AND action = 'integration.deleted'`);
    expect(audit.map((a) => a.target_id).sort()).toEqual([github, slackId].sort());
    // The organization's own and the other end users' are still there.
    expect(await proxiedLogin('')).toBe('orgbot');
    expect(await proxiedLogin('?endUser=cust-a')).toBe('alice');
  });

  it('answers 0 for an end user without integrations, 400 without endUser, and 403 to a member', async () => {
    expect((await t.fastify.inject({ method: 'DELETE', url: '/v1/integrations?endUser=cust-nobody', headers: bearer(apiToken) })).json()).toEqual({ success: true, deleted: 0 });
    const bulk = await t.fastify.inject({ method: 'DELETE', url: '/v1/integrations', headers: bearer(apiToken) });
    expect([bulk.statusCode, bulk.json().code]).toEqual([400, 'INVALID_INPUT']);
    const member = await registerAndLogin(t.fastify, 'member');
    await t.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${owner.organizationId}, ${member.userId}, 'member')`);
    const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(member.token), payload: { organizationId: owner.organizationId } });
    const refused = await t.fastify.inject({ method: 'DELETE', url: '/v1/integrations?endUser=cust-a', headers: bearer(switched.json().accessToken) });
    expect(refused.statusCode).toBe(403);
    expect((await get('/v1/integrations?endUser=cust-a')).json().integrations).toHaveLength(1);
  });
});
