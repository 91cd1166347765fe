/**
 * Runs every fault-injection script, one child process each (so each gets a clean
 * process, its own fake providers and its own throwaway database), prints each script's
 * checks and a summary; exits non-zero when any fault misbehaved. Results: docs/faults.md.
 *
 * Usage: node bench/faults/run.ts [name ...]   (names: the entries below, e.g. provider-hang:pg)
 */
import { spawn } from 'node:child_process';
import { ROOT } from './lib.ts';

const FAULTS: { name: string; file: string; args: string[] }[] = [
  { name: 'provider-hang:pg', file: 'provider-hang.ts', args: ['--backend=pg'] },
  { name: 'provider-hang:pglite', file: 'provider-hang.ts', args: ['--backend=pglite'] },
  { name: 'provider-garbage:pg', file: 'provider-garbage.ts', args: ['--backend=pg'] },
  { name: 'provider-garbage:pglite', file: 'provider-garbage.ts', args: ['--backend=pglite'] },
  { name: 'postgres-restart', file: 'postgres-restart.ts', args: [] },
  { name: 'sigkill-refresh', file: 'sigkill-refresh.ts', args: [] },
  { name: 'webhook-down:pg', file: 'webhook-down.ts', args: ['--backend=pg'] },
  { name: 'webhook-down:pglite', file: 'webhook-down.ts', args: ['--backend=pglite'] },
];

const wanted = process.argv.slice(2);
const selected = wanted.length ? FAULTS.filter((f) => wanted.includes(f.name) || wanted.includes(f.file.replace(/\.ts$/, ''))) : FAULTS;
if (selected.length === 0) {
  console.error(`no such fault: ${wanted.join(' ')}; known: ${FAULTS.map((f) => f.name).join(', ')}`);
  process.exit(2);
}

const summary: { name: string; code: number | null; seconds: number; result: string }[] = [];
for (const fault of selected) {
  const started = Date.now();
  const child = spawn(process.execPath, [`bench/faults/${fault.file}`, ...fault.args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let result = '';
  child.stdout.on('data', (chunk: Buffer) => {
    const text = chunk.toString();
    process.stdout.write(text);
    const line = /^RESULT .*$/m.exec(text)?.[0];
    if (line) result = line;
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  summary.push({ name: fault.name, code, seconds: (Date.now() - started) / 1000, result });
}

console.log('\n# summary');
for (const s of summary) console.log(`${s.code === 0 ? 'BEHAVED   ' : 'MISBEHAVED'} ${s.name.padEnd(24)} exit ${s.code} ${s.seconds.toFixed(0).padStart(4)} s`);
process.exitCode = summary.every((s) => s.code === 0) ? 0 : 1;
