/**
 * Two cases of cases.ts head to head (a change's "before" beside its "after", e.g. `proxy-unpaced`
 * and `proxy`): one fixture, short autocannon bursts alternating between them in a random order
 * each round, so whatever the machine does meanwhile falls on both alike. Prints each side's mean
 * req/s and CPU µs per request, the ratio of the means, and the median and spread of the paired
 * per-round ratios — the figure to read on a shared host.
 * Usage: BENCH_PAIR=<before id>,<after id> node --expose-gc bench/pair.ts
 *   (BENCH_DATABASE_URL=postgres://… for PostgreSQL; PAIR_ROUNDS, default 12; PAIR_DURATION seconds, default 3).
 */
import autocannon from 'autocannon';
import { CASES, type HttpCase } from './cases.ts';
import { type Fixture, startFixture } from './fixture.ts';

const ROUNDS = Number(process.env.PAIR_ROUNDS ?? 12);
const DURATION = Number(process.env.PAIR_DURATION ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);

interface Burst {
  rps: number;
  cpuUs: number;
  failed: number;
}

async function burst(f: Fixture, c: HttpCase, duration: number): Promise<Burst> {
  const { path, ...options } = c.request(f);
  const cpu = process.cpuUsage();
  const result = await autocannon({
    url: `${f.base}${path}`,
    method: (options.method ?? 'GET') as 'GET',
    headers: options.headers ?? {},
    ...(options.body ? { body: options.body } : {}),
    connections: CONNECTIONS,
    duration,
  });
  const used = process.cpuUsage(cpu);
  return { rps: result.requests.average, cpuUs: (used.user + used.system) / Math.max(1, result.requests.total), failed: result.non2xx + result.errors + result.timeouts };
}

const mean = (xs: number[]) => xs.reduce((sum, x) => sum + x, 0) / xs.length;
const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

const ids = (process.env.BENCH_PAIR ?? '').split(',').map((id) => id.trim());
const pair = ids.map((id) => CASES.find((c) => c.id === id));
if (ids.length !== 2 || pair.some((c) => c === undefined)) {
  console.error(`BENCH_PAIR must name two case ids of bench/cases.ts, e.g. proxy-unpaced,proxy (known: ${CASES.map((c) => c.id).join(', ')})`);
  process.exit(2);
}
const [before, after] = pair as [HttpCase, HttpCase];
const f = await startFixture();
let failed = 0;
try {
  // Warm-up of both sides' code paths (the JIT optimizes per function), not measured.
  for (const c of [before, after]) failed += (await burst(f, c, DURATION)).failed;
  const seen = { before: [] as Burst[], after: [] as Burst[] };
  for (let round = 0; round < ROUNDS; round++) {
    const order = Math.random() < 0.5 ? (['before', 'after'] as const) : (['after', 'before'] as const);
    for (const side of order) {
      const measured = await burst(f, side === 'before' ? before : after, DURATION);
      failed += measured.failed;
      seen[side].push(measured);
    }
  }
  const ratios = seen.after.map((m, n) => m.rps / (seen.before[n] as Burst).rps);
  const rps = { before: mean(seen.before.map((m) => m.rps)), after: mean(seen.after.map((m) => m.rps)) };
  const cpu = { before: mean(seen.before.map((m) => m.cpuUs)), after: mean(seen.after.map((m) => m.cpuUs)) };
  console.log(`${f.database.kind}, ${ROUNDS} rounds of ${DURATION} s each side, ${CONNECTIONS} connections`);
  console.log(`| side | case | req/s (mean) | CPU µs/req (mean) |\n|---|---|---|---|`);
  console.log(`| before | ${before.id} | ${rps.before.toFixed(0)} | ${cpu.before.toFixed(0)} |`);
  console.log(`| after | ${after.id} | ${rps.after.toFixed(0)} | ${cpu.after.toFixed(0)} |`);
  console.log(
    `after ÷ before: req/s ${(rps.after / rps.before).toFixed(3)} (paired per round: median ${median(ratios).toFixed(3)}, min ${Math.min(...ratios).toFixed(2)}, max ${Math.max(...ratios).toFixed(2)}); CPU µs/req ${(cpu.after / cpu.before).toFixed(3)}`,
  );
} finally {
  await f.close();
}
if (failed > 0) {
  console.error(`${failed} answers were not 2xx (or failed): the comparison is void`);
  process.exit(1);
}
process.exit(0);
