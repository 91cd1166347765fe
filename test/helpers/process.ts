import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Node flags for the servers tests spawn: V8 optimizes only PGlite's WebAssembly that runs ~75× longer
 * than its default asks. A server living a few seconds never earns back the ~2 s of CPU that optimizing
 * costs at boot, nor the ~1.8 s its exit then waits for the compiler (decision 339). `serve` itself
 * keeps V8's default; every other command sets this on its own (bin/tessera.mjs).
 */
export const SHORT_RUN_NODE_FLAGS = ['--wasm-tiering-budget=1000000000'];

/** A free loopback port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

export interface ServiceProcess {
  child: ChildProcess;
  port: number;
  url: string;
  output(): string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
  /** Sends `signal` (default SIGTERM) and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Spawns the service the way `npm start` does (or another `script` with `args`, e.g. a docs example; in `cwd`, default the project;
 * with `nodeFlags`, default SHORT_RUN_NODE_FLAGS), on
 * the pinned Node (process.execPath), on `port` or a free one. Keeps the last 256 KiB of its output (enough to explain a failure,
 * bounded over a long run); a process `exit` hook kills it if the caller never stops it.
 */
export async function spawnService(
  env: Record<string, string>,
  options: { port?: number; script?: string; args?: string[]; cwd?: string; stdin?: 'pipe'; nodeFlags?: string[] } = {},
): Promise<ServiceProcess> {
  const port = options.port ?? (await freePort());
  const child = spawn(process.execPath, [...(options.nodeFlags ?? SHORT_RUN_NODE_FLAGS), options.script ?? 'bin/tessera.mjs', ...(options.args ?? [])], {
    cwd: options.cwd ?? ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', HOST: '127.0.0.1', PORT: String(port), ...env },
    stdio: [options.stdin ?? 'ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (chunk: Buffer) => {
    out = (out + chunk.toString()).slice(-262_144);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const running = () => child.exitCode === null && child.signalCode === null;
  const kill = () => {
    if (running()) child.kill('SIGKILL');
  };
  process.on('exit', kill);
  return {
    child,
    port,
    url: `http://127.0.0.1:${port}`,
    output: () => out,
    exited,
    stop: async (signal = 'SIGTERM') => {
      if (running()) child.kill(signal);
      const code = await exited;
      process.off('exit', kill);
      return code;
    },
  };
}

/** Polls `path` until it answers `status`, or the process exits, or the deadline passes. */
export async function waitFor(service: ServiceProcess, path = '/readyz', status = 200, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (service.child.exitCode !== null || service.child.signalCode !== null) {
      throw new Error(`service exited (${service.child.exitCode ?? service.child.signalCode}):\n${service.output()}`);
    }
    try {
      const res = await fetch(service.url + path, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === status) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${path}:\n${service.output()}`);
}
