// The product's key for its customer (docs/contract.md §3, §5a, §5d; decision 229): an
// organization's `externalId` is one namespace, the product's. Only a service token or a system
// administrator as themselves sets it — on create or by PATCH, linking an organization a person
// made — it is unique across the deployment and matched exactly, so the provisioning pattern
// (`organizations[0] ?? create(…)`) can never adopt an organization someone else made.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData, graphqlRequest } from './helpers/graphql.ts';
import { type Account, bearer, login, registerAndLogin } from './helpers/identity.ts';

const ADMIN_EMAIL = 'root@example.com';
const ADMIN_PASSWORD = 'bootstrap admin password';
const CREATE = 'mutation ($name: String!, $id: String) { createOrganization(name: $name, externalId: $id) { id name externalId role } }';
const FIND = 'query ($id: String!) { organizationByExternalId(externalId: $id) { id externalId role } }';

let t: TestApp;
let admin: Account;
let adminPat: string;
let service: string;
let person: Account;

function as(token: string, organizationId?: string): Record<string, string> {
  return { ...bearer(token), ...(organizationId ? { 'x-organization-id': organizationId } : {}) };
}

async function post(auth: Record<string, string>, payload: Record<string, unknown>) {
  return t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: auth, payload });
}

async function patch(auth: Record<string, string>, id: string, payload: Record<string, unknown>) {
  return t.fastify.inject({ method: 'PATCH', url: `/v1/organizations/${id}`, headers: auth, payload });
}

/** The service token's lookup: what the provisioning pattern reads. */
async function lookup(externalId: string): Promise<{ id: string; externalId: string }[]> {
  const res = await t.fastify.inject({ url: `/v1/organizations?externalId=${encodeURIComponent(externalId)}`, headers: as(service) });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().organizations;
}

/** The documented provisioning pattern (docs/embedding.md): the customer's organization, created when absent. */
async function provision(externalId: string, name: string): Promise<string> {
  const [found] = await lookup(externalId);
  if (found) return found.id;
  const created = await post(as(service), { name, externalId });
  expect(created.statusCode, created.body).toBe(201);
  return created.json().organization.id;
}

beforeAll(async () => {
  t = await createTestApp({ env: { BOOTSTRAP_ADMIN_EMAIL: ADMIN_EMAIL, BOOTSTRAP_ADMIN_PASSWORD: ADMIN_PASSWORD, RATE_LIMIT_MAX: '0', LIMIT_ORGANIZATIONS_PER_USER: '2' } });
  await ensureBootstrapAdmin(t.app.services);
  admin = await login(t.fastify, ADMIN_EMAIL, ADMIN_PASSWORD);
  adminPat = (await graphqlData(t.fastify, admin.token, 'mutation { createPersonalAccessToken(name: "ops") { token } }')).createPersonalAccessToken.token;
  service = (await graphqlData(t.fastify, admin.token, 'mutation { createServiceToken(name: "backend") { token } }')).createServiceToken.token;
  person = await registerAndLogin(t.fastify, 'squatter');
});

afterAll(async () => {
  await t?.close();
});

describe('who sets an externalId', () => {
  it('refuses a person who is not a system administrator, by every door, and nothing of theirs is adopted', async () => {
    const pat = (await graphqlData(t.fastify, person.token, 'mutation { createPersonalAccessToken(name: "p") { token } }')).createPersonalAccessToken.token;
    // REST with a session and with a PAT.
    for (const auth of [bearer(person.token), bearer(pat)]) {
      const res = await post(auth, { name: 'Acme Corp', externalId: 'cust_victim' });
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json().code).toBe('FORBIDDEN');
    }
    // GraphQL createOrganization.
    const { body } = await graphqlRequest(t.fastify, person.token, CREATE, { name: 'Acme Corp', id: 'cust_victim' });
    expect(body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(body.data?.createOrganization ?? null).toBeNull();
    // A system administrator impersonating someone is that someone.
    const impersonating = await post({ ...bearer(admin.token), 'x-impersonate-user': person.userId }, { name: 'Acme Corp', externalId: 'cust_victim' });
    expect(impersonating.statusCode, impersonating.body).toBe(403);

    const stored = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM organizations WHERE external_id = 'cust_victim'`);
    expect(stored[0]?.n).toBe(0);
    // The product's provisioning creates the real customer, not the squatter's organization.
    const real = await provision('cust_victim', 'Victim Inc');
    expect(await lookup('cust_victim')).toEqual([expect.objectContaining({ id: real, externalId: 'cust_victim' })]);
    const access = (await t.fastify.inject({ url: '/v1/account/access', headers: bearer(person.token) })).json();
    expect(access.organizations.map((o: { id: string }) => o.id)).not.toContain(real);
    // A person without a key still creates their own organizations.
    expect((await post(bearer(person.token), { name: 'Mine' })).statusCode).toBe(201);
  });

  it('lets a system administrator as themselves (session or PAT, REST or GraphQL) set one; those do not count against LIMIT_ORGANIZATIONS_PER_USER', async () => {
    const made: string[] = [];
    for (const [i, auth] of [bearer(admin.token), bearer(adminPat), bearer(admin.token)].entries()) {
      const res = await post(auth, { name: `Customer ${i}`, externalId: `admin-made-${i}` });
      expect(res.statusCode, res.body).toBe(201);
      made.push(res.json().organization.id);
    }
    const viaGraphql = await graphqlData(t.fastify, admin.token, CREATE, { name: 'Customer 3', id: 'admin-made-3' });
    expect(viaGraphql.createOrganization).toEqual({ id: expect.any(String), name: 'Customer 3', externalId: 'admin-made-3', role: 'owner' });
    // Four keyed organizations, and the administrator's own quota (2, their personal one counted) still has room for one more.
    expect((await post(bearer(admin.token), { name: 'My own' })).statusCode).toBe(201);
    const beyond = await post(bearer(admin.token), { name: 'One too many' });
    expect(beyond.statusCode, beyond.body).toBe(409);
    expect(beyond.json().error).toMatch(/LIMIT_ORGANIZATIONS_PER_USER/);
    for (const [i, id] of made.entries()) expect(await lookup(`admin-made-${i}`)).toEqual([expect.objectContaining({ id })]);
  });
});

describe('one namespace, matched exactly', () => {
  it('is unique across the deployment: a service token and a system administrator collide (409), nothing of the second request persists', async () => {
    const first = await post(as(service), { name: 'Globex', externalId: 'cust_globex' });
    expect(first.statusCode, first.body).toBe(201);
    for (const auth of [as(service), bearer(admin.token), bearer(adminPat)]) {
      const again = await post(auth, { name: 'Globex again', externalId: 'cust_globex' });
      expect(again.statusCode, again.body).toBe(409);
      expect(again.json().code).toBe('CONFLICT');
    }
    const graphql = await graphqlRequest(t.fastify, admin.token, CREATE, { name: 'Globex again', id: 'cust_globex' });
    expect(graphql.body.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    const names = await queryRows<{ name: string }>(t.database.db, sql`SELECT name FROM organizations WHERE name LIKE 'Globex%'`);
    expect(names).toEqual([{ name: 'Globex' }]);
  });

  it('matches exactly: letter case, spaces and look-alikes are other keys; malformed keys are refused', async () => {
    const id = await provision('Cust-Exact', 'Exact');
    expect(await lookup('Cust-Exact')).toEqual([expect.objectContaining({ id })]);
    for (const other of ['cust-exact', 'CUST-EXACT', ' Cust-Exact', 'Cust-Exact ', 'Cust‐Exact']) {
      expect(await lookup(other), JSON.stringify(other)).toEqual([]);
      // …and each is a key of its own, free to create.
      expect((await post(as(service), { name: 'Other', externalId: other })).statusCode, JSON.stringify(other)).toBe(201);
    }
    for (const bad of ['', 'x'.repeat(129), 'tab\there', 'bidi\u202Eevil', 'zero\u200Bwidth']) {
      const res = await post(as(service), { name: 'Bad', externalId: bad });
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.json().details?.[0]?.path).toBe('body.externalId');
    }
    expect((await post(as(service), { name: 'Longest', externalId: 'k'.repeat(128) })).statusCode).toBe(201);
  });

  it("GraphQL organizationByExternalId finds only an organization the caller belongs to", async () => {
    const keyed = (await graphqlData(t.fastify, admin.token, CREATE, { name: 'Admin keyed', id: 'gql-keyed' })).createOrganization;
    expect((await graphqlData(t.fastify, admin.token, FIND, { id: 'gql-keyed' })).organizationByExternalId).toEqual({ id: keyed.id, externalId: 'gql-keyed', role: 'owner' });
    // Not a member: null, whoever asks.
    expect((await graphqlData(t.fastify, person.token, FIND, { id: 'gql-keyed' })).organizationByExternalId).toBeNull();
    await provision('gql-service', 'Service made');
    for (const token of [admin.token, adminPat, person.token]) expect((await graphqlData(t.fastify, token, FIND, { id: 'gql-service' })).organizationByExternalId).toBeNull();
  });
});

describe('PATCH /v1/organizations/{id}', () => {
  it("links an organization a person made to the product's key (service token or system administrator), clears it with null, audited", async () => {
    const owner = await registerAndLogin(t.fastify, 'customer-owner');
    const theirs = (await post(bearer(owner.token), { name: 'Made by a person' })).json().organization.id;
    // The owner may not set the key, by any door.
    const refused = await patch(bearer(owner.token), theirs, { externalId: 'cust_linked' });
    expect(refused.statusCode, refused.body).toBe(403);
    expect((await patch(bearer(owner.token), theirs, { externalId: null })).statusCode).toBe(403);

    const linked = await patch(as(service), theirs, { externalId: 'cust_linked' });
    expect(linked.statusCode, linked.body).toBe(200);
    expect(linked.json().organization).toMatchObject({ id: theirs, name: 'Made by a person', externalId: 'cust_linked' });
    expect(await lookup('cust_linked')).toEqual([expect.objectContaining({ id: theirs })]);
    // The key is taken: linking another organization to it is a 409, by either setter.
    const other = (await post(bearer(owner.token), { name: 'Second' })).json().organization.id;
    for (const auth of [as(service), bearer(admin.token)]) {
      const taken = await patch(auth, other, { externalId: 'cust_linked' });
      expect(taken.statusCode, taken.body).toBe(409);
      expect(taken.json().code).toBe('CONFLICT');
    }
    // A system administrator who is not a member moves it; null clears it.
    expect((await patch(bearer(admin.token), theirs, { externalId: 'cust_moved' })).json().organization.externalId).toBe('cust_moved');
    expect(await lookup('cust_linked')).toEqual([]);
    const cleared = await patch(bearer(adminPat), theirs, { externalId: null });
    expect(cleared.statusCode, cleared.body).toBe(200);
    expect(cleared.json().organization.externalId).toBeNull();
    expect(await lookup('cust_moved')).toEqual([]);
    // …and the freed key can be linked elsewhere.
    expect((await patch(as(service), other, { externalId: 'cust_linked' })).statusCode).toBe(200);

    const audit = await queryRows<{ action: string; detail: Record<string, unknown>; credential_kind: string }>(
      t.database.db,
      sql`SELECT action, detail, credential_kind FROM audit_logs WHERE organization_id = ${theirs} AND action = 'organization.external_id_changed' ORDER BY id`,
    );
    expect(audit).toEqual([
      { action: 'organization.external_id_changed', detail: { from: null, to: 'cust_linked' }, credential_kind: 'service_token' },
      { action: 'organization.external_id_changed', detail: { from: 'cust_linked', to: 'cust_moved' }, credential_kind: 'jwt' },
      { action: 'organization.external_id_changed', detail: { from: 'cust_moved', to: null }, credential_kind: 'pat' },
    ]);
  });

  it('renames by its owner, a system administrator or a service token — not a stranger', async () => {
    const owner = await registerAndLogin(t.fastify, 'renamer');
    const id = (await post(bearer(owner.token), { name: 'Before' })).json().organization.id;
    expect((await patch(bearer(owner.token), id, { name: 'By owner' })).json().organization.name).toBe('By owner');
    expect((await patch(bearer(admin.token), id, { name: 'By system admin' })).json().organization.name).toBe('By system admin');
    expect((await patch(as(service), id, { name: 'By service' })).json().organization.name).toBe('By service');
    // A system administrator reads it too without being a member.
    expect((await t.fastify.inject({ url: `/v1/organizations/${id}`, headers: bearer(admin.token) })).json().organization.name).toBe('By service');
    const stranger = await registerAndLogin(t.fastify, 'stranger');
    expect((await patch(bearer(stranger.token), id, { name: 'Nope' })).statusCode).toBe(404);
    // An empty PATCH says what it needs.
    const empty = await patch(bearer(owner.token), id, {});
    expect(empty.statusCode).toBe(400);
    expect(empty.json().code).toBe('INVALID_INPUT');
  });
});
