/**
 * npm run bench — every benchmark, on PGlite, and on PostgreSQL too when BENCH_DATABASE_URL
 * points at a server (an admin URL; a database is created and dropped): validation passes,
 * then the HTTP cases (bench/cases.ts). The cost-as-work-grows mode (bench/scale.ts, `npm run
 * bench:scale`), the soak (bench/soak.ts) and the fault scripts (bench/faults/) run on their own.
 *
 * npm run bench:smoke (BENCH_SMOKE=1) — every benchmark for a few seconds on the given database
 * only (BENCH_DATABASE_URL, else PGlite): validation, HTTP, scale and a short soak. Exits
 * non-zero when a benchmark fails to run, crashes, or sees an answer that is not 2xx (5xx for
 * the soak's mixed traffic) — never on speed. Results: docs/benchmarks.md.
 */
import { PENDING } from './cases.ts';
import { benchHttp, printHttp, reportFailures } from './http.ts';
import { fmt } from './lib.ts';
import { benchScale, printScaleHeading, printScaleRow, scaleSizes } from './scale.ts';
import { benchValidation } from './validation.ts';

const SMOKE = process.env.BENCH_SMOKE === '1';
const failures: { what: string; problem: string }[] = [];
const fail = (what: string, error: unknown) => failures.push({ what, problem: error instanceof Error ? (error.stack ?? error.message) : String(error) });

/** Runs one benchmark; a throw is recorded as its failure (and the others still run). */
async function attempt(what: string, fn: () => Promise<void>): Promise<void> {
  const started = performance.now();
  try {
    await fn();
  } catch (error) {
    fail(what, error);
  }
  if (SMOKE) console.log(`# ${what}: ${fmt((performance.now() - started) / 1000)} s`);
}

const counts = (process.env.BENCH_VALIDATION_COUNTS ?? (SMOKE ? '200' : '1000,10000')).split(',').map(Number);
const url = process.env.BENCH_DATABASE_URL;
// A smoke run checks the database it is given; a full run compares PGlite with PostgreSQL.
const backends = SMOKE ? [url ? 'pg' : 'pglite'] : url ? ['pglite', 'pg'] : ['pglite'];
console.log(`# node ${process.version}, ${new Date().toISOString()}${SMOKE ? ', smoke run (figures are not measurements)' : ''}`);
for (const backend of backends) {
  if (backend === 'pglite') delete process.env.BENCH_DATABASE_URL;
  try {
    for (const count of counts) {
      await attempt(`validation pass on ${backend}, n=${count}`, async () => {
        const r = await benchValidation(count);
        console.log(
          `validation pass  ${r.backend.padEnd(6)} n=${String(r.count).padStart(6)}  ${fmt(r.seconds)} s  ${fmt(r.perSecond, 0)}/s  baseline ${fmt(r.baselinePerSecond, 0)}/s  ratio ${fmt(r.ratio, 2)}  peak RSS ${fmt(r.peakRssMb, 0)} MiB  heap after GC ${r.heapGrowthMb === null ? 'n/a' : fmt(r.heapGrowthMb)} MiB`,
        );
      });
    }
    await attempt(`HTTP on ${backend}`, async () => {
      const http = await benchHttp();
      printHttp(http.backend, http.rows, http.events);
      for (const failure of http.failures) failures.push({ what: `HTTP on ${backend}: ${failure.scenario}`, problem: failure.problem });
    });
    if (SMOKE) {
      await attempt(`scale on ${backend}`, async () => {
        printScaleHeading(backend);
        // One small size unless told: the mode's code paths, not its figures.
        for (const count of process.env.BENCH_SCALE_SIZES ? scaleSizes() : [500]) printScaleRow(await benchScale(count));
      });
      await attempt(`soak on ${backend}`, async () => {
        process.env.SOAK_SECONDS ??= '5';
        process.env.SOAK_WARMUP_SECONDS ??= '0';
        const { soak, soakProblems } = await import('./soak.ts');
        const result = await soak();
        console.log(`soak: ${result.requests} requests, ${result.rps} req/s, 5xx ${result.fiveXx}, events ${result.eventsCreated} created / ${result.eventsDelivered} delivered`);
        for (const problem of soakProblems(result)) failures.push({ what: `soak on ${backend}`, problem });
      });
    }
  } finally {
    if (url) process.env.BENCH_DATABASE_URL = url;
  }
}

if (PENDING.length) console.log('\nBenchmarks waiting for their routes (bench/cases.ts PENDING):');
for (const pending of PENDING) console.log(`- ${pending.name}: ${pending.measures}; target ${pending.target}`);

if (!reportFailures('bench', failures.map((f) => ({ scenario: f.what, problem: f.problem })))) {
  console.error(`bench: ${failures.length} failure(s)`);
  process.exitCode = 1;
} else if (SMOKE) console.log('bench smoke: every benchmark ran, every answer was as expected');
