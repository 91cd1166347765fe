import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeProvider, json } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createPgDatabase, dropPgDatabase, newDataDir, TEST_DATABASE_URL } from './helpers/database.ts';
import { type ServiceProcess, spawnService, waitFor } from './helpers/process.ts';
import { providerEnv } from './helpers/providers.ts';

let gh: FakeProvider;
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
});
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await gh?.close();
});

/** A database for spawned services: a PostgreSQL database of its own, or a PGlite directory. */
async function storage(): Promise<Record<string, string>> {
  if (TEST_DATABASE_URL) {
    const url = await createPgDatabase();
    cleanups.push(() => dropPgDatabase(url));
    return { DATABASE_URL: url };
  }
  const dir = newDataDir('tessera-proc-');
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return { DATA_DIR: dir };
}

function serviceEnv(db: Record<string, string>, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...db,
    ...providerEnv(gh),
    ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 4).toString('base64')}`,
    JWT_SECRET: 's'.repeat(40),
    PASSWORD_COST: '10',
    RATE_LIMIT_MAX: '0',
    LOG_LEVEL: 'warn',
    PUBLIC_URL: 'http://127.0.0.1:8080',
    ...extra,
  };
}

async function api(service: ServiceProcess, method: string, path: string, options: { token?: string; body?: unknown; cookie?: string } = {}) {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.cookie) headers.cookie = options.cookie;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(service.url + path, { method, headers, ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}) });
  const text = await res.text();
  // biome-ignore lint/suspicious/noExplicitAny: answers read loosely; the assertions check their shape
  return { status: res.status, json: text ? (JSON.parse(text) as Record<string, any>) : {}, headers: res.headers };
}

/** Registers, signs in and connects GitHub through a spawned service; returns the session token. */
async function connectThrough(service: ServiceProcess, login: string): Promise<string> {
  gh.addUser({ login, email: `${login}@example.com` });
  const email = `${login}@example.com`;
  expect((await api(service, 'POST', '/v1/register', { body: { email, password: 'process test password' } })).status).toBe(201);
  const token = (await api(service, 'POST', '/v1/login', { body: { email, password: 'process test password' } })).json.accessToken as string;
  const start = await api(service, 'POST', '/v1/integrations/oauth/start', { token, body: { provider: 'github', redirectUri: 'http://127.0.0.1:8080/app' } });
  expect(start.status).toBe(200);
  const cookie = (start.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  const approved = gh.authorize(start.json.authUrl as string, login);
  const callback = await api(service, 'POST', '/v1/integrations/oauth/callback', { cookie, body: { provider: 'github', code: approved.code, state: approved.state } });
  expect(callback.status, JSON.stringify(callback.json)).toBe(200);
  return token;
}

describe.runIf(TEST_DATABASE_URL)('two service processes on one PostgreSQL', () => {
  it('make one provider call for 25 concurrent refreshes and never reuse a refresh token', async () => {
    const db = await storage();
    const a = await spawnService(serviceEnv(db));
    const b = await spawnService(serviceEnv(db));
    cleanups.push(async () => {
      await a.stop();
      await b.stop();
    });
    await Promise.all([waitFor(a), waitFor(b)]);
    const token = await connectThrough(a, 'twoproc');
    const before = { ...gh.stats };
    const results = await Promise.all(Array.from({ length: 25 }, (_, i) => api(i % 2 ? a : b, 'POST', '/v1/integrations/github/refresh', { token })));
    expect(results.map((r) => r.status)).toEqual(Array(25).fill(200));
    expect(gh.stats.refreshes - before.refreshes).toBe(1);
    expect(gh.stats.reusedRefreshTokens - before.reusedRefreshTokens).toBe(0);
    expect(new Set(results.map((r) => r.json.token.accessToken))).toEqual(new Set([gh.tokensOf('twoproc')[0]?.accessToken]));
  }, 180_000);
});

describe.runIf(TEST_DATABASE_URL)('a provider budget across two service processes (docs/contract.md §5f)', () => {
  it('is learned by one process and stops the other before it calls the provider', async () => {
    const db = await storage();
    const a = await spawnService(serviceEnv(db));
    const b = await spawnService(serviceEnv(db));
    cleanups.push(async () => {
      await a.stop();
      await b.stop();
    });
    await Promise.all([waitFor(a), waitFor(b)]);
    const token = await connectThrough(a, 'budgeted');
    const seen: string[] = [];
    gh.script = (ctx) => {
      if (!ctx.path.startsWith('/api/scripted')) return null;
      seen.push(ctx.path);
      return json(200, [], { 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 60) });
    };
    try {
      const first = await api(a, 'GET', '/v1/integrations/github/proxy/scripted/repos', { token });
      expect(first.status).toBe(200);
      const other = await api(b, 'GET', '/v1/integrations/github/proxy/scripted/repos', { token });
      expect(other.status).toBe(429);
      expect(other.json.code).toBe('PROVIDER_RATE_LIMITED');
      expect(Number(other.headers.get('retry-after'))).toBeGreaterThanOrEqual(58);
      expect(other.headers.get('tessera-attempts')).toBe('0');
      expect(seen).toHaveLength(1);
    } finally {
      gh.script = null;
    }
  }, 180_000);
});

describe('a crash after the provider rotated the token', () => {
  it('leaves the rotated token stored: it is written before it is validated', async () => {
    const db = await storage();
    const env = serviceEnv(db, { PROVIDER_TIMEOUT: '60' });
    const first = await spawnService(env);
    cleanups.push(() => first.stop('SIGKILL').then(() => undefined));
    await waitFor(first);
    const token = await connectThrough(first, 'crashy');
    const refreshesBefore = gh.stats.refreshes;
    const userCallsBefore = gh.requests.filter((r) => r.path === '/api/user').length;
    // Validation of the refreshed token hangs: the process dies while it waits.
    gh.mode.api = 'hang';
    const pending = api(first, 'POST', '/v1/integrations/github/refresh', { token }).catch(() => null);
    try {
      await expect.poll(() => gh.stats.refreshes - refreshesBefore, { timeout: 10_000 }).toBe(1);
      await expect.poll(() => gh.requests.filter((r) => r.path === '/api/user').length - userCallsBefore, { timeout: 10_000 }).toBeGreaterThan(0);
      await first.stop('SIGKILL');
      await pending;
    } finally {
      gh.mode.api = 'ok';
    }
    const second = await spawnService(env);
    cleanups.push(() => second.stop().then(() => undefined));
    await waitFor(second);
    const read = await api(second, 'GET', '/v1/integrations/github/token', { token });
    expect(read.status, JSON.stringify(read.json)).toBe(200);
    expect(read.json.token.accessToken).toBe(gh.tokensOf('crashy')[0]?.accessToken);
    expect((await api(second, 'GET', '/v1/integrations/github/proxy/user', { token })).status).toBe(200);
  }, 180_000);
});
