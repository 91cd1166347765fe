import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import type { HeldValidation } from '../src/integrations/status.ts';
import { loadById } from '../src/integrations/tokens/loaded.ts';
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

describe('background validation in batches (issue 42)', () => {
  /** An app with no background pass of its own, seeing every statement it runs, and `count` connected GitHub integrations. */
  async function quietWith(count: number, prefix: string) {
    const seen: string[] = [];
    let recording = false;
    const quiet = await createTestApp({ env: { ...providerEnv(gh), RATE_LIMIT_MAX: '0' }, background: false, onQuery: (query) => recording && seen.push(query) });
    const ids: { id: string; organizationId: string }[] = [];
    for (let i = 0; i < count; i++) {
      const login = `${prefix}-${i}`;
      gh.addUser({ login });
      const account = await registerAndLogin(quiet.fastify, login);
      const res = await connect(quiet.fastify, account.token, gh, login);
      expect(res.statusCode).toBe(200);
      ids.push({ id: res.json().integration.id as string, organizationId: account.organizationId });
    }
    await quiet.database.db.execute(sql`UPDATE integrations SET next_validation_at = now() - interval '1 second', last_validated_at = now() - interval '1 day'`);
    const record = async <T>(fn: () => Promise<T>) => {
      seen.length = 0;
      recording = true;
      try {
        return await fn();
      } finally {
        recording = false;
      }
    };
    return { quiet, ids, seen, record };
  }

  const rowsOf = (db: TestApp['database']['db']) =>
    queryRows<{ id: string; status: string; last_error: string | null; validated_ago: number; next_in: number }>(
      db,
      sql`SELECT id, status, last_error, extract(epoch FROM now() - last_validated_at)::float8 AS validated_ago, extract(epoch FROM next_validation_at - now())::float8 AS next_in FROM integrations`,
    );

  it("writes a batch's results in one statement — a few statements per batch, none per integration — with a status change still audited", async () => {
    const { quiet, ids, seen, record } = await quietWith(6, 'batch');
    try {
      // One of them was left `warning` by an earlier answer: its good validation changes its status, as ever.
      const warned = ids[0] as (typeof ids)[number];
      await quiet.database.db.execute(sql`UPDATE integrations SET status = 'warning', last_error = 'provider unreachable during validation' WHERE id = ${warned.id}`);
      const result = await record(() => runValidationPass(quiet.app.services, { batchSize: 50 }));
      expect(result).toMatchObject({ claimed: 6, valid: 6, errors: 0, invalid: 0 });
      // The claim, the integrations with their secrets, the batch's budgets, the batch's results — and the one status change
      // (its keepStatus, then its unit of work: begin, the row locked, updated, the audit row, the event, commit).
      const perIntegration = seen.filter((text) => /budget|update "integrations"/i.test(text) && !/json_to_recordset|unnest/i.test(text));
      expect(seen.filter((text) => /json_to_recordset/i.test(text))).toHaveLength(1);
      expect(perIntegration.length).toBeLessThanOrEqual(2);
      const interval = quiet.app.services.config.oauth.validationInterval;
      for (const row of await rowsOf(quiet.database.db)) {
        expect(row).toMatchObject({ status: 'connected', last_error: null });
        expect(row.validated_ago).toBeLessThan(60);
        expect(Math.abs(row.next_in - interval)).toBeLessThan(60);
      }
      const audited = await queryRows<{ organization_id: string; detail: { from: string; to: string; source: string } }>(
        quiet.database.db,
        sql`SELECT organization_id, detail FROM audit_logs WHERE action = 'integration.status_changed'`,
      );
      expect(audited).toEqual([{ organization_id: warned.organizationId, detail: { from: 'warning', to: 'connected', reason: null } }]);
      const events = await queryRows<{ organization_id: string; data: { from: string; to: string } }>(
        quiet.database.db,
        sql`SELECT organization_id, data FROM events WHERE type = 'integration.status_changed'`,
      );
      expect(events).toEqual([{ organization_id: warned.organizationId, data: expect.objectContaining({ from: 'warning', to: 'connected', reason: null }) }]);
    } finally {
      await quiet.close();
    }
  });

  it("one integration's failing write does not lose the others' results: it alone counts as an error", async () => {
    const { quiet, ids } = await quietWith(3, 'failing-write');
    const failing = ids[1] as (typeof ids)[number];
    // The database refuses to record this one integration's validation (and nothing else of anyone's).
    await quiet.database.db.execute(sql.raw(`CREATE FUNCTION refuse_validation() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused for the test'; END $$`));
    await quiet.database.db.execute(
      sql.raw(`CREATE TRIGGER refuse_validation BEFORE UPDATE ON integrations FOR EACH ROW
        WHEN (NEW.id = '${failing.id}' AND NEW.last_validated_at IS DISTINCT FROM OLD.last_validated_at) EXECUTE FUNCTION refuse_validation()`),
    );
    try {
      const result = await runValidationPass(quiet.app.services, { batchSize: 50 });
      expect(result).toMatchObject({ claimed: 3, valid: 2, errors: 1, invalid: 0 });
      const rows = await rowsOf(quiet.database.db);
      for (const row of rows.filter((one) => one.id !== failing.id)) {
        expect(row.status).toBe('connected');
        expect(row.validated_ago).toBeLessThan(60);
      }
      const refused = rows.find((one) => one.id === failing.id);
      expect(refused?.validated_ago).toBeGreaterThan(3600);
      expect(quiet.logs.text).toContain('background validation failed for one integration');
      expect(quiet.logs.text).toContain(failing.id);
      expect(quiet.logs.text).not.toContain('refused for the test');
    } finally {
      await quiet.database.db.execute(sql`DROP TRIGGER refuse_validation ON integrations`);
      await quiet.close();
    }
  });

  it('a good result held for its batch never undoes a status another request set meanwhile, on newer evidence', async () => {
    const { quiet, ids } = await quietWith(1, 'held-then-revoked');
    try {
      const one = ids[0] as (typeof ids)[number];
      const { lifecycle } = quiet.app.services;
      const actor = { principal: null, requestId: null };
      const hold: HeldValidation[] = [];
      const { outcome } = await lifecycle.check(await loadById(quiet.app.services, one.organizationId, one.id), actor, {}, { hold });
      expect(outcome.kind).toBe('valid');
      expect(hold).toHaveLength(1);
      // A proxied call's 401 makes it `invalid` after the provider answered the validation, before the batch is written.
      await quiet.database.db.execute(sql`UPDATE integrations SET status = 'invalid', last_error = 'token unauthorized', token_valid = false WHERE id = ${one.id}`);
      expect(await lifecycle.keepValidated(hold, actor)).toEqual([]);
      const [row] = await rowsOf(quiet.database.db);
      expect(row).toMatchObject({ status: 'invalid', last_error: 'token unauthorized' });
      expect(row?.validated_ago).toBeGreaterThan(3600);
      const [audited] = await queryRows<{ n: number }>(quiet.database.db, sql`SELECT count(*)::int AS n FROM audit_logs WHERE action = 'integration.status_changed'`);
      expect(audited?.n).toBe(0);
    } finally {
      await quiet.close();
    }
  });

  it('rows of a batch never checked — their provider backed off — are due again at once, not an interval later', async () => {
    const { quiet } = await quietWith(3, 'released');
    gh.mode.api = 'rate-limited';
    try {
      const result = await runValidationPass(quiet.app.services, { batchSize: 50, concurrencyPerProvider: 1 });
      expect(result).toMatchObject({ claimed: 3, rateLimited: 1, valid: 0, invalid: 0, errors: 0 });
    } finally {
      gh.mode.api = 'ok';
    }
    try {
      const rows = await rowsOf(quiet.database.db);
      // The one checked waits for the provider's Retry-After; the two never checked are due now, for the next pass.
      expect(rows.filter((row) => row.next_in > 0)).toHaveLength(1);
      expect(rows.filter((row) => row.next_in <= 0)).toHaveLength(2);
      for (const row of rows) expect(row).toMatchObject({ status: 'connected' });
      for (const row of rows) expect(row.validated_ago).toBeGreaterThan(3600);
      // The limit is kept for every instance until its reset, which passes here (decision 326).
      const [kept] = await queryRows<{ n: number }>(quiet.database.db, sql`SELECT count(*)::int AS n FROM provider_budgets WHERE blocked_until > now()`);
      expect(kept?.n).toBe(1);
    } finally {
      await quiet.close();
    }
  });
});
