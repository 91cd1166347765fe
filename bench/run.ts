/**
 * npm run bench — every benchmark, on PGlite, and on PostgreSQL too when
 * BENCH_DATABASE_URL points at a server (an admin URL; a database is created and dropped).
 * Validation passes, then the HTTP scenarios. The soak (bench/soak.ts) and the fault
 * scripts (bench/faults/) run on their own. Results: docs/benchmarks.md.
 */
import { benchHttp, printHttp } from './http.ts';
import { benchValidation } from './validation.ts';
import { fmt } from './lib.ts';

const counts = (process.env.BENCH_VALIDATION_COUNTS ?? '1000,10000').split(',').map(Number);
const backends = process.env.BENCH_DATABASE_URL ? ['pglite', 'pg'] : ['pglite'];
console.log(`# node ${process.version}, ${new Date().toISOString()}`);
for (const backend of backends) {
  const saved = process.env.BENCH_DATABASE_URL;
  if (backend === 'pglite') delete process.env.BENCH_DATABASE_URL;
  try {
    for (const count of counts) {
      const r = await benchValidation(count);
      console.log(
        `validation pass  ${r.backend.padEnd(6)} n=${String(r.count).padStart(6)}  ${fmt(r.seconds)} s  ${fmt(r.perSecond, 0)}/s  baseline ${fmt(r.baselinePerSecond, 0)}/s  ratio ${fmt(r.ratio, 2)}  peak RSS ${fmt(r.peakRssMb, 0)} MiB  heap after GC ${r.heapGrowthMb === null ? 'n/a' : fmt(r.heapGrowthMb)} MiB`,
      );
    }
    const http = await benchHttp();
    printHttp(http.backend, http.rows);
  } finally {
    if (saved) process.env.BENCH_DATABASE_URL = saved;
  }
}
