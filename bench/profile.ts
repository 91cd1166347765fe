/**
 * Where a case's time goes. `node --cpu-prof --cpu-prof-dir=DIR bench/profile.ts <case id>
 * [seconds]` runs only that case of cases.ts (no baselines) under autocannon for `seconds`
 * (default 15) after a short warm-up, so the profile V8 writes at exit is mostly that load;
 * `node bench/profile.ts --top FILE.cpuprofile [n] [last seconds]` prints self time by function
 * and by package/source file (of the profile's last seconds only: the load, without start-up). autocannon runs in the same process: its share is listed as its own.
 */
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { CASES } from './cases.ts';
import { startFixture } from './fixture.ts';
import { fmt } from './lib.ts';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Where a frame's code lives: a package, a file of ours, Node itself, or V8's pseudo-frames. */
function area(url: string, name: string): string {
  if (!url) return name.startsWith('(') ? name : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1] as string;
  const ours = /\/((?:src|bench|test)\/.*)$/.exec(url);
  if (ours) return ours[1] as string;
  return url.startsWith('node:') ? url : url.replace(/^.*\//, '');
}

/** Self time (ms) by function and by area, largest first. */
export function topSelfTime(profile: Profile, lastSeconds = Number.POSITIVE_INFINITY): { total: number; byFunction: [string, number][]; byArea: [string, number][] } {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const fn = new Map<string, number>();
  const ar = new Map<string, number>();
  let total = 0;
  const span = profile.timeDeltas.reduce((sum, d) => sum + d, 0);
  let at = 0;
  profile.samples.forEach((id, i) => {
    const node = byId.get(id);
    const ms = (profile.timeDeltas[i] ?? 0) / 1000;
    at += profile.timeDeltas[i] ?? 0;
    // Only the last seconds: the load, not the start-up (module loading, migrations) before it.
    if (!node || span - at > lastSeconds * 1e6) return;
    const { functionName, url, lineNumber } = node.callFrame;
    const name = functionName || '(anonymous)';
    const where = area(url, name);
    const key = url ? `${name} ${where}:${lineNumber + 1}` : name;
    fn.set(key, (fn.get(key) ?? 0) + ms);
    ar.set(where, (ar.get(where) ?? 0) + ms);
    total += ms;
  });
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  return { total, byFunction: sorted(fn), byArea: sorted(ar) };
}

if (process.argv[2] === '--top') {
  const file = process.argv[3] ?? '';
  const n = Number(process.argv[4] ?? 25);
  const last = Number(process.argv[5] ?? Number.POSITIVE_INFINITY);
  const { total, byFunction, byArea } = topSelfTime(JSON.parse(readFileSync(file, 'utf8')) as Profile, last);
  const busy = total - (byArea.find(([a]) => a === '(idle)')?.[1] ?? 0);
  console.log(`${file}: ${fmt(total / 1000)} s sampled, ${fmt(busy / 1000)} s not idle; shares below are of the time not idle`);
  console.log('\n| self time by function | ms | % |\n|---|---|---|');
  for (const [key, ms] of byFunction.filter(([k]) => k !== '(idle)').slice(0, n)) console.log(`| ${key} | ${fmt(ms, 0)} | ${fmt((ms / busy) * 100)} |`);
  console.log('\n| self time by package or file | ms | % |\n|---|---|---|');
  for (const [key, ms] of byArea.filter(([k]) => k !== '(idle)').slice(0, n)) console.log(`| ${key} | ${fmt(ms, 0)} | ${fmt((ms / busy) * 100)} |`);
} else if (import.meta.url === `file://${process.argv[1]}`) {
  const id = process.argv[2] ?? 'token-api';
  const seconds = Number(process.argv[3] ?? 15);
  const c = CASES.find((x) => x.id === id);
  if (!c) throw new Error(`no case ${id}; cases: ${CASES.map((x) => x.id).join(', ')}`);
  const f = await startFixture();
  try {
    const { path, method, headers, body } = c.request(f);
    const load = (duration: number) =>
      autocannon({ url: f.base + path, method: (method ?? 'GET') as 'GET', headers: headers ?? {}, ...(body ? { body } : {}), connections: 16, duration });
    await load(3);
    const result = await load(seconds);
    console.log(`${c.name}: ${result.requests.total} requests, ${fmt(result.requests.average, 0)} req/s, p99 ${result.latency.p99} ms, non-2xx ${result.non2xx}`);
  } finally {
    await f.close();
  }
}
