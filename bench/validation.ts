/**
 * Validation-pass benchmark: N integrations seeded directly, a fake provider answering
 * in 50 ms, one pass. Reports integrations validated per second, peak RSS, and the
 * ratio to a baseline measured in the same run: the same provider calls at the same
 * concurrency with no database work (the ceiling the latency allows).
 * Usage: node bench/validation.ts [count ...]   (BENCH_DATABASE_URL=postgres://… for PostgreSQL)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ulid } from 'ulidx';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config/load.ts';
import { type Database, openPglite, openPostgres, sql } from '../src/db/client.ts';
import { createLogger } from '../src/http/logging.ts';
import { seal } from '../src/secrets/crypto.ts';
import { runValidationPass } from '../src/integrations/validator.ts';
import { fmt, startSlowUserApi, withPeakRss } from './lib.ts';

const LATENCY_MS = 50;
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);

export interface ValidationBenchResult {
  backend: string;
  count: number;
  seconds: number;
  perSecond: number;
  baselinePerSecond: number;
  ratio: number;
  peakRssMb: number;
  rssGrowthMb: number;
  /** Heap after a full GC, after the pass minus before it (needs --expose-gc). */
  heapGrowthMb: number | null;
  /** Statements the pass ran, per validated integration, and by first words (the census). */
  statementsPerIntegration: number;
  census: string;
}

/** `onQuery` sees the text of every statement Drizzle runs (the census). */
export async function openBenchDatabase(onQuery?: (query: string) => void): Promise<{ database: Database; cleanup(): Promise<void> }> {
  const url = process.env.BENCH_DATABASE_URL;
  if (url) {
    const pg = (await import('pg')).default;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const name = `tessera_bench_${ulid().toLowerCase()}`;
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const dbUrl = new URL(url);
    dbUrl.pathname = `/${name}`;
    const database = await openPostgres({ url: dbUrl.href, poolMax: 20, statementTimeout: 60, connectTimeout: 5, ...(onQuery ? { onQuery } : {}) });
    return {
      database,
      cleanup: async () => {
        await database.close();
        const again = new pg.Client({ connectionString: url });
        await again.connect();
        await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await again.end();
      },
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-'));
  const database = await openPglite({ dataDir: dir, ...(onQuery ? { onQuery } : {}) });
  return { database, cleanup: async () => { await database.close(); rmSync(dir, { recursive: true, force: true }); } };
}

/**
 * Seeds `count` connected GitHub integrations (with encrypted access tokens), due now:
 * `perOrganization` 1 gives each its own organization (the organization's own integration);
 * more puts that many end users' integrations in each organization. Returns the organizations.
 */
export async function seed(database: Database, keyring: ReturnType<typeof loadConfig>['keyring'], count: number, perOrganization = 1): Promise<string[]> {
  // One integration per (organization, provider, end user).
  const orgs = Math.ceil(count / perOrganization);
  const orgIds = Array.from({ length: orgs }, () => ulid());
  for (let start = 0; start < orgIds.length; start += 1000) {
    await database.db.execute(sql`INSERT INTO organizations (id, name) SELECT unnest(${sql.param(orgIds.slice(start, start + 1000))}::text[]), 'bench'`);
  }
  const batch = 500;
  for (let start = 0; start < count; start += batch) {
    const rows: { org: string; id: string; endUser: string }[] = [];
    for (let i = start; i < Math.min(count, start + batch); i++) {
      rows.push({ org: orgIds[Math.floor(i / perOrganization)] as string, id: ulid(), endUser: perOrganization === 1 ? '' : `end-user-${i % perOrganization}` });
    }
    const ids = rows.map((r) => r.id);
    const orgsCol = rows.map((r) => r.org);
    await database.db.execute(sql`
      INSERT INTO integrations (organization_id, id, provider, app_id, end_user_key, end_user, name, description, provider_account_id, next_validation_at, last_validated_at)
      SELECT o, i, 'github', 'github', e, CASE WHEN e = '' THEN NULL ELSE jsonb_build_object('id', e) END,
             'GitHub Integration (bench)', 'OAuth integration with github for bench', i, now() - interval '1 second', now() - interval '1 day'
      FROM unnest(${sql.param(orgsCol)}::text[], ${sql.param(ids)}::text[], ${sql.param(rows.map((r) => r.endUser))}::text[]) AS t(o, i, e)`);
    const envelopes = rows.map((row) => seal(keyring, { organizationId: row.org, recordId: row.id, name: 'github_access_token' }, `gho_bench_${row.id.slice(-6).toLowerCase()}`));
    await database.db.execute(sql`
      INSERT INTO integration_secrets (organization_id, integration_id, name, key_id, envelope)
      SELECT o, i, 'github_access_token', k, e
      FROM unnest(${sql.param(orgsCol)}::text[], ${sql.param(ids)}::text[], ${sql.param(envelopes.map((e) => e.keyId))}::text[], ${sql.param(envelopes.map((e) => e.envelope))}::text[]) AS t(o, i, k, e)`);
  }
  return orgIds;
}

/** The same provider calls at the same concurrency, with no database: the latency-bound ceiling. */
export async function baseline(apiUrl: string, count: number): Promise<number> {
  const started = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      const res = await fetch(`${apiUrl}/user`, { headers: { authorization: 'token gho_bench_000001' } });
      await res.text();
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return count / ((performance.now() - started) / 1000);
}

/** The JS heap in use after a full collection, MiB (null without --expose-gc). */
export function heapAfterGc(): number | null {
  if (!globalThis.gc) return null;
  globalThis.gc();
  return process.memoryUsage().heapUsed / 1048576;
}

/** Statements counted by their first words (`select`, `update "integrations"`…), most first. */
function censusOf(statements: string[]): string {
  const counts = new Map<string, number>();
  for (const text of statements) {
    const words = text.trim().replace(/\s+/g, ' ').split(' ').slice(0, 3).join(' ').toLowerCase();
    counts.set(words, (counts.get(words) ?? 0) + 1);
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([words, n]) => `${n}× ${words}`).join('; ');
}

/** Runs one validation pass over `count` seeded integrations. */
export async function benchValidation(count: number): Promise<ValidationBenchResult> {
  const apiServer = await startSlowUserApi(LATENCY_MS);
  let recording: string[] | null = null;
  const { database, cleanup } = await openBenchDatabase((query) => recording?.push(query));
  try {
    await database.migrate();
    const config = loadConfig({
      env: {
        ENCRYPTION_KEYS: `bench:${Buffer.alloc(32, 9).toString('base64')}`,
        JWT_SECRET: 'b'.repeat(40),
        INTEGRATION_OAUTH_GITHUB_CLIENT_ID: 'bench',
        INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET: 'bench',
        INTEGRATION_OAUTH_GITHUB_API_URL: apiServer.url,
        LOG_LEVEL: 'error',
      },
      persistGeneratedSecrets: false,
    });
    const app = await buildApp({ config, database, logger: createLogger({ level: 'error' }) });
    await seed(database, config.keyring, count);
    const heapBefore = heapAfterGc();
    const baselinePerSecond = await baseline(apiServer.url, Math.min(count, 2000));
    const callsBefore = apiServer.calls();
    const statements: string[] = [];
    recording = statements;
    const started = performance.now();
    const measured = await withPeakRss(() => runValidationPass(app.services, { batchSize: 500, concurrencyPerProvider: CONCURRENCY, budgetMs: 3_600_000 }));
    const seconds = (performance.now() - started) / 1000;
    recording = null;
    const validated = measured.result.valid;
    if (validated !== count) throw new Error(`validated ${validated} of ${count} (${JSON.stringify(measured.result)})`);
    if (apiServer.calls() - callsBefore !== count) throw new Error('provider calls do not match');
    const heapAfter = heapAfterGc();
    await app.fastify.close();
    return {
      backend: database.kind,
      count,
      seconds,
      perSecond: count / seconds,
      baselinePerSecond,
      ratio: count / seconds / baselinePerSecond,
      peakRssMb: measured.peakRssMb,
      rssGrowthMb: measured.peakRssMb - measured.startRssMb,
      heapGrowthMb: heapBefore !== null && heapAfter !== null ? heapAfter - heapBefore : null,
      statementsPerIntegration: statements.length / count,
      census: censusOf(statements),
    };
  } finally {
    await cleanup();
    await apiServer.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const counts = process.argv.slice(2).map(Number).filter((n) => n > 0);
  for (const count of counts.length ? counts : [10_000]) {
    const r = await benchValidation(count);
    console.log(
      `validation pass  ${r.backend.padEnd(6)} n=${String(r.count).padStart(6)}  ${fmt(r.seconds)} s  ${fmt(r.perSecond, 0)} integrations/s  baseline ${fmt(r.baselinePerSecond, 0)}/s  ratio ${fmt(r.ratio, 2)}  peak RSS ${fmt(r.peakRssMb, 0)} MiB (+${fmt(r.rssGrowthMb, 0)} during the pass)  heap after GC ${r.heapGrowthMb === null ? 'n/a' : `${r.heapGrowthMb >= 0 ? '+' : ''}${fmt(r.heapGrowthMb)} MiB`}`,
    );
    console.log(`  statements per integration ${fmt(r.statementsPerIntegration, 3)}: ${r.census}`);
  }
}
