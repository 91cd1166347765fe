// Provisioning (docs/contract.md §5a): a product creates one organization per customer, finds it
// again by its own id, mints an API token for each, and its customers' end users connect —
// without a person in the loop. The last part runs docs/examples/provision.mjs over HTTP.
// `externalId` is the product's key (§5d, decision 229): here the product provisions as the
// deployment's system administrator (a service token's way is test/service-tokens.test.ts); a
// person who is not one may not set it.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provision } from '../docs/examples/provision.mjs';
import { queryRows } from '../src/db/client.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { formOf } from './helpers/connect-page.ts';
import { type Account, bearer, login, registerAndLogin } from './helpers/identity.ts';
import { freePort, ROOT, spawnService, waitFor } from './helpers/process.ts';
import { providerEnv } from './helpers/providers.ts';

const PRODUCT = 'http://127.0.0.1:4456';

let t: TestApp;
let gh: FakeProvider;
let tessera: string;
let ops: Account;
let backendPort: number;
const WEBHOOK_SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;

/** One GraphQL request; the answer's data and errors as they are. */
async function graphql(token: string, query: string, variables: Record<string, unknown> = {}) {
  const res = await t.fastify.inject({ method: 'POST', url: '/query', headers: bearer(token), payload: { query, variables } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { data: Record<string, { id: string; externalId?: string | null; token?: string } | null> | null; errors?: { extensions: { code: string } }[] };
}

const CREATE = 'mutation ($name: String!, $id: String) { createOrganization(name: $name, externalId: $id) { id name externalId role } }';
const FIND = 'query ($id: String!) { organizationByExternalId(externalId: $id) { id externalId role } }';
const API_TOKEN = 'mutation ($org: ID) { createAPIToken(name: "backend", organizationId: $org) { id token } }';

async function create(account: Account, name: string, externalId?: string) {
  return graphql(account.token, CREATE, { name, id: externalId });
}

const organizationCount = async () => (await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM organizations`))[0]?.n;

beforeAll(async () => {
  gh = await startFakeGitHub();
  gh.addUser({ login: 'customer-user', email: 'user@customer.example' });
  const port = await freePort();
  backendPort = await freePort();
  tessera = `http://127.0.0.1:${port}`;
  t = await createTestApp({
    env: {
      ...providerEnv(gh),
      PUBLIC_URL: tessera,
      OAUTH_REDIRECT_ORIGINS: `${tessera},${PRODUCT}`,
      RATE_LIMIT_MAX: '0',
      BOOTSTRAP_ADMIN_EMAIL: 'ops@product.example',
      BOOTSTRAP_ADMIN_PASSWORD: 'operator password of the product',
      // The backend example of docs/embedding.md receives the events.
      EVENTS_WEBHOOK_URL: `http://127.0.0.1:${backendPort}/webhooks/tessera`,
      EVENTS_WEBHOOK_SECRET: WEBHOOK_SECRET,
    },
  });
  await t.fastify.listen({ host: '127.0.0.1', port });
  await ensureBootstrapAdmin(t.app.services);
  ops = await login(t.fastify, 'ops@product.example', 'operator password of the product');
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

describe('createOrganization with an externalId', () => {
  it('creates an organization the caller owns that carries the externalId, in its event too', async () => {
    const { data, errors } = await create(ops, 'Acme Corp', 'cust_acme');
    expect(errors).toBeUndefined();
    expect(data?.createOrganization).toEqual({ id: expect.any(String), name: 'Acme Corp', externalId: 'cust_acme', role: 'owner' });
    const [event] = await queryRows<{ data: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT data FROM events WHERE organization_id = ${data?.createOrganization?.id} AND type = 'organization.created'`,
    );
    expect(event?.data).toMatchObject({ organizationId: data?.createOrganization?.id, organization: { id: data?.createOrganization?.id, name: 'Acme Corp', externalId: 'cust_acme' } });
    // Every event's data names the organization's externalId beside its id (docs/contract.md §7).
    expect(event?.data.externalId).toBe('cust_acme');
    // Without one, externalId is null, in the event's data too.
    const plain = (await create(ops, 'No id')).data?.createOrganization;
    expect(plain?.externalId).toBeNull();
    const [plainEvent] = await queryRows<{ data: Record<string, unknown> }>(t.database.db, sql`SELECT data FROM events WHERE organization_id = ${plain?.id} AND type = 'organization.created'`);
    expect(plainEvent?.data).toHaveProperty('externalId', null);
  });

  it('answers CONFLICT when the externalId exists already, and nothing of that request persists; a person who is not a system administrator may not set one', async () => {
    await create(ops, 'Globex', 'cust_globex');
    const before = await organizationCount();
    const again = await graphql(ops.token, `mutation { a: createOrganization(name: "Other") { id } b: createOrganization(name: "Globex 2", externalId: "cust_globex") { id } }`);
    expect(again.errors?.map((e) => e.extensions.code)).toEqual(['CONFLICT']);
    expect(await organizationCount()).toBe(before);
    // The product's key (docs/contract.md §5d): a person who is not a system administrator may not set one, not even a free one.
    const other = await registerAndLogin(t.fastify, 'other-product');
    const withTheirs = await organizationCount();
    expect((await create(other, 'Globex elsewhere', 'cust_globex')).errors?.[0]?.extensions.code).toBe('FORBIDDEN');
    expect((await create(other, 'Free key', 'cust_free')).errors?.[0]?.extensions.code).toBe('FORBIDDEN');
    expect(await organizationCount()).toBe(withTheirs);
  });

  it('takes 1–128 printable characters, kept exactly, and refuses the rest with INVALID_INPUT', async () => {
    for (const good of ['x', 'é'.repeat(128), 'a b/c:d@e#1', '顧客-42']) {
      expect((await create(ops, 'ok', good)).data?.createOrganization?.externalId, good).toBe(good);
    }
    for (const bad of ['', 'x'.repeat(129), 'tab\there', 'line\nbreak', 'zero\u200bwidth', 'bell\u0007', 'rtl\u202eoverride']) {
      const { errors } = await create(ops, 'bad', bad);
      expect(errors?.[0]?.extensions.code, JSON.stringify(bad)).toBe('INVALID_INPUT');
    }
  });

  it('needs a user: an API token cannot create organizations', async () => {
    const token = (await graphql(ops.token, API_TOKEN)).data?.createAPIToken?.token as string;
    expect((await create({ ...ops, token }, 'By token', 'by-token')).errors?.[0]?.extensions.code).toBe('FORBIDDEN');
  });
});

describe('organizationByExternalId', () => {
  it('finds only organizations the caller belongs to', async () => {
    const mine = (await create(ops, 'Initech', 'cust_initech')).data?.createOrganization;
    expect((await graphql(ops.token, FIND, { id: 'cust_initech' })).data?.organizationByExternalId).toEqual({ id: mine?.id, externalId: 'cust_initech', role: 'owner' });
    const stranger = await registerAndLogin(t.fastify, 'stranger');
    expect((await graphql(stranger.token, FIND, { id: 'cust_initech' })).data?.organizationByExternalId).toBeNull();
    expect((await graphql(ops.token, FIND, { id: 'nobody' })).data?.organizationByExternalId).toBeNull();
    // The stranger cannot make an organization of their own with the same id (docs/contract.md §5d): ops's stays the one.
    expect((await create(stranger, 'Their Initech', 'cust_initech')).errors?.[0]?.extensions.code).toBe('FORBIDDEN');
    expect((await graphql(stranger.token, FIND, { id: 'cust_initech' })).data?.organizationByExternalId).toBeNull();
    expect((await graphql(ops.token, FIND, { id: 'cust_initech' })).data?.organizationByExternalId?.id).toBe(mine?.id);
    expect((await graphql(ops.token, FIND, { id: '' })).errors?.[0]?.extensions.code).toBe('INVALID_INPUT');
  });

  it("for a personal access token, is the organization it acts in or null: it learns nothing of organizations it is not valid for", async () => {
    const listed = (await create(ops, 'Listed', 'cust_listed')).data?.createOrganization;
    const unlisted = (await create(ops, 'Unlisted', 'cust_unlisted')).data?.createOrganization;
    const pat = (await graphql(ops.token, 'mutation ($orgs: [ID!]) { createPersonalAccessToken(name: "scoped", organizationIds: $orgs) { token } }', { orgs: [listed?.id] })).data
      ?.createPersonalAccessToken?.token as string;
    expect((await graphql(pat, FIND, { id: 'cust_listed' })).data?.organizationByExternalId?.id).toBe(listed?.id);
    expect((await graphql(pat, FIND, { id: 'cust_unlisted' })).data?.organizationByExternalId).toBeNull();
    expect(unlisted?.id).toBeDefined();
  });

  it("for an API token, is its own organization's or null", async () => {
    const org = (await create(ops, 'Hooli', 'cust_hooli')).data?.createOrganization;
    const token = (await graphql(ops.token, API_TOKEN, { org: org?.id })).data?.createAPIToken?.token as string;
    expect((await graphql(token, FIND, { id: 'cust_hooli' })).data?.organizationByExternalId?.id).toBe(org?.id);
    expect((await graphql(token, FIND, { id: 'cust_acme' })).data?.organizationByExternalId).toBeNull();
  });
});

describe('createAPIToken for another organization', () => {
  it('mints a token acting in that organization for its owner or admin', async () => {
    const org = (await create(ops, 'Umbrella', 'cust_umbrella')).data?.createOrganization;
    const { data, errors } = await graphql(ops.token, API_TOKEN, { org: org?.id });
    expect(errors).toBeUndefined();
    const access = await t.fastify.inject({ url: '/v1/account/access', headers: bearer(data?.createAPIToken?.token as string) });
    expect(access.json()).toMatchObject({ authMethod: 'api_token', organization: { id: org?.id }, user: null });
    // Audited in that organization, by the user.
    const [audit] = await queryRows<{ actor_user_id: string }>(
      t.database.db,
      sql`SELECT actor_user_id FROM audit_logs WHERE organization_id = ${org?.id} AND action = 'api_token.created' AND target_id = ${data?.createAPIToken?.id}`,
    );
    expect(audit?.actor_user_id).toBe(ops.userId);
  });

  it('refuses a member below admin, a non-member, an unknown id, a PAT and an API token with FORBIDDEN', async () => {
    const org = (await create(ops, 'Soylent', 'cust_soylent')).data?.createOrganization;
    const member = await registerAndLogin(t.fastify, 'plain-member');
    await t.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${org?.id}, ${member.userId}, 'member')`);
    const outsider = await registerAndLogin(t.fastify, 'outsider');
    const pat = (await graphql(ops.token, `mutation ($orgs: [ID!]) { createPersonalAccessToken(name: "p", organizationIds: $orgs) { token } }`, { orgs: [ops.organizationId, org?.id] }))
      .data?.createPersonalAccessToken?.token as string;
    const apiToken = (await graphql(ops.token, API_TOKEN)).data?.createAPIToken?.token as string;
    for (const [who, token, target] of [
      ['member', member.token, org?.id],
      ['outsider', outsider.token, org?.id],
      ['unknown id', ops.token, '01JUNKNOWNUNKNOWNUNKNOWNUN'],
      ['PAT', pat, org?.id],
      ['API token', apiToken, org?.id],
    ] as const) {
      expect((await graphql(token, API_TOKEN, { org: target })).errors?.[0]?.extensions.code, who).toBe('FORBIDDEN');
    }
    const tokens = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM api_tokens WHERE organization_id = ${org?.id}`);
    expect(tokens[0]?.n).toBe(0);
  });
});

describe('revoking a credential', () => {
  it('revokes the pending connect sessions it minted, and only those', async () => {
    const minted = await graphql(ops.token, API_TOKEN);
    const { id: tokenId, token } = minted.data?.createAPIToken as { id: string; token: string };
    const mint = async (credential: string) =>
      (await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(credential), payload: { redirectUri: `${PRODUCT}/done` } })).json().session;
    const byToken = await mint(token);
    const byOwner = await mint(ops.token);
    const revoked = await graphql(ops.token, 'mutation ($id: ID!) { revokeAPIToken(id: $id) { id } }', { id: tokenId });
    expect(revoked.errors).toBeUndefined();
    const status = async (id: string) => (await t.fastify.inject({ url: `/v1/connect/sessions/${id}`, headers: bearer(ops.token) })).json().session.status;
    expect(await status(byToken.id)).toBe('revoked');
    expect(await status(byOwner.id)).toBe('pending');
    expect((await t.fastify.inject({ url: new URL(byToken.url).pathname })).statusCode).toBe(410);
    const [audit] = await queryRows<{ detail: Record<string, unknown> }>(t.database.db, sql`SELECT detail FROM audit_logs WHERE action = 'api_token.revoked' AND target_id = ${tokenId}`);
    expect(audit?.detail).toEqual({ sessionsRevoked: 1 });
  });

  it("a PAT's revocation ends its sessions too", async () => {
    const pat = (await graphql(ops.token, 'mutation { createPersonalAccessToken(name: "minting") { id token } }')).data?.createPersonalAccessToken as { id: string; token: string };
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(pat.token), payload: { redirectUri: `${PRODUCT}/done` } });
    expect(res.statusCode, res.body).toBe(201);
    expect((await graphql(ops.token, 'mutation ($id: ID!) { revokePersonalAccessToken(id: $id) { id } }', { id: pat.id })).errors).toBeUndefined();
    const session = await t.fastify.inject({ url: `/v1/connect/sessions/${res.json().session.id}`, headers: bearer(ops.token) });
    expect(session.json().session.status).toBe('revoked');
  });
});

/** What an end user's browser does with a connect link: the hosted page, its GitHub button (the form, with the page's nonce and cookie), the provider's consent, back to the product. */
async function connectAsEndUser(connectUrl: string): Promise<URL> {
  const page = await fetch(connectUrl);
  expect(page.status).toBe(200);
  const form = formOf(await page.text());
  const formCookie = (page.headers.get('set-cookie') ?? '').split(';')[0] as string;
  const started = await fetch(new URL(form?.action as string, tessera), {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: formCookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ nonce: form?.nonce as string, provider: 'github' }),
  });
  expect(started.status).toBe(303);
  const cookie = (started.headers.get('set-cookie') ?? '').split(';')[0] as string;
  const back = gh.authorize(started.headers.get('location') as string, 'customer-user').location;
  const done = await fetch(back, { redirect: 'manual', headers: { cookie } });
  expect(done.status).toBe(302);
  return new URL(done.headers.get('location') as string);
}

describe('the provisioning script of docs/embedding.md', () => {
  const customers = [
    { id: 'shop-1', name: 'First Shop' },
    { id: 'shop-2', name: 'Second Shop' },
    { id: 'shop-3', name: 'Third Shop' },
  ];

  it('creates 3 organizations by externalId, an API token and a session for each, and each end user connects', async () => {
    const results = await provision({ url: tessera, email: ops.email, password: ops.password, customers, redirectUri: `${PRODUCT}/done`, allowedProviders: ['github'] });
    expect(results.map((r) => r.customer)).toEqual(['shop-1', 'shop-2', 'shop-3']);
    expect(new Set(results.map((r) => r.organizationId)).size).toBe(3);
    for (const result of results) {
      const landed = await connectAsEndUser(result.connectUrl);
      expect(Object.fromEntries(landed.searchParams)).toMatchObject({ status: 'connected', provider: 'github', session: result.sessionId });
      const list = await fetch(`${tessera}/v1/integrations`, { headers: bearer(result.apiToken) });
      const { integrations } = (await list.json()) as { integrations: unknown[] };
      expect(integrations).toHaveLength(1);
      expect(integrations[0]).toMatchObject({ provider: 'github', connectedVia: { sessionId: result.sessionId, endUser: { id: result.customer } } });
      // The connection is the end user's own (docs/contract.md §5d): addressed by endUser.
      const token = await fetch(`${tessera}/v1/integrations/github/token?endUser=${result.customer}`, { headers: bearer(result.apiToken) });
      expect(token.status).toBe(200);
      // The event a product's webhook receives names the organization, the session and the end user.
      const [event] = await queryRows<{ data: Record<string, unknown> }>(t.database.db, sql`SELECT data FROM events WHERE organization_id = ${result.organizationId} AND type = 'integration.connected'`);
      expect(event?.data).toMatchObject({ organizationId: result.organizationId, sessionId: result.sessionId, endUser: { id: result.customer } });
    }
  });

  it('finds the same organizations when run again, and works as the documented command', async () => {
    const first = await provision({ url: tessera, email: ops.email, password: ops.password, customers, redirectUri: `${PRODUCT}/done` });
    const { stdout } = await promisify(execFile)(process.execPath, ['docs/examples/provision.mjs', 'shop-2', 'shop-4'], {
      env: { ...process.env, TESSERA_URL: tessera, TESSERA_EMAIL: ops.email, TESSERA_PASSWORD: ops.password, REDIRECT_URI: `${PRODUCT}/done` },
    });
    const lines = stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(lines.map((line) => line.customer)).toEqual(['shop-2', 'shop-4']);
    expect(lines[0].organizationId).toBe(first[1]?.organizationId);
    expect(lines[1].connectUrl).toMatch(/\/connect\/[A-Za-z0-9_-]{43}$/);
    const byId = await graphql(ops.token, FIND, { id: 'shop-4' });
    expect(byId.data?.organizationByExternalId?.id).toBe(lines[1].organizationId);
  });

  it('is what docs/embedding.md shows: the backend example appears there whole', async () => {
    const doc = await readFile(`${ROOT}/docs/embedding.md`, 'utf8');
    expect(doc).toContain((await readFile(`${ROOT}/docs/examples/backend.mjs`, 'utf8')).trim());
  });

  it('and the backend example mints a link for the signed-in customer, hears integration.connected, and reads the token', async () => {
    const [customer] = await provision({ url: tessera, email: ops.email, password: ops.password, customers: [{ id: 'shop-9', name: 'Ninth Shop' }], redirectUri: `${PRODUCT}/done` });
    // docs/embedding.md §2: the operator makes the backend's one service token.
    const serviceToken = (await graphql(ops.token, 'mutation { createServiceToken(name: "product backend") { token } }')).data?.createServiceToken?.token as string;
    expect(serviceToken).toMatch(/^tss_/);
    const backend = await spawnService(
      { TESSERA_URL: tessera, TESSERA_SERVICE_TOKEN: serviceToken, EVENTS_WEBHOOK_SECRET: WEBHOOK_SECRET, RETURN_URL: `${PRODUCT}/done` },
      { script: 'docs/examples/backend.mjs', port: backendPort },
    );
    try {
      await waitFor(backend, '/', 404, 20_000);
      const forged = await fetch(`${backend.url}/webhooks/tessera`, { method: 'POST', body: JSON.stringify({ type: 'integration.connected', data: {} }) });
      expect(forged.status).toBe(401);
      const link = await fetch(`${backend.url}/connect-link`, { method: 'POST', headers: { 'x-organization': customer?.organizationId as string, 'x-user': 'end-9' } });
      const { url } = (await link.json()) as { url: string };
      expect((await connectAsEndUser(url)).searchParams.get('status')).toBe('connected');
      await expect.poll(() => backend.output(), { timeout: 30_000 }).toContain(`connected ${customer?.organizationId} github for end-9; token expires`);
      expect(backend.output()).not.toContain(serviceToken);
    } finally {
      await backend.stop();
    }
  });
});
