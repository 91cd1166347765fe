/**
 * HTTP benchmarks: autocannon on loopback against the app in this process, each
 * scenario paired with a baseline measured in alternating rounds of the same run — a
 * bare route doing one indexed SELECT by primary key through the same pool (the
 * practical ceiling for a request that must read its data). Prints req/s, p50/p99
 * latency and the ratios. Usage: node bench/http.ts (BENCH_DATABASE_URL=postgres://… for
 * PostgreSQL; BENCH_ONLY=<part of a scenario name> to run only those).
 */
import { Writable } from 'node:stream';
import autocannon from 'autocannon';
import { sql } from 'drizzle-orm';
import { ulid } from 'ulidx';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config/load.ts';
import { HotStatement, queryRows } from '../src/db/client.ts';
import { createApiToken } from '../src/identity/access-tokens.ts';
import { createLogger } from '../src/http/logging.ts';
import { replaceSecrets } from '../src/integrations/secrets.ts';
import { startFakeGitHub } from '../test/fakes/github.ts';
import { openBenchDatabase } from './validation.ts';
import { fmt, postgresCpuUs } from './lib.ts';

const BASELINE = new HotStatement(sql`SELECT id, name FROM organizations WHERE id = ${sql.placeholder('id')}`);

/** Seconds of each measurement; a scenario and its baseline alternate ROUNDS times. */
const DURATION = Number(process.env.BENCH_DURATION ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);

interface Measured {
  /** CPU time of this process (app and autocannon) per request, µs: less noisy than req/s on a shared host. */
  cpuUs: number;
  /** CPU time of the local PostgreSQL server per request, µs (NaN when it is not local or not PostgreSQL). */
  dbCpuUs: number;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

export interface HttpResult extends Measured {
  scenario: string;
  /** The baseline, measured in the rounds alternating with this scenario's. */
  baseline: Measured;
}

type Request = { method?: string; headers?: Record<string, string>; body?: string };
/** 'postgres' when the benchmark's PostgreSQL may be this host's (its CPU is then read from /proc). */
type LocalDatabase = 'postgres' | null;

async function run(url: string, options: Request, local: LocalDatabase = null): Promise<Measured> {
  const cpu = process.cpuUsage();
  const db = local === 'postgres' ? postgresCpuUs() : null;
  const result = await autocannon({
    url,
    method: (options.method ?? 'GET') as 'GET',
    headers: options.headers ?? {},
    ...(options.body ? { body: options.body } : {}),
    connections: CONNECTIONS,
    duration: DURATION,
  });
  const used = process.cpuUsage(cpu);
  const dbAfter = local === 'postgres' ? postgresCpuUs() : null;
  const requests = Math.max(1, result.requests.total);
  const dbCpuUs = db !== null && dbAfter !== null ? (dbAfter - db) / requests : Number.NaN;
  return { cpuUs: (used.user + used.system) / requests, dbCpuUs, rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors };
}

/** Means over rounds (latency percentiles averaged round by round). */
function mean(runs: Measured[]): Measured {
  const avg = (pick: (m: Measured) => number) => runs.reduce((sum, m) => sum + pick(m), 0) / runs.length;
  return { cpuUs: avg((m) => m.cpuUs), dbCpuUs: avg((m) => m.dbCpuUs), rps: avg((m) => m.rps), p50: avg((m) => m.p50), p99: avg((m) => m.p99), non2xx: avg((m) => m.non2xx) * runs.length, errors: avg((m) => m.errors) * runs.length };
}

/**
 * A scenario against the baseline in alternating rounds, so a machine whose speed drifts
 * (shared hosts do) moves both sides of the ratio alike.
 */
async function paired(baselineUrl: string, url: string, options: Request, local: LocalDatabase): Promise<Omit<HttpResult, 'scenario'>> {
  const base: Measured[] = [];
  const runs: Measured[] = [];
  // Warm-up of the scenario's own code paths (the JIT optimizes per function), not measured.
  await run(url, options);
  for (let round = 0; round < ROUNDS; round++) {
    base.push(await run(baselineUrl, {}, local));
    runs.push(await run(url, options, local));
  }
  return { ...mean(runs), baseline: mean(base) };
}

/** Runs every scenario against one backend and returns the rows (baseline first). */
export async function benchHttp(): Promise<{ backend: string; rows: HttpResult[] }> {
  const fake = await startFakeGitHub({ tokenExpiresIn: 28800 });
  fake.addUser({ login: 'bench', email: 'bench@example.com' });
  const { database, cleanup } = await openBenchDatabase();
  try {
    await database.migrate();
    const port = 18000 + Math.floor(Math.random() * 2000);
    const config = loadConfig({
      env: {
        ENCRYPTION_KEYS: `bench:${Buffer.alloc(32, 9).toString('base64')}`,
        JWT_SECRET: 'b'.repeat(40),
        PASSWORD_COST: '10',
        RATE_LIMIT_MAX: '0',
        OAUTH_STATUS_MAX_AGE: '86400',
        PORT: String(port),
        INTEGRATION_OAUTH_GITHUB_CLIENT_ID: fake.clientId,
        INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET: fake.clientSecret,
        INTEGRATION_OAUTH_GITHUB_AUTH_URL: fake.authUrl,
        INTEGRATION_OAUTH_GITHUB_TOKEN_URL: fake.tokenUrl,
        INTEGRATION_OAUTH_GITHUB_API_URL: fake.apiUrl,
        DB_POOL_MAX: '16',
      },
      persistGeneratedSecrets: false,
    });
    // Logs are produced and serialized as in production, then dropped.
    const sink = new Writable({ write: (_chunk, _encoding, callback) => callback() });
    let organizationId = '';
    const app = await buildApp({
      config,
      database,
      logger: createLogger({ level: process.env.BENCH_LOG_LEVEL ?? 'info', stream: sink }),
      routes: (fastify, services) => {
        fastify.get('/bench/baseline', { config: { auth: 'unauthenticated', errors: [] }, schema: { hide: true } }, async () => {
          // A prepared statement like the hot paths' own, so the comparison is like for like.
          const [row] = await BASELINE.rows(services.db, { id: organizationId });
          return { row: row ?? null };
        });
        // The same SELECT unprepared, as a plain `db.execute`: what planning every statement costs.
        fastify.get('/bench/unprepared', { config: { auth: 'unauthenticated', errors: [] }, schema: { hide: true } }, async () => {
          const [row] = await queryRows(services.db, sql`SELECT id, name FROM organizations WHERE id = ${organizationId}`);
          return { row: row ?? null };
        });
      },
    });
    await app.fastify.listen({ host: '127.0.0.1', port });
    const base = `http://127.0.0.1:${port}`;
    // biome-ignore lint/suspicious/noExplicitAny: the service's answers, read loosely to set the benchmark up
    const json = (r: Response) => r.json() as Promise<Record<string, any>>;

    await fetch(`${base}/v1/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'bench@example.com', password: 'benchmark password' }) });
    const login = await json(await fetch(`${base}/v1/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'bench@example.com', password: 'benchmark password' }) }));
    const jwt = login.accessToken as string;
    organizationId = login.organizationId as string;
    const auth = { authorization: `Bearer ${jwt}` };
    const start = await json(await fetch(`${base}/v1/integrations/oauth/start`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ provider: 'github', redirectUri: `${base}/` }) }));
    const approved = fake.authorize(start.authUrl as string, 'bench');
    await fetch(`${base}/v1/integrations/oauth/callback`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ provider: 'github', code: approved.code, state: approved.state }) });
    const sid = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString()).sid as string;
    const principal = { kind: 'jwt' as const, userId: login.user.id as string, organizationId, role: 'owner' as const, credentialId: sid, systemAdmin: false, viaCookie: false };
    const apiToken = (await createApiToken({ db: database.db, actor: { principal, requestId: null } }, { name: 'bench' })).token;

    // A second organization with 100 integrations, for the listing.
    const listOrg = ulid();
    await database.db.execute(sql`INSERT INTO organizations (id, name) VALUES (${listOrg}, 'list')`);
    await database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${listOrg}, ${principal.userId}, 'owner')`);
    for (let i = 0; i < 100; i++) {
      const id = ulid();
      await database.db.execute(sql`INSERT INTO integrations (organization_id, id, provider, name, description, provider_account_id, last_validated_at)
        VALUES (${listOrg}, ${id}, ${`p${i}`}, ${`P${i} Integration (bench)`}, ${`OAuth integration with p${i} for bench`}, ${String(i)}, now())`);
      await replaceSecrets(database.db, config.keyring, { organizationId: listOrg, integrationId: id, provider: `p${i}` }, { access_token: `tok_${i}` });
    }
    const listJwt = (await json(await fetch(`${base}/v1/account/switch`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ organizationId: listOrg }) }))).accessToken as string;

    const scenarios: [string, string, Request][] = [
      ['the baseline\'s SELECT, unprepared', '/bench/unprepared', {}],
      ['GET …/token (session JWT)', '/v1/integrations/github/token', { headers: auth }],
      ['GET …/token (API token)', '/v1/integrations/github/token', { headers: { authorization: `Bearer ${apiToken}` } }],
      ['GET /v1/integrations (100)', '/v1/integrations', { headers: { authorization: `Bearer ${listJwt}` } }],
      ['GET …/status (no live validation)', '/v1/integrations/github/status', { headers: auth }],
      ['POST …/oauth/start', '/v1/integrations/oauth/start', { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ provider: 'github', redirectUri: `${base}/` }) }],
      ['POST /query { integrations }', '/query', { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ query: '{ integrations { id name status statusDetail { message actions } } }' }) }],
    ];
    const rows: HttpResult[] = [];
    // Warm-up: JIT, caches, connections.
    await run(`${base}/bench/baseline`, {});
    // BENCH_ONLY=token runs only the scenarios whose name contains "token".
    const only = process.env.BENCH_ONLY;
    for (const [scenario, path, options] of scenarios.filter(([name]) => !only || name.includes(only))) {
      rows.push({ scenario, ...(await paired(`${base}/bench/baseline`, base + path, options, database.kind === 'pg' ? 'postgres' : null)) });
    }
    await app.fastify.close();
    return { backend: database.kind, rows };
  } finally {
    await cleanup();
    await fake.close();
  }
}

/** Prints one backend's table with each scenario's ratios to its paired baseline. */
export function printHttp(backend: string, rows: HttpResult[]): void {
  console.log(`\n## HTTP on ${backend} (${CONNECTIONS} connections; ${ROUNDS} rounds of ${DURATION} s, alternating with the baseline; node ${process.execArgv.join(' ') || '(no flags)'})`);
  console.log('| scenario | req/s | p50 ms | p99 ms | baseline req/s | baseline p99 ms | × baseline req/s | × baseline p99 | CPU µs/req (baseline) | PostgreSQL CPU µs/req (baseline) | non-2xx |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const row of rows) {
    const b = row.baseline;
    console.log(
      `| ${row.scenario} | ${fmt(row.rps, 0)} | ${fmt(row.p50, 1)} | ${fmt(row.p99, 1)} | ${fmt(b.rps, 0)} | ${fmt(b.p99, 1)} | ${fmt(row.rps / b.rps, 2)} | ${fmt(row.p99 / Math.max(1, b.p99), 2)} | ${fmt(row.cpuUs, 0)} (${fmt(b.cpuUs, 0)}) | ${Number.isNaN(row.dbCpuUs) ? '–' : `${fmt(row.dbCpuUs, 0)} (${fmt(b.dbCpuUs, 0)})`} | ${row.non2xx + row.errors + b.non2xx + b.errors} |`,
    );
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { backend, rows } = await benchHttp();
  printHttp(backend, rows);
}
