// GitHub App installations (docs/contract.md §5c `app_installation`), HTTP in and out against a
// fake GitHub App written from GitHub's documentation: the install through the callback and
// through a connect session, the `/user/installations` proof, the app JWT, the installation-token
// mint, and the uninstall on delete.
import { generateKeyPairSync } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigError } from '../src/config/load.ts';
import { queryRows } from '../src/db/client.ts';
import { buildProviderRegistry } from '../src/integrations/providers/registry.ts';
import { ProviderError } from '../src/integrations/providers/types.ts';
import { judged } from '../src/integrations/tokens/policy.ts';
import { type FakeGitHubApp, startFakeGitHubApp } from './fakes/githubapp.ts';
import { createTestApp, type TestApp, testConfig } from './helpers/app.ts';
import { startThroughPage } from './helpers/connect-page.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { REDIRECT_URI, startFlow } from './helpers/providers.ts';

const CALLBACK = 'http://127.0.0.1:8080/v1/integrations/oauth/callback';
const PRODUCT = 'http://127.0.0.1:4455';

let t: TestApp;
let fake: FakeGitHubApp;
let owner: Account;

beforeAll(async () => {
  fake = await startFakeGitHubApp({ callbackUrl: CALLBACK });
  for (const login of ['octo', 'mallory', 'enduser', 'leaver']) fake.addUser(login);
  t = await createTestApp({ env: { ...fake.env(), OAUTH_REDIRECT_ORIGINS: `http://127.0.0.1:8080,${PRODUCT}`, RATE_LIMIT_MAX: '0' } });
  owner = await registerAndLogin(t.fastify, 'appowner');
});

afterAll(async () => {
  await t?.close();
  await fake?.close();
});

/** The browser's return from GitHub, as GET callback, with the flow's cookie. */
function followBack(location: string, tx: string) {
  const back = new URL(location);
  return t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}` } });
}

async function integrationRows(organizationId: string) {
  return queryRows<{ id: string; metadata: Record<string, unknown>; provider_account_id: string }>(
    t.database.db,
    sql`SELECT id, metadata, provider_account_id FROM integrations WHERE organization_id = ${organizationId} AND provider = 'githubapp'`,
  );
}

/** Every part of the private key long enough to identify it (its base64 body, line by line). */
const keyLines = () => fake.privateKeyPem.split('\n').filter((line) => line.length > 20 && !line.startsWith('-----'));

describe('install through the callback', () => {
  it('starts at the install page with the state, and connects the installation the user can see', async () => {
    const started = await startFlow(t.fastify, owner.token, 'githubapp');
    const url = new URL(started.authUrl);
    expect(`${url.origin}${url.pathname}`).toBe(fake.installUrl);
    // The install page takes the state only: no client id, scope or PKCE challenge.
    expect([...url.searchParams.keys()]).toEqual(['state']);
    expect(url.searchParams.get('state')).toBe(started.state);

    const installed = fake.install(started.authUrl, 'octo', { account: 'octo-org', type: 'Organization', repositorySelection: 'all' });
    const res = await followBack(installed.location, started.txCookie);
    expect(res.statusCode, res.body).toBe(302);
    const redirect = new URL(res.headers.location as string);
    expect(`${redirect.origin}${redirect.pathname}`).toBe(REDIRECT_URI);
    expect(redirect.searchParams.get('status')).toBe('connected');
    expect(redirect.searchParams.get('provider')).toBe('githubapp');
    const integrationId = redirect.searchParams.get('integration');

    const list = await t.fastify.inject({ url: '/v1/integrations', headers: bearer(owner.token) });
    const item = list.json().integrations.find((entry: { id: string }) => entry.id === integrationId);
    expect(item).toMatchObject({ provider: 'githubapp', name: 'GitHub App Integration (octo-org)', status: 'connected' });
    const [row] = await integrationRows(owner.organizationId);
    expect(row?.metadata).toEqual({
      installationId: installed.installation.id,
      account: { login: 'octo-org', id: installed.installation.account.id, type: 'Organization' },
      repositorySelection: 'all',
    });
    expect(row?.provider_account_id).toBe(String(installed.installation.account.id));

    // The token read hands out an installation token GitHub minted, with its expiry.
    const token = await t.fastify.inject({ url: '/v1/integrations/githubapp/token', headers: bearer(owner.token) });
    expect(token.statusCode, token.body).toBe(200);
    expect(token.json().token.accessToken).toMatch(/^ghs_/);
    expect(Date.parse(token.json().token.expiresAt) - Date.now()).toBeGreaterThan(55 * 60_000);
    expect(token.json().token.scopes).toEqual(['contents:read', 'issues:write', 'metadata:read']);
    // …which GitHub accepts for the installation's calls, through the proxy.
    const proxied = await t.fastify.inject({ url: '/v1/integrations/githubapp/proxy/installation/repositories', headers: bearer(owner.token) });
    expect(proxied.statusCode, proxied.body).toBe(200);
    expect(proxied.json().repositories[0].full_name).toBe('octo-org/hello-world');
  });

  it('signs the app JWT as GitHub requires: RS256 under the app key, iss the client id, iat 60 s back, exp 10 minutes on', () => {
    expect(fake.jwtChecks.length).toBeGreaterThan(0);
    for (const check of fake.jwtChecks) {
      expect(check, check.reason).toMatchObject({ ok: true, header: { alg: 'RS256', typ: 'JWT' } });
      const claims = check.claims as { iss: string; iat: number; exp: number };
      expect(claims.iss).toBe(fake.clientId);
      const now = Math.floor(Date.now() / 1000);
      expect(now - claims.iat).toBeGreaterThanOrEqual(59);
      expect(now - claims.iat).toBeLessThan(120);
      expect(claims.exp - claims.iat).toBe(660);
    }
  });

  it('refuses an installation id the user’s token does not list, and stores nothing', async () => {
    const victim = await registerAndLogin(t.fastify, 'victimorg');
    // A real installation of someone else's account: the attacker names its id in their own callback.
    const other = fake.install((await startFlow(t.fastify, victim.token, 'githubapp')).authUrl, 'leaver', { account: 'victim-org', type: 'Organization' });
    const mallory = await registerAndLogin(t.fastify, 'mallory');
    const started = await startFlow(t.fastify, mallory.token, 'githubapp');
    const own = fake.install(started.authUrl, 'mallory');
    const forged = new URL(own.location);
    forged.searchParams.set('installation_id', String(other.installation.id));
    const mintsBefore = fake.stats.mints;
    const res = await followBack(forged.href, started.txCookie);
    expect(res.statusCode, res.body).toBe(302);
    const redirect = new URL(res.headers.location as string);
    expect(redirect.searchParams.get('status')).toBe('error');
    expect(redirect.searchParams.get('error')).toBe('OAUTH_EXCHANGE_FAILED');
    expect(await integrationRows(mallory.organizationId)).toEqual([]);
    // Refused before any token of that installation was minted.
    expect(fake.stats.mints).toBe(mintsBefore);

    // The same through the POST callback a client relays.
    const again = await startFlow(t.fastify, mallory.token, 'githubapp');
    const code = new URL(fake.install(again.authUrl, 'mallory').location).searchParams.get('code');
    const posted = await t.fastify.inject({
      method: 'POST',
      url: '/v1/integrations/oauth/callback',
      headers: { cookie: `oauth_tx=${again.txCookie}` },
      payload: { provider: 'githubapp', code, state: again.state, installationId: String(other.installation.id) },
    });
    expect(posted.statusCode, posted.body).toBe(400);
    expect(posted.json().code).toBe('OAUTH_EXCHANGE_FAILED');
    expect(await integrationRows(mallory.organizationId)).toEqual([]);
  });

  it('says when an owner has yet to approve the installation (setup_action=request), storing nothing', async () => {
    const person = await registerAndLogin(t.fastify, 'requester');
    const started = await startFlow(t.fastify, person.token, 'githubapp');
    const back = new URL(CALLBACK);
    back.searchParams.set('setup_action', 'request');
    back.searchParams.set('state', started.state);
    const res = await followBack(back.href, started.txCookie);
    expect(new URL(res.headers.location as string).searchParams.get('error')).toBe('OAUTH_EXCHANGE_FAILED');
    expect(await integrationRows(person.organizationId)).toEqual([]);
  });

  it('uninstalls the app when the integration is deleted', async () => {
    const person = await registerAndLogin(t.fastify, 'deleter');
    const started = await startFlow(t.fastify, person.token, 'githubapp');
    const installed = fake.install(started.authUrl, 'leaver', { account: 'leaving-org', type: 'Organization' });
    const done = new URL((await followBack(installed.location, started.txCookie)).headers.location as string);
    const id = done.searchParams.get('integration');
    const deleted = await t.fastify.inject({ method: 'DELETE', url: `/v1/integrations/${id}`, headers: bearer(person.token) });
    expect(deleted.statusCode, deleted.body).toBe(200);
    await vi.waitFor(() => expect(fake.uninstalled).toContain(installed.installation.id), { timeout: 5000 });
    expect(fake.installations.get(installed.installation.id)?.deleted).toBe(true);
    expect(fake.jwtChecks.at(-1)).toMatchObject({ ok: true, path: `/app/installations/${installed.installation.id}` });
  });
});

describe('install through a connect session', () => {
  it('connects the end user’s installation from the hosted page and lands on the product with the session', async () => {
    const apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
    const minted = await t.fastify.inject({
      method: 'POST',
      url: '/v1/connect/sessions',
      headers: bearer(apiToken),
      payload: { redirectUri: `${PRODUCT}/done`, allowedProviders: ['githubapp'], endUser: { id: 'customer-7' } },
    });
    expect(minted.statusCode, minted.body).toBe(201);
    const session = minted.json().session;
    const { tx, authUrl } = await startThroughPage(t.fastify, session.url, 'githubapp');
    expect(authUrl.startsWith(`${fake.installUrl}?state=`)).toBe(true);
    const installed = fake.install(authUrl, 'enduser', { repositorySelection: 'selected' });
    const res = await followBack(installed.location, tx);
    expect(res.statusCode, res.body).toBe(302);
    const redirect = new URL(res.headers.location as string);
    expect(`${redirect.origin}${redirect.pathname}`).toBe(`${PRODUCT}/done`);
    expect(Object.fromEntries(redirect.searchParams)).toMatchObject({ status: 'connected', provider: 'githubapp', session: session.id });

    const token = await t.fastify.inject({ url: '/v1/integrations/githubapp/token?endUser=customer-7', headers: bearer(apiToken) });
    expect(token.statusCode, token.body).toBe(200);
    expect(token.json().token.accessToken).toMatch(/^ghs_/);
    const status = await t.fastify.inject({ url: `/v1/connect/sessions/${session.id}`, headers: bearer(apiToken) });
    expect(status.json().session).toMatchObject({ status: 'completed', integrationId: redirect.searchParams.get('integration') });
  });
});

describe('the installation-token mint', () => {
  it('mints a token with its expiry; a suspended or deleted installation is judged invalid', async () => {
    const registry = buildProviderRegistry(testConfig(fake.env()));
    const provider = registry.get('githubapp');
    const mint = provider?.definition.mint;
    if (!provider || !mint) throw new Error('githubapp has no mint');
    const person = fake.addUser('minter');
    const installed = fake.install(`${fake.installUrl}?state=x`, person.login);
    const metadata = { installationId: installed.installation.id };

    const minted = await mint(provider.contextFor(metadata), { credentials: {}, metadata });
    expect(minted.accessToken).toMatch(/^ghs_/);
    expect((minted.expiresAt?.getTime() ?? 0) - Date.now()).toBeGreaterThan(59 * 60_000);
    expect((minted.expiresAt?.getTime() ?? 0) - Date.now()).toBeLessThanOrEqual(3600_000);

    fake.suspend(installed.installation.id);
    const suspended = await mint(provider.contextFor(metadata), { credentials: {}, metadata }).catch((error: unknown) => error);
    expect(suspended).toBeInstanceOf(ProviderError);
    expect(suspended).toMatchObject({ kind: 'revoked', status: 403, providerCode: 'installation_suspended' });
    for (const point of ['refresh', 'validate', 'call'] as const) expect(judged(suspended, point).verdict.transition?.status).toBe('invalid');

    fake.remove(installed.installation.id);
    const gone = await mint(provider.contextFor(metadata), { credentials: {}, metadata }).catch((error: unknown) => error);
    expect(gone).toMatchObject({ kind: 'revoked', status: 404, providerCode: 'installation_not_found' });
    expect(judged(gone, 'refresh').verdict.transition?.status).toBe('invalid');
  });

  it('a JWT GitHub refuses (another app’s key) is this deployment’s configuration fault, never a revocation', async () => {
    const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const registry = buildProviderRegistry(testConfig({ ...fake.env(), INTEGRATION_OAUTH_GITHUBAPP_PRIVATE_KEY: stranger }));
    const provider = registry.get('githubapp');
    const installed = fake.install(`${fake.installUrl}?state=y`, fake.addUser('strangerkey').login);
    const metadata = { installationId: installed.installation.id };
    const failure = await provider?.definition.mint?.(provider.contextFor(metadata), { credentials: {}, metadata }).catch((error: unknown) => error);
    expect(fake.jwtChecks.at(-1)).toMatchObject({ ok: false, reason: 'A JSON web token could not be decoded' });
    expect(failure).toMatchObject({ kind: 'misconfigured', status: 401 });
    expect(judged(failure, 'refresh').verdict.transition?.status).toBe('warning');
  });
});

describe('the private key', () => {
  it('is never printed: a malformed key, or one of the wrong kind, stops the start naming only the setting', () => {
    const broken = fake.privateKeyPem.replace(/\n[A-Za-z0-9+/]{10}/, '\n!!!!!!!!!!');
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    for (const value of [broken, ec, fake.privateKeyPem.slice(0, 200)]) {
      let error: unknown;
      try {
        testConfig({ ...fake.env(), INTEGRATION_OAUTH_GITHUBAPP_PRIVATE_KEY: value });
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(ConfigError);
      const text = `${(error as Error).message}\n${String((error as Error).stack)}`;
      expect(text).toContain('INTEGRATION_OAUTH_GITHUBAPP_PRIVATE_KEY');
      for (const line of [...keyLines(), ...value.split('\n').filter((l) => l.length > 20 && !l.startsWith('-----'))]) expect(text).not.toContain(line.slice(0, 20));
    }
  });

  it('is required, with the slug, once a GitHub App has its client: the start names what to set', () => {
    const { INTEGRATION_OAUTH_GITHUBAPP_PRIVATE_KEY: _key, INTEGRATION_OAUTH_GITHUBAPP_SLUG: _slug, INTEGRATION_OAUTH_GITHUBAPP_INSTALL_URL: _url, ...rest } = fake.env();
    expect(() => buildProviderRegistry(testConfig(rest))).toThrow(/INTEGRATION_OAUTH_GITHUBAPP_PRIVATE_KEY[\s\S]*INTEGRATION_OAUTH_GITHUBAPP_SLUG/);
  });

  it('accepts the key with \\n escapes (as an environment often carries it), and never shows up in a log line or an answer', async () => {
    const escaped = fake.privateKeyPem.trim().replaceAll('\n', '\\n');
    expect(buildProviderRegistry(testConfig({ ...fake.env(), INTEGRATION_OAUTH_GITHUBAPP_PRIVATE_KEY: escaped })).get('githubapp')).toBeDefined();
    const providers = await t.fastify.inject({ url: '/v1/providers', headers: bearer(owner.token) });
    expect(providers.json().providers.map((p: { id: string }) => p.id)).toContain('githubapp');
    for (const line of keyLines()) {
      expect(t.logs.text).not.toContain(line.slice(0, 20));
      expect(providers.body).not.toContain(line.slice(0, 20));
    }
    // Nor the user tokens of the proofs, nor the installation tokens minted.
    expect(t.logs.text).not.toMatch(/gh[sur]_[A-Za-z0-9]{20}/);
  });

  it('a key GitHub does not know fails the connect as this deployment’s fault, naming the key setting, and stores nothing', async () => {
    const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
    const wrong = await createTestApp({ env: { ...fake.env(), INTEGRATION_OAUTH_GITHUBAPP_PRIVATE_KEY: stranger }, background: false });
    try {
      const person = await registerAndLogin(wrong.fastify, 'wrongkey');
      const started = await startFlow(wrong.fastify, person.token, 'githubapp');
      const code = new URL(fake.install(started.authUrl, fake.addUser('wrongkeyuser').login).location).searchParams;
      const res = await wrong.fastify.inject({
        method: 'POST',
        url: '/v1/integrations/oauth/callback',
        headers: { cookie: `oauth_tx=${started.txCookie}` },
        payload: { provider: 'githubapp', code: code.get('code'), state: started.state, installationId: code.get('installation_id') },
      });
      expect(res.statusCode, res.body).toBe(502);
      expect(res.json().code).toBe('PROVIDER_MISCONFIGURED');
      const [row] = await queryRows<{ n: number }>(wrong.database.db, sql`SELECT count(*)::int AS n FROM integrations`);
      expect(row?.n).toBe(0);
      expect(wrong.logs.text).toContain('INTEGRATION_OAUTH_GITHUBAPP_PRIVATE_KEY');
      for (const line of stranger.split('\n').filter((l) => l.length > 20 && !l.startsWith('-----'))) expect(wrong.logs.text).not.toContain(line.slice(0, 20));
    } finally {
      await wrong.close();
    }
  });
});
