// A GitHub App integration through the token lifecycle (docs/contract.md §5c `app_installation`),
// HTTP in and out against the fake GitHub App: installation tokens minted once for concurrent
// readers (one process, and two on one PostgreSQL), cached until 5 minutes before `expires_at`,
// an installation suspended or deleted at GitHub → `invalid` on a token read, the proxy and a
// status check; delete → uninstall; and the secrets scan (the app's private key, minted tokens).
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type FakeGitHubApp, startFakeGitHubApp } from './fakes/githubapp.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { createPgDatabase, dropPgDatabase, TEST_DATABASE_URL } from './helpers/database.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { spawnService, waitFor } from './helpers/process.ts';
import { startFlow } from './helpers/providers.ts';
import { everyStoredValue } from './helpers/stored-values.ts';

const CALLBACK = 'http://127.0.0.1:8080/v1/integrations/oauth/callback';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let t: TestApp;
let fake: FakeGitHubApp;
/** Every JSON answer but the token read's, for the secrets scan. */
const answers: string[] = [];
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  fake = await startFakeGitHubApp({ callbackUrl: CALLBACK });
  t = await createTestApp({ background: false, env: { ...fake.env(), RATE_LIMIT_MAX: '0', OAUTH_STATUS_MAX_AGE: '1' } });
});

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await t?.close();
  await fake?.close();
});

/** The organizations, one per installation, by name. */
const owners = new Map<string, Account>();

async function call(name: string, url: string, method: 'GET' | 'DELETE' = 'GET') {
  const owner = owners.get(name);
  if (!owner) throw new Error(`no organization ${name}`);
  const res = await t.fastify.inject({ method, url, headers: bearer(owner.token) });
  if (!/\/token(\?|$)/.test(url)) answers.push(res.body);
  return res;
}

/** A new organization `endUser` installs the app on a new GitHub account of that name; the installation id. */
async function installFor(endUser: string, options: { ttlSeconds?: number } = {}): Promise<number> {
  const login = `${endUser}-admin`;
  fake.addUser(login);
  const owner = await registerAndLogin(t.fastify, endUser);
  owners.set(endUser, owner);
  const started = await startFlow(t.fastify, owner.token, 'githubapp');
  const installed = fake.install(started.authUrl, login, { account: `${endUser}-org`, type: 'Organization' });
  fake.control.tokenTtlSeconds = options.ttlSeconds ?? 3600;
  try {
    const back = new URL(installed.location);
    const res = await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${started.txCookie}` } });
    answers.push(res.body);
    expect(new URL(res.headers.location as string).searchParams.get('status'), res.headers.location as string).toBe('connected');
  } finally {
    fake.control.tokenTtlSeconds = 3600;
  }
  return installed.installation.id;
}

describe('installation tokens through the lifecycle', () => {
  it('are served from the cache until 5 minutes before expires_at, then minted again', async () => {
    const id = await installFor('cache', { ttlSeconds: 3600 });
    expect(fake.mintedFor(id)).toHaveLength(1);
    const cached = await call('cache', '/v1/integrations/githubapp/token');
    expect(cached.statusCode, cached.body).toBe(200);
    expect(cached.json().token.accessToken).toBe(fake.mintedFor(id)[0]);
    expect(fake.mintedFor(id)).toHaveLength(1);
    // An hour later, as the stored row sees it: 299 s of life left, inside the 5-minute margin
    // (moved in the database rather than waited for, so a loaded machine cannot mint early).
    await t.database.db.execute(sql`UPDATE integrations SET token_expires_at = now() + interval '299 seconds' WHERE organization_id = ${owners.get('cache')?.organizationId} AND provider = 'githubapp'`);
    const renewed = await call('cache', '/v1/integrations/githubapp/token');
    expect(renewed.statusCode, renewed.body).toBe(200);
    expect(fake.mintedFor(id)).toHaveLength(2);
    expect(renewed.json().token.accessToken).toBe(fake.mintedFor(id)[1]);
    expect(Date.parse(renewed.json().token.expiresAt)).toBeGreaterThan(Date.now() + 3500_000);
    expect((await call('cache', '/v1/integrations/githubapp/token')).json().token.accessToken).toBe(fake.mintedFor(id)[1]);
    expect(fake.mintedFor(id)).toHaveLength(2);
  });

  it('are minted once for 20 concurrent readers of a token that is due', async () => {
    const id = await installFor('crowd', { ttlSeconds: 301 });
    await sleep(1500);
    fake.control.mintDelayMs = 200;
    try {
      const reads = await Promise.all(Array.from({ length: 20 }, () => call('crowd', '/v1/integrations/githubapp/token')));
      expect(reads.map((r) => r.statusCode)).toEqual(Array(20).fill(200));
      expect(fake.mintedFor(id)).toHaveLength(2);
      expect(new Set(reads.map((r) => r.json().token.accessToken))).toEqual(new Set([fake.mintedFor(id)[1]]));
    } finally {
      fake.control.mintDelayMs = 0;
    }
  });

  it('a status check validates by minting: connected while GitHub mints, invalid once the installation is suspended', async () => {
    const fine = await installFor('checked');
    await sleep(1100);
    const connected = await call('checked', '/v1/integrations/githubapp/status');
    expect(connected.statusCode, connected.body).toBe(200);
    expect(connected.json().status).toMatchObject({ status: 'connected', connected: true, tokenValid: true });
    expect(fake.mintedFor(fine)).toHaveLength(2);

    const id = await installFor('suspended');
    fake.suspend(id);
    await sleep(1100);
    const suspended = await call('suspended', '/v1/integrations/githubapp/status');
    expect(suspended.json().status).toMatchObject({ status: 'invalid', connected: false, actions: ['reconnect'] });
    expect((await call('suspended', '/v1/integrations/githubapp/token')).statusCode).toBe(409);
  });

  it('a status check of a deleted installation: invalid', async () => {
    const id = await installFor('removed');
    fake.remove(id);
    await sleep(1100);
    const status = await call('removed', '/v1/integrations/githubapp/status');
    expect(status.json().status).toMatchObject({ status: 'invalid', connected: false });
  });

  it('a token read that must mint, for a suspended or deleted installation: 409, and the integration is invalid', async () => {
    for (const [endUser, cut] of [
      ['readsuspended', (id: number) => fake.suspend(id)],
      ['readdeleted', (id: number) => fake.remove(id)],
    ] as const) {
      const id = await installFor(endUser, { ttlSeconds: 301 });
      cut(id);
      await sleep(1100);
      const read = await call(endUser, `/v1/integrations/githubapp/token`);
      expect(read.statusCode, read.body).toBe(409);
      expect(read.json().code).toBe('TOKEN_VALIDATION_FAILED');
      const status = await call(endUser, `/v1/integrations/githubapp/status`);
      expect(status.json().status, endUser).toMatchObject({ status: 'invalid', connected: false });
    }
  });

  it('the proxy with a cached token of a suspended or deleted installation: mints once more, is refused, and the integration is invalid', async () => {
    for (const [endUser, cut] of [
      ['proxysuspended', (id: number) => fake.suspend(id)],
      ['proxydeleted', (id: number) => fake.remove(id)],
    ] as const) {
      const id = await installFor(endUser);
      expect((await call(endUser, `/v1/integrations/githubapp/proxy/installation/repositories`)).statusCode).toBe(200);
      cut(id);
      const mints = () => fake.requests.filter((r) => r.method === 'POST' && r.path === `/api/app/installations/${id}/access_tokens`).length;
      const mintsBefore = mints();
      const res = await call(endUser, `/v1/integrations/githubapp/proxy/installation/repositories`);
      expect(res.statusCode, res.body).toBe(409);
      expect(res.json().code).toBe('TOKEN_VALIDATION_FAILED');
      // The refusal is believed only once a fresh mint is refused too.
      expect(mints() - mintsBefore, endUser).toBe(1);
      const list = await call(endUser, `/v1/integrations?provider=githubapp`);
      expect(list.json().integrations[0], endUser).toMatchObject({ status: 'invalid' });
    }
  });

  it('delete uninstalls the app at GitHub and records it', async () => {
    const id = await installFor('leaving');
    const list = await call('leaving', '/v1/integrations?provider=githubapp');
    const integrationId = list.json().integrations[0].id as string;
    const deleted = await call('leaving', `/v1/integrations/${integrationId}`, 'DELETE');
    expect(deleted.statusCode, deleted.body).toBe(200);
    await vi.waitFor(() => expect(fake.uninstalled).toContain(id), { timeout: 5000 });
    expect((await call('leaving', '/v1/integrations?provider=githubapp')).json().integrations).toEqual([]);
  });

  it('the secrets scan finds neither the app’s private key nor a minted installation token in a log line, a JSON answer or a stored column', async () => {
    const keyLines = fake.privateKeyPem.split('\n').filter((line) => line.length > 20 && !line.startsWith('-----'));
    expect(fake.minted.length).toBeGreaterThan(5);
    const stored = await everyStoredValue(t.database);
    const logs = t.logs.text;
    for (const line of keyLines) {
      const piece = line.slice(0, 24);
      expect(logs).not.toContain(piece);
      expect(stored).not.toContain(piece);
      for (const answer of answers) expect(answer).not.toContain(piece);
    }
    for (const { token } of fake.minted) {
      expect(logs).not.toContain(token);
      expect(stored).not.toContain(token);
      for (const answer of answers) expect(answer).not.toContain(token);
    }
    expect(logs).not.toMatch(/gh[sur]_[A-Za-z0-9]{20}/);
    expect(stored).not.toMatch(/gh[sur]_[A-Za-z0-9]{20}/);
  });
});

describe.runIf(TEST_DATABASE_URL)('two service processes on one PostgreSQL', () => {
  it('mint an installation token once for 20 concurrent token reads across both', async () => {
    const url = await createPgDatabase();
    cleanups.push(() => dropPgDatabase(url));
    const env = {
      DATABASE_URL: url,
      ...fake.env(),
      ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 5).toString('base64')}`,
      JWT_SECRET: 's'.repeat(40),
      PASSWORD_COST: '10',
      RATE_LIMIT_MAX: '0',
      LOG_LEVEL: 'warn',
      PUBLIC_URL: 'http://127.0.0.1:8080',
    };
    const a = await spawnService(env);
    const b = await spawnService(env);
    cleanups.push(async () => {
      await a.stop();
      await b.stop();
    });
    await Promise.all([waitFor(a), waitFor(b)]);
    const request = (service: typeof a, method: string, path: string, options: { body?: unknown; token?: string; cookie?: string } = {}) =>
      fetch(service.url + path, {
        method,
        redirect: 'manual',
        headers: {
          ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
          ...(options.cookie ? { cookie: options.cookie } : {}),
          ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      });
    const credentials = { email: 'twoproc-githubapp@example.com', password: 'process test password' };
    expect((await request(a, 'POST', '/v1/register', { body: credentials })).status).toBe(201);
    const token = ((await (await request(a, 'POST', '/v1/login', { body: credentials })).json()) as { accessToken: string }).accessToken;
    const started = await request(a, 'POST', '/v1/integrations/oauth/start', { token, body: { provider: 'githubapp', redirectUri: 'http://127.0.0.1:8080/app/integrations' } });
    expect(started.status).toBe(200);
    const tx = /oauth_tx=([^;]+)/.exec(started.headers.get('set-cookie') ?? '')?.[1] ?? '';
    const { authUrl } = (await started.json()) as { authUrl: string };
    fake.addUser('twoproc-admin');
    const installed = fake.install(authUrl, 'twoproc-admin', { account: 'twoproc-org', type: 'Organization' });
    fake.control.tokenTtlSeconds = 301;
    try {
      const back = new URL(installed.location);
      const landed = await request(b, 'GET', `${back.pathname}${back.search}`, { cookie: `oauth_tx=${tx}` });
      expect(new URL(landed.headers.get('location') ?? '').searchParams.get('status')).toBe('connected');
    } finally {
      fake.control.tokenTtlSeconds = 3600;
    }
    const id = installed.installation.id;
    expect(fake.mintedFor(id)).toHaveLength(1);
    await sleep(1500);
    fake.control.mintDelayMs = 300;
    try {
      const reads = await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const res = await request(i % 2 ? a : b, 'GET', '/v1/integrations/githubapp/token', { token });
          return { status: res.status, json: (await res.json()) as { token: { accessToken: string } } };
        }),
      );
      expect(reads.map((r) => r.status)).toEqual(Array(20).fill(200));
      expect(fake.mintedFor(id)).toHaveLength(2);
      expect(new Set(reads.map((r) => r.json.token.accessToken))).toEqual(new Set([fake.mintedFor(id)[1]]));
    } finally {
      fake.control.mintDelayMs = 0;
    }
  }, 180_000);
});
