/**
 * HTTP benchmarks: autocannon on loopback against the app in this process (fixture.ts), each
 * case of cases.ts measured in alternating rounds with two baselines of the same run — the
 * one-row baseline (a bare route doing one indexed SELECT by primary key through the same pool:
 * the machine's limit for a request that reads its data) and the case's same-work baseline (a
 * bare route replaying the statements the case's request ran: Tessera's overhead alone).
 * Prints req/s, p50/p99 latency and the ratios to both. Every answer must be 2xx: failures are
 * returned (and fail a smoke run), never hidden in a mean.
 * Usage: node bench/http.ts (BENCH_DATABASE_URL=postgres://… for PostgreSQL; BENCH_ONLY=<part of
 * a case name>; BENCH_SMOKE=1 for one short round per case).
 */
import autocannon from 'autocannon';
import { CASES, type HttpCase, type HttpRequest } from './cases.ts';
import { benchEvents, type EventsResult } from './events.ts';
import { type Fixture, startFixture } from './fixture.ts';
import { fmt, postgresCpuUs } from './lib.ts';
import { replayable, replayer, summary } from './replay.ts';

const SMOKE = process.env.BENCH_SMOKE === '1';
/** Seconds of each measurement; a case and its baselines alternate ROUNDS times. */
const DURATION = Number(process.env.BENCH_DURATION ?? (SMOKE ? 1 : 4));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (SMOKE ? 1 : 2));
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);

export interface Measured {
  /** CPU time of this process (app and autocannon) per request, µs: less noisy than req/s on a shared host. */
  cpuUs: number;
  /** CPU time of the local PostgreSQL server per request, µs (NaN when it is not local or not PostgreSQL). */
  dbCpuUs: number;
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  /** Answers other than 2xx, and connection errors and timeouts. */
  failed: number;
}

export interface HttpResult extends Measured {
  scenario: string;
  /** Statements one request ran (the census), and what they were. */
  statements: number;
  census: string;
  /** The one-row baseline, measured in the rounds alternating with this case's. */
  oneRow: Measured;
  /** The case this one is compared with (`compareWith`), by id. */
  compareWith?: string;
  id: string;
  /** The same-work baseline, likewise; null when the case has none. */
  sameWork: Measured | null;
  noSameWork?: string;
}

/** 'postgres' when the benchmark's PostgreSQL may be this host's (its CPU is then read from /proc). */
type LocalDatabase = 'postgres' | null;

/** One autocannon measurement of `url` (also bench/trees.ts's burst). */
export async function run(url: string, options: HttpRequest, local: LocalDatabase = null, duration = DURATION): Promise<Measured> {
  const cpu = process.cpuUsage();
  const db = local === 'postgres' ? postgresCpuUs() : null;
  const result = await autocannon({
    url,
    method: (options.method ?? 'GET') as 'GET',
    headers: options.headers ?? {},
    ...(options.body ? { body: options.body } : {}),
    connections: CONNECTIONS,
    duration,
  });
  const used = process.cpuUsage(cpu);
  const dbAfter = local === 'postgres' ? postgresCpuUs() : null;
  const requests = Math.max(1, result.requests.total);
  const dbCpuUs = db !== null && dbAfter !== null ? (dbAfter - db) / requests : Number.NaN;
  return {
    cpuUs: (used.user + used.system) / requests,
    dbCpuUs,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    failed: result.non2xx + result.errors + result.timeouts,
  };
}

/** Means over rounds (latency percentiles averaged round by round); counts summed. */
function mean(runs: Measured[]): Measured {
  const avg = (pick: (m: Measured) => number) => runs.reduce((sum, m) => sum + pick(m), 0) / runs.length;
  const sum = (pick: (m: Measured) => number) => runs.reduce((total, m) => total + pick(m), 0);
  return { cpuUs: avg((m) => m.cpuUs), dbCpuUs: avg((m) => m.dbCpuUs), rps: avg((m) => m.rps), p50: avg((m) => m.p50), p99: avg((m) => m.p99), requests: sum((m) => m.requests), failed: sum((m) => m.failed) };
}

/** One request of a case; throws with the answer when it is not 2xx. */
async function once(url: string, options: HttpRequest): Promise<void> {
  const res = await fetch(url, { method: options.method ?? 'GET', headers: options.headers ?? {}, ...(options.body ? { body: options.body } : {}) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${options.method ?? 'GET'} ${new URL(url).pathname} answered ${res.status}: ${text.slice(0, 300)}`);
}

/**
 * The census of a case: two warm-up requests, then two recorded ones (nothing else runs
 * meanwhile), whose statements become the same-work baseline; a replay is tried once.
 */
async function census(f: Fixture, c: HttpCase, url: string, options: HttpRequest): Promise<{ statements: number; census: string }> {
  await f.recorder.quiesce();
  await once(url, options);
  await once(url, options);
  const first = await f.recorder.record(() => once(url, options));
  const second = await f.recorder.record(() => once(url, options));
  if (c.noSameWork) return { statements: first.length, census: summary(first) };
  const plan = replayable(first, second);
  if (plan.problem) throw new Error(`case ${c.id}: no same-work baseline: ${plan.problem} (${summary(first)})`);
  f.sameWork.set(c.id, replayer(f.database, first, second, plan.fresh));
  await once(`${f.base}/bench/same/${c.id}`, {});
  return { statements: first.length, census: summary(first) };
}

/** BENCH_BREAK=<case id> sends that case to a path that answers 404: shows that a failing route fails the run. */
function requestOf(f: Fixture, c: HttpCase): { url: string; options: HttpRequest } {
  const { path, ...options } = c.request(f);
  const broken = process.env.BENCH_BREAK === c.id ? '-broken' : '';
  return { url: `${f.base}${path}${broken}`, options };
}

/**
 * A case against its baselines in alternating rounds, so a machine whose speed drifts
 * (shared hosts do) moves every side of the ratios alike.
 */
async function measure(f: Fixture, c: HttpCase, local: LocalDatabase): Promise<HttpResult> {
  const { url, options } = requestOf(f, c);
  const counted = await census(f, c, url, options);
  const oneRow: Measured[] = [];
  const same: Measured[] = [];
  const runs: Measured[] = [];
  // Warm-up of the case's own code paths (the JIT optimizes per function), not measured. A smoke run
  // skips it and the one-row baseline beside each case (the run's warm-up ran that): an autocannon
  // run lasts at least a second, whatever its duration, and the smoke run's figures mean nothing.
  const warm = SMOKE ? null : await run(url, options, null, DURATION);
  for (let round = 0; round < ROUNDS; round++) {
    if (!SMOKE) oneRow.push(await run(`${f.base}/bench/baseline`, {}, local));
    if (!c.noSameWork) same.push(await run(`${f.base}/bench/same/${c.id}`, {}, local));
    runs.push(await run(url, options, local));
  }
  const measured = mean(runs);
  return {
    scenario: c.name,
    ...counted,
    ...measured,
    // A failure while warming up fails the run too.
    failed: measured.failed + (warm?.failed ?? 0),
    oneRow: mean(oneRow),
    sameWork: same.length ? mean(same) : null,
    ...(c.noSameWork ? { noSameWork: c.noSameWork } : {}),
    id: c.id,
    ...(c.compareWith ? { compareWith: c.compareWith } : {}),
  };
}

/** What went wrong in a run: a case that could not run, or answers that were not 2xx. */
export interface HttpFailure {
  scenario: string;
  problem: string;
}

/** Runs every case (BENCH_ONLY: those whose name contains it) against one backend. */
export async function benchHttp(): Promise<{ backend: string; rows: HttpResult[]; events: EventsResult | null; failures: HttpFailure[] }> {
  const f = await startFixture();
  const rows: HttpResult[] = [];
  const failures: HttpFailure[] = [];
  try {
    const local: LocalDatabase = f.database.kind === 'pg' ? 'postgres' : null;
    // Warm-up: JIT, caches, connections.
    const warm = await run(`${f.base}/bench/baseline`, {}, null, DURATION);
    if (warm.failed > 0) failures.push({ scenario: 'the one-row baseline', problem: `${warm.failed} answers were not 2xx while warming up` });
    const only = process.env.BENCH_ONLY;
    const cases = CASES.filter((c) => !only || c.name.includes(only));
    const eventsName = 'provider events acted on';
    const runEvents = !only || eventsName.includes(only);
    if (cases.length === 0 && !runEvents) failures.push({ scenario: `BENCH_ONLY=${only}`, problem: 'matches no case' });
    for (const c of cases) {
      try {
        const row = await measure(f, c, local);
        rows.push(row);
        const failed = row.failed + row.oneRow.failed + (row.sameWork?.failed ?? 0);
        if (failed > 0) failures.push({ scenario: c.name, problem: `${failed} answers were not 2xx (or failed) while measuring` });
        if (row.requests === 0) failures.push({ scenario: c.name, problem: 'no request completed' });
      } catch (error) {
        failures.push({ scenario: c.name, problem: error instanceof Error ? error.message : String(error) });
      }
    }
    // Provider events: a fixed stream of distinct deliveries, after the cases (it revokes the integrations it names).
    let events: EventsResult | null = null;
    if (runEvents) {
      try {
        events = await benchEvents(f, CONNECTIONS);
        if (events.failed > 0) failures.push({ scenario: eventsName, problem: `${events.failed} deliveries failed: ${events.problem}` });
        if (events.changed !== events.deliveries) failures.push({ scenario: eventsName, problem: `${events.deliveries} deliveries changed ${events.changed} integrations` });
      } catch (error) {
        failures.push({ scenario: eventsName, problem: error instanceof Error ? error.message : String(error) });
      }
    }
    return { backend: f.database.kind, rows, events, failures };
  } finally {
    await f.close();
  }
}

const ratio = (a: number, b: number | undefined) => (b ? fmt(a / b, 2) : '–');

/** Prints one backend's table: each case's ratios to its same-work baseline and to the one-row baseline; the comparisons between cases; the provider events. */
export function printHttp(backend: string, rows: HttpResult[], events: EventsResult | null = null): void {
  console.log(`\n## HTTP on ${backend} (${CONNECTIONS} connections; ${ROUNDS} rounds of ${DURATION} s, alternating with the baselines; node ${process.execArgv.join(' ') || '(no flags)'})`);
  console.log('| scenario | req/s | p50 ms | p99 ms | same-work req/s | same-work p99 ms | one-row req/s | one-row p99 ms | × same-work req/s | × same-work p99 | × one-row req/s | × one-row p99 | statements | CPU µs/req (same-work, one-row) | PostgreSQL CPU µs/req (same-work, one-row) | failed |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const row of rows) {
    const s = row.sameWork;
    const o = row.oneRow;
    const db = Number.isNaN(row.dbCpuUs) ? '–' : `${fmt(row.dbCpuUs, 0)} (${s ? fmt(s.dbCpuUs, 0) : '–'}, ${fmt(o.dbCpuUs, 0)})`;
    console.log(
      `| ${row.scenario} | ${fmt(row.rps, 0)} | ${fmt(row.p50, 1)} | ${fmt(row.p99, 1)} | ${s ? fmt(s.rps, 0) : '–'} | ${s ? fmt(s.p99, 1) : '–'} | ${fmt(o.rps, 0)} | ${fmt(o.p99, 1)} | ${ratio(row.rps, s?.rps)} | ${ratio(row.p99, s ? Math.max(1, s.p99) : undefined)} | ${ratio(row.rps, o.rps)} | ${ratio(row.p99, Math.max(1, o.p99))} | ${row.statements} | ${fmt(row.cpuUs, 0)} (${s ? fmt(s.cpuUs, 0) : '–'}, ${fmt(o.cpuUs, 0)}) | ${db} | ${row.failed + o.failed + (s?.failed ?? 0)} |`,
    );
  }
  console.log('\nStatements per request (the census; the same-work baseline replays these):');
  for (const row of rows) console.log(`- ${row.scenario}: ${row.noSameWork ? `(no same-work baseline: ${row.noSameWork}) ` : ''}${row.census}`);
  const compared = rows.filter((row) => row.compareWith);
  if (compared.length) console.log('\nCases compared with another case of the same run:');
  for (const row of compared) {
    const other = rows.find((candidate) => candidate.id === row.compareWith);
    console.log(
      other
        ? `- ${row.scenario} ÷ ${other.scenario}: ${ratio(row.rps, other.rps)}× req/s, ${ratio(row.p99, Math.max(1, other.p99))}× p99`
        : `- ${row.scenario}: case ${row.compareWith} was not run (BENCH_ONLY), no ratio`,
    );
  }
  if (events) {
    console.log(`\nProvider events (${CONNECTIONS} concurrent senders; latency = time to detect, the answer follows the commit):`);
    console.log('| scenario | deliveries | deliveries/s | p50 ms | p99 ms | status changes committed | failed |');
    console.log('|---|---|---|---|---|---|---|');
    console.log(`| ${events.scenario} | ${events.deliveries} | ${fmt(events.perSecond, 0)} | ${fmt(events.p50, 1)} | ${fmt(events.p99, 1)} | ${events.changed} | ${events.failed} |`);
    console.log(`\nCPU per delivery: this process ${fmt(events.cpuUs, 0)} µs, PostgreSQL ${events.dbCpuUs === null ? 'n/a' : `${fmt(events.dbCpuUs, 0)} µs (the whole server, shared)`}`);
    console.log(`Statements of one delivery arriving alone (the census): ${events.statements}: ${events.census}`);
  }
}

/** Prints failures; true when there were none. */
export function reportFailures(what: string, failures: HttpFailure[]): boolean {
  for (const failure of failures) console.error(`FAILED ${what}: ${failure.scenario}: ${failure.problem}`);
  return failures.length === 0;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { backend, rows, events, failures } = await benchHttp();
  printHttp(backend, rows, events);
  if (!reportFailures(`HTTP on ${backend}`, failures)) process.exitCode = 1;
}
