// Offboarding (docs/contract.md §5d), HTTP in; HTTP, events, audit and the fakes' records out:
// deleting an organization removes everything it holds in one transaction and revokes its
// grants at the providers after the commit — durably, retried, and by any instance.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { queryRows } from '../src/db/client.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, LogCapture, type TestApp, testConfig } from './helpers/app.ts';
import { graphqlData, graphqlRequest } from './helpers/graphql.ts';
import { type Account, bearer, login, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv } from './helpers/providers.ts';
import { createLogger } from '../src/http/logging.ts';

const ADMIN_EMAIL = 'root@example.com';
const ADMIN_PASSWORD = 'bootstrap admin password';
const WEBHOOK_SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;

let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let receiver: Server;
let hookUrl: string;
const received: { type: string; data: Record<string, unknown> }[] = [];
let serviceToken: string;

/** What every app of this file runs with: both fakes, quick event delivery and retries. */
function env(): Record<string, string> {
  return {
    ...providerEnv(gh),
    ...providerEnv(slack),
    BOOTSTRAP_ADMIN_EMAIL: ADMIN_EMAIL,
    BOOTSTRAP_ADMIN_PASSWORD: ADMIN_PASSWORD,
    EVENTS_WEBHOOK_URL: hookUrl,
    EVENTS_WEBHOOK_SECRET: WEBHOOK_SECRET,
    EVENTS_POLL_INTERVAL: '1',
    EVENTS_RETRY_BASE: '1',
    EVENTS_RETRY_MAX: '1',
    RATE_LIMIT_MAX: '0',
  };
}

const count = async (query: ReturnType<typeof sql>) => (await queryRows<{ n: number }>(t.database.db, query))[0]?.n;

/** `account` made an owner of `organizationId` (as accepting an invitation would) and signed in there. */
async function ownerIn(account: Account, organizationId: string): Promise<string> {
  await t.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${organizationId}, ${account.userId}, 'owner')`);
  const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(account.token), payload: { organizationId } });
  expect(switched.statusCode, switched.body).toBe(200);
  return switched.json().accessToken;
}

async function offboard(headers: Record<string, string>, organizationId: string) {
  return t.fastify.inject({ method: 'DELETE', url: `/v1/organizations/${organizationId}`, headers });
}

beforeAll(async () => {
  [gh, slack] = await Promise.all([startFakeGitHub(), startFakeSlack()]);
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      received.push(JSON.parse(body));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  t = await createTestApp({ env: env() });
  await ensureBootstrapAdmin(t.app.services);
  const admin = await login(t.fastify, ADMIN_EMAIL, ADMIN_PASSWORD);
  serviceToken = (await graphqlData(t.fastify, admin.token, 'mutation { createServiceToken(name: "backend") { token } }')).createServiceToken.token;
});

afterAll(async () => {
  await t?.close();
  await Promise.all([gh?.close(), slack?.close()]);
  receiver?.close();
});

describe('a service token offboards a customer', () => {
  it('deletes the organization with everything it holds, revokes its grants at the providers, keeps the audit rows and emits organization.deleted', async () => {
    gh.addUser({ login: 'cust-gh' });
    slack.addUser({ login: 'cust-slack' });
    const created = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(serviceToken), payload: { name: 'Customer', externalId: 'cust-1' } });
    const organizationId: string = created.json().organization.id;
    const alice = await registerAndLogin(t.fastify, 'alice');
    const aliceThere = await ownerIn(alice, organizationId);
    for (const [fake, user] of [[gh, 'cust-gh'], [slack, 'cust-slack']] as const) {
      const connected = await connect(t.fastify, aliceThere, fake, user);
      expect(connected.statusCode, connected.body).toBe(200);
    }
    const apiToken = (await graphqlData(t.fastify, aliceThere, 'mutation { createAPIToken(name: "customer") { token } }')).createAPIToken.token;
    const pat = (await graphqlData(t.fastify, aliceThere, `mutation { createPersonalAccessToken(name: "p", organizationIds: ["${organizationId}"]) { token } }`)).createPersonalAccessToken.token;
    const session = (await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(apiToken), payload: { redirectUri: 'http://127.0.0.1:8080/done' } })).json().session;
    const read = await t.fastify.inject({ url: '/v1/integrations/github/token', headers: bearer(apiToken) });
    expect(read.statusCode).toBe(200);
    await graphqlRequest(t.fastify, { ...bearer(serviceToken), 'x-organization-id': organizationId }, 'mutation { addMember(email: "later@example.com", role: "owner") { id } }');
    const revocationsBefore = { gh: gh.stats.revocations, slack: slack.stats.revocations };
    // An organization app's budget (docs/contract.md §5f), as the proxy stores it: the organization's, deleted with it.
    await t.database.db.execute(
      sql`INSERT INTO provider_budgets (scope, account_id, organization_id, provider, remaining, blocked_until) VALUES ('01JBUDGETAPP0000000000000X', '100001', ${organizationId}, 'github', 0, now() + interval '1 minute')`,
    );
    const auditBefore = await count(sql`SELECT count(*)::int AS n FROM audit_logs WHERE organization_id = ${organizationId}`);

    const res = await offboard({ ...bearer(serviceToken), 'x-request-id': 'offboard-1' }, organizationId);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true, deleted: { integrations: 2 } });

    // Revoked at both providers: their tokens no longer work there.
    await expect.poll(() => gh.stats.revocations - revocationsBefore.gh, { timeout: 5000 }).toBe(1);
    await expect.poll(() => slack.stats.revocations - revocationsBefore.slack, { timeout: 5000 }).toBe(1);
    expect(gh.tokensOf('cust-gh')).toEqual([]);
    expect(slack.tokensOf('cust-slack')).toEqual([]);
    await expect.poll(() => count(sql`SELECT count(*)::int AS n FROM grant_revocations`)).toBe(0);

    // Nothing of the organization is left, and nothing it issued works.
    for (const table of ['organizations', 'integrations', 'integration_secrets', 'api_tokens', 'connect_sessions', 'memberships', 'invitations', 'oauth_states', 'provider_budgets']) {
      const column = table === 'organizations' ? 'id' : 'organization_id';
      expect(await count(sql`SELECT count(*)::int AS n FROM ${sql.raw(table)} WHERE ${sql.raw(column)} = ${organizationId}`), table).toBe(0);
    }
    expect((await t.fastify.inject({ url: '/v1/integrations', headers: bearer(apiToken) })).statusCode).toBe(401);
    expect((await t.fastify.inject({ url: new URL(session.url).pathname })).statusCode).toBe(404);
    expect((await t.fastify.inject({ url: '/v1/account/access', headers: bearer(aliceThere) })).statusCode).toBe(403);
    expect((await t.fastify.inject({ url: '/v1/account/access', headers: bearer(pat) })).statusCode).toBe(403);
    expect((await t.fastify.inject({ url: '/v1/integrations', headers: { ...bearer(serviceToken), 'x-organization-id': organizationId } })).statusCode).toBe(404);
    expect((await offboard(bearer(serviceToken), organizationId)).statusCode).toBe(404);

    // The audit trail stays, ending with the deletion by the service token.
    const audit = await queryRows<{ action: string; credential_kind: string | null; request_id: string | null; detail: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT action, credential_kind, request_id, detail FROM audit_logs WHERE organization_id = ${organizationId} ORDER BY id`,
    );
    expect(audit.length).toBeGreaterThan(auditBefore ?? 0);
    expect(audit.map((row) => row.action)).toEqual(expect.arrayContaining(['organization.created', 'integration.connected', 'integration.token_read', 'organization.deleted']));
    expect(audit.find((row) => row.action === 'organization.deleted')).toMatchObject({ credential_kind: 'service_token', request_id: 'offboard-1', detail: { name: 'Customer', integrations: 2 } });

    await expect.poll(() => received.find((event) => event.type === 'organization.deleted' && event.data.organizationId === organizationId), { timeout: 5000 }).toBeDefined();
    const event = received.find((e) => e.type === 'organization.deleted' && e.data.organizationId === organizationId);
    expect(event?.data).toEqual({ organizationId, externalId: 'cust-1', organization: { id: organizationId, name: 'Customer', externalId: 'cust-1' }, deleted: { integrations: 2 } });

    // Alice keeps her account: her default organization (the one she last switched to) moved to her own, where she signs in.
    const [user] = await queryRows<{ default_organization_id: string | null }>(t.database.db, sql`SELECT default_organization_id FROM users WHERE id = ${alice.userId}`);
    expect(user?.default_organization_id).toBe(alice.organizationId);
    const again = await login(t.fastify, alice.email, alice.password);
    expect(again.organizationId).toBe(alice.organizationId);
  });
});

describe('an owner offboards their organization', () => {
  it('deletes their personal organization; they keep their account and sign in to a new one', async () => {
    gh.addUser({ login: 'bob-gh' });
    const bob = await registerAndLogin(t.fastify, 'bob');
    expect((await connect(t.fastify, bob.token, gh, 'bob-gh')).statusCode).toBe(200);
    const before = gh.stats.revocations;
    const res = await offboard(bearer(bob.token), bob.organizationId);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true, deleted: { integrations: 1 } });
    await expect.poll(() => gh.stats.revocations - before, { timeout: 5000 }).toBe(1);
    expect(gh.tokensOf('bob-gh')).toEqual([]);
    // The session bound to it gets the usual 403; the account is intact.
    expect((await t.fastify.inject({ url: '/v1/account/access', headers: bearer(bob.token) })).statusCode).toBe(403);
    const [user] = await queryRows<{ default_organization_id: string | null }>(t.database.db, sql`SELECT default_organization_id FROM users WHERE id = ${bob.userId}`);
    expect(user?.default_organization_id).toBeNull();
    const again = await login(t.fastify, bob.email, bob.password);
    expect(again.organizationId).not.toBe(bob.organizationId);
    const access = await t.fastify.inject({ url: '/v1/account/access', headers: bearer(again.token) });
    expect(access.json()).toMatchObject({ user: { id: bob.userId }, organization: { id: again.organizationId, role: 'owner' } });
  });

  it('is the owner’s alone: an admin, a member of another organization, an API token and an impersonating administrator are refused', async () => {
    const owner = await registerAndLogin(t.fastify, 'keeper');
    const adminOfIt = await registerAndLogin(t.fastify, 'its-admin');
    await t.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${owner.organizationId}, ${adminOfIt.userId}, 'admin')`);
    const adminThere = (await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(adminOfIt.token), payload: { organizationId: owner.organizationId } })).json().accessToken;
    const stranger = await registerAndLogin(t.fastify, 'stranger');
    const apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "t") { token } }')).createAPIToken.token;
    const root = await login(t.fastify, ADMIN_EMAIL, ADMIN_PASSWORD);
    for (const [headers, status] of [
      [bearer(adminThere), 403],
      [bearer(stranger.token), 404],
      [bearer(apiToken), 403],
      [{ ...bearer(root.token), 'x-impersonate-user': owner.userId }, 403],
    ] as const) {
      expect((await offboard(headers, owner.organizationId)).statusCode, JSON.stringify(headers)).toBe(status);
    }
    expect(await count(sql`SELECT count(*)::int AS n FROM organizations WHERE id = ${owner.organizationId}`)).toBe(1);
  });
});

describe('revocations after the commit', () => {
  it('retries a revocation the provider failed at first, until it succeeds', async () => {
    slack.addUser({ login: 'flaky-slack' });
    const carol = await registerAndLogin(t.fastify, 'carol');
    expect((await connect(t.fastify, carol.token, slack, 'flaky-slack')).statusCode).toBe(200);
    const before = slack.stats.revocations;
    const attemptsBefore = slack.requests.filter((r) => r.path === '/api/auth.revoke').length;
    slack.mode = { token: 'ok', api: 'down' };
    try {
      expect((await offboard(bearer(carol.token), carol.organizationId)).statusCode).toBe(200);
      await expect.poll(() => slack.requests.filter((r) => r.path === '/api/auth.revoke').length - attemptsBefore, { timeout: 5000 }).toBeGreaterThan(0);
      const [pending] = await queryRows<{ attempts: number; last_error: string | null; envelope: string }>(
        t.database.db,
        sql`SELECT attempts, last_error, envelope FROM grant_revocations WHERE organization_id = ${carol.organizationId}`,
      );
      expect(pending).toMatchObject({ attempts: 1, last_error: expect.stringMatching(/transient/) });
      expect(slack.stats.revocations).toBe(before);
    } finally {
      slack.mode = { token: 'ok', api: 'ok' };
    }
    await expect.poll(() => slack.stats.revocations - before, { timeout: 8000 }).toBe(1);
    expect(slack.tokensOf('flaky-slack')).toEqual([]);
    await expect.poll(() => count(sql`SELECT count(*)::int AS n FROM grant_revocations WHERE organization_id = ${carol.organizationId}`)).toBe(0);
    expect(t.logs.entries.some((entry) => entry.msg === 'could not revoke the grant at the provider; will retry' && entry.provider === 'slack')).toBe(true);
    expect(t.logs.text).not.toMatch(/xoxp-/);
  });

  it('are committed with the deletion: a fresh instance on the same database carries out what a stopped one left', async () => {
    gh.addUser({ login: 'dave-gh' });
    slack.addUser({ login: 'dave-slack' });
    const dave = await registerAndLogin(t.fastify, 'dave');
    expect((await connect(t.fastify, dave.token, gh, 'dave-gh')).statusCode).toBe(200);
    const organization = (await graphqlData(t.fastify, dave.token, 'mutation { createOrganization(name: "Second") { id } }')).createOrganization.id;
    const there = (await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(dave.token), payload: { organizationId: organization } })).json().accessToken;
    expect((await connect(t.fastify, there, slack, 'dave-slack')).statusCode).toBe(200);
    const integrationId = (await t.fastify.inject({ url: '/v1/integrations', headers: bearer(dave.token) })).json().integrations[0].id;
    const slackToken = slack.tokensOf('dave-slack')[0]?.accessToken as string;
    const before = { gh: gh.stats.revocations, slack: slack.stats.revocations };

    // This instance dies right after its commits: nothing after them runs here.
    await t.app.services.revocations.stop();
    expect((await t.fastify.inject({ method: 'DELETE', url: `/v1/integrations/${integrationId}`, headers: bearer(dave.token) })).statusCode).toBe(200);
    expect((await offboard(bearer(there), organization)).statusCode).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect({ gh: gh.stats.revocations, slack: slack.stats.revocations }).toEqual(before);
    const pending = await queryRows<{ provider: string; reason: string; attempts: number; envelope: string }>(t.database.db, sql`SELECT provider, reason, attempts, envelope FROM grant_revocations ORDER BY provider`);
    expect(pending.map(({ envelope: _, ...row }) => row)).toEqual([
      { provider: 'github', reason: 'integration.deleted', attempts: 0 },
      { provider: 'slack', reason: 'organization.deleted', attempts: 0 },
    ]);
    // Stored encrypted, like any secret.
    expect(JSON.stringify(pending)).not.toContain(slackToken);

    const logs = new LogCapture();
    const fresh = await buildApp({ config: testConfig(env()), database: t.database, logger: createLogger({ level: 'info', stream: logs }) });
    try {
      fresh.startBackground();
      await expect.poll(() => gh.stats.revocations - before.gh, { timeout: 8000 }).toBe(1);
      await expect.poll(() => slack.stats.revocations - before.slack, { timeout: 8000 }).toBe(1);
      expect(gh.tokensOf('dave-gh')).toEqual([]);
      expect(slack.tokensOf('dave-slack')).toEqual([]);
      await expect.poll(() => count(sql`SELECT count(*)::int AS n FROM grant_revocations`)).toBe(0);
      expect(logs.entries.filter((entry) => entry.msg === 'grant revoked at the provider').map((entry) => entry.reason).sort()).toEqual(['integration.deleted', 'organization.deleted']);
    } finally {
      await fresh.fastify.close();
    }
  });
});
