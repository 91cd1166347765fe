// Operating Tessera (docs/contract.md §11), HTTP in, HTTP, audit and the database out: an
// organization's connect sessions listed and filtered; every organization, with its
// integrations' health, found by a system administrator, who enters one to read there (never to
// write, never a token) with an audit row per request; the audit log filtered; and retention
// purging old sessions, deliveries and states once across instances while keeping audit rows.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows, sql } from '../src/db/client.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import { runRetention } from '../src/jobs/retention.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { openPage, press } from './helpers/connect-page.ts';
import { backend } from './helpers/database.ts';
import { graphqlData, graphqlRequest } from './helpers/graphql.ts';
import { type Account, bearer, browser, login, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv } from './helpers/providers.ts';

const ADMIN = { email: 'operator@example.com', password: 'bootstrap admin password' };
const RETURN = 'http://127.0.0.1:8080/done';

let t: TestApp;
let gh: FakeProvider;
let admin: Account;
let owner: Account;
let apiToken: string;
/** The product's service token: it links customers' organizations to their externalId. */
let service: string;

interface Page<T> {
  items: T[];
  pageInfo: { endCursor: string | null; hasNextPage: boolean };
}

async function mint(body: Record<string, unknown> = {}) {
  const res = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(apiToken), payload: { redirectUri: RETURN, ...body } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().session as { id: string; url: string };
}

async function sessions(query: string, headers: Record<string, string> = bearer(owner.token)) {
  return t.fastify.inject({ url: `/v1/connect/sessions${query}`, headers });
}

async function organizationsPage(query: string, headers: Record<string, string> = bearer(admin.token)) {
  return t.fastify.inject({ url: `/v1/organizations${query}`, headers });
}

/**
 * Creates an organization owned by a new user, which the product's service token links to
 * `externalId` (only it or a system administrator sets it, docs/contract.md §5d); that owner's token bound to it.
 */
async function customer(name: string, externalId: string): Promise<{ id: string; token: string; userId: string }> {
  const person = await registerAndLogin(t.fastify, 'customer');
  const created = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(person.token), payload: { name } });
  expect(created.statusCode, created.body).toBe(201);
  const { id } = created.json().organization;
  const linked = await t.fastify.inject({ method: 'PATCH', url: `/v1/organizations/${id}`, headers: bearer(service), payload: { externalId } });
  expect(linked.statusCode, linked.body).toBe(200);
  const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(person.token), payload: { organizationId: id } });
  return { id, token: switched.json().accessToken, userId: person.userId };
}

beforeAll(async () => {
  gh = await startFakeGitHub();
  for (const login of ['octo', 'hubot', 'monalisa', 'enduser']) gh.addUser({ login, email: `${login}@example.com` });
  t = await createTestApp({
    env: { ...providerEnv(gh), BOOTSTRAP_ADMIN_EMAIL: ADMIN.email, BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password, OAUTH_STATUS_MAX_AGE: '1', RATE_LIMIT_MAX: '0' },
  });
  await ensureBootstrapAdmin(t.app.services);
  admin = await login(t.fastify, ADMIN.email, ADMIN.password);
  service = (await graphqlData(t.fastify, admin.token, 'mutation { createServiceToken(name: "product") { token } }')).createServiceToken.token;
  owner = await registerAndLogin(t.fastify, 'owner');
  apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

describe(`listing connect sessions (${backend})`, () => {
  it('lists the organization’s sessions newest first, without secrets, filtered by status and paged', async () => {
    const completed = await mint({ allowedProviders: ['github'], endUser: { id: 'cust-1', displayName: 'Customer One' } });
    const revoked = await mint({ endUser: { id: 'cust-2' } });
    const expired = await mint();
    const pending = await mint({ expiresIn: 600 });
    // Completed through the hosted page and the provider, as an end user's browser would.
    const page = await openPage(t.fastify, completed.url);
    const started = await press(t.fastify, page, 'github');
    const back = new URL(gh.authorize(started.headers.location as string, 'enduser').location);
    const tx = started.cookies.find((cookie) => cookie.name === 'oauth_tx')?.value;
    expect((await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}` } })).statusCode).toBe(302);
    expect((await t.fastify.inject({ method: 'DELETE', url: `/v1/connect/sessions/${revoked.id}`, headers: bearer(apiToken) })).statusCode).toBe(200);
    await t.database.db.execute(sql`UPDATE connect_sessions SET expires_at = now() - interval '1 minute' WHERE id = ${expired.id}`);

    const res = await sessions('');
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.sessions.map((s: { id: string }) => s.id)).toEqual([pending.id, expired.id, revoked.id, completed.id]);
    expect(body.sessions.map((s: { status: string }) => s.status)).toEqual(['pending', 'expired', 'revoked', 'completed']);
    expect(body.sessions[3]).toMatchObject({ allowedProviders: ['github'], endUser: { id: 'cust-1', displayName: 'Customer One' }, integrationId: expect.any(String), createdAt: expect.any(String) });
    expect(body.pageInfo).toEqual({ endCursor: completed.id, hasNextPage: false });
    for (const session of [completed, revoked, expired, pending]) expect(res.body).not.toContain(new URL(session.url).pathname.split('/').pop());

    for (const [status, id] of [['pending', pending.id], ['completed', completed.id], ['revoked', revoked.id], ['expired', expired.id]] as const) {
      const filtered = await sessions(`?status=${status}`);
      expect(filtered.json().sessions.map((s: { id: string }) => s.id), status).toEqual([id]);
    }

    const first = (await sessions('?first=3')).json() as { sessions: { id: string }[]; pageInfo: Page<unknown>['pageInfo'] };
    expect(first.sessions.map((s) => s.id)).toEqual([pending.id, expired.id, revoked.id]);
    expect(first.pageInfo).toEqual({ endCursor: revoked.id, hasNextPage: true });
    const second = (await sessions(`?first=3&after=${first.pageInfo.endCursor}`)).json();
    expect(second.sessions.map((s: { id: string }) => s.id)).toEqual([completed.id]);
    expect(second.pageInfo.hasNextPage).toBe(false);

    for (const bad of ['?first=0', '?first=101', '?first=ten', '?status=done', '?after=not-a-cursor']) {
      const refused = await sessions(bad);
      expect(refused.statusCode, bad).toBe(400);
      expect(refused.json().code, bad).toBe('INVALID_INPUT');
    }
  });

  it('is for those who may mint there: the console’s cookie session works; another organization sees none of them; a member and an impersonator are refused', async () => {
    const mine = await mint();
    expect((await sessions('', browser(owner))).json().sessions.map((s: { id: string }) => s.id)).toContain(mine.id);
    expect((await sessions('', bearer(apiToken))).statusCode).toBe(200);

    const other = await registerAndLogin(t.fastify, 'other');
    const theirs = await sessions('', bearer(other.token));
    expect(theirs.statusCode).toBe(200);
    expect(theirs.json().sessions).toEqual([]);
    // Another organization's id as a cursor reveals nothing either.
    expect((await sessions(`?after=${mine.id}`, bearer(other.token))).json().sessions).toEqual([]);

    const member = await registerAndLogin(t.fastify, 'member');
    await t.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${owner.organizationId}, ${member.userId}, 'member')`);
    const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(member.token), payload: { organizationId: owner.organizationId } });
    expect((await sessions('', bearer(switched.json().accessToken))).statusCode).toBe(403);
    expect((await sessions('', { ...bearer(admin.token), 'x-impersonate-user': owner.userId })).statusCode).toBe(403);
    expect((await sessions('', {})).statusCode).toBe(401);
  });
});

describe(`organizations for system administrators (${backend})`, () => {
  it('finds any organization by name or externalId (any case, wildcards taken literally), each with its integrations’ health, a page at a time', async () => {
    const acme = await customer('Acme Corp', 'acme-0001');
    const beta = await customer('Acme Corp', 'beta_0002');
    await customer('Gamma 100% Ltd', 'gamma-0003');
    // Acme: GitHub connected for itself and for an end user (expired); Beta: one invalid.
    expect((await connect(t.fastify, acme.token, gh, 'octo')).statusCode).toBe(200);
    expect((await connect(t.fastify, beta.token, gh, 'hubot')).statusCode).toBe(200);
    await t.database.db.execute(sql`
      INSERT INTO integrations (organization_id, id, provider, app_id, end_user_key, end_user, name, description, provider_account_id, token_expires_at)
      VALUES (${acme.id}, '01J00000000000000000000EXP', 'github', 'github', 'eu-1', '{"id":"eu-1"}', 'GitHub Integration (eu)', 'OAuth integration with github for eu', '99', now() - interval '1 hour')`);
    gh.revokeUser('hubot');
    await sleep(1100);
    expect((await t.fastify.inject({ url: '/v1/integrations/github/status', headers: bearer(beta.token) })).json().status.status).toBe('invalid');

    const byExternalId = await organizationsPage('?q=ACME-0001');
    expect(byExternalId.statusCode, byExternalId.body).toBe(200);
    expect(byExternalId.json().organizations).toEqual([
      { id: acme.id, name: 'Acme Corp', externalId: 'acme-0001', createdAt: expect.any(String), health: { connected: 1, warning: 0, expired: 1, invalid: 0 } },
    ]);
    // Two customers of one name are told apart by externalId.
    const byName = (await organizationsPage('?q=acme%20corp')).json().organizations;
    expect(byName.map((o: { externalId: string }) => o.externalId)).toEqual(['beta_0002', 'acme-0001']);
    expect(byName[0].health).toEqual({ connected: 0, warning: 0, expired: 0, invalid: 1 });
    expect((await organizationsPage('?q=100%25')).json().organizations.map((o: { externalId: string }) => o.externalId)).toEqual(['gamma-0003']);
    expect((await organizationsPage('?q=%25')).json().organizations.map((o: { externalId: string }) => o.externalId)).toEqual(['gamma-0003']);
    expect((await organizationsPage('?q=_')).json().organizations.map((o: { externalId: string }) => o.externalId)).toEqual(['beta_0002']);
    expect((await organizationsPage('?externalId=acme-0001')).json().organizations.map((o: { id: string }) => o.id)).toEqual([acme.id]);

    const one = (await organizationsPage('?first=1')).json();
    expect(one.organizations).toHaveLength(1);
    expect(one.pageInfo.hasNextPage).toBe(true);
    const next = (await organizationsPage(`?first=1&after=${one.pageInfo.endCursor}`)).json();
    expect(next.organizations[0].id < one.organizations[0].id).toBe(true);
    expect((await organizationsPage('?first=101')).statusCode).toBe(400);

    // The administrator's console uses a cookie session; a PAT of theirs works too. An owner, an API token and an impersonator do not.
    expect((await organizationsPage('?q=acme', browser(admin))).statusCode).toBe(200);
    const pat = (await graphqlData(t.fastify, admin.token, 'mutation { createPersonalAccessToken(name: "ops") { token } }')).createPersonalAccessToken.token;
    expect((await organizationsPage('', bearer(pat))).statusCode).toBe(200);
    for (const headers of [bearer(owner.token), bearer(apiToken), { ...bearer(admin.token), 'x-impersonate-user': owner.userId }]) {
      expect((await organizationsPage('', headers)).statusCode).toBe(403);
    }
  });
});

describe(`a system administrator entering an organization (${backend})`, () => {
  it('reads there as a member would, and its audit log; every request is in that organization’s audit log', async () => {
    const org = await customer('Delta Inc', 'delta-0004');
    expect((await connect(t.fastify, org.token, gh, 'monalisa')).statusCode).toBe(200);
    const enter = (headers: Record<string, string> = bearer(admin.token)) => ({ ...headers, 'x-organization-id': org.id });
    const before = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM audit_logs WHERE organization_id = ${org.id} AND action = 'system_admin.request'`);
    expect(before[0]?.n).toBe(0);

    const access = await t.fastify.inject({ url: '/v1/account/access', headers: enter() });
    expect(access.statusCode, access.body).toBe(200);
    expect(access.json().organization).toEqual({ id: org.id, name: 'Delta Inc', role: 'member' });
    const integrations = await t.fastify.inject({ url: '/v1/integrations', headers: enter(browser(admin)) });
    expect(integrations.statusCode, integrations.body).toBe(200);
    expect(integrations.json().integrations.map((i: { provider: string }) => i.provider)).toEqual(['github']);
    expect((await t.fastify.inject({ url: '/v1/integrations/github/status', headers: enter() })).json().status.status).toBe('connected');
    const read = await graphqlRequest(t.fastify, enter(), '{ organization { id name } members { role } auditLogs(first: 50) { nodes { action } } }');
    expect(read.body.errors, read.raw).toBeUndefined();
    expect(read.body.data.organization).toEqual({ id: org.id, name: 'Delta Inc' });
    expect(read.body.data.auditLogs.nodes.map((n: { action: string }) => n.action)).toContain('integration.connected');

    // Never a write, never a token: refused before anything happens.
    const integrationId = integrations.json().integrations[0].id;
    const refused = [
      await t.fastify.inject({ url: '/v1/integrations/github/token', headers: enter() }),
      await t.fastify.inject({ url: '/v1/integrations/github/proxy/user', headers: enter() }),
      await t.fastify.inject({ method: 'POST', url: '/v1/integrations/github/refresh', headers: enter() }),
      await t.fastify.inject({ method: 'DELETE', url: `/v1/integrations/${integrationId}`, headers: enter() }),
      await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: enter(), payload: { redirectUri: RETURN } }),
      await t.fastify.inject({ method: 'PATCH', url: `/v1/organizations/${org.id}`, headers: enter(), payload: { name: 'Taken over' } }),
      await t.fastify.inject({ url: '/v1/connect/sessions', headers: enter() }),
    ];
    for (const res of refused) expect(res.statusCode, res.body).toBe(403);
    const mutation = await graphqlRequest(t.fastify, enter(), 'mutation { addMember(email: "mallory@example.com", role: "owner") { id } }');
    expect(mutation.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const tokenMinted = await graphqlRequest(t.fastify, enter(), 'mutation { createAPIToken(name: "backdoor") { token } }');
    expect(tokenMinted.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(JSON.stringify(tokenMinted.body)).not.toContain('tsa_');
    const still = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM api_tokens WHERE organization_id = ${org.id}`);
    expect(still[0]?.n).toBe(0);
    expect((await graphqlData(t.fastify, org.token, '{ invitations { email } }')).invitations).toEqual([]);

    // Every request that got in left a row in the organization's audit log, naming the administrator.
    const rows = await queryRows<{ actor_user_id: string; credential_kind: string; detail: { method: string; route: string } }>(
      t.database.db,
      sql`SELECT actor_user_id, credential_kind, detail FROM audit_logs WHERE organization_id = ${org.id} AND action = 'system_admin.request' ORDER BY id`,
    );
    // access, integrations, status, /query, the read-only /query of the mutation attempts (2).
    expect(rows.map((row) => `${row.detail.method} ${row.detail.route}`)).toEqual([
      'GET /v1/account/access',
      'GET /v1/integrations',
      'GET /v1/integrations/:provider/status',
      'POST /query',
      'GET /v1/connect/sessions',
      'POST /query',
      'POST /query',
    ]);
    expect(new Set(rows.map((row) => `${row.actor_user_id}:${row.credential_kind}`))).toEqual(new Set([`${admin.userId}:jwt`]));
  });

  it('is a system administrator’s only: anyone else naming another organization is refused; an unknown organization is 404', async () => {
    const org = await customer('Epsilon', 'eps-0005');
    const res = await t.fastify.inject({ url: '/v1/integrations', headers: { ...bearer(owner.token), 'x-organization-id': org.id } });
    expect(res.statusCode).toBe(403);
    expect((await t.fastify.inject({ url: '/v1/integrations', headers: { ...bearer(admin.token), 'x-organization-id': '01J0000000000000000000000Z' } })).statusCode).toBe(404);
    // Entering is no way into the deployment's own views either.
    expect((await t.fastify.inject({ url: '/v1/webhooks/deliveries', headers: { ...bearer(admin.token), 'x-organization-id': org.id } })).statusCode).toBe(403);
  });
});

describe(`the audit log, filtered (${backend})`, () => {
  it('answers only one integration’s, one action’s or one actor’s rows', async () => {
    const org = await customer('Zeta', 'zeta-0006');
    const connected = await connect(t.fastify, org.token, gh, 'octo');
    const integrationId = connected.json().integration.id;
    expect((await t.fastify.inject({ url: '/v1/integrations/github/token', headers: bearer(org.token) })).statusCode).toBe(200);
    await graphqlData(t.fastify, org.token, 'mutation { createAPIToken(name: "x") { id } }');
    const query = 'query($i: String, $a: String, $u: String) { auditLogs(first: 100, integrationId: $i, action: $a, actorUserId: $u) { nodes { action targetId actorUserId } } }';
    const nodes = async (variables: Record<string, unknown>) => (await graphqlData(t.fastify, org.token, query, variables)).auditLogs.nodes as { action: string; targetId: string; actorUserId: string }[];

    const ofIntegration = await nodes({ i: integrationId });
    expect(ofIntegration.length).toBeGreaterThanOrEqual(2);
    expect(ofIntegration.every((node) => node.targetId === integrationId)).toBe(true);
    expect(ofIntegration.map((node) => node.action)).toContain('integration.connected');
    const connects = await nodes({ a: 'integration.connected' });
    expect(connects.map((node) => node.targetId)).toEqual([integrationId]);
    const mine = await nodes({ u: org.userId });
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((node) => node.actorUserId === org.userId)).toBe(true);
    expect(await nodes({ u: admin.userId })).toEqual([]);
  });
});

describe(`retention (${backend})`, () => {
  it('purges old finished sessions, deliveries, expired states, provider delivery ids and untouched provider budgets in small batches, once across instances, keeps audit rows, and counts it in /metrics', async () => {
    // Its own app: a configured (unreachable) webhook gives events their deliveries; nothing runs in the background.
    const r = await createTestApp({
      background: false,
      env: { METRICS_ENABLED: 'true', RETENTION_DAYS: '30', EVENTS_WEBHOOK_URL: 'http://127.0.0.1:9/hook', EVENTS_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 1).toString('base64')}` },
    });
    try {
      const db = r.database.db;
      const people = [];
      for (let i = 0; i < 5; i++) people.push(await registerAndLogin(r.fastify, 'kept'));
      const [a, b, c, d, e] = people as [Account, Account, Account, Account, Account];
      const at = (days: number) => sql`now() - ${days}::int * interval '1 day'`;
      const deliveryOf = (who: Account) => sql`organization_id = ${who.organizationId}`;
      // Deliveries: a delivered 31 days ago, b failed 31 days ago, c delivered yesterday, d pending since long ago, e delivered 31 days ago.
      await db.execute(sql`UPDATE event_deliveries SET delivered_at = ${at(31)} WHERE ${deliveryOf(a)} OR ${deliveryOf(e)}`);
      await db.execute(sql`UPDATE event_deliveries SET failed_at = ${at(31)} WHERE ${deliveryOf(b)}`);
      await db.execute(sql`UPDATE event_deliveries SET delivered_at = ${at(1)} WHERE ${deliveryOf(c)}`);
      await db.execute(sql`UPDATE events SET occurred_at = ${at(40)}`);
      await db.execute(sql`INSERT INTO event_delivery_attempts (organization_id, event_id, webhook_id, number, at, response_status, duration_ms)
                           SELECT organization_id, event_id, webhook_id, 1, ${at(31)}, 204, 5 FROM event_deliveries WHERE ${deliveryOf(a)}`);
      // Sessions: one completed and ended 31 days ago, one ended 29 days ago, one still open.
      const minted = ['01J00000000000000000000S01', '01J00000000000000000000S02', '01J00000000000000000000S03'];
      for (const [id, status, expires] of [
        [minted[0], 'completed', at(31)],
        [minted[1], 'pending', at(29)],
        [minted[2], 'pending', sql`now() + interval '1 hour'`],
      ] as const) {
        await db.execute(sql`INSERT INTO connect_sessions (organization_id, id, secret_hash, redirect_uri, allowed_providers, status, created_by_kind, created_by_id, expires_at)
                             VALUES (${a.organizationId}, ${id}, ${`hash-${id}`}, 'http://127.0.0.1:8080/x', '{github}', ${status}, 'api_token', 'tok', ${expires})`);
      }
      // OAuth states: one expired 31 days ago, one an hour ago.
      for (const [nonce, expires] of [['old', at(31)], ['recent', sql`now() - interval '1 hour'`]] as const) {
        await db.execute(sql`INSERT INTO oauth_states (organization_id, nonce_hash, provider, app_id, redirect_uri, scopes, tx_hash, expires_at)
                             VALUES (${a.organizationId}, ${nonce}, 'github', 'github', 'http://127.0.0.1:8080/x', '{}', 'h', ${expires})`);
      }
      // Provider deliveries' ids: one received 31 days ago, one yesterday.
      for (const [id, received] of [['old-delivery', at(31)], ['recent-delivery', at(1)]] as const) {
        await db.execute(sql`INSERT INTO provider_event_deliveries (provider, delivery_id, received_at) VALUES ('github', ${id}, ${received})`);
      }
      // Provider budgets: one last updated 31 days ago, one yesterday, one 31 days ago still blocking (a clock's leap: kept).
      for (const [scope, updated, blocked] of [
        ['old', at(31), sql`NULL`],
        ['recent', at(1), sql`NULL`],
        ['blocking', at(31), sql`now() + interval '1 hour'`],
      ] as const) {
        await db.execute(sql`INSERT INTO provider_budgets (scope, account_id, organization_id, provider, remaining, reset_at, blocked_until, updated_at)
                             VALUES (${scope}, 'acct', NULL, 'github', 10, NULL, ${blocked}, ${updated})`);
      }
      await db.execute(sql`UPDATE audit_logs SET created_at = ${at(400)}`);
      const auditBefore = await queryRows<{ n: number }>(db, sql`SELECT count(*)::int AS n FROM audit_logs`);

      // Two instances ask at once: one runs the pass.
      const results = await Promise.all([runRetention(r.app.services, { batchSize: 1 }), runRetention(r.app.services, { batchSize: 1 })]);
      expect(results.filter((result) => result === null)).toHaveLength(1);
      expect(results.find((result) => result !== null)).toEqual({ connect_sessions: 1, deliveries: 3, oauth_states: 1, events: 3, provider_deliveries: 1, provider_bodies: 0, provider_budgets: 1 });
      expect((await queryRows<{ scope: string }>(db, sql`SELECT scope FROM provider_budgets ORDER BY scope`)).map((row) => row.scope)).toEqual(['blocking', 'recent']);
      expect((await queryRows<{ delivery_id: string }>(db, sql`SELECT delivery_id FROM provider_event_deliveries`)).map((row) => row.delivery_id)).toEqual(['recent-delivery']);

      const left = await queryRows<{ organization_id: string }>(db, sql`SELECT organization_id FROM event_deliveries ORDER BY organization_id`);
      expect(left.map((row) => row.organization_id).sort()).toEqual([c.organizationId, d.organizationId].sort());
      expect((await queryRows(db, sql`SELECT 1 FROM event_delivery_attempts`)).length).toBe(0);
      expect((await queryRows<{ id: string }>(db, sql`SELECT id FROM connect_sessions ORDER BY id`)).map((row) => row.id)).toEqual(minted.slice(1));
      expect((await queryRows<{ nonce_hash: string }>(db, sql`SELECT nonce_hash FROM oauth_states`)).map((row) => row.nonce_hash)).toEqual(['recent']);
      expect(await queryRows<{ n: number }>(db, sql`SELECT count(*)::int AS n FROM audit_logs`)).toEqual(auditBefore);
      // Events still needed by a delivery stay.
      expect((await queryRows(db, sql`SELECT 1 FROM events WHERE organization_id IN (${c.organizationId}, ${d.organizationId})`)).length).toBe(2);

      const metrics = await (await r.fastify.inject({ url: '/metrics' })).body;
      expect(metrics).toContain('tessera_retention_purged_total{kind="connect_sessions"} 1');
      expect(metrics).toContain('tessera_retention_purged_total{kind="deliveries"} 3');
      expect(metrics).toContain('tessera_retention_purged_total{kind="oauth_states"} 1');
      // Not due again for an hour, whoever asks.
      expect(await runRetention(r.app.services)).toBeNull();
    } finally {
      await r.close();
    }
  });
});
