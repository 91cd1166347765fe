import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { runValidationPass } from '../src/integrations/validator.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv } from './helpers/providers.ts';

let t: TestApp;
let gh: FakeProvider;
let n = 0;

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  t = await createTestApp({ env: { ...providerEnv(gh), OAUTH_TOKEN_VALIDATION_INTERVAL: '1', RATE_LIMIT_MAX: '0' } });
});
afterAll(async () => {
  await t?.close();
  await gh?.close();
});

async function connected() {
  const login = `bg-${++n}`;
  gh.addUser({ login, email: `${login}@example.com` });
  const account = await registerAndLogin(t.fastify, login);
  const res = await connect(t.fastify, account.token, gh, login);
  return { account, id: res.json().integration.id as string, login };
}

const statusOf = async (id: string) =>
  (await queryRows<{ status: string; last_error: string | null }>(t.database.db, sql`SELECT status, last_error FROM integrations WHERE id = ${id}`))[0];

describe('background validation', () => {
  it('notices a revocation with no traffic within one interval', async () => {
    const c = await connected();
    gh.revokeUser(c.login);
    // The 401 first tries a refresh (rejected too), then settles as "token unauthorized".
    await expect.poll(async () => statusOf(c.id), { timeout: 15_000, interval: 200 }).toEqual({ status: 'invalid', last_error: 'token unauthorized' });
  });

  it('validates each due integration once in total, even with two passes racing', async () => {
    const quiet = await createTestApp({ env: { ...providerEnv(gh), RATE_LIMIT_MAX: '0' }, background: false });
    try {
      for (let i = 0; i < 7; i++) {
        const login = `race-${i}`;
        gh.addUser({ login });
        const account = await registerAndLogin(quiet.fastify, login);
        expect((await connect(quiet.fastify, account.token, gh, login)).statusCode).toBe(200);
      }
      await quiet.database.db.execute(sql`UPDATE integrations SET next_validation_at = now() - interval '1 second'`);
      const before = gh.requests.filter((r) => r.path === '/api/user').length;
      const [a, b] = await Promise.all([
        runValidationPass(quiet.app.services, { batchSize: 2, concurrencyPerProvider: 2 }),
        runValidationPass(quiet.app.services, { batchSize: 2, concurrencyPerProvider: 2 }),
      ]);
      expect((a?.claimed ?? 0) + (b?.claimed ?? 0)).toBe(7);
      expect((a?.valid ?? 0) + (b?.valid ?? 0)).toBe(7);
      expect(gh.requests.filter((r) => r.path === '/api/user').length - before).toBe(7);
      const [due] = await queryRows<{ n: number }>(quiet.database.db, sql`SELECT count(*)::int AS n FROM integrations WHERE next_validation_at <= now()`);
      expect(due?.n).toBe(0);
    } finally {
      await quiet.close();
    }
  });

  it('leaves statuses alone when the provider rate-limits, and keeps going past one failure', async () => {
    const a = await connected();
    const b = await connected();
    await t.database.db.execute(sql`UPDATE integrations SET next_validation_at = now() - interval '1 second' WHERE id IN (${a.id}, ${b.id})`);
    gh.mode.api = 'rate-limited';
    try {
      const result = await runValidationPass(t.app.services, { batchSize: 50 });
      expect(result.invalid).toBe(0);
    } finally {
      gh.mode.api = 'ok';
    }
    expect((await statusOf(a.id))?.status).toBe('connected');
    expect((await statusOf(b.id))?.status).toBe('connected');
    // The limit is remembered for every instance (docs/contract.md §5f) until its reset, which passes here.
    const [kept] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM provider_budgets WHERE blocked_until > now()`);
    expect(kept?.n).toBeGreaterThanOrEqual(1);
    await t.database.db.execute(sql`DELETE FROM provider_budgets`);

    // A secret that no longer decrypts is that integration's problem only.
    await t.database.db.execute(sql`DELETE FROM integration_secrets WHERE integration_id = ${a.id} AND name = 'github_access_token'`);
    await t.database.db.execute(
      sql`INSERT INTO integration_secrets (organization_id, integration_id, name, key_id, envelope) SELECT organization_id, integration_id, 'github_access_token', key_id, envelope FROM integration_secrets WHERE integration_id = ${a.id} AND name = 'github_provider_username'`,
    );
    await t.database.db.execute(sql`UPDATE integrations SET next_validation_at = now() - interval '1 second' WHERE id IN (${a.id}, ${b.id})`);
    const result = await runValidationPass(t.app.services, { batchSize: 50 });
    expect(result.errors).toBeGreaterThanOrEqual(1);
    expect(result.valid).toBeGreaterThanOrEqual(1);
  });

  it('refreshes ahead of time when the refresh token nears its own expiry', async () => {
    const c = await connected();
    await t.database.db.execute(sql`UPDATE integrations SET refresh_token_expires_at = now() + interval '1 hour', next_validation_at = now() - interval '1 second' WHERE id = ${c.id}`);
    const before = gh.stats.refreshes;
    await runValidationPass(t.app.services, { batchSize: 50 });
    expect(gh.stats.refreshes).toBeGreaterThan(before);
    expect(gh.stats.reusedRefreshTokens).toBe(0);
  });
});
