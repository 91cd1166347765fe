/**
 * Log scrubbing micro-benchmark: `scrubLogLine` on four typical lines (a request's start and
 * finish, a connect link's start, a service line), in ns per line. With a second module path
 * (e.g. an older logging.ts copied next to src/http/ so its imports resolve), both run in
 * alternating rounds in one process, so a busy machine slows both alike.
 * Usage: node bench/scrub.ts [other-logging.ts]
 */
import { resolve } from 'node:path';
import { scrubLogLine } from '../src/http/logging.ts';

type Scrub = (line: string) => string;

const base = { level: 30, time: '2026-11-28T00:10:00.000Z', service: 'tessera', requestId: '01JDZ3K5M8Q2W4E6R8T0Y2U4I6' };
const LINES = [
  JSON.stringify({ ...base, method: 'GET', url: '/v1/integrations/github/token', route: '/v1/integrations/:provider/token', msg: 'request start' }),
  JSON.stringify({ ...base, method: 'GET', url: '/v1/integrations/github/token', route: '/v1/integrations/:provider/token', status: 200, durationMs: 1.23, msg: 'request finish' }),
  JSON.stringify({ ...base, method: 'GET', url: '/connect/AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCdE', route: '/connect/:secret', msg: 'request start' }),
  JSON.stringify({ ...base, level: 40, provider: 'github', integrationId: '01JDZ3K5M8Q2W4E6R8T0Y2U4I7', outcome: 'refreshed', msg: 'token refreshed after provider answered 200 in 123 ms' }),
];
const PER_ROUND = 100_000;
const ROUNDS = 21;

function round(scrub: Scrub): number {
  const started = process.hrtime.bigint();
  for (let i = 0; i < PER_ROUND; i++) scrub(LINES[i & 3] as string);
  return Number(process.hrtime.bigint() - started) / PER_ROUND;
}

const summary = (rounds: number[]) => {
  const sorted = [...rounds].sort((a, b) => a - b);
  return `min ${(sorted[0] as number).toFixed(0)} ns/line, median ${(sorted[Math.floor(sorted.length / 2)] as number).toFixed(0)} ns/line`;
};

const other = process.argv[2] ? ((await import(resolve(process.argv[2]))) as { scrubLogLine: Scrub }).scrubLogLine : undefined;
const contenders: [string, Scrub][] = [['this tree', scrubLogLine], ...(other ? ([[process.argv[2] as string, other]] as [string, Scrub][]) : [])];
for (let i = 0; i < 5; i++) for (const [, scrub] of contenders) round(scrub);
const results = contenders.map(([name]) => [name, [] as number[]] as const);
for (let r = 0; r < ROUNDS; r++) {
  contenders.forEach(([, scrub], index) => {
    results[index]?.[1].push(round(scrub));
  });
}
for (const [name, rounds] of results) console.log(`${name}: ${summary(rounds)}`);
