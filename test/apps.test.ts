// An organization's own OAuth apps (docs/contract.md §5e), HTTP in: made, listed, read, changed and
// deleted over REST and GraphQL beside the deployment's apps (read-only but for the default); who
// may do what; every validation rule with its code; the limit; one default per provider; 409 while
// an integration, a pending connect session or an OAuth state uses an app; the authorize URL an
// own app yields; and no secret in any answer, GraphQL result, audit row, log line or stored column.
import { generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.ts';
import { queryRows, sql } from '../src/db/client.ts';
import { rotateSecrets } from '../src/secrets/rotate.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, TEST_ENCRYPTION_KEY, type TestApp } from './helpers/app.ts';
import { graphqlData, graphqlRequest } from './helpers/graphql.ts';
import { type Account, bearer, browser, login, registerAndLogin } from './helpers/identity.ts';
import { providerEnv, REDIRECT_URI } from './helpers/providers.ts';
import { everyStoredValue } from './helpers/stored-values.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';

const PUBLIC_URL = 'http://127.0.0.1:8080';
const NEW_KEY = `k2:${Buffer.alloc(32, 3).toString('base64')}`;
const PRIVATE_KEY = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const SMALL_KEY = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const EC_KEY = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const GITHUB_EVENTS_SECRET = `events-${crypto.randomUUID()}`;
const READONLY_SECRET = `ro-${crypto.randomUUID()}`;
const PARTNER_SECRET = `pa-${crypto.randomUUID()}`;

let t: TestApp;
let gh: FakeProvider;
let owner: Account;
let member: Account;
let other: Account;
let apiToken: string;
let serviceToken: string;
/** Every secret this file gives an app: none may show anywhere but where it is used. */
const secrets = new Set<string>();

const secret = (label: string) => {
  const value = `${label}-${crypto.randomUUID()}-${crypto.randomUUID()}`;
  secrets.add(value);
  return value;
};

const api = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, headers: Record<string, string>, payload?: unknown) =>
  t.fastify.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });

/** Every answer this file got, for the secrets scan at the end. */
const answers: string[] = [];
async function call(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, headers: Record<string, string>, payload?: unknown) {
  const res = await api(method, url, headers, payload);
  answers.push(res.body);
  return res;
}

async function create(payload: Record<string, unknown>, headers = bearer(owner.token)) {
  const res = await call('POST', '/v1/apps', headers, payload);
  expect(res.statusCode, res.body).toBe(201);
  return res.json().app as Record<string, unknown> & { id: string };
}

async function gql(token: string | Record<string, string>, query: string, variables?: Record<string, unknown>) {
  const res = await graphqlRequest(t.fastify, token, query, variables);
  answers.push(res.raw);
  return res;
}

/** Each 12-character slice of a secret (a PEM key: of each line of its body) — none may show anywhere. */
function slices(value: string): string[] {
  const parts = value.includes('-----BEGIN') ? value.split('\n').filter((line) => line && !line.startsWith('-----')) : [value];
  return parts.flatMap((part) => Array.from({ length: Math.max(1, part.length - 11) }, (_, index) => part.slice(index, index + 12)));
}

function expectNoSecret(haystack: string, where: string): void {
  for (const value of secrets) {
    const leaked = slices(value).find((slice) => haystack.includes(slice));
    expect(leaked, `${where} holds a part of a secret`).toBeUndefined();
  }
}

beforeAll(async () => {
  gh = await startFakeGitHub();
  gh.addUser({ login: 'octo' });
  t = await createTestApp({
    background: false,
    env: {
      ...providerEnv(gh),
      // The app seals with test1; k2 is known, so a rotation to it leaves everything readable.
      ENCRYPTION_KEYS: `${TEST_ENCRYPTION_KEY},${NEW_KEY}`,
      PUBLIC_URL,
      OAUTH_REDIRECT_ORIGINS: new URL(REDIRECT_URI).origin,
      RATE_LIMIT_MAX: '0',
      INTEGRATION_OAUTH_GITHUB_EVENTS_SECRET: GITHUB_EVENTS_SECRET,
      // Offered to organizations' own apps only: entries without client credentials.
      INTEGRATION_OAUTH_GITLAB_CLIENT_ID: 'unused',
      INTEGRATION_OAUTH_GITHUBAPP_CLIENT_ID: 'unused',
      INTEGRATION_OAUTH_STRIPE_ENABLED: 'true',
      LIMIT_APPS_PER_ORGANIZATION: '5',
      BOOTSTRAP_ADMIN_EMAIL: 'apps-root@example.com',
      BOOTSTRAP_ADMIN_PASSWORD: 'bootstrap admin password',
    },
    overrides: {
      integrationOauthApps: [
        { id: 'github-readonly', provider: 'github', name: 'GitHub (read-only)', clientId: 'readonly-client', clientSecret: READONLY_SECRET, scopes: ['read:user'] },
        { id: 'github-partner', provider: 'github', clientId: 'partner-client', clientSecret: PARTNER_SECRET, organizations: ['01ARZ3NDEKTSV4RRFFQ69G5FAV'] },
      ],
    },
  });
  secrets.add(GITHUB_EVENTS_SECRET).add(READONLY_SECRET).add(PARTNER_SECRET);
  owner = await registerAndLogin(t.fastify, 'apps-owner');
  other = await registerAndLogin(t.fastify, 'apps-other');
  member = await registerAndLogin(t.fastify, 'apps-member');
  await t.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${owner.organizationId}, ${member.userId}, 'member')`);
  member = await login(t.fastify, member.email, member.password);
  const switched = await api('POST', '/v1/account/switch', bearer(member.token), { organizationId: owner.organizationId });
  expect(switched.statusCode, switched.body).toBe(200);
  member = { ...member, token: switched.json().accessToken, organizationId: owner.organizationId };
  apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
  await ensureBootstrapAdmin(t.app.services);
  const admin = await login(t.fastify, 'apps-root@example.com', 'bootstrap admin password');
  serviceToken = (await graphqlData(t.fastify, admin.token, 'mutation { createServiceToken(name: "product") { token } }')).createServiceToken.token;
}, 120_000);

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

describe('the apps of an organization', () => {
  let own: { id: string };

  it("lists the deployment's apps it may use, read-only, with their redirect URI and events URL", async () => {
    const res = await call('GET', '/v1/apps', bearer(owner.token));
    expect(res.statusCode, res.body).toBe(200);
    const apps = res.json().apps as Record<string, unknown>[];
    // github-partner is another organization's: not listed.
    expect(apps.map((app) => app.id)).toEqual(['github', 'github-readonly']);
    expect(apps[0]).toEqual({
      id: 'github',
      provider: 'github',
      owner: 'deployment',
      name: 'GitHub',
      clientId: gh.clientId,
      scopes: null,
      default: false,
      redirectUri: `${PUBLIC_URL}/v1/integrations/oauth/callback`,
      eventsUrl: `${PUBLIC_URL}/v1/providers/github/events`,
      hasEventsSecret: true,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(apps[1]).toMatchObject({ id: 'github-readonly', owner: 'deployment', name: 'GitHub (read-only)', scopes: ['read:user'], eventsUrl: `${PUBLIC_URL}/v1/apps/github-readonly/events`, hasEventsSecret: false });
    expect((await call('GET', '/v1/apps/github-partner', bearer(owner.token))).statusCode).toBe(404);
  });

  it('creates an own app (201), reads it, lists it; a member reads too', async () => {
    const clientSecret = secret('own-client-secret');
    const eventsSecret = secret('own-events-secret');
    const app = await create({ provider: 'github', name: 'Acme GitHub', clientId: 'acme.client~id_1', clientSecret, eventsSecret, scopes: ['repo', 'read:user'] });
    own = app;
    expect(app.id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(app).toEqual({
      id: app.id,
      provider: 'github',
      owner: 'organization',
      name: 'Acme GitHub',
      clientId: 'acme.client~id_1',
      scopes: ['repo', 'read:user'],
      default: false,
      redirectUri: `${PUBLIC_URL}/v1/integrations/oauth/callback`,
      eventsUrl: `${PUBLIC_URL}/v1/apps/${app.id}/events`,
      hasEventsSecret: true,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      updatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    const read = await call('GET', `/v1/apps/${app.id}`, bearer(member.token));
    expect(read.statusCode, read.body).toBe(200);
    expect(read.json().app).toEqual(app);
    const listed = await call('GET', '/v1/apps?provider=github', bearer(member.token));
    expect(listed.json().apps.map((a: { id: string }) => a.id)).toEqual(['github', 'github-readonly', app.id]);
    expect((await call('GET', '/v1/apps?provider=gitlab', bearer(member.token))).json().apps).toEqual([]);
    const [audit] = await queryRows<{ action: string; detail: unknown }>(t.database.db, sql`SELECT action, detail FROM audit_logs WHERE organization_id = ${owner.organizationId} AND target_id = ${app.id}`);
    expect(audit).toEqual({ action: 'app.created', detail: { provider: 'github', default: false } });
  });

  it('a provider without events has no events URL; a GitHub App takes its id, slug and key', async () => {
    const gitlab = await create({ provider: 'gitlab', clientId: 'gl-client', clientSecret: secret('gitlab-secret') });
    expect(gitlab).toMatchObject({ provider: 'gitlab', name: 'GitLab', eventsUrl: null, hasEventsSecret: false, scopes: null });
    const ghApp = await create({ provider: 'githubapp', clientId: 'Iv1.abc', clientSecret: secret('ghapp-secret'), appId: '12345', slug: 'acme-app', privateKey: PRIVATE_KEY });
    secrets.add(PRIVATE_KEY);
    expect(ghApp).toMatchObject({ provider: 'githubapp', owner: 'organization', eventsUrl: `${PUBLIC_URL}/v1/apps/${ghApp.id}/events`, hasEventsSecret: false });
    for (const id of [gitlab.id, ghApp.id]) expect((await call('DELETE', `/v1/apps/${id}`, bearer(owner.token))).statusCode).toBe(200);
  });

  it('refuses what the rules refuse, each with its code', async () => {
    const post = (payload: Record<string, unknown>) => call('POST', '/v1/apps', bearer(owner.token), payload);
    const base = { provider: 'github', clientId: 'ok-client', clientSecret: secret('refused') };
    const cases: [Record<string, unknown>, number, string][] = [
      [{ ...base, provider: 'slack' }, 400, 'PROVIDER_NOT_CONFIGURED'],
      [{ ...base, provider: 'nosuch' }, 400, 'PROVIDER_NOT_CONFIGURED'],
      [{ ...base, provider: 'stripe' }, 400, 'INVALID_INPUT'],
      [{ ...base, clientId: 'has space' }, 400, 'INVALID_INPUT'],
      [{ ...base, clientId: 'a/b' }, 400, 'INVALID_INPUT'],
      [{ ...base, clientId: 'x'.repeat(256) }, 400, 'INVALID_INPUT'],
      [{ provider: 'github', clientId: 'ok-client' }, 400, 'INVALID_INPUT'],
      [{ ...base, appId: '1' }, 400, 'INVALID_INPUT'],
      [{ ...base, slug: 'acme' }, 400, 'INVALID_INPUT'],
      [{ ...base, privateKey: PRIVATE_KEY }, 400, 'INVALID_INPUT'],
      [{ ...base, provider: 'gitlab', eventsSecret: 'x'.repeat(20) }, 400, 'INVALID_INPUT'],
      [{ ...base, provider: 'githubapp', slug: 'acme', privateKey: PRIVATE_KEY }, 400, 'INVALID_INPUT'],
      [{ ...base, provider: 'githubapp', appId: '1', privateKey: PRIVATE_KEY }, 400, 'INVALID_INPUT'],
      [{ ...base, provider: 'githubapp', appId: '1', slug: 'acme' }, 400, 'INVALID_INPUT'],
      [{ provider: 'githubapp', clientId: 'ok', appId: '1', slug: 'acme', privateKey: PRIVATE_KEY }, 400, 'INVALID_INPUT'],
      [{ ...base, provider: 'githubapp', appId: 'one', slug: 'acme', privateKey: PRIVATE_KEY }, 400, 'INVALID_INPUT'],
      [{ ...base, provider: 'githubapp', appId: '1', slug: 'Acme', privateKey: PRIVATE_KEY }, 400, 'INVALID_INPUT'],
      [{ ...base, provider: 'githubapp', appId: '1', slug: '-acme', privateKey: PRIVATE_KEY }, 400, 'INVALID_INPUT'],
      [{ ...base, provider: 'githubapp', appId: '1', slug: 'acme', privateKey: 'not a key' }, 400, 'INVALID_INPUT'],
      [{ ...base, provider: 'githubapp', appId: '1', slug: 'acme', privateKey: SMALL_KEY }, 400, 'INVALID_INPUT'],
      [{ ...base, provider: 'githubapp', appId: '1', slug: 'acme', privateKey: EC_KEY }, 400, 'INVALID_INPUT'],
      [{ ...base, unknown: true }, 400, 'INVALID_INPUT'],
    ];
    secrets.add(SMALL_KEY).add(EC_KEY);
    for (const [payload, status, code] of cases) {
      const res = await post(payload);
      expect([res.statusCode, res.json().code], `${JSON.stringify(payload).slice(0, 120)}: ${res.body}`).toEqual([status, code]);
    }
    // The same rules through GraphQL.
    const refused = await gql(owner.token, 'mutation ($input: CreateAppInput!) { createApp(input: $input) { id } }', { input: { provider: 'github', clientId: 'a/b', clientSecret: 'abcdefgh' } });
    expect(refused.body.errors[0].extensions.code).toBe('INVALID_INPUT');
    const noSecret = await gql(owner.token, 'mutation ($input: CreateAppInput!) { createApp(input: $input) { id } }', { input: { provider: 'github', clientId: 'ok' } });
    expect(noSecret.body.errors[0].extensions.code).toBe('INVALID_INPUT');
    const ghApp = await gql(owner.token, 'mutation ($input: CreateAppInput!) { createApp(input: $input) { id } }', { input: { provider: 'githubapp', clientId: 'ok', clientSecret: 'abcdefgh', appId: '1', slug: 'acme' } });
    expect(ghApp.body.errors[0].extensions.code).toBe('INVALID_INPUT');
    const notOffered = await gql(owner.token, 'mutation ($input: CreateAppInput!) { createApp(input: $input) { id } }', { input: { provider: 'slack', clientId: 'ok', clientSecret: 'abcdefgh' } });
    expect(notOffered.body.errors[0].extensions.code).toBe('PROVIDER_NOT_CONFIGURED');
    expect((await queryRows(t.database.db, sql`SELECT 1 FROM oauth_apps WHERE organization_id = ${owner.organizationId}`)).length).toBe(1);
  });

  it('lets owners, API tokens and service tokens write; members cannot; another organization sees 404', async () => {
    const payload = () => ({ provider: 'gitlab', clientId: 'role-client', clientSecret: secret('role') });
    expect((await call('POST', '/v1/apps', bearer(member.token), payload())).statusCode).toBe(403);
    expect((await call('PATCH', `/v1/apps/${own.id}`, bearer(member.token), { name: 'no' })).statusCode).toBe(403);
    expect((await call('DELETE', `/v1/apps/${own.id}`, bearer(member.token))).statusCode).toBe(403);
    const viaMember = await gql(member.token, 'mutation { updateApp(id: "github", input: { default: true }) { id } }');
    expect(viaMember.body.errors[0].extensions.code).toBe('FORBIDDEN');
    const byToken = await create(payload(), bearer(apiToken));
    const asService = { ...bearer(serviceToken), 'x-organization-id': owner.organizationId };
    const byService = await create(payload(), asService);
    expect((await call('GET', `/v1/apps/${byToken.id}`, asService)).statusCode).toBe(200);
    expect((await call('PATCH', `/v1/apps/${byService.id}`, asService, { name: 'Renamed by the product' })).json().app.name).toBe('Renamed by the product');
    // A service token without an organization acts in none.
    expect((await call('GET', '/v1/apps', bearer(serviceToken))).statusCode).toBe(400);
    // The console's cookie session writes with the CSRF token, never without.
    expect((await call('PATCH', `/v1/apps/${byToken.id}`, { cookie: browser(owner).cookie as string }, { name: 'x' })).statusCode).toBe(403);
    expect((await call('PATCH', `/v1/apps/${byToken.id}`, browser(owner), { name: 'From the console' })).statusCode).toBe(200);
    // Another organization: 404 for each, and its list holds none of them.
    for (const [method, body] of [['GET'], ['PATCH', { name: 'theirs' }], ['DELETE']] as const) {
      const res = await call(method, `/v1/apps/${own.id}`, bearer(other.token), body);
      expect([res.statusCode, res.json().code]).toEqual([404, 'NOT_FOUND']);
    }
    expect((await call('GET', '/v1/apps/01ARZ3NDEKTSV4RRFFQ69G5FAV', bearer(owner.token))).statusCode).toBe(404);
    expect((await call('GET', '/v1/apps', bearer(other.token))).json().apps.map((a: { id: string }) => a.id)).toEqual(['github', 'github-readonly']);
    const theirs = await gql(other.token, '{ apps { id owner } }');
    expect(theirs.body.data.apps).toEqual([{ id: 'github', owner: 'deployment' }, { id: 'github-readonly', owner: 'deployment' }]);
    // The service token through GraphQL.
    const viaService = await gql(asService, `mutation { deleteApp(id: "${byService.id}") }`);
    expect(viaService.body, viaService.raw).toEqual({ data: { deleteApp: true } });
    expect((await call('DELETE', `/v1/apps/${byToken.id}`, bearer(apiToken))).statusCode).toBe(200);
  });

  it('stops at LIMIT_APPS_PER_ORGANIZATION with 409 naming the limit', async () => {
    const made: string[] = [];
    // The organization holds one app (own): four more reach the limit of five.
    for (let index = 0; index < 4; index++) made.push((await create({ provider: 'gitlab', clientId: `limit-${index}`, clientSecret: secret('limit') })).id);
    const refused = await call('POST', '/v1/apps', bearer(owner.token), { provider: 'gitlab', clientId: 'limit-5', clientSecret: secret('limit') });
    expect([refused.statusCode, refused.json().code]).toEqual([409, 'CONFLICT']);
    expect(refused.json().error).toContain('LIMIT_APPS_PER_ORGANIZATION');
    // Another organization has a limit of its own.
    await create({ provider: 'gitlab', clientId: 'elsewhere', clientSecret: secret('limit') }, bearer(other.token));
    for (const id of made) expect((await call('DELETE', `/v1/apps/${id}`, bearer(owner.token))).statusCode).toBe(200);
  });

  it('keeps exactly one default per provider: setting one replaces the other; false clears it', async () => {
    const defaults = async () => ((await call('GET', '/v1/apps?provider=github', bearer(member.token))).json().apps as { id: string; default: boolean }[]).filter((a) => a.default).map((a) => a.id);
    expect(await defaults()).toEqual([]);
    expect((await call('PATCH', '/v1/apps/github-readonly', bearer(owner.token), { default: true })).json().app.default).toBe(true);
    expect(await defaults()).toEqual(['github-readonly']);
    expect((await call('PATCH', `/v1/apps/${own.id}`, bearer(owner.token), { default: true })).json().app.default).toBe(true);
    expect(await defaults()).toEqual([own.id]);
    // false on an app that is not the default changes nothing.
    await call('PATCH', '/v1/apps/github', bearer(owner.token), { default: false });
    expect(await defaults()).toEqual([own.id]);
    const cleared = await gql(owner.token, `mutation { updateApp(id: "${own.id}", input: { default: false }) { id default } }`);
    expect(cleared.body.data.updateApp).toEqual({ id: own.id, default: false });
    expect(await defaults()).toEqual([]);
    // A new app made the default replaces the chosen one too; the other organization's choice is its own.
    await call('PATCH', '/v1/apps/github', bearer(owner.token), { default: true });
    const second = await create({ provider: 'github', clientId: 'second', clientSecret: secret('second'), default: true });
    expect(await defaults()).toEqual([second.id]);
    expect(((await call('GET', '/v1/apps', bearer(other.token))).json().apps as { default: boolean }[]).some((a) => a.default)).toBe(false);
    // Deleting the default leaves the organization with none (the deployment app is used again).
    expect((await call('DELETE', `/v1/apps/${second.id}`, bearer(owner.token))).statusCode).toBe(200);
    expect(await defaults()).toEqual([]);
  });

  it("refuses to change or delete a deployment app (403), but lets it be chosen as the default", async () => {
    for (const body of [{ name: 'mine now' }, { clientSecret: 'x'.repeat(20) }, { scopes: ['repo'] }, { default: true, name: 'both' }]) {
      const res = await call('PATCH', '/v1/apps/github-readonly', bearer(owner.token), body);
      expect([res.statusCode, res.json().code], JSON.stringify(body)).toEqual([403, 'FORBIDDEN']);
    }
    expect((await call('DELETE', '/v1/apps/github', bearer(owner.token))).json().code).toBe('FORBIDDEN');
    const viaGraphql = await gql(owner.token, 'mutation { deleteApp(id: "github") }');
    expect(viaGraphql.body.errors[0].extensions.code).toBe('FORBIDDEN');
    // Another organization's deployment app is not there at all.
    expect((await call('PATCH', '/v1/apps/github-partner', bearer(owner.token), { default: true })).statusCode).toBe(404);
    expect((await call('PATCH', '/v1/apps/github', bearer(owner.token), { default: true })).json().app).toMatchObject({ id: 'github', default: true });
    await call('PATCH', '/v1/apps/github', bearer(owner.token), { default: false });
  });

  it('changes an own app: secrets re-sealed, updated_at moved on, the audit row naming the fields only', async () => {
    const before = (await call('GET', `/v1/apps/${own.id}`, bearer(owner.token))).json().app;
    const [sealedBefore] = await queryRows<{ envelope: string }>(t.database.db, sql`SELECT envelope FROM oauth_app_secrets WHERE app_id = ${own.id}`);
    const clientSecret = secret('rotated-client-secret');
    const res = await call('PATCH', `/v1/apps/${own.id}`, bearer(owner.token), { name: 'Acme GitHub (rotated)', clientSecret, scopes: ['repo'], eventsSecret: null });
    expect(res.statusCode, res.body).toBe(200);
    const after = res.json().app;
    expect(after).toMatchObject({ name: 'Acme GitHub (rotated)', scopes: ['repo'], hasEventsSecret: false, clientId: before.clientId, createdAt: before.createdAt });
    expect(after.updatedAt > before.updatedAt).toBe(true);
    const [sealedAfter] = await queryRows<{ envelope: string }>(t.database.db, sql`SELECT envelope FROM oauth_app_secrets WHERE app_id = ${own.id}`);
    expect(sealedAfter?.envelope).not.toBe(sealedBefore?.envelope);
    const [row] = await queryRows<Parameters<typeof t.app.services.apps.secrets>[0]>(t.database.db, sql`SELECT organization_id, app_id AS id, key_id, envelope FROM oauth_app_secrets WHERE app_id = ${own.id}`);
    expect(t.app.services.apps.secrets(row as Parameters<typeof t.app.services.apps.secrets>[0])).toEqual({ clientSecret });
    const [audit] = await queryRows<{ detail: unknown }>(t.database.db, sql`SELECT detail FROM audit_logs WHERE action = 'app.updated' AND target_id = ${own.id} ORDER BY id DESC LIMIT 1`);
    expect(audit?.detail).toEqual({ provider: 'github', changed: ['name', 'clientSecret', 'scopes', 'eventsSecret'] });
    // Neither the client id nor the provider changes; a private key is a GitHub App's only.
    for (const body of [{ clientId: 'other' }, { provider: 'gitlab' }]) expect((await call('PATCH', `/v1/apps/${own.id}`, bearer(owner.token), body)).statusCode).toBe(400);
    expect((await call('PATCH', `/v1/apps/${own.id}`, bearer(owner.token), { privateKey: PRIVATE_KEY })).json().code).toBe('INVALID_INPUT');
    // GraphQL changes it the same way, and answers the App type.
    const renamed = await gql(owner.token, `mutation { updateApp(id: "${own.id}", input: { name: "Acme GitHub", scopes: ["repo", "read:user"] }) { id name scopes owner clientId redirectUri eventsUrl hasEventsSecret default createdAt updatedAt provider } }`);
    expect(renamed.body.data.updateApp).toMatchObject({ id: own.id, name: 'Acme GitHub', scopes: ['repo', 'read:user'], owner: 'organization', provider: 'github' });
  });

  it("starts a flow through an own app: the authorize URL carries its client id and its scopes", async () => {
    const res = await call('POST', '/v1/integrations/oauth/start', bearer(owner.token), { provider: 'github', app: own.id, redirectUri: REDIRECT_URI });
    expect(res.statusCode, res.body).toBe(200);
    const url = new URL(res.json().authUrl);
    expect(url.searchParams.get('client_id')).toBe('acme.client~id_1');
    expect(url.searchParams.get('scope')).toBe('repo read:user');
    expect(url.searchParams.get('redirect_uri')).toBe(`${PUBLIC_URL}/v1/integrations/oauth/callback`);
    // Without `app`: the deployment app, until the organization chooses its own as the default.
    const plain = new URL((await call('POST', '/v1/integrations/oauth/start', bearer(owner.token), { provider: 'github', redirectUri: REDIRECT_URI })).json().authUrl);
    expect(plain.searchParams.get('client_id')).toBe(gh.clientId);
    await call('PATCH', `/v1/apps/${own.id}`, bearer(owner.token), { default: true });
    const chosen = new URL((await call('POST', '/v1/integrations/oauth/start', bearer(owner.token), { provider: 'github', redirectUri: REDIRECT_URI })).json().authUrl);
    expect(chosen.searchParams.get('client_id')).toBe('acme.client~id_1');
    await call('PATCH', `/v1/apps/${own.id}`, bearer(owner.token), { default: false });
  });

  it('refuses to delete an app while an OAuth state, a pending connect session or an integration uses it, saying which', async () => {
    // The unexpired states of the flows the test before started.
    const states = await call('DELETE', `/v1/apps/${own.id}`, bearer(owner.token));
    expect([states.statusCode, states.json().code]).toEqual([409, 'CONFLICT']);
    expect(states.json().error).toMatch(/unexpired OAuth state/);
    expect(states.json().details.map((d: { path: string }) => d.path)).toEqual(['oauthStates']);
    await t.database.db.execute(sql`UPDATE oauth_states SET expires_at = now() - interval '1 second' WHERE app_id = ${own.id}`);
    // A pending connect session through it.
    const session = await call('POST', '/v1/connect/sessions', bearer(apiToken), { redirectUri: REDIRECT_URI, allowedProviders: ['github'], app: own.id });
    expect(session.statusCode, session.body).toBe(201);
    const pending = await call('DELETE', `/v1/apps/${own.id}`, bearer(owner.token));
    expect([pending.statusCode, pending.json().error]).toEqual([409, 'The app is in use: 1 pending connect session']);
    expect((await call('DELETE', `/v1/connect/sessions/${session.json().session.id}`, bearer(apiToken))).statusCode).toBe(200);
    // An integration connected through it (an app registered with the fake's own client).
    secrets.add(gh.clientSecret);
    const connectable = await create({ provider: 'github', clientId: gh.clientId, clientSecret: gh.clientSecret, name: 'Connectable' });
    const started = await call('POST', '/v1/integrations/oauth/start', bearer(owner.token), { provider: 'github', app: connectable.id, redirectUri: REDIRECT_URI });
    const approved = gh.authorize(started.json().authUrl, 'octo');
    const tx = started.cookies.find((c) => c.name === 'oauth_tx')?.value ?? '';
    const callback = await api('POST', '/v1/integrations/oauth/callback', { cookie: `oauth_tx=${tx}` }, { provider: 'github', code: approved.code, state: approved.state });
    expect(callback.statusCode, callback.body).toBe(200);
    await t.database.db.execute(sql`UPDATE oauth_states SET expires_at = now() - interval '1 second' WHERE app_id = ${connectable.id}`);
    const used = await call('DELETE', `/v1/apps/${connectable.id}`, bearer(owner.token));
    expect([used.statusCode, used.json().error]).toEqual([409, 'The app is in use: 1 integration']);
    const viaGraphql = await gql(owner.token, `mutation { deleteApp(id: "${connectable.id}") }`);
    expect(viaGraphql.body.errors[0].extensions.code).toBe('CONFLICT');
    // Once nothing uses it, it goes, audited.
    expect((await call('DELETE', `/v1/apps/${own.id}`, bearer(owner.token))).statusCode).toBe(200);
    expect((await call('GET', `/v1/apps/${own.id}`, bearer(owner.token))).statusCode).toBe(404);
    const [deleted] = await queryRows<{ detail: unknown }>(t.database.db, sql`SELECT detail FROM audit_logs WHERE action = 'app.deleted' AND target_id = ${own.id}`);
    expect(deleted?.detail).toEqual({ provider: 'github' });
    expect((await queryRows(t.database.db, sql`SELECT 1 FROM oauth_app_secrets WHERE app_id = ${own.id}`)).length).toBe(0);
  });

  it('re-seals app secrets on key rotation, and the app still works', async () => {
    const connectable = ((await call('GET', '/v1/apps?provider=github', bearer(owner.token))).json().apps as { id: string; name: string }[]).find((a) => a.name === 'Connectable') as { id: string };
    const rotated = loadConfig({ env: { ENCRYPTION_KEYS: `${NEW_KEY},${TEST_ENCRYPTION_KEY}`, JWT_SECRET: 'j'.repeat(32) }, persistGeneratedSecrets: false }).keyring;
    const result = await rotateSecrets(t.database.db, rotated);
    expect(result.done).toBeGreaterThan(0);
    const keys = await queryRows<{ key_id: string }>(t.database.db, sql`SELECT DISTINCT key_id FROM oauth_app_secrets`);
    expect(keys).toEqual([{ key_id: 'k2' }]);
    // A change makes every instance open the envelope again: connecting through the app exchanges with the re-sealed secret.
    expect((await call('PATCH', `/v1/apps/${connectable.id}`, bearer(owner.token), { name: 'Connectable, after rotation' })).statusCode).toBe(200);
    const started = await call('POST', '/v1/integrations/oauth/start', bearer(owner.token), { provider: 'github', app: connectable.id, redirectUri: REDIRECT_URI });
    const approved = gh.authorize(started.json().authUrl, 'octo');
    const tx = started.cookies.find((c) => c.name === 'oauth_tx')?.value ?? '';
    const callback = await api('POST', '/v1/integrations/oauth/callback', { cookie: `oauth_tx=${tx}` }, { provider: 'github', code: approved.code, state: approved.state });
    expect(callback.statusCode, callback.body).toBe(200);
  });

  it("a product's backend manages its customer's apps through @tessera/client with its service token", async () => {
    // The package's own source: this checkout's client, whatever node_modules links.
    const { Tessera } = await import('../packages/client/src/index.js');
    const address = await t.fastify.listen({ host: '127.0.0.1', port: 0 });
    const tessera = new Tessera({ baseUrl: address, serviceToken, organizationId: owner.organizationId });
    const { app } = await tessera.apps.create({ provider: 'gitlab', clientId: 'client-made', clientSecret: secret('client-made'), scopes: ['read_user'] });
    answers.push(JSON.stringify(app));
    expect(app).toMatchObject({ provider: 'gitlab', owner: 'organization', scopes: ['read_user'], default: false });
    expect((await tessera.apps.list({ provider: 'gitlab' })).apps.map((listed: { id: string }) => listed.id)).toEqual([app.id]);
    expect((await tessera.apps.update(app.id, { default: true })).app.default).toBe(true);
    expect((await tessera.apps.get(app.id)).app).toMatchObject({ id: app.id, default: true });
    await expect(tessera.apps.delete('github')).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await tessera.apps.delete(app.id);
    await expect(tessera.apps.get(app.id)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('never shows a secret: answers, GraphQL, audit rows, log lines, stored columns', async () => {
    const listed = await gql(owner.token, '{ apps { id provider owner name clientId scopes default redirectUri eventsUrl hasEventsSecret createdAt updatedAt } }');
    expect(listed.body.errors).toBeUndefined();
    // The App type has no field that could hold one.
    const fields = await gql(owner.token, '{ __type(name: "App") { fields { name } } }');
    expect(fields.body.data.__type.fields.map((f: { name: string }) => f.name).sort()).toEqual(
      ['clientId', 'createdAt', 'default', 'eventsUrl', 'hasEventsSecret', 'id', 'name', 'owner', 'provider', 'redirectUri', 'scopes', 'updatedAt'].sort(),
    );
    expectNoSecret(answers.join('\n'), 'an answer');
    const audit = await queryRows<{ row: string }>(t.database.db, sql`SELECT a::text AS row FROM audit_logs a`);
    expectNoSecret(audit.map((r) => r.row).join('\n'), 'an audit row');
    expectNoSecret(t.logs.text, 'a log line');
    // What the database holds: the apps' secrets sealed, never in clear.
    expectNoSecret(await everyStoredValue(t.database), 'a stored column');
  });
});
