/**
 * Cost as work grows: at N integrations (default 1k, 10k, 100k), laid out as organizations of
 * 1,000 end users' integrations each, one validation pass over all N (against a fake provider
 * answering in 50 ms), then the list of one organization's 1,000 among the N, then the list of
 * one organization holding N. Prints time per item and the JS heap left after a full GC
 * (needs --expose-gc): the targets are linear time (time per item flat as N grows) and a
 * flat heap. Usage: node --expose-gc bench/scale.ts [N ...] (BENCH_DATABASE_URL=postgres://…
 * for PostgreSQL; BENCH_SCALE_MAX caps N, for a smoke run).
 */
import { sql } from 'drizzle-orm';
import { ulid } from 'ulidx';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config/load.ts';
import { createLogger } from '../src/http/logging.ts';
import { runValidationPass } from '../src/integrations/validator.ts';
import { fmt, startSlowUserApi, withPeakRss } from './lib.ts';
import { baseline, heapAfterGc, openBenchDatabase, seed } from './validation.ts';

const LATENCY_MS = Number(process.env.BENCH_SCALE_LATENCY ?? 50);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const PER_ORGANIZATION = 1000;

export interface ScaleResult {
  backend: string;
  count: number;
  organizations: number;
  validationSeconds: number;
  /** The same provider calls with no database work, per second: the ceiling the latency allows. */
  baselinePerSecond: number;
  validationRatio: number;
  peakRssMb: number;
  /** JS heap after a full GC, after the pass minus before it. */
  heapAfterPassMb: number | null;
  /** One organization's 1,000 end users' integrations, among N. */
  listOrgMs: number;
  listOrgItems: number;
  /** One organization holding all N. */
  listAllMs: number;
  listAllItems: number;
  /** JS heap after a full GC, after the lists minus before them. */
  heapAfterListsMb: number | null;
}

const delta = (after: number | null, before: number | null) => (after !== null && before !== null ? after - before : null);

/** Mean wall time of `times` sequential calls, ms. */
async function timed(times: number, fn: () => Promise<void>): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < times; i++) await fn();
  return (performance.now() - started) / times;
}

/** One size: seed, validation pass, lists. */
export async function benchScale(count: number): Promise<ScaleResult> {
  const apiServer = await startSlowUserApi(LATENCY_MS);
  const { database, cleanup } = await openBenchDatabase();
  try {
    await database.migrate();
    const config = loadConfig({
      env: {
        ENCRYPTION_KEYS: `bench:${Buffer.alloc(32, 9).toString('base64')}`,
        JWT_SECRET: 'b'.repeat(40),
        PASSWORD_COST: '10',
        RATE_LIMIT_MAX: '0',
        INTEGRATION_OAUTH_GITHUB_CLIENT_ID: 'bench',
        INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET: 'bench',
        INTEGRATION_OAUTH_GITHUB_API_URL: apiServer.url,
        LOG_LEVEL: 'error',
      },
      persistGeneratedSecrets: false,
    });
    const app = await buildApp({ config, database, logger: createLogger({ level: 'error' }) });
    const orgIds = await seed(database, config.keyring, count, PER_ORGANIZATION);

    const heapBefore = heapAfterGc();
    const baselinePerSecond = await baseline(apiServer.url, Math.min(count, 2000));
    const started = performance.now();
    const pass = await withPeakRss(() => runValidationPass(app.services, { batchSize: 500, concurrencyPerProvider: CONCURRENCY, budgetMs: 3_600_000 }));
    const validationSeconds = (performance.now() - started) / 1000;
    if (pass.result.valid !== count) throw new Error(`validated ${pass.result.valid} of ${count} (${JSON.stringify(pass.result)})`);
    const heapAfterPass = heapAfterGc();

    // A member of the first organization, and of one holding N (seeded now, so the pass above did not see it).
    const inject = async (method: 'GET' | 'POST', url: string, payload?: unknown, token?: string) => {
      const res = await app.fastify.inject({ method, url, ...(payload ? { payload: payload as object } : {}), headers: token ? { authorization: `Bearer ${token}` } : {} });
      if (res.statusCode >= 300) throw new Error(`${method} ${url} answered ${res.statusCode}: ${res.body.slice(0, 300)}`);
      return res;
    };
    await inject('POST', '/v1/register', { email: 'scale@example.com', password: 'benchmark password' });
    const login = (await inject('POST', '/v1/login', { email: 'scale@example.com', password: 'benchmark password' })).json();
    const bigOrg = ulid();
    await database.db.execute(sql`INSERT INTO organizations (id, name) VALUES (${bigOrg}, 'big')`);
    for (let start = 0; start < count; start += 5000) {
      const ids = Array.from({ length: Math.min(5000, count - start) }, (_, i) => String(start + i));
      await database.db.execute(sql`
        INSERT INTO integrations (organization_id, id, provider, app_id, end_user_key, end_user, name, description, provider_account_id, next_validation_at)
        SELECT ${bigOrg}, ${ulid()} || '-' || n, 'github', 'github', 'end-user-' || n, jsonb_build_object('id', 'end-user-' || n),
               'GitHub Integration (bench)', 'OAuth integration with github for bench', n, now() + interval '1 day'
        FROM unnest(${sql.param(ids)}::text[]) AS t(n)`);
    }
    await database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role)
      SELECT unnest(${sql.param([orgIds[0] as string, bigOrg])}::text[]), ${login.user.id as string}, 'owner'`);
    const tokenFor = async (organizationId: string) => (await inject('POST', '/v1/account/switch', { organizationId }, login.accessToken)).json().accessToken as string;
    const orgToken = await tokenFor(orgIds[0] as string);
    const bigToken = await tokenFor(bigOrg);
    const items = async (token: string) => (await inject('GET', '/v1/integrations', undefined, token)).json().integrations.length as number;
    const listOrgItems = await items(orgToken);
    const listAllItems = await items(bigToken);

    const heapBeforeLists = heapAfterGc();
    const listOrgMs = await timed(20, async () => void (await inject('GET', '/v1/integrations', undefined, orgToken)));
    const listAllMs = await timed(Math.max(2, Math.min(20, Math.round(20_000 / count))), async () => void (await inject('GET', '/v1/integrations', undefined, bigToken)));
    const heapAfterLists = heapAfterGc();
    await app.fastify.close();
    return {
      backend: database.kind,
      count,
      organizations: orgIds.length,
      validationSeconds,
      baselinePerSecond,
      validationRatio: count / validationSeconds / baselinePerSecond,
      peakRssMb: pass.peakRssMb,
      heapAfterPassMb: delta(heapAfterPass, heapBefore),
      listOrgMs,
      listOrgItems,
      listAllMs,
      listAllItems,
      heapAfterListsMb: delta(heapAfterLists, heapBeforeLists),
    };
  } finally {
    await cleanup();
    await apiServer.close();
  }
}

/** The sizes to run: the arguments, else BENCH_SCALE_SIZES, else 1k, 10k, 100k; none above BENCH_SCALE_MAX. */
export function scaleSizes(args: string[] = []): number[] {
  const asked = args.length ? args.map(Number) : (process.env.BENCH_SCALE_SIZES ?? '1000,10000,100000').split(',').map(Number);
  const max = Number(process.env.BENCH_SCALE_MAX ?? Number.POSITIVE_INFINITY);
  return asked.filter((n) => n > 0 && n <= max);
}

const signed = (n: number | null) => (n === null ? 'n/a' : `${n >= 0 ? '+' : ''}${fmt(n)}`);

/** Prints the table's heading. */
export function printScaleHeading(backend: string): void {
  console.log(`\n## Cost as work grows on ${backend} (${PER_ORGANIZATION} end users' integrations per organization; provider latency ${LATENCY_MS} ms, ${CONCURRENCY} at once)`);
  console.log('| N | organizations | validation pass | ms per integration | × ceiling | peak RSS MiB | heap after pass, Δ MiB | list of one org (items) | µs per item | list of one org of N (items) | µs per item | heap after lists, Δ MiB |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
}

/** Prints one size's row (as soon as it is measured: the largest takes minutes). */
export function printScaleRow(r: ScaleResult): void {
  console.log(
    `| ${r.count} | ${r.organizations} | ${fmt(r.validationSeconds)} s | ${fmt((r.validationSeconds * 1000) / r.count, 2)} | ${fmt(r.validationRatio, 2)} | ${fmt(r.peakRssMb, 0)} | ${signed(r.heapAfterPassMb)} | ${fmt(r.listOrgMs)} ms (${r.listOrgItems}) | ${fmt((r.listOrgMs * 1000) / r.listOrgItems, 1)} | ${fmt(r.listAllMs)} ms (${r.listAllItems}) | ${fmt((r.listAllMs * 1000) / r.listAllItems, 1)} | ${signed(r.heapAfterListsMb)} |`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  printScaleHeading(process.env.BENCH_DATABASE_URL ? 'pg' : 'pglite');
  for (const count of scaleSizes(process.argv.slice(2))) printScaleRow(await benchScale(count));
}
