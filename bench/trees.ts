/**
 * Cases of cases.ts in two checkouts head to head, in one process: the tree at BENCH_BEFORE (a
 * worktree of an earlier commit, its node_modules linked to this one's) and this tree, each with
 * its own fixture (app, database, fakes), short autocannon bursts alternating between them in a
 * random order each round — so whatever the machine does meanwhile falls on both alike, where
 * two separate runs minutes apart differ by ±20 % on a shared host. Prints, per case, each tree's
 * mean req/s and CPU µs per request (this process: both apps and autocannon), the ratio of the
 * means and the median and spread of the paired per-round ratios.
 * Usage: git worktree add --detach ../before <commit> && ln -s "$PWD/node_modules" ../before/node_modules
 *        BENCH_BEFORE=../before BENCH_CASES=token-jwt,token-api node --expose-gc bench/trees.ts
 *   (BENCH_DATABASE_URL=postgres://… for PostgreSQL; PAIR_ROUNDS, default 10; PAIR_DURATION seconds, default 3).
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { HttpCase } from './cases.ts';
import type { Fixture } from './fixture.ts';
import { type Measured, run } from './http.ts';

const ROUNDS = Number(process.env.PAIR_ROUNDS ?? 10);
const DURATION = Number(process.env.PAIR_DURATION ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);

interface Tree {
  name: 'before' | 'after';
  fixture: Fixture;
  cases: readonly HttpCase[];
}

async function load(name: Tree['name'], root: string): Promise<Tree> {
  const from = (file: string) => pathToFileURL(resolve(root, 'bench', file)).href;
  const { startFixture } = (await import(from('fixture.ts'))) as typeof import('./fixture.ts');
  const { CASES } = (await import(from('cases.ts'))) as typeof import('./cases.ts');
  return { name, fixture: await startFixture(), cases: CASES };
}

/** One burst of case `id` against `tree`'s fixture (http.ts's measurement). */
function burst(tree: Tree, id: string, duration: number): Promise<Measured> {
  const c = tree.cases.find((candidate) => candidate.id === id);
  if (!c) throw new Error(`the ${tree.name} tree has no case ${id}`);
  const { path, ...options } = c.request(tree.fixture);
  return run(`${tree.fixture.base}${path}`, options, null, duration);
}

const mean = (xs: number[]) => xs.reduce((sum, x) => sum + x, 0) / xs.length;
const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

const beforeRoot = process.env.BENCH_BEFORE;
const ids = (process.env.BENCH_CASES ?? '').split(',').filter((id) => id !== '');
if (!beforeRoot || ids.length === 0) {
  console.error('BENCH_BEFORE=<a checkout of the earlier commit> and BENCH_CASES=<case ids, comma-separated> are required');
  process.exit(2);
}
const trees = [await load('before', beforeRoot), await load('after', resolve(import.meta.dirname, '..'))] as const;
let failed = 0;
try {
  const seen = new Map<string, { before: Measured[]; after: Measured[] }>();
  for (const id of ids) {
    seen.set(id, { before: [], after: [] });
    // Warm-up of both trees' code paths, not measured.
    for (const tree of trees) failed += (await burst(tree, id, DURATION)).failed;
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const id of ids) {
      const order = Math.random() < 0.5 ? [trees[0], trees[1]] : [trees[1], trees[0]];
      for (const tree of order) {
        const measured = await burst(tree, id, DURATION);
        failed += measured.failed;
        seen.get(id)?.[tree.name].push(measured);
      }
    }
  }
  console.log(`${trees[1].fixture.database.kind}, before = ${beforeRoot}, ${ROUNDS} rounds of ${DURATION} s per case and tree, ${CONNECTIONS} connections`);
  console.log('| case | req/s before | req/s after | after ÷ before (means) | paired per round: median (min–max) | CPU µs/req before / after |\n|---|---|---|---|---|---|');
  for (const [id, { before, after }] of seen) {
    const ratios = after.map((m, n) => m.rps / (before[n] as Measured).rps);
    const rps = { before: mean(before.map((m) => m.rps)), after: mean(after.map((m) => m.rps)) };
    const cpu = { before: mean(before.map((m) => m.cpuUs)), after: mean(after.map((m) => m.cpuUs)) };
    console.log(
      `| ${id} | ${rps.before.toFixed(0)} | ${rps.after.toFixed(0)} | ${(rps.after / rps.before).toFixed(3)} | ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}) | ${cpu.before.toFixed(0)} / ${cpu.after.toFixed(0)} |`,
    );
  }
} finally {
  await Promise.all(trees.map((tree) => tree.fixture.close()));
}
if (failed > 0) {
  console.error(`${failed} answers were not 2xx (or failed): the comparison is void`);
  process.exit(1);
}
process.exit(0);
