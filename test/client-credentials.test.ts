// An organization's own client credentials (docs/contract.md §5c, Zoom Server-to-Server OAuth):
// verified by minting, tokens minted on demand and cached until 5 minutes before they expire,
// one mint for concurrent readers — in one process and across two on one PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicOf } from './fakes/entered.ts';
import { type FakeZoomS2S, startFakeZoomS2S, type ZoomS2SApp } from './fakes/providers/zooms2s.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { createPgDatabase, dropPgDatabase, TEST_DATABASE_URL } from './helpers/database.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { spawnService, waitFor } from './helpers/process.ts';
import { everyStoredValue } from './helpers/stored-values.ts';

let zoom: FakeZoomS2S;
let t: TestApp;
let owner: Account;
const answers: string[] = [];
const cleanups: (() => Promise<void> | void)[] = [];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function zoomEnv(): Record<string, string> {
  return { INTEGRATION_OAUTH_ZOOMS2S_ENABLED: 'true', INTEGRATION_OAUTH_ZOOMS2S_TOKEN_URL: `${zoom.url}/oauth/token`, INTEGRATION_OAUTH_ZOOMS2S_API_URL: `${zoom.url}/v2` };
}

async function call(method: 'GET' | 'POST', url: string, payload?: unknown) {
  const res = await t.fastify.inject({ method, url, headers: bearer(owner.token), ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}) });
  if (!/\/token(\?|$)/.test(url)) answers.push(res.body);
  return res;
}

const fieldsOf = (app: ZoomS2SApp) => ({ accountId: app.accountId, clientId: app.clientId, clientSecret: app.clientSecret });
const mintsOf = (app: ZoomS2SApp) => zoom.minted.filter((entry) => entry.app === app).map((entry) => entry.token);

beforeAll(async () => {
  zoom = await startFakeZoomS2S();
  t = await createTestApp({ background: false, env: { RATE_LIMIT_MAX: '0', OAUTH_STATUS_MAX_AGE: '1', ...zoomEnv() } });
  owner = await registerAndLogin(t.fastify, 'zoom-owner');
});

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await t?.close();
  await zoom?.close();
});

describe('client credentials (Zoom Server-to-Server)', () => {
  it('are verified by minting: a wrong secret or account → 400 INVALID_CREDENTIALS, nothing stored', async () => {
    const app = zoom.addApp();
    const wrongSecret = await call('POST', '/v1/integrations/zooms2s/credentials', { credentials: { ...fieldsOf(app), clientSecret: 'not-the-secret-at-all' } });
    expect(wrongSecret.statusCode).toBe(400);
    expect(wrongSecret.json().code).toBe('INVALID_CREDENTIALS');
    const wrongAccount = await call('POST', '/v1/integrations/zooms2s/credentials', { credentials: { ...fieldsOf(app), accountId: 'NoSuchAccount' } });
    expect(wrongAccount.statusCode).toBe(400);
    expect(wrongAccount.json().code).toBe('INVALID_CREDENTIALS');
    expect(mintsOf(app)).toEqual([]);
    expect((await call('GET', '/v1/integrations?provider=zooms2s')).json().integrations).toEqual([]);
  });

  it('mint at connect with the documented grant; the token read serves the cached token until it is due; the proxy carries it', async () => {
    const app = zoom.addApp();
    const res = await call('POST', '/v1/integrations/zooms2s/credentials', { credentials: fieldsOf(app) });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().integration.name).toBe(`Zoom Server-to-Server Integration (${app.accountId})`);
    expect(mintsOf(app)).toHaveLength(1);
    const mint = zoom.requests.find((r) => r.path === '/oauth/token' && r.query.get('account_id') === app.accountId);
    expect(mint?.query.get('grant_type')).toBe('account_credentials');
    expect(basicOf(mint as NonNullable<typeof mint>)).toEqual({ user: app.clientId, password: app.clientSecret });

    const first = await call('GET', '/v1/integrations/zooms2s/token');
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toMatchObject({ provider: 'zooms2s', authMode: 'client_credentials', token: { accessToken: mintsOf(app)[0], tokenType: 'Bearer' }, metadata: { accountId: app.accountId } });
    expect(first.json().credentials).toBeUndefined();
    const expiresAt = Date.parse(first.json().token.expiresAt);
    expect(expiresAt).toBeGreaterThan(Date.now() + 3500_000);
    const second = await call('GET', '/v1/integrations/zooms2s/token');
    expect(second.json().token.accessToken).toBe(mintsOf(app)[0]);
    expect(mintsOf(app)).toHaveLength(1);

    const proxied = await call('GET', '/v1/integrations/zooms2s/proxy/users');
    expect(proxied.statusCode, proxied.body).toBe(200);
    expect(zoom.requests.at(-1)?.headers.authorization).toBe(`Bearer ${mintsOf(app)[0]}`);
  });

  it('reuse a cached token until 5 minutes before it expires, then mint a new one', async () => {
    const app = zoom.addApp();
    zoom.expiresIn = 302;
    try {
      expect((await call('POST', '/v1/integrations/zooms2s/credentials?endUser=soon', { credentials: fieldsOf(app) })).statusCode).toBe(201);
    } finally {
      zoom.expiresIn = 3600;
    }
    // 302 s of life: served from the cache for the first ~2 s, then due (within 5 minutes of its expiry).
    const cached = await call('GET', '/v1/integrations/zooms2s/token?endUser=soon');
    expect(cached.json().token.accessToken).toBe(mintsOf(app)[0]);
    expect(mintsOf(app)).toHaveLength(1);
    await sleep(2500);
    const renewed = await call('GET', '/v1/integrations/zooms2s/token?endUser=soon');
    expect(renewed.statusCode, renewed.body).toBe(200);
    expect(mintsOf(app)).toHaveLength(2);
    expect(renewed.json().token.accessToken).toBe(mintsOf(app)[1]);
    expect(Date.parse(renewed.json().token.expiresAt)).toBeGreaterThan(Date.now() + 3500_000);
    // The new token is cached in turn.
    expect((await call('GET', '/v1/integrations/zooms2s/token?endUser=soon')).json().token.accessToken).toBe(mintsOf(app)[1]);
    expect(mintsOf(app)).toHaveLength(2);
  });

  it('mint once for 20 concurrent readers of a token that is due', async () => {
    const app = zoom.addApp();
    zoom.expiresIn = 301;
    try {
      expect((await call('POST', '/v1/integrations/zooms2s/credentials?endUser=crowd', { credentials: fieldsOf(app) })).statusCode).toBe(201);
    } finally {
      zoom.expiresIn = 3600;
    }
    await sleep(1500);
    zoom.mintDelayMs = 200;
    try {
      const reads = await Promise.all(Array.from({ length: 20 }, () => call('GET', '/v1/integrations/zooms2s/token?endUser=crowd')));
      expect(reads.map((r) => r.statusCode)).toEqual(Array(20).fill(200));
      expect(mintsOf(app)).toHaveLength(2);
      expect(new Set(reads.map((r) => r.json().token.accessToken))).toEqual(new Set([mintsOf(app)[1]]));
    } finally {
      zoom.mintDelayMs = 0;
    }
  });

  it('deactivated at the provider → the next validation mints, is refused, and the integration is invalid', async () => {
    const app = zoom.addApp();
    expect((await call('POST', '/v1/integrations/zooms2s/credentials?endUser=gone', { credentials: fieldsOf(app) })).statusCode).toBe(201);
    zoom.deactivate(app);
    await sleep(1100);
    const status = await call('GET', '/v1/integrations/zooms2s/status?endUser=gone');
    expect(status.statusCode).toBe(200);
    expect(status.json().status).toMatchObject({ status: 'invalid', connected: false, actions: ['reconnect'] });
    const read = await call('GET', '/v1/integrations/zooms2s/token?endUser=gone');
    expect(read.statusCode).toBe(409);
  });

  it('a proxied 401 re-mints once, and only a refused mint makes the integration invalid', async () => {
    const app = zoom.addApp();
    expect((await call('POST', '/v1/integrations/zooms2s/credentials?endUser=proxied', { credentials: fieldsOf(app) })).statusCode).toBe(201);
    zoom.deactivate(app);
    const res = await call('GET', '/v1/integrations/zooms2s/proxy/users?endUser=proxied');
    expect(res.statusCode).toBe(409);
    expect(res.json().code).toBe('TOKEN_VALIDATION_FAILED');
    expect(zoom.requests.filter((r) => r.path === '/oauth/token' && r.query.get('account_id') === app.accountId)).toHaveLength(2);
  });

  it('the secrets scan finds no client secret in any JSON answer, log line or stored column', async () => {
    const secrets = zoom.apps.map((app) => app.clientSecret);
    const stored = await everyStoredValue(t.database);
    for (const secret of secrets) {
      for (const answer of answers) expect(answer).not.toContain(secret);
      expect(t.logs.text).not.toContain(secret);
      expect(stored).not.toContain(secret);
    }
  });
});

describe.runIf(TEST_DATABASE_URL)('two service processes on one PostgreSQL', () => {
  it('mint once for 20 concurrent token reads across both', async () => {
    const url = await createPgDatabase();
    cleanups.push(() => dropPgDatabase(url));
    const env = {
      DATABASE_URL: url,
      ...zoomEnv(),
      ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 4).toString('base64')}`,
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
    const json = async (service: typeof a, method: string, path: string, body?: unknown, token?: string) => {
      const res = await fetch(service.url + path, {
        method,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      // biome-ignore lint/suspicious/noExplicitAny: answers read loosely; the assertions check their shape
      return { status: res.status, json: (await res.json()) as Record<string, any> };
    };
    const credentials = { email: 'twoproc-zoom@example.com', password: 'process test password' };
    expect((await json(a, 'POST', '/v1/register', credentials)).status).toBe(201);
    const token = (await json(a, 'POST', '/v1/login', credentials)).json.accessToken as string;
    const app = zoom.addApp();
    zoom.expiresIn = 301;
    try {
      expect((await json(a, 'POST', '/v1/integrations/zooms2s/credentials', { credentials: fieldsOf(app) }, token)).status).toBe(201);
    } finally {
      zoom.expiresIn = 3600;
    }
    await sleep(1500);
    zoom.mintDelayMs = 300;
    try {
      const reads = await Promise.all(Array.from({ length: 20 }, (_, i) => json(i % 2 ? a : b, 'GET', '/v1/integrations/zooms2s/token', undefined, token)));
      expect(reads.map((r) => r.status)).toEqual(Array(20).fill(200));
      expect(mintsOf(app)).toHaveLength(2);
      expect(new Set(reads.map((r) => r.json.token.accessToken))).toEqual(new Set([mintsOf(app)[1]]));
    } finally {
      zoom.mintDelayMs = 0;
    }
  }, 180_000);
});
