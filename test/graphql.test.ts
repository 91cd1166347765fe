import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { printSchema } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { graphqlSchema } from '../src/graphql/schema.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlRequest } from './helpers/graphql.ts';
import { type Account, bearer, browser, registerAndLogin } from './helpers/identity.ts';
import { acceptTokenOf } from './helpers/invitations.ts';
import { connect, providerEnv } from './helpers/providers.ts';

let t: TestApp;
let gh: FakeProvider;
let owner: Account;
let integrationId: string;

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  gh.addUser({ login: 'gqlcat', email: 'gqlcat@example.com' });
  t = await createTestApp({ env: { ...providerEnv(gh), RATE_LIMIT_MAX: '0' } });
  owner = await registerAndLogin(t.fastify, 'gql-owner');
  integrationId = (await connect(t.fastify, owner.token, gh, 'gqlcat')).json().integration.id;
});
afterAll(async () => {
  await t?.close();
  await gh?.close();
});

const gql = (token: string, query: string, variables?: Record<string, unknown>) => graphqlRequest(t.fastify, token, query, variables);

describe('transport', () => {
  it('answers GET /query with 405 in the error shape', async () => {
    const res = await t.fastify.inject({ method: 'GET', url: '/query?query={me{id}}' });
    expect(res.statusCode).toBe(405);
    expect(res.json()).toMatchObject({ success: false, code: 'METHOD_NOT_ALLOWED' });
  });

  it('answers without credentials with 401 in the REST shape, before execution', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/query', payload: { query: '{ me { id } }' } });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ success: false, code: 'UNAUTHENTICATED' });
  });

  it('refuses application/graphql and text bodies (415) and demands CSRF from cookie sessions', async () => {
    for (const type of ['application/graphql', 'text/plain']) {
      const res = await t.fastify.inject({ method: 'POST', url: '/query', headers: { ...bearer(owner.token), 'content-type': type }, payload: '{ me { id } }' });
      expect(res.statusCode, type).toBe(415);
    }
    const noCsrf = await t.fastify.inject({ method: 'POST', url: '/query', headers: { cookie: `session=${owner.cookies.session}` }, payload: { query: '{ me { id } }' } });
    expect(noCsrf.statusCode).toBe(403);
    expect(noCsrf.json().code).toBe('CSRF_INVALID');
    const ok = await t.fastify.inject({ method: 'POST', url: '/query', headers: browser(owner), payload: { query: '{ me { id } }' } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().data.me.id).toBe(owner.userId);
  });

  it('limits batches', async () => {
    const batch = Array.from({ length: 6 }, () => ({ query: '{ me { id } }' }));
    const res = await t.fastify.inject({ method: 'POST', url: '/query', headers: bearer(owner.token), payload: batch });
    expect(res.statusCode).toBe(400);
    const two = await t.fastify.inject({ method: 'POST', url: '/query', headers: bearer(owner.token), payload: batch.slice(0, 2) });
    expect(two.json()).toHaveLength(2);
  });

  it('keeps docs/schema.graphql identical to the schema in code', () => {
    expect(readFileSync(new URL('../docs/schema.graphql', import.meta.url), 'utf8')).toBe(`${printSchema(graphqlSchema())}\n`);
  });
});

describe('queries', () => {
  it('answers me, organization and organizations', async () => {
    const { body } = await gql(owner.token, '{ me { id email name systemAdmin } organization { id name role } organizations { id role } }');
    expect(body.errors).toBeUndefined();
    expect(body.data.me).toMatchObject({ id: owner.userId, email: owner.email, systemAdmin: false });
    expect(body.data.organization).toMatchObject({ id: owner.organizationId, role: 'owner' });
    expect(body.data.organizations).toEqual([{ id: owner.organizationId, role: 'owner' }]);
  });

  it('lists integrations with status and statusDetail, and no token anywhere', async () => {
    const { body, raw } = await gql(owner.token, '{ integrations { id name kind provider description status statusDetail { provider connected status tokenValid tokenExpired lastValidated message actions lastError detectedAt } createdAt updatedAt } }');
    expect(body.data.integrations).toEqual([
      {
        id: integrationId,
        name: 'GitHub Integration (gqlcat)',
        kind: 'github',
        provider: 'github',
        description: 'OAuth integration with github for gqlcat',
        status: 'connected',
        statusDetail: { provider: 'github', connected: true, status: 'connected', tokenValid: true, tokenExpired: false, lastValidated: expect.any(String), message: 'GitHub is connected.', actions: [], lastError: null, detectedAt: null },
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
      },
    ]);
    for (const token of gh.tokensOf('gqlcat')) expect(raw).not.toContain(token.accessToken);
    const one = await gql(owner.token, 'query($id: ID!) { integration(id: $id) { id status } }', { id: integrationId });
    expect(one.body.data.integration).toEqual({ id: integrationId, status: 'connected' });
  });

  it('offers no field that could read a provider token', async () => {
    const res = await gql(owner.token, '{ integrations { accessToken } }');
    expect(res.status).toBe(400);
    expect(res.body.errors[0]).toMatchObject({ extensions: { code: 'INVALID_INPUT' } });
    const sdl = printSchema(graphqlSchema());
    expect(sdl).not.toMatch(/accessToken: String!?\n[\s\S]*type Integration/);
    expect(sdl).not.toMatch(/refreshToken/);
  });

  it('pages the audit log newest first with a cursor', async () => {
    const first = await gql(owner.token, '{ auditLogs(first: 2) { nodes { id action createdAt } edges { cursor } pageInfo { hasNextPage endCursor } } }');
    const page = first.body.data.auditLogs;
    expect(page.nodes).toHaveLength(2);
    expect(page.pageInfo.hasNextPage).toBe(true);
    expect(page.pageInfo.endCursor).toBe(page.nodes[1].id);
    const second = await gql(owner.token, 'query($after: String) { auditLogs(first: 2, after: $after) { nodes { id } } }', { after: page.pageInfo.endCursor });
    expect(second.body.data.auditLogs.nodes[0].id < page.nodes[1].id).toBe(true);
  });
});

describe('mutations', () => {
  it('creates an organization and emits organization.created after commit, like REST', async () => {
    const { body } = await gql(owner.token, 'mutation { createOrganization(name: "  GraphQL Org ") { id name role } }');
    expect(body.data.createOrganization).toMatchObject({ name: 'GraphQL Org', role: 'owner' });
    const [event] = await queryRows<{ type: string }>(t.database.db, sql`SELECT type FROM events WHERE organization_id = ${body.data.createOrganization.id}`);
    expect(event?.type).toBe('organization.created');
  });

  it('rolls back every write of a document when one mutation fails', async () => {
    const { body } = await gql(
      owner.token,
      'mutation { createOrganization(name: "Doomed") { id } addMember(email: "doomed@example.com", role: "member") { id } removeMember(email: "nobody@example.com") }',
    );
    expect(body.errors[0].extensions.code).toBe('NOT_FOUND');
    const rows = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM organizations WHERE name = 'Doomed'`);
    expect(rows[0]?.n).toBe(0);
    const events = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM events WHERE data->'organization'->>'name' = 'Doomed'`);
    expect(events[0]?.n).toBe(0);
    const invited = await queryRows<{ n: number }>(t.database.db, sql`SELECT (SELECT count(*)::int FROM invitations WHERE email = 'doomed@example.com') + (SELECT count(*)::int FROM events WHERE data->'invitation'->>'email' = 'doomed@example.com') AS n`);
    expect(invited[0]?.n).toBe(0);
  });

  it('manages members with role checks, and never removes or demotes the last owner', async () => {
    const alice = await registerAndLogin(t.fastify, 'gql-alice');
    // addMember invites: an Invitation, nothing about the user, and no membership before she accepts.
    const added = await gql(owner.token, 'mutation($e: String!) { addMember(email: $e, role: "member") { id email role status expiresAt organization { id } } }', { e: alice.email });
    expect(added.body.data.addMember).toEqual({ id: expect.any(String), email: alice.email, role: 'member', status: 'pending', expiresAt: expect.any(String), organization: { id: owner.organizationId } });
    expect(added.raw).not.toContain(alice.userId);
    expect((await gql(owner.token, 'mutation($e: String!) { addMember(email: $e, role: "member") { user { id } } }', { e: alice.email })).status).toBe(400);
    expect((await gql(owner.token, '{ members { role } }')).body.data.members).toEqual([{ role: 'owner' }]);
    const invitationId = added.body.data.addMember.id;
    const accepted = await gql(alice.token, 'mutation($id: ID!, $token: String!) { acceptInvitation(id: $id, token: $token) { id role } }', {
      id: invitationId,
      token: await acceptTokenOf(t, invitationId),
    });
    expect(accepted.body.data.acceptInvitation).toEqual({ id: owner.organizationId, role: 'member' });
    const members = await gql(owner.token, '{ members { user { email } role } }');
    expect(members.body.data.members.map((m: { role: string }) => m.role)).toEqual(['owner', 'member']);

    const aliceToken = (await gql(alice.token, 'mutation($o: ID!) { switchOrganization(organizationId: $o) { accessToken tokenType organizationId } }', { o: owner.organizationId })).body.data.switchOrganization;
    expect(aliceToken).toMatchObject({ tokenType: 'Bearer', organizationId: owner.organizationId });
    const denied = await gql(aliceToken.accessToken, 'mutation($e: String!) { setMemberRole(email: $e, role: "owner") { role } }', { e: alice.email });
    expect(denied.body.errors[0].extensions.code).toBe('FORBIDDEN');
    const lastOwner = await gql(owner.token, 'mutation($e: String!) { removeMember(email: $e) }', { e: owner.email });
    expect(lastOwner.body.errors[0].extensions.code).toBe('CONFLICT');
    const demote = await gql(owner.token, 'mutation($e: String!) { setMemberRole(email: $e, role: "admin") { role } }', { e: owner.email });
    expect(demote.body.errors[0].extensions.code).toBe('CONFLICT');
    const promoted = await gql(owner.token, 'mutation($e: String!) { setMemberRole(email: $e, role: "admin") { role } }', { e: alice.email });
    expect(promoted.body.data.setMemberRole.role).toBe('admin');
    const badRole = await gql(owner.token, 'mutation($e: String!) { setMemberRole(email: $e, role: "king") { role } }', { e: alice.email });
    expect(badRole.body.errors[0].extensions.code).toBe('INVALID_INPUT');
    expect((await gql(owner.token, 'mutation($e: String!) { removeMember(email: $e) }', { e: alice.email })).body.data.removeMember).toBe(true);
  });

  it('shows PAT and API token values once, at creation, and never again', async () => {
    const created = await gql(owner.token, 'mutation { createPersonalAccessToken(name: "ci") { token id name display organizationIds } }');
    const pat = created.body.data.createPersonalAccessToken;
    expect(pat.token).toMatch(/^tsp_/);
    expect(pat.organizationIds).toEqual([owner.organizationId]);
    const listed = await gql(owner.token, '{ personalAccessTokens { id name display revokedAt } }');
    expect(listed.raw).not.toContain(pat.token);
    expect(listed.body.data.personalAccessTokens[0]).toMatchObject({ id: pat.id, display: `tsp_…${pat.token.slice(-4)}` });
    expect((await gql(owner.token, '{ personalAccessTokens { token } }')).status).toBe(400);
    expect((await gql(pat.token, '{ me { id } }')).body.data.me.id).toBe(owner.userId);
    // A PAT cannot mint more credentials: that needs a signed-in session.
    expect((await gql(pat.token, 'mutation { createAPIToken(name: "x") { token } }')).body.errors[0].extensions.code).toBe('FORBIDDEN');
    const revoked = await gql(owner.token, 'mutation($id: ID!) { revokePersonalAccessToken(id: $id) { revokedAt } }', { id: pat.id });
    expect(revoked.body.data.revokePersonalAccessToken.revokedAt).toEqual(expect.any(String));
    expect((await gql(pat.token, '{ me { id } }')).status).toBe(401);

    const api = (await gql(owner.token, 'mutation { createAPIToken(name: "backend", expiresAt: "2099-01-01T00:00:00Z") { token id display expiresAt } }')).body.data.createAPIToken;
    expect(api.token).toMatch(/^tsa_/);
    const apiList = await gql(owner.token, '{ apiTokens { id display expiresAt } }');
    expect(apiList.raw).not.toContain(api.token);
    expect((await gql(api.token, '{ organization { id role } me { id } }')).body.data).toEqual({ organization: { id: owner.organizationId, role: 'admin' }, me: null });
    await gql(owner.token, 'mutation($id: ID!) { revokeAPIToken(id: $id) { id } }', { id: api.id });
    expect((await gql(api.token, '{ me { id } }')).status).toBe(401);
  });

  it('refreshes an integration without revealing the token, and deletes it', async () => {
    const before = gh.stats.refreshes;
    const refreshed = await gql(owner.token, 'mutation($id: ID!) { refreshIntegration(id: $id) { id status } }', { id: integrationId });
    expect(refreshed.body.data.refreshIntegration).toEqual({ id: integrationId, status: 'connected' });
    expect(gh.stats.refreshes - before).toBe(1);
    for (const token of gh.tokensOf('gqlcat')) expect(refreshed.raw).not.toContain(token.accessToken);
    const deleted = await gql(owner.token, 'mutation($id: ID!) { deleteIntegration(id: $id) }', { id: integrationId });
    expect(deleted.body.data.deleteIntegration).toBe(true);
    expect((await gql(owner.token, '{ integrations { id } }')).body.data.integrations).toEqual([]);
  });
});

describe('isolation and roles', () => {
  it('answers another organization’s ids with not-found', async () => {
    const login = 'gql-other';
    gh.addUser({ login });
    const other = await registerAndLogin(t.fastify, 'gql-other');
    const theirs = (await connect(t.fastify, other.token, gh, login)).json().integration.id;
    for (const query of [
      'query($id: ID!) { integration(id: $id) { id } }',
      'mutation($id: ID!) { deleteIntegration(id: $id) }',
      'mutation($id: ID!) { refreshIntegration(id: $id) { id } }',
    ]) {
      const res = await gql(owner.token, query, { id: theirs });
      expect(res.body.errors[0].extensions.code, query).toBe('INTEGRATION_NOT_FOUND');
    }
    const revoke = await gql(owner.token, 'mutation($id: ID!) { revokeAPIToken(id: $id) { id } }', { id: theirs });
    expect(revoke.body.errors[0].extensions.code).toBe('NOT_FOUND');
    expect((await gql(other.token, '{ integrations { id } }')).body.data.integrations).toEqual([{ id: theirs }]);
  });

  it('keeps audit logs and API tokens to owners and admins', async () => {
    const bob = await registerAndLogin(t.fastify, 'gql-bob');
    const invitation = (await gql(owner.token, 'mutation($e: String!) { addMember(email: $e, role: "member") { id } }', { e: bob.email })).body.data.addMember;
    const accept = 'mutation($id: ID!, $token: String!) { acceptInvitation(id: $id, token: $token) { role } }';
    expect((await gql(bob.token, accept, { id: invitation.id, token: await acceptTokenOf(t, invitation.id) })).body.data.acceptInvitation.role).toBe('member');
    const token = (await gql(bob.token, 'mutation($o: ID!) { switchOrganization(organizationId: $o) { accessToken } }', { o: owner.organizationId })).body.data.switchOrganization.accessToken;
    expect((await gql(token, '{ auditLogs { nodes { id } } }')).body.errors[0].extensions.code).toBe('FORBIDDEN');
    expect((await gql(token, '{ apiTokens { id } }')).body.errors[0].extensions.code).toBe('FORBIDDEN');
    expect((await gql(token, '{ integrations { id } members { role } }')).body.errors).toBeUndefined();
  });
});

describe('limits', () => {
  it('rejects an over-deep or over-expensive query with a clear error, before running it', async () => {
    const aliases = Array.from({ length: 120 }, (_, i) => `a${i}: integrations { id name statusDetail { message actions } }`).join(' ');
    const costly = await gql(owner.token, `{ ${aliases} }`);
    expect(costly.status).toBe(400);
    expect(costly.body.errors[0]).toMatchObject({ message: expect.stringMatching(/too expensive/), extensions: { code: 'INVALID_INPUT' } });
    const fragments = `fragment F on Integration { id name statusDetail { message } } { ${Array.from({ length: 120 }, (_, i) => `b${i}: integrations { ...F }`).join(' ')} }`;
    expect((await gql(owner.token, fragments)).status).toBe(400);
    const deep = '{ auditLogs { edges { node { id } } nodes { id } pageInfo { hasNextPage } } }';
    expect((await gql(owner.token, deep)).status).toBe(200);
  });

  it('allows introspection in development and refuses it in production', async () => {
    expect((await gql(owner.token, '{ __schema { queryType { name } } }')).body.data.__schema.queryType.name).toBe('Query');
    const prod = await createTestApp({ env: { APP_ENV: 'production', PUBLIC_URL: 'https://tessera.example', REGISTRATION: 'open' } });
    try {
      await prod.fastify.inject({ method: 'POST', url: '/v1/register', payload: { email: 'p@example.com', password: 'production password' } });
      const login = await prod.fastify.inject({ method: 'POST', url: '/v1/login', payload: { email: 'p@example.com', password: 'production password' } });
      const res = await prod.fastify.inject({ method: 'POST', url: '/query', headers: bearer(login.json().accessToken), payload: { query: '{ __schema { queryType { name } } }' } });
      expect(res.statusCode).toBe(400);
      expect(res.json().errors[0].message).toMatch(/introspection/i);
    } finally {
      await prod.close();
    }
  });
});
