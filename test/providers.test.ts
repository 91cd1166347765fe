// Every provider end to end against its fake (written from the provider's documentation):
// connect → token → proxy → refresh (rotating or not) → rate limit (429, status unchanged) →
// missing scope (warning, not invalid) → revocation (invalid) → delete (revoked at the
// provider where it has an endpoint).
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeAtlassian } from './fakes/providers/atlassian.ts';
import { startFakeBitbucket } from './fakes/providers/bitbucket.ts';
import { startFakeDiscord } from './fakes/providers/discord.ts';
import { startFakeGitLab } from './fakes/providers/gitlab.ts';
import { startFakeGoogle } from './fakes/providers/google.ts';
import { startFakeLinear } from './fakes/providers/linear.ts';
import { startFakeMicrosoft } from './fakes/providers/microsoft.ts';
import { startFakeNotion } from './fakes/providers/notion.ts';
import { startFakeSalesforce } from './fakes/providers/salesforce.ts';
import { startFakeZoom } from './fakes/providers/zoom.ts';
import type { ScreenUser } from './fakes/toolkit.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { connect, refreshesAtProvider } from './helpers/providers.ts';

type Fake = FakeProvider<ScreenUser>;

interface ProviderCase {
  id: string;
  displayName: string;
  start(): Promise<Fake>;
  /** The deployment's settings pointing at the fake (endpoints the definition cannot derive). */
  env(fake: Fake): Record<string, string>;
  /** A call that only reads, through the proxy. */
  read: { method: 'GET' | 'POST'; path: string; body?: unknown };
  /** What a refresh does at this provider. */
  refresh: 'rotate' | 'keep' | 'none';
  /** Whether deleting revokes the grant at the provider. */
  revokes: boolean;
  /** Metadata the integration must carry after connecting. */
  metadata?(fake: Fake): Record<string, unknown>;
}

const base = (fake: Fake, extra: Record<string, string> = {}) => {
  const prefix = `INTEGRATION_OAUTH_${fake.id.toUpperCase()}`;
  const env: Record<string, string> = { [`${prefix}_CLIENT_ID`]: fake.clientId, [`${prefix}_CLIENT_SECRET`]: fake.clientSecret, [`${prefix}_AUTH_URL`]: fake.authUrl, [`${prefix}_TOKEN_URL`]: fake.tokenUrl };
  for (const [key, value] of Object.entries(extra)) env[`${prefix}_${key}`] = value;
  return env;
};

const CASES: ProviderCase[] = [
  { id: 'gitlab', displayName: 'GitLab', start: () => startFakeGitLab(), env: (f) => base(f, { API_URL: f.apiUrl, REVOKE_URL: `${f.url}/oauth/revoke` }), read: { method: 'GET', path: 'user' }, refresh: 'rotate', revokes: true },
  { id: 'bitbucket', displayName: 'Bitbucket', start: () => startFakeBitbucket(), env: (f) => base(f, { API_URL: f.apiUrl }), read: { method: 'GET', path: 'repositories' }, refresh: 'rotate', revokes: false },
  { id: 'discord', displayName: 'Discord', start: () => startFakeDiscord(), env: (f) => base(f, { API_URL: f.apiUrl, REVOKE_URL: `${f.url}/api/oauth2/token/revoke` }), read: { method: 'GET', path: 'users/@me/guilds' }, refresh: 'rotate', revokes: true },
  {
    id: 'google',
    displayName: 'Google',
    start: () => startFakeGoogle(),
    env: (f) => base(f, { API_URL: f.apiUrl, USERINFO_URL: `${f.url}/v1/userinfo`, REVOKE_URL: `${f.url}/revoke` }),
    read: { method: 'GET', path: 'drive/v3/about' },
    refresh: 'keep',
    revokes: true,
  },
  {
    id: 'microsoft',
    displayName: 'Microsoft',
    start: () => startFakeMicrosoft({ tenant: 'contoso' }),
    env: (f) => base(f, { API_URL: f.apiUrl, TENANT: 'contoso' }),
    read: { method: 'GET', path: 'me/messages' },
    refresh: 'rotate',
    revokes: false,
    metadata: () => ({ tenantId: '9188040d-6c67-4c5b-b112-36a304b66dad' }),
  },
  {
    id: 'atlassian',
    displayName: 'Atlassian',
    start: () => startFakeAtlassian(),
    env: (f) => base(f, { API_URL: f.apiUrl }),
    read: { method: 'GET', path: 'ex/jira/0b3c5f2e-1111-4c3d-9e8f-aaaabbbbcccc/rest/api/3/myself' },
    refresh: 'rotate',
    revokes: false,
    metadata: () => ({
      sites: [
        { id: '0b3c5f2e-1111-4c3d-9e8f-aaaabbbbcccc', name: 'Acme Corp', url: 'https://acme-corp.atlassian.net' },
        { id: '1324a887-45db-1bf4-1e99-ef0ff456d421', name: 'Zeta Works', url: 'https://zeta-works.atlassian.net' },
      ],
    }),
  },
  {
    id: 'linear',
    displayName: 'Linear',
    start: () => startFakeLinear(),
    env: (f) => base(f, { API_URL: f.apiUrl, REVOKE_URL: `${f.url}/oauth/revoke` }),
    read: { method: 'POST', path: 'graphql', body: { query: '{ viewer { id name } }' } },
    refresh: 'rotate',
    revokes: true,
    metadata: () => ({ organizationId: 'org-fake-0001', organizationName: 'Fake Org' }),
  },
  {
    id: 'notion',
    displayName: 'Notion',
    start: () => startFakeNotion(),
    env: (f) => base(f, { API_URL: f.apiUrl, REVOKE_URL: `${f.url}/v1/oauth/revoke` }),
    read: { method: 'GET', path: 'users/me' },
    refresh: 'rotate',
    revokes: true,
    metadata: () => ({ workspaceId: 'a1b2c3d4-fake-4000-8000-workspace0001', workspaceName: 'Fake Workspace', botId: expect.stringMatching(/^b0700000-/) }),
  },
  {
    id: 'zoom',
    displayName: 'Zoom',
    start: () => startFakeZoom(),
    // No API_URL: the API host comes from the token answer's api_url.
    env: (f) => base(f, { REVOKE_URL: `${f.url}/oauth/revoke` }),
    read: { method: 'GET', path: 'users/me/meetings' },
    refresh: 'rotate',
    revokes: true,
    metadata: (f) => ({ apiUrl: f.url, accountId: 'fakeAccount0001' }),
  },
  {
    id: 'salesforce',
    displayName: 'Salesforce',
    start: () => startFakeSalesforce(),
    // No API_URL or USERINFO_URL: both come from the token answer's instance_url.
    env: (f) => base(f, { REVOKE_URL: `${f.url}/services/oauth2/revoke` }),
    read: { method: 'GET', path: 'limits' },
    refresh: 'keep',
    revokes: true,
    metadata: (f) => ({ instanceUrl: f.url, organizationId: '00Dfake000000001' }),
  },
];

const fakes = new Map<string, Fake>();
let t: TestApp;
let owner: Account;

beforeAll(async () => {
  for (const providerCase of CASES) {
    const fake = await providerCase.start();
    fake.addUser({ login: `${providerCase.id}-ada`, email: `ada@${providerCase.id}.example`, name: 'Ada Lovelace' });
    fakes.set(providerCase.id, fake);
  }
  const env = Object.assign({ RATE_LIMIT_MAX: '0' }, ...CASES.map((providerCase) => providerCase.env(fakes.get(providerCase.id) as Fake)));
  t = await createTestApp({ background: false, env });
  owner = await registerAndLogin(t.fastify, 'catalog');
}, 60_000);

afterAll(async () => {
  await t?.close();
  await Promise.all([...fakes.values()].map((fake) => fake.close()));
});

async function status(provider: string): Promise<string> {
  const res = await t.fastify.inject({ url: `/v1/integrations/${provider}/status`, headers: bearer(owner.token) });
  return res.json().status.status;
}

function proxy(providerCase: ProviderCase) {
  const { method, path, body } = providerCase.read;
  return t.fastify.inject({ method, url: `/v1/integrations/${providerCase.id}/proxy/${path}`, headers: bearer(owner.token), ...(body !== undefined ? { payload: body as Record<string, unknown> } : {}) });
}

describe.each(CASES)('$displayName', (providerCase) => {
  const fake = () => fakes.get(providerCase.id) as Fake;
  const login = `${providerCase.id}-ada`;
  let integrationId = '';

  it('connects, names the integration after the account and keeps its metadata', async () => {
    const res = await connect(t.fastify, owner.token, fake(), login);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ message: `Successfully connected ${providerCase.displayName} integration`, integration: { provider: providerCase.id } });
    integrationId = res.json().integration.id;
    const listed = (await t.fastify.inject({ url: '/v1/integrations', headers: bearer(owner.token) })).json().integrations.find((item: { id: string }) => item.id === integrationId);
    expect(listed).toMatchObject({ status: 'connected', name: expect.stringMatching(new RegExp(`^${providerCase.displayName} Integration \\(.+\\)$`)) });
    if (providerCase.metadata) expect(listed.metadata).toMatchObject(providerCase.metadata(fake()));
  });

  it('hands out the provider’s current token, with the metadata', async () => {
    const res = await t.fastify.inject({ url: `/v1/integrations/${providerCase.id}/token`, headers: bearer(owner.token) });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().token.accessToken).toBe(fake().tokensOf(login)[0]?.accessToken);
    if (providerCase.metadata) expect(res.json().metadata).toMatchObject(providerCase.metadata(fake()));
  });

  it('proxies a call that reads, with the provider’s own headers', async () => {
    const res = await proxy(providerCase);
    expect(res.statusCode, res.body).toBe(200);
  });

  it(`refreshes (${providerCase.refresh === 'rotate' ? 'rotating the refresh token' : 'keeping the refresh token'}) and can refresh again with what it stored`, async () => {
    for (let round = 0; round < 2; round++) {
      // Out of the window in which a refresh shares the last one's result (decision 49).
      await t.database.db.execute(sql`UPDATE integrations SET last_refreshed_at = now() - interval '1 minute' WHERE id = ${integrationId}`);
      const before = { ...fake().stats };
      const res = await t.fastify.inject({ method: 'POST', url: `/v1/integrations/${providerCase.id}/refresh`, headers: bearer(owner.token) });
      expect(res.statusCode, res.body).toBe(200);
      expect(fake().stats.refreshes - before.refreshes).toBe(1);
      expect(fake().stats.reusedRefreshTokens).toBe(before.reusedRefreshTokens);
      const live = fake().tokensOf(login);
      expect(live).toHaveLength(1);
      expect(res.json().token.accessToken).toBe(live[0]?.accessToken);
    }
    expect(await status(providerCase.id)).toBe('connected');
  });

  it('answers a provider rate limit with 429 and Retry-After, leaving the status alone', async () => {
    fake().mode.api = 'rate-limited';
    try {
      const res = await proxy(providerCase);
      expect(res.statusCode, res.body).toBe(429);
      expect(res.json().code).toBe('PROVIDER_RATE_LIMITED');
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    } finally {
      fake().mode.api = 'ok';
    }
    expect(await status(providerCase.id)).toBe('connected');
    // The limit is remembered for every instance (docs/contract.md §5f) until its reset, which passes here.
    const [kept] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM provider_budgets WHERE provider = ${providerCase.id} AND blocked_until > now()`);
    expect(kept?.n).toBe(1);
    await t.database.db.execute(sql`DELETE FROM provider_budgets`);
  });

  it('takes a missing scope for a warning, never a revocation, and passes the provider’s answer through', async () => {
    fake().mode.api = 'missing-scope';
    try {
      const res = await proxy(providerCase);
      // The provider's own answer (400 Linear and Zoom, 401 Atlassian, 403 the others), not our 409.
      expect([400, 401, 403], res.body).toContain(res.statusCode);
      expect(res.json()).not.toMatchObject({ code: 'TOKEN_VALIDATION_FAILED' });
    } finally {
      fake().mode.api = 'ok';
    }
    expect(await status(providerCase.id)).toBe('warning');
  });

  it('detects a revocation: the call answers 409 and the integration turns invalid', async () => {
    fake().revokeUser(login);
    const res = await proxy(providerCase);
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json().code).toBe('TOKEN_VALIDATION_FAILED');
    expect(await status(providerCase.id)).toBe('invalid');
  });

  it(`reconnects keeping the id, and deletes${providerCase.revokes ? ', revoking the grant at the provider' : ''}`, async () => {
    const before = fake().stats.revocations;
    const res = await connect(t.fastify, owner.token, fake(), login);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().integration.id).toBe(integrationId);
    // A provider whose account id is per authorization (Notion's bot_id) reports every reconnect as a replaced account,
    // whose previous grant is revoked too (docs/contract.md §5d).
    const [connected] = await queryRows<{ replaced: boolean }>(t.database.db, sql`SELECT (data->>'accountChanged')::boolean AS replaced FROM events WHERE type = 'integration.connected' AND data->'integration'->>'id' = ${integrationId} ORDER BY id DESC LIMIT 1`);
    const replaced = connected?.replaced && providerCase.revokes ? 1 : 0;
    const requestsBefore = fake().requests.length;
    const deleted = await t.fastify.inject({ method: 'DELETE', url: `/v1/integrations/${integrationId}`, headers: bearer(owner.token) });
    expect(deleted.statusCode, deleted.body).toBe(200);
    if (providerCase.revokes) {
      await expect.poll(() => fake().stats.revocations - before, { timeout: 5000 }).toBe(1 + replaced);
      expect(fake().tokensOf(login)).toEqual([]);
    } else {
      // No revocation endpoint: the delete asks the provider nothing, and its tokens stay as they were.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(fake().requests.slice(requestsBefore)).toEqual([]);
      expect(fake().tokensOf(login)).not.toEqual([]);
    }
    const [row] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM integrations WHERE id = ${integrationId}`);
    expect(row?.n).toBe(0);
  });
});

// Revocation the other way (docs/contract.md §5b): the delete must end the grant, not one token. Where revoking
// the access token leaves the refresh token alive (Salesforce), only sending the refresh token does.
describe.each(CASES.filter((providerCase) => providerCase.revokes))('$displayName: deleting an integration', (providerCase) => {
  it('revokes the grant at the provider: its refresh token no longer refreshes, and no token of it lives on', async () => {
    const fake = fakes.get(providerCase.id) as Fake;
    const login = `${providerCase.id}-grace`;
    fake.addUser({ login, email: `grace@${providerCase.id}.example`, name: 'Grace Hopper' });
    const res = await connect(t.fastify, owner.token, fake, login);
    expect(res.statusCode, res.body).toBe(200);
    const [issued] = fake.tokensOf(login);
    const refreshToken = issued?.refreshToken ?? '';
    expect(refreshToken).not.toBe('');
    const before = fake.stats.revocations;
    const deleted = await t.fastify.inject({ method: 'DELETE', url: `/v1/integrations/${res.json().integration.id}`, headers: bearer(owner.token) });
    expect(deleted.statusCode, deleted.body).toBe(200);
    await expect.poll(() => fake.stats.revocations - before, { timeout: 5000 }).toBe(1);
    expect(await refreshesAtProvider(fake, refreshToken)).toBe(false);
    expect(fake.tokensOf(login)).toEqual([]);
  });
});

describe('provider quirks', () => {
  it('Salesforce: a token without an expiry is refreshed when Salesforce rejects it (INVALID_SESSION_ID), and the call retried', async () => {
    const sf = await startFakeSalesforce({ sessionSeconds: 1 });
    sf.addUser({ login: 'sf-grace', email: 'grace@salesforce.example', name: 'Grace Hopper' });
    const app = await createTestApp({ background: false, env: { RATE_LIMIT_MAX: '0', ...base(sf, { REVOKE_URL: `${sf.url}/services/oauth2/revoke` }) } });
    try {
      const account = await registerAndLogin(app.fastify, 'sf');
      const connected = await connect(app.fastify, account.token, sf, 'sf-grace');
      expect(connected.statusCode, connected.body).toBe(200);
      const token = await app.fastify.inject({ url: '/v1/integrations/salesforce/token', headers: bearer(account.token) });
      expect(token.json().token.expiresAt).toBeNull();
      await new Promise((resolve) => setTimeout(resolve, 1200));
      const refreshes = sf.stats.refreshes;
      const res = await app.fastify.inject({ url: '/v1/integrations/salesforce/proxy/limits', headers: bearer(account.token) });
      expect(res.statusCode, res.body).toBe(200);
      expect(sf.stats.refreshes - refreshes).toBe(1);
      const status = await app.fastify.inject({ url: '/v1/integrations/salesforce/status', headers: bearer(account.token) });
      expect(status.json().status.status).toBe('connected');
    } finally {
      await app.close();
      await sf.close();
    }
  });

  it('Notion: older tokens without a refresh token work, and a refresh re-validates them', async () => {
    const legacy = await startFakeNotion({ refresh: 'none' });
    legacy.addUser({ login: 'nt-old', email: 'old@notion.example', name: 'Old Timer' });
    const app = await createTestApp({ background: false, env: { RATE_LIMIT_MAX: '0', ...base(legacy, { API_URL: legacy.apiUrl, REVOKE_URL: `${legacy.url}/v1/oauth/revoke` }) } });
    try {
      const account = await registerAndLogin(app.fastify, 'nt');
      const connected = await connect(app.fastify, account.token, legacy, 'nt-old');
      expect(connected.statusCode, connected.body).toBe(200);
      const refreshed = await app.fastify.inject({ method: 'POST', url: '/v1/integrations/notion/refresh', headers: bearer(account.token) });
      expect(refreshed.statusCode, refreshed.body).toBe(200);
      expect(legacy.stats.refreshes).toBe(0);
      expect(refreshed.json().token).toMatchObject({ accessToken: legacy.tokensOf('nt-old')[0]?.accessToken, expiresAt: null });
    } finally {
      await app.close();
      await legacy.close();
    }
  });

  it('Linear: members may send GraphQL queries through the proxy, never mutations', async () => {
    const linearFake = fakes.get('linear') as Fake;
    expect((await connect(t.fastify, owner.token, linearFake, 'linear-ada')).statusCode).toBe(200);
    const member = await registerAndLogin(t.fastify, 'linear-member');
    await t.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${owner.organizationId}, ${member.userId}, 'member')`);
    const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(member.token), payload: { organizationId: owner.organizationId } });
    const memberToken = switched.json().accessToken as string;
    const call = (query: string) => t.fastify.inject({ method: 'POST', url: '/v1/integrations/linear/proxy/graphql', headers: bearer(memberToken), payload: { query } });
    expect((await call('query Me { viewer { id } }')).statusCode).toBe(200);
    expect((await call('mutation { issueCreate(input: {title: "x"}) { success } }')).statusCode).toBe(403);
    expect((await call('{ viewer { id } } mutation M { issueDelete(id: "x") { success } }')).statusCode).toBe(403);
    expect((await call('not graphql at all')).statusCode).toBe(403);
  });
});
