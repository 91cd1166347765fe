// Service tokens (docs/contract.md §5d), HTTP in, HTTP and audit out: a system administrator creates
// one; a product's backend manages its customers' organizations with it over REST and acts as an
// admin in the one X-Organization-ID names — and nowhere else, and not after it is revoked.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData, graphqlRequest } from './helpers/graphql.ts';
import { type Account, bearer, login, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv } from './helpers/providers.ts';

const ADMIN_EMAIL = 'root@example.com';
const ADMIN_PASSWORD = 'bootstrap admin password';
const CREATE = 'mutation ($name: String!, $expiresAt: String) { createServiceToken(name: $name, expiresAt: $expiresAt) { id name display expiresAt token } }';
const UNKNOWN_ORGANIZATION = '01J0000000000000000000000Z';

let t: TestApp;
let gh: FakeProvider;
let admin: Account;
let service: { id: string; token: string };

/** Headers of a service token's request, acting in `organizationId` when given. */
function as(token: string, organizationId?: string): Record<string, string> {
  return { ...bearer(token), ...(organizationId ? { 'x-organization-id': organizationId } : {}) };
}

async function createServiceToken(by: string, variables: Record<string, unknown> = { name: 'backend' }): Promise<{ id: string; token: string }> {
  return (await graphqlData(t.fastify, by, CREATE, variables)).createServiceToken;
}

async function newOrganization(token: string, payload: Record<string, unknown>) {
  return t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: as(token), payload });
}

beforeAll(async () => {
  gh = await startFakeGitHub();
  gh.addUser({ login: 'octo', email: 'octo@example.com' });
  t = await createTestApp({ env: { ...providerEnv(gh), BOOTSTRAP_ADMIN_EMAIL: ADMIN_EMAIL, BOOTSTRAP_ADMIN_PASSWORD: ADMIN_PASSWORD, RATE_LIMIT_MAX: '0' } });
  await ensureBootstrapAdmin(t.app.services);
  admin = await login(t.fastify, ADMIN_EMAIL, ADMIN_PASSWORD);
  service = await createServiceToken(admin.token);
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

describe('creating service tokens', () => {
  it('is for a system administrator, with a session or a PAT: the value is shown once, stored as a hash, listed by prefix and last four', async () => {
    expect(service.token).toMatch(/^tss_[A-Za-z0-9_-]{43}$/);
    const listed = (await graphqlData(t.fastify, admin.token, '{ serviceTokens { id name display revokedAt } }')).serviceTokens;
    expect(listed).toContainEqual({ id: service.id, name: 'backend', display: `tss_…${service.token.slice(-4)}`, revokedAt: null });
    const stored = await queryRows<Record<string, unknown>>(t.database.db, sql`SELECT * FROM service_tokens WHERE id = ${service.id}`);
    expect(JSON.stringify(stored)).not.toContain(service.token.slice(4));

    const pat = (await graphqlData(t.fastify, admin.token, 'mutation { createPersonalAccessToken(name: "ops") { token } }')).createPersonalAccessToken.token;
    expect((await createServiceToken(pat, { name: 'from a PAT' })).token).toMatch(/^tss_/);
  });

  it('is refused to an owner, an API token, an administrator impersonating someone, and a service token', async () => {
    const owner = await registerAndLogin(t.fastify, 'owner');
    const apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "t") { token } }')).createAPIToken.token;
    const impersonating = { ...bearer(admin.token), 'x-impersonate-user': owner.userId };
    for (const auth of [owner.token, apiToken, impersonating, as(service.token, owner.organizationId)]) {
      for (const query of [CREATE, '{ serviceTokens { id } }', `mutation { revokeServiceToken(id: "${service.id}") { id } }`]) {
        const { status, body, raw } = await graphqlRequest(t.fastify, auth, query, { name: 'nope' });
        expect(status, raw).toBe(200);
        expect(body.errors?.[0]?.extensions?.code, raw).toBe('FORBIDDEN');
        expect(raw).not.toMatch(/tss_/);
      }
    }
    expect((await graphqlData(t.fastify, admin.token, '{ serviceTokens { revokedAt } }')).serviceTokens.every((token: { revokedAt: string | null }) => token.revokedAt === null)).toBe(true);
  });
});

describe('managing organizations over REST', () => {
  it('creates one without members, finds it by externalId, reads and renames it; a second externalId is a 409', async () => {
    const created = await newOrganization(service.token, { name: 'Acme Corp', externalId: 'cust_acme' });
    expect(created.statusCode, created.body).toBe(201);
    const { organization } = created.json();
    expect(organization).toEqual({ id: expect.stringMatching(/^[0-9A-HJKMNP-TV-Z]{26}$/), name: 'Acme Corp', externalId: 'cust_acme' });
    const listedMembers = await graphqlRequest(t.fastify, as(service.token, organization.id), '{ members { role } organization { id name role } }');
    expect(listedMembers.body).toEqual({ data: { members: [], organization: { id: organization.id, name: 'Acme Corp', role: 'admin' } } });
    const [event] = await queryRows<{ data: Record<string, unknown> }>(t.database.db, sql`SELECT data FROM events WHERE organization_id = ${organization.id} AND type = 'organization.created'`);
    expect(event?.data).toMatchObject({ organization: { id: organization.id, externalId: 'cust_acme' }, createdBy: null });

    const again = await newOrganization(service.token, { name: 'Acme again', externalId: 'cust_acme' });
    expect(again.statusCode).toBe(409);
    expect(again.json().code).toBe('CONFLICT');
    // Another service token shares the namespace: externalId is unique among organizations service tokens created.
    const other = await createServiceToken(admin.token, { name: 'other backend' });
    expect((await newOrganization(other.token, { name: 'Acme', externalId: 'cust_acme' })).statusCode).toBe(409);
    // The product's key (docs/contract.md §5d): a person who is not a system administrator may not set one at all.
    const person = await registerAndLogin(t.fastify, 'person');
    const theirs = await newOrganization(person.token, { name: 'Theirs', externalId: 'cust_acme' });
    expect(theirs.statusCode, theirs.body).toBe(403);

    const found = await t.fastify.inject({ url: '/v1/organizations?externalId=cust_acme', headers: as(service.token) });
    expect(found.statusCode, found.body).toBe(200);
    expect(found.json().organizations.map((o: { id: string }) => o.id)).toEqual([organization.id]);

    const read = await t.fastify.inject({ url: `/v1/organizations/${organization.id}`, headers: as(service.token) });
    expect(read.json()).toEqual({ success: true, organization: { ...organization, createdAt: expect.any(String) } });
    const renamed = await t.fastify.inject({ method: 'PATCH', url: `/v1/organizations/${organization.id}`, headers: as(service.token), payload: { name: '  Acme Inc  ' } });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json().organization).toMatchObject({ id: organization.id, name: 'Acme Inc', externalId: 'cust_acme' });
    expect((await t.fastify.inject({ url: `/v1/organizations/${UNKNOWN_ORGANIZATION}`, headers: as(service.token) })).statusCode).toBe(404);
    expect((await t.fastify.inject({ method: 'PATCH', url: `/v1/organizations/${organization.id}`, headers: as(service.token), payload: { name: ' ' } })).json().code).toBe('INVALID_INPUT');
  });

  it('lists newest first, a page at a time, with 1–100 per page', async () => {
    const created: string[] = [];
    for (let i = 0; i < 5; i++) created.push((await newOrganization(service.token, { name: `Paged ${i}` })).json().organization.id);
    const seen: string[] = [];
    let after: string | null = null;
    for (let page = 0; page < 50; page++) {
      const res = await t.fastify.inject({ url: `/v1/organizations?first=2${after ? `&after=${after}` : ''}`, headers: as(service.token) });
      expect(res.statusCode, res.body).toBe(200);
      const body: { organizations: { id: string }[]; pageInfo: { endCursor: string | null; hasNextPage: boolean } } = res.json();
      expect(body.organizations.length).toBeLessThanOrEqual(2);
      seen.push(...body.organizations.map((o) => o.id));
      expect(body.pageInfo.endCursor).toBe(body.organizations.at(-1)?.id ?? null);
      if (!body.pageInfo.hasNextPage) break;
      after = body.pageInfo.endCursor;
    }
    expect(seen.slice(0, 5)).toEqual([...created].reverse());
    expect(new Set(seen).size).toBe(seen.length);
    const all = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM organizations`);
    expect(seen).toHaveLength(all[0]?.n ?? -1);
    const byDefault = (await t.fastify.inject({ url: '/v1/organizations', headers: as(service.token) })).json();
    expect(byDefault.organizations).toHaveLength(Math.min(20, all[0]?.n ?? 0));
    for (const query of ['first=0', 'first=101', 'first=two', 'after=not-a-cursor']) {
      const res = await t.fastify.inject({ url: `/v1/organizations?${query}`, headers: as(service.token) });
      expect(res.statusCode, query).toBe(400);
      expect(res.json().code).toBe('INVALID_INPUT');
    }
  });

  it('lets a user create one they own (without an externalId: the product sets that) but list none; an API token creates none', async () => {
    const person = await registerAndLogin(t.fastify, 'creator');
    expect((await newOrganization(person.token, { name: 'Mine', externalId: 'mine-1' })).statusCode).toBe(403);
    const res = await newOrganization(person.token, { name: 'Mine' });
    expect(res.statusCode, res.body).toBe(201);
    const access = await t.fastify.inject({ url: '/v1/account/access', headers: bearer(person.token) });
    expect(access.json().organizations).toContainEqual({ id: res.json().organization.id, name: 'Mine', role: 'owner' });
    expect((await t.fastify.inject({ url: '/v1/organizations', headers: bearer(person.token) })).statusCode).toBe(403);
    const apiToken = (await graphqlData(t.fastify, person.token, 'mutation { createAPIToken(name: "t") { token } }')).createAPIToken.token;
    expect((await newOrganization(apiToken, { name: 'Nope' })).statusCode).toBe(403);
    // A member reads their organization; a stranger finds nothing there.
    expect((await t.fastify.inject({ url: `/v1/organizations/${res.json().organization.id}`, headers: bearer(person.token) })).statusCode).toBe(200);
    const stranger = await registerAndLogin(t.fastify, 'stranger');
    expect((await t.fastify.inject({ url: `/v1/organizations/${res.json().organization.id}`, headers: bearer(stranger.token) })).statusCode).toBe(404);
  });
});

describe('the deployment it works in', () => {
  it("lists the configured providers, with or without an organization: what the product offers its customers", async () => {
    const { organization } = (await newOrganization(service.token, { name: 'Providers' })).json();
    for (const headers of [as(service.token), as(service.token, organization.id)]) {
      const res = await t.fastify.inject({ url: '/v1/providers', headers });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().providers.map((provider: { id: string }) => provider.id)).toContain('github');
    }
  });
});

describe('acting in an organization', () => {
  let owner: Account;
  beforeAll(async () => {
    owner = await registerAndLogin(t.fastify, 'customer');
    const connected = await connect(t.fastify, owner.token, gh, 'octo');
    expect(connected.statusCode, connected.body).toBe(200);
  });

  it('acts as an admin of the organization X-Organization-ID names: access, integrations, token reads, connect sessions, invitations, API tokens', async () => {
    const access = await t.fastify.inject({ url: '/v1/account/access', headers: as(service.token, owner.organizationId) });
    expect(access.statusCode, access.body).toBe(200);
    expect(access.json()).toEqual({
      success: true,
      user: null,
      organization: { id: owner.organizationId, name: expect.any(String), role: 'admin' },
      organizations: [{ id: owner.organizationId, name: expect.any(String), role: 'admin' }],
      authMethod: 'service_token',
    });
    const list = await t.fastify.inject({ url: '/v1/integrations', headers: as(service.token, owner.organizationId) });
    expect(list.json().integrations.map((i: { provider: string }) => i.provider)).toEqual(['github']);
    const token = await t.fastify.inject({ url: '/v1/integrations/github/token', headers: as(service.token, owner.organizationId) });
    expect(token.statusCode, token.body).toBe(200);
    expect(token.json().token.accessToken).toBe(gh.tokensOf('octo')[0]?.accessToken);
    const status = await t.fastify.inject({ url: '/v1/integrations/github/status', headers: as(service.token, owner.organizationId) });
    expect(status.statusCode, status.body).toBe(200);
    const minted = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: as(service.token, owner.organizationId), payload: { redirectUri: 'http://127.0.0.1:8080/done' } });
    expect(minted.statusCode, minted.body).toBe(201);

    // Invitations, owners included (an organization a service token made has no owner to invite them).
    const invited = await graphqlRequest(t.fastify, as(service.token, owner.organizationId), 'mutation { addMember(email: "new-owner@example.com", role: "owner") { id role } }');
    expect(invited.body.errors, invited.raw).toBeUndefined();
    const invitations = await graphqlRequest(t.fastify, as(service.token, owner.organizationId), '{ invitations { id role } }');
    expect(invitations.body.data.invitations).toContainEqual({ id: invited.body.data.addMember.id, role: 'owner' });
    const revoked = await graphqlRequest(t.fastify, as(service.token, owner.organizationId), `mutation { revokeInvitation(id: "${invited.body.data.addMember.id}") { status } }`);
    expect(revoked.body.data).toEqual({ revokeInvitation: { status: 'revoked' } });

    // An API token for the organization, which then works on its own.
    const created = await graphqlRequest(t.fastify, as(service.token, owner.organizationId), `mutation { createAPIToken(name: "customer backend", organizationId: "${owner.organizationId}") { token } }`);
    expect(created.body.errors, created.raw).toBeUndefined();
    const apiToken = created.body.data.createAPIToken.token;
    expect((await t.fastify.inject({ url: '/v1/integrations', headers: bearer(apiToken) })).json().integrations).toHaveLength(1);
    const elsewhere = await graphqlRequest(t.fastify, as(service.token, owner.organizationId), `mutation { createAPIToken(name: "x", organizationId: "${UNKNOWN_ORGANIZATION}") { token } }`);
    expect(elsewhere.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });

  it('needs X-Organization-ID there (400), and an organization that exists (404)', async () => {
    for (const [method, url] of [
      ['GET', '/v1/account/access'],
      ['GET', '/v1/integrations'],
      ['GET', '/v1/integrations/github/token'],
      ['POST', '/query'],
    ] as const) {
      const payload = method === 'POST' ? { query: '{ organization { id } }' } : undefined;
      const without = await t.fastify.inject({ method, url, headers: as(service.token), ...(payload ? { payload } : {}) });
      expect(without.statusCode, `${url}: ${without.body}`).toBe(400);
      expect(without.json()).toMatchObject({ code: 'INVALID_INPUT', details: [{ path: 'headers.x-organization-id' }] });
      const unknown = await t.fastify.inject({ method, url, headers: as(service.token, UNKNOWN_ORGANIZATION), ...(payload ? { payload } : {}) });
      expect(unknown.statusCode, `${url}: ${unknown.body}`).toBe(404);
      expect(unknown.json().code).toBe('NOT_FOUND');
    }
    expect((await t.fastify.inject({ url: '/v1/integrations', headers: as(service.token, 'not an id!') })).statusCode).toBe(400);
  });

  it('may not sign in, impersonate, start an OAuth flow, switch, manage users, PATs or service tokens', async () => {
    const headers = as(service.token, owner.organizationId);
    const refusedRest = [
      { method: 'POST', url: '/v1/integrations/oauth/start', payload: { provider: 'github', redirectUri: 'http://127.0.0.1:8080/app/integrations' } },
      { method: 'POST', url: '/v1/account/switch', payload: { organizationId: owner.organizationId } },
      { method: 'POST', url: '/v1/logout' },
    ] as const;
    for (const request of refusedRest) {
      const res = await t.fastify.inject({ ...request, headers });
      expect(res.statusCode, `${request.url}: ${res.body}`).toBe(403);
      expect(res.json().code).toBe('FORBIDDEN');
    }
    expect(gh.requests.filter((r) => r.path === '/login/oauth/authorize')).toEqual([]);
    const impersonating = await t.fastify.inject({ url: '/v1/integrations', headers: { ...headers, 'x-impersonate-user': owner.userId } });
    expect(impersonating.statusCode).toBe(403);

    for (const query of [
      '{ me { id } }',
      '{ myInvitations { id } }',
      '{ personalAccessTokens { id } }',
      '{ serviceTokens { id } }',
      'mutation { createPersonalAccessToken(name: "x") { token } }',
      'mutation { createServiceToken(name: "x") { token } }',
      `mutation { switchOrganization(organizationId: "${owner.organizationId}") { accessToken } }`,
      'mutation { createOrganization(name: "x") { id } }',
    ]) {
      const { status, body, raw } = await graphqlRequest(t.fastify, headers, query);
      expect(status, query).toBe(200);
      expect(body.errors?.[0]?.extensions?.code, `${query}: ${raw}`).toBe('FORBIDDEN');
      expect(raw).not.toMatch(/tsp_|tss_|eyJ/);
    }
  });

  it('records every use in the audit log, naming the token', async () => {
    const before = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM audit_logs WHERE credential_id = ${service.id}`);
    const requestId = `st-${Date.now()}`;
    await t.fastify.inject({ url: '/v1/integrations', headers: { ...as(service.token, owner.organizationId), 'x-request-id': requestId } });
    await t.fastify.inject({ url: '/v1/integrations/github/token', headers: { ...as(service.token, owner.organizationId), 'x-request-id': `${requestId}-token` } });
    await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: { ...as(service.token, owner.organizationId), 'x-request-id': `${requestId}-refused` }, payload: { organizationId: owner.organizationId } });
    await t.fastify.inject({ url: '/v1/organizations?first=1', headers: { ...as(service.token), 'x-request-id': `${requestId}-list` } });

    const entries = await graphqlData(t.fastify, owner.token, '{ auditLogs(first: 50) { nodes { action credentialKind credentialId requestId detail } } }');
    const mine = entries.auditLogs.nodes
      .filter((node: { requestId: string }) => node.requestId?.startsWith(requestId))
      .map((node: { detail: string }) => ({ ...node, detail: JSON.parse(node.detail) }));
    expect(mine).toContainEqual({ action: 'service_token.request', credentialKind: 'service_token', credentialId: service.id, requestId, detail: { method: 'GET', route: '/v1/integrations' } });
    expect(mine).toContainEqual(expect.objectContaining({ action: 'integration.token_read', credentialKind: 'service_token', credentialId: service.id, requestId: `${requestId}-token` }));
    // The token read's own row names it: no second row for that request.
    expect(mine.filter((node: { requestId: string }) => node.requestId === `${requestId}-token`)).toHaveLength(1);
    expect(mine).toContainEqual(
      expect.objectContaining({ action: 'service_token.request', credentialId: service.id, requestId: `${requestId}-refused`, detail: { method: 'POST', route: '/v1/account/switch', refused: true } }),
    );
    // A use in no organization is the deployment's.
    const [listing] = await queryRows<{ organization_id: string }>(t.database.db, sql`SELECT organization_id FROM audit_logs WHERE request_id = ${`${requestId}-list`}`);
    expect(listing?.organization_id).toBe('deployment');
    const after = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM audit_logs WHERE credential_id = ${service.id}`);
    expect((after[0]?.n ?? 0) - (before[0]?.n ?? 0)).toBe(4);
  });
});

describe('revocation and expiry', () => {
  it('a revoked service token gets 401 from then on, and the connect sessions it minted are revoked with it', async () => {
    const owner = await registerAndLogin(t.fastify, 'revoked');
    const doomed = await createServiceToken(admin.token, { name: 'doomed' });
    const minted = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: as(doomed.token, owner.organizationId), payload: { redirectUri: 'http://127.0.0.1:8080/done' } });
    expect(minted.statusCode, minted.body).toBe(201);
    expect((await t.fastify.inject({ url: '/v1/integrations', headers: as(doomed.token, owner.organizationId) })).statusCode).toBe(200);

    const revoked = await graphqlData(t.fastify, admin.token, `mutation { revokeServiceToken(id: "${doomed.id}") { id revokedAt } }`);
    expect(revoked.revokeServiceToken.revokedAt).toEqual(expect.any(String));
    for (const [url, organizationId] of [['/v1/integrations', owner.organizationId], ['/v1/organizations', undefined]] as const) {
      const res = await t.fastify.inject({ url, headers: as(doomed.token, organizationId) });
      expect(res.statusCode, url).toBe(401);
      expect(res.json().code).toBe('UNAUTHENTICATED');
    }
    const session = await t.fastify.inject({ url: `/v1/connect/sessions/${minted.json().session.id}`, headers: bearer(owner.token) });
    expect(session.json().session.status).toBe('revoked');
    const again = await graphqlRequest(t.fastify, admin.token, `mutation { revokeServiceToken(id: "${doomed.id}") { id } }`);
    expect(again.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });

  it('a connect session it minted is usable while the token lives: pending, and its page opens', async () => {
    const owner = await registerAndLogin(t.fastify, 'session-minter');
    const minted = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: as(service.token, owner.organizationId), payload: { redirectUri: 'http://127.0.0.1:8080/done' } });
    expect(minted.statusCode, minted.body).toBe(201);
    const { id, url } = minted.json().session;
    const read = await t.fastify.inject({ url: `/v1/connect/sessions/${id}`, headers: as(service.token, owner.organizationId) });
    expect(read.json().session.status).toBe('pending');
    const page = await t.fastify.inject({ url: new URL(url).pathname });
    expect(page.statusCode, page.body).toBe(200);
  });

  it('an expired service token gets 401', async () => {
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const brief = await createServiceToken(admin.token, { name: 'brief', expiresAt });
    expect((await t.fastify.inject({ url: '/v1/organizations?first=1', headers: as(brief.token) })).statusCode).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1600));
    expect((await t.fastify.inject({ url: '/v1/organizations?first=1', headers: as(brief.token) })).statusCode).toBe(401);
    const past = await graphqlRequest(t.fastify, admin.token, CREATE, { name: 'past', expiresAt: new Date(Date.now() - 1000).toISOString() });
    expect(past.body.errors?.[0]?.extensions?.code).toBe('INVALID_INPUT');
  });

  it('an unknown tss_ value gets 401 and never falls back to the session cookie', async () => {
    const res = await t.fastify.inject({ url: '/v1/organizations', headers: { ...bearer(`tss_${'x'.repeat(43)}`), cookie: `session=${admin.cookies.session}` } });
    expect(res.statusCode).toBe(401);
  });
});

describe('the token read, its check folded into the read (decision 216)', () => {
  // An app of its own, without background work, so that the statements a request runs are its own.
  let app: TestApp;
  let token: string;
  let statements: string[] | null = null;
  const read = (organizationId: string, tokenValue = token) => app.fastify.inject({ url: '/v1/integrations/github/token', headers: as(tokenValue, organizationId) });
  /** An organization with its own GitHub integration, and the token the fake issued it. */
  const customer = async (login: string) => {
    const owner = await registerAndLogin(app.fastify, login);
    gh.addUser({ login, email: `${login}@example.com` });
    expect((await connect(app.fastify, owner.token, gh, login)).statusCode).toBe(200);
    return { owner, accessToken: gh.tokensOf(login)[0]?.accessToken };
  };
  /** A first use of the token in the organization (the usual path), after which its reads there are deferred. */
  const firstUse = async (organizationId: string, tokenValue = token) =>
    expect((await app.fastify.inject({ url: '/v1/account/access', headers: as(tokenValue, organizationId) })).statusCode).toBe(200);
  const recorded = async <T>(fn: () => Promise<T>): Promise<{ result: T; ran: string[] }> => {
    statements = [];
    try {
      const result = await fn();
      return { result, ran: statements };
    } finally {
      statements = null;
    }
  };

  beforeAll(async () => {
    app = await createTestApp({
      background: false,
      onQuery: (query) => statements?.push(query),
      env: { ...providerEnv(gh), BOOTSTRAP_ADMIN_EMAIL: ADMIN_EMAIL, BOOTSTRAP_ADMIN_PASSWORD: ADMIN_PASSWORD, RATE_LIMIT_MAX: '0' },
    });
    await ensureBootstrapAdmin(app.app.services);
    const root = await login(app.fastify, ADMIN_EMAIL, ADMIN_PASSWORD);
    token = (await graphqlData(app.fastify, root.token, CREATE, { name: 'folded' })).createServiceToken.token;
  });

  afterAll(async () => {
    await app?.close();
  });

  it('is one statement once the token has acted in the organization, answering and auditing as before, in the organization the header names', async () => {
    const a = await customer('folded-a');
    const b = await customer('folded-b');
    await firstUse(a.owner.organizationId);
    await firstUse(b.owner.organizationId);
    for (const { owner, accessToken } of [a, b, a]) {
      const { result, ran } = await recorded(() => read(owner.organizationId));
      expect(result.statusCode, result.body).toBe(200);
      expect(result.json().token.accessToken).toBe(accessToken);
      expect(ran, ran.join('\n')).toHaveLength(1);
      const audit = await queryRows<{ organization_id: string; credential_kind: string }>(
        app.database.db,
        sql`SELECT organization_id, credential_kind FROM audit_logs WHERE request_id = ${result.headers['x-request-id'] as string}`,
      );
      expect(audit).toEqual([{ organization_id: owner.organizationId, credential_kind: 'service_token' }]);
    }
  });

  it('records its use once a minute, as the usual check does', async () => {
    const { owner } = await customer('folded-touch');
    await firstUse(owner.organizationId);
    await app.database.db.execute(sql`UPDATE service_tokens SET last_used_at = NULL WHERE token_hash IS NOT NULL`);
    const lastUsed = async () => (await queryRows<{ at: Date | null }>(app.database.db, sql`SELECT max(last_used_at) AS at FROM service_tokens`))[0]?.at ?? null;
    // Within the minute of the first use, the read leaves the token's row alone…
    expect((await read(owner.organizationId)).statusCode).toBe(200);
    expect(await lastUsed()).toBeNull();
    // …and records it again once that minute has passed.
    const now = Date.now();
    const clock = vi.spyOn(Date, 'now').mockReturnValue(now + 61_000);
    try {
      expect((await read(owner.organizationId)).statusCode).toBe(200);
    } finally {
      clock.mockRestore();
    }
    expect(await lastUsed()).not.toBeNull();
  });

  it('still refuses a token revoked or expired since its last use (401), and an organization gone since (404)', async () => {
    const root = await login(app.fastify, ADMIN_EMAIL, ADMIN_PASSWORD);
    const { owner } = await customer('folded-refused');
    const revoked = (await graphqlData(app.fastify, root.token, CREATE, { name: 'to revoke' })).createServiceToken;
    const expired = (await graphqlData(app.fastify, root.token, CREATE, { name: 'to expire' })).createServiceToken;
    for (const { token: value } of [revoked, expired]) {
      await firstUse(owner.organizationId, value);
      expect((await read(owner.organizationId, value)).statusCode).toBe(200);
    }
    await graphqlData(app.fastify, root.token, `mutation { revokeServiceToken(id: "${revoked.id}") { id } }`);
    await app.database.db.execute(sql`UPDATE service_tokens SET expires_at = now() - interval '1 second' WHERE id = ${expired.id}`);
    for (const { token: value } of [revoked, expired]) {
      const { result, ran } = await recorded(() => read(owner.organizationId, value));
      expect(result.statusCode, result.body).toBe(401);
      expect(result.json().code).toBe('UNAUTHENTICATED');
      expect(result.body).not.toContain(gh.tokensOf('folded-refused')[0]?.accessToken);
      expect(ran).toHaveLength(1);
      expect(await queryRows(app.database.db, sql`SELECT 1 FROM audit_logs WHERE request_id = ${result.headers['x-request-id'] as string}`)).toEqual([]);
    }

    // An organization the token acted in, deleted since: it can act there no more.
    const gone = await customer('folded-gone');
    await firstUse(gone.owner.organizationId);
    expect((await read(gone.owner.organizationId)).statusCode).toBe(200);
    const deleted = await app.fastify.inject({ method: 'DELETE', url: `/v1/organizations/${gone.owner.organizationId}`, headers: as(token) });
    expect(deleted.statusCode, deleted.body).toBe(200);
    // The grants' revocation runs after the delete's commit: its statements are not the read's.
    while ((await recorded(() => new Promise((resolve) => setTimeout(resolve, 100)))).ran.length > 0);
    const { result, ran } = await recorded(() => read(gone.owner.organizationId));
    expect(result.statusCode, result.body).toBe(404);
    expect(result.json().code).toBe('NOT_FOUND');
    expect(ran, ran.join('\n')).toHaveLength(1);
  });
});

describe('rate limits', () => {
  it('gives each service token its own RATE_LIMIT_SERVICE_MAX, while the organization-wide limit still counts its requests there', async () => {
    const limited = await createTestApp({
      background: false,
      env: { BOOTSTRAP_ADMIN_EMAIL: ADMIN_EMAIL, BOOTSTRAP_ADMIN_PASSWORD: ADMIN_PASSWORD, RATE_LIMIT_MAX: '2', RATE_LIMIT_SERVICE_MAX: '8', RATE_LIMIT_ORGANIZATION_MAX: '4', RATE_LIMIT_WINDOW: '60' },
    });
    try {
      await ensureBootstrapAdmin(limited.app.services);
      const root = await login(limited.fastify, ADMIN_EMAIL, ADMIN_PASSWORD);
      const { token } = (await graphqlData(limited.fastify, root.token, CREATE, { name: 'limited' })).createServiceToken;
      const create = (name: string) => limited.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: as(token), payload: { name } });
      const a = (await create('A')).json().organization.id;
      const b = (await create('B')).json().organization.id;
      const statuses = async (organizationId: string, n: number) => {
        const out: number[] = [];
        for (let i = 0; i < n; i++) out.push((await limited.fastify.inject({ url: '/v1/integrations', headers: as(token, organizationId) })).statusCode);
        return out;
      };
      // Past RATE_LIMIT_MAX (2): its own budget. Then organization A's budget (4) ends it there…
      expect(await statuses(a, 5)).toEqual([200, 200, 200, 200, 429]);
      // …while B has room, until the token's own 8 are spent (2 creations + 5 in A + 1 in B).
      expect(await statuses(b, 2)).toEqual([200, 429]);
      const refused = await limited.fastify.inject({ url: '/v1/integrations', headers: as(token, b) });
      expect(refused.json().code).toBe('RATE_LIMITED');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    } finally {
      await limited.close();
    }
  });
});
