import pg from 'pg';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import type { FakeProvider, FakeRequest } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { backend, TEST_DATABASE_URL } from './helpers/database.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv } from './helpers/providers.ts';

// docs/contract.md §2 (503 row) and decisions 35, 255, 257: the store of a token the provider has just
// rotated — what happens when it cannot be written, and when its connection is lost while the provider answers.

let t: TestApp;
let gh: FakeProvider;
let logins = 0;

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  t = await createTestApp({ env: { ...providerEnv(gh), PROVIDER_TIMEOUT: '3', RATE_LIMIT_MAX: '0' } });
}, 180_000);
afterAll(async () => {
  await t?.close();
  await gh?.close();
});

async function connected(): Promise<{ account: Account; id: string; login: string }> {
  const login = `rotated-${++logins}`;
  gh.addUser({ login, email: `${login}@example.com` });
  const account = await registerAndLogin(t.fastify, login);
  const res = await connect(t.fastify, account.token, gh, login);
  expect(res.statusCode, res.body).toBe(200);
  return { account, id: res.json().integration.id, login };
}

/** Runs `fault` the moment the fake receives a refresh (it rotates the token then, and answers `latencyMs` later). */
async function duringNextRefresh<T>(latencyMs: number, fault: () => Promise<void>, run: () => Promise<T>): Promise<T> {
  const requests = gh.requests as FakeRequest[];
  const push = requests.push;
  let faulted: Promise<void> | undefined;
  requests.push = (...items: FakeRequest[]) => {
    if (!faulted && items.some((item) => item.method === 'POST' && new URLSearchParams(item.body).get('grant_type') === 'refresh_token')) faulted = fault();
    return push.apply(requests, items);
  };
  gh.latencyMs = latencyMs;
  try {
    const result = await run();
    await faulted;
    return result;
  } finally {
    gh.latencyMs = 0;
    requests.push = push;
  }
}

const post = (token: string, url: string) => t.fastify.inject({ method: 'POST', url, headers: bearer(token) });
const get = (token: string, url: string) => t.fastify.inject({ method: 'GET', url, headers: bearer(token) });

describe('a rotated token that cannot be stored', () => {
  it('is logged as an error naming the integration, "rotated token lost", with no token; its next use finds the grant dead', async () => {
    const c = await connected();
    const refreshes = gh.stats.refreshes;
    const res = await duringNextRefresh(
      300,
      // The database refuses the store (the same on both backends): the secrets' table is gone while the provider answers.
      async () => void (await queryRows(t.database.db, sql`ALTER TABLE integration_secrets RENAME TO integration_secrets_away`)),
      () => post(c.account.token, '/v1/integrations/github/refresh'),
    );
    await queryRows(t.database.db, sql`ALTER TABLE integration_secrets_away RENAME TO integration_secrets`);
    expect(gh.stats.refreshes - refreshes).toBe(1);
    expect(res.statusCode).toBeGreaterThanOrEqual(500);
    const lost = t.logs.entries.filter((entry) => String(entry.msg).includes('rotated token lost'));
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({ level: 50, integrationId: c.id, provider: 'github' });
    for (const token of gh.tokensOf(c.login)) {
      expect(t.logs.text).not.toContain(token.accessToken);
      if (token.refreshToken) expect(t.logs.text).not.toContain(token.refreshToken);
    }
    // The provider retired the stored refresh token with that answer: the next refresh is refused, and §5 calls that invalid.
    const next = await post(c.account.token, '/v1/integrations/github/refresh');
    expect(next.statusCode).toBe(409);
    expect((await get(c.account.token, '/v1/integrations/github/status')).json().status).toMatchObject({ status: 'invalid', actions: ['reconnect'] });
  });

  it('logs nothing of the kind when the store succeeds', async () => {
    const c = await connected();
    const res = await post(c.account.token, '/v1/integrations/github/refresh');
    expect(res.statusCode, res.body).toBe(200);
    expect(t.logs.entries.filter((entry) => String(entry.msg).includes('rotated token lost') && entry.integrationId === c.id)).toEqual([]);
  });
});

describe.runIf(backend === 'pg')('the connection held for the store (PostgreSQL)', () => {
  it('is ended by the server while the provider answers: the store is tried again on a new one, and the rotated token kept', async () => {
    const c = await connected();
    const [{ name } = { name: '' }] = await queryRows<{ name: string }>(t.database.db, sql`SELECT current_database() AS name`);
    const refreshes = gh.stats.refreshes;
    const res = await duringNextRefresh(
      300,
      async () => {
        // Every session of the app's database ends, the one held for the store included (as in a failover).
        const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
        await admin.connect();
        try {
          await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
        } finally {
          await admin.end();
        }
      },
      () => post(c.account.token, '/v1/integrations/github/refresh'),
    );
    expect(gh.stats.refreshes - refreshes).toBe(1);
    expect(res.statusCode, res.body).toBe(200);
    const newest = gh.tokensOf(c.login)[0];
    expect(res.json().token.accessToken).toBe(newest?.accessToken);
    expect((await get(c.account.token, '/v1/integrations/github/token')).json().token.accessToken).toBe(newest?.accessToken);
    expect(t.logs.entries.filter((entry) => String(entry.msg).includes('rotated token lost') && entry.integrationId === c.id)).toHaveLength(0);
  });
});
