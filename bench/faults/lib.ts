/**
 * Shared pieces of the fault-injection scripts (bench/faults/*.ts): a throwaway
 * PostgreSQL cluster, the service spawned as a child process (as `npm start` runs it),
 * HTTP helpers, accounts and connected integrations through the loopback fakes, and a
 * small check/report helper. Everything listens on 127.0.0.1 only.
 */
import { execFile, execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { FakeProvider } from '../../test/fakes/common.ts';
export { providerEnv } from '../../test/fakes/common.ts';
import { freePort, ROOT, type ServiceProcess, spawnService, waitFor } from '../../test/helpers/process.ts';

export { freePort, ROOT };

const run = promisify(execFile);

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));


// ---------------------------------------------------------------------------
// PostgreSQL: a throwaway cluster of our own (never the shared dev server).

export interface PgCluster {
  port: number;
  /** URL of database `name` (default `postgres`). */
  url(name?: string): string;
  /** `pg_ctl restart -m fast -w`. */
  restart(): Promise<void>;
  /** `pg_ctl stop -m fast -w`. */
  stop(): Promise<void>;
  /** `pg_ctl start -w`. */
  start(): Promise<void>;
  /** Stops the server (if running) and deletes its directory. Idempotent. */
  destroy(): void;
  createDatabase(name: string): Promise<string>;
}

function pgBin(): string {
  const bin = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
  return bin;
}

/**
 * initdb + start as the `postgres` user (PostgreSQL refuses root), in a temp directory,
 * on a free loopback port, fsync off. A process `exit` hook stops it if the script
 * forgets or crashes.
 */
export async function startCluster(settings: string[] = []): Promise<PgCluster> {
  const bin = pgBin();
  const dir = mkdtempSync(join(tmpdir(), 'tessera-faults-pg-'));
  const pgUser = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const pgGroup = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  chownSync(dir, pgUser, pgGroup);
  const port = await freePort();
  const data = join(dir, 'data');
  const asPostgres = (cmd: string, args: string[]) => run('runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args]);
  await asPostgres('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8']);
  const options = `-c listen_addresses=127.0.0.1 -c port=${port} -c unix_socket_directories=${dir} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200${settings.map((setting) => ` -c ${setting}`).join('')}`;
  const start = () => asPostgres('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-w', '-o', options, 'start']).then(() => undefined);
  await start();
  let destroyed = false;
  const destroy = () => {
    if (destroyed) return;
    destroyed = true;
    try {
      execFileSync('runuser', ['-u', 'postgres', '--', join(bin, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop'], { stdio: 'ignore' });
    } catch {
      // already stopped
    }
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', destroy);
  const url = (name = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${name}`;
  return {
    port,
    url,
    restart: () => asPostgres('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-m', 'fast', '-w', '-o', options, 'restart']).then(() => undefined),
    stop: () => asPostgres('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']).then(() => undefined),
    start,
    destroy,
    async createDatabase(name) {
      const pg = (await import('pg')).default;
      const admin = new pg.Client({ connectionString: url() });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${name}`);
      } finally {
        await admin.end();
      }
      return url(name);
    },
  };
}

/**
 * Storage for a spawned service: `pg` = a database on a new throwaway cluster,
 * `pglite` = a temporary DATA_DIR. `cleanup` removes either.
 */
export async function storage(backend: 'pg' | 'pglite'): Promise<{ env: Record<string, string>; cluster?: PgCluster; cleanup(): void }> {
  if (backend === 'pg') {
    const cluster = await startCluster();
    const url = await cluster.createDatabase('tessera_faults');
    return { env: { DATABASE_URL: url }, cluster, cleanup: () => cluster.destroy() };
  }
  const dir = mkdtempSync(join(tmpdir(), 'tessera-faults-data-'));
  return { env: { DATA_DIR: dir }, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** `--backend=pg|pglite` from argv (default `pg`). */
export function backendArg(): 'pg' | 'pglite' {
  const arg = process.argv.find((a) => a.startsWith('--backend='));
  const value = arg?.slice('--backend='.length) ?? 'pg';
  if (value !== 'pg' && value !== 'pglite') throw new Error(`--backend must be pg or pglite, got ${value}`);
  return value;
}

// ---------------------------------------------------------------------------
// The service as a child process.

export type { ServiceProcess as Service } from '../../test/helpers/process.ts';
export { spawnService };

/** Polls `/readyz` until 200, the process exits, or the deadline passes (120 s by default: a start on a loaded two-core host took 25–75 s). */
export function waitReady(service: ServiceProcess, timeoutMs = 120_000): Promise<void> {
  return waitFor(service, '/readyz', 200, timeoutMs);
}

/** Settings every fault run shares; `extra` wins. */
export function baseEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
    JWT_SECRET: 'f'.repeat(40),
    PASSWORD_COST: '10',
    RATE_LIMIT_MAX: '0',
    LOG_LEVEL: 'warn',
    PUBLIC_URL: 'http://127.0.0.1:8080',
    ...extra,
  };
}


// ---------------------------------------------------------------------------
// HTTP.

export interface Answer {
  /** 0 when the request failed at the network level or timed out. */
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: JSON answers are checked field by field
  json: Record<string, any>;
  text: string;
  headers: Headers;
  /** Milliseconds from sending to the end of the body. */
  ms: number;
  /** performance.now() at the start. */
  startedAt: number;
  error?: string;
}

export interface CallOptions {
  token?: string;
  body?: unknown;
  cookie?: string;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

/** One request; never throws (network failures come back as status 0). */
export async function call(baseUrl: string, method: string, path: string, options: CallOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.cookie) headers.cookie = options.cookie;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const startedAt = performance.now();
  try {
    const res = await fetch(baseUrl + path, {
      method,
      headers,
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
    });
    const text = await res.text();
    let json: Record<string, unknown> = {};
    try {
      json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      json = {};
    }
    return { status: res.status, json, text, headers: res.headers, ms: performance.now() - startedAt, startedAt };
  } catch (error) {
    const name = (error as Error).name;
    return { status: 0, json: {}, text: '', headers: new Headers(), ms: performance.now() - startedAt, startedAt, error: name === 'TimeoutError' ? 'timeout' : `network error (${name})` };
  }
}

/** Registers a user (which creates their personal organization) and signs in; returns the session token. */
export async function registerAndLogin(baseUrl: string, email: string, password = 'fault injection password'): Promise<{ token: string; organizationId: string }> {
  const registered = await call(baseUrl, 'POST', '/v1/register', { body: { email, password } });
  if (registered.status !== 201) throw new Error(`register ${email}: ${registered.status} ${registered.text}`);
  const login = await call(baseUrl, 'POST', '/v1/login', { body: { email, password } });
  if (login.status !== 200) throw new Error(`login ${email}: ${login.status} ${login.text}`);
  return { token: login.json.accessToken as string, organizationId: login.json.organizationId as string };
}

/** Connects `fake` for the caller's organization as the fake's user `login` (created if needed). */
export async function connectProvider(baseUrl: string, token: string, fake: FakeProvider, login: string): Promise<string> {
  try {
    fake.addUser({ login, email: `${login}@example.com` });
  } catch {
    // exists
  }
  const start = await call(baseUrl, 'POST', '/v1/integrations/oauth/start', { token, body: { provider: fake.id, redirectUri: 'http://127.0.0.1:8080/app' } });
  if (start.status !== 200) throw new Error(`oauth start: ${start.status} ${start.text}`);
  const cookie = (start.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  const approved = fake.authorize(start.json.authUrl as string, login);
  const callback = await call(baseUrl, 'POST', '/v1/integrations/oauth/callback', { cookie, body: { provider: fake.id, code: approved.code, state: approved.state } });
  if (callback.status !== 200) throw new Error(`oauth callback: ${callback.status} ${callback.text}`);
  return callback.json.integration.id as string;
}

// ---------------------------------------------------------------------------
// Figures and checks.

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}

export function latencySummary(values: number[]): string {
  if (values.length === 0) return 'n=0';
  return `n=${values.length} p50=${percentile(values, 50).toFixed(1)} ms p95=${percentile(values, 95).toFixed(1)} ms max=${Math.max(...values).toFixed(1)} ms`;
}

/** Counts of each status code, e.g. `200×12 502×3`. */
export function statusCounts(answers: { status: number }[]): string {
  const counts = new Map<number, number>();
  for (const a of answers) counts.set(a.status, (counts.get(a.status) ?? 0) + 1);
  return [...counts.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([status, n]) => `${status}×${n}`)
    .join(' ');
}

/** Collects named checks and figures; `finish` prints them and sets the exit code. */
export class Report {
  readonly title: string;
  private readonly checks: { name: string; ok: boolean; detail: string }[] = [];
  private readonly notes: string[] = [];
  private readonly started = Date.now();

  constructor(title: string) {
    this.title = title;
    const load = loadavg().map((n) => n.toFixed(1)).join(' ');
    console.log(`# ${title}  [${new Date().toISOString()}, node ${process.version}, ${cpus().length} cores, load average ${load}]`);
  }

  check(name: string, ok: boolean, detail = ''): boolean {
    this.checks.push({ name, ok, detail });
    console.log(`  ${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ` — ${detail}` : ''}`);
    return ok;
  }

  note(text: string): void {
    this.notes.push(text);
    console.log(`  note ${text}`);
  }

  get failed(): number {
    return this.checks.filter((c) => !c.ok).length;
  }

  /** Prints `output` (a service log) when FAULTS_VERBOSE is set. */
  log(label: string, output: string): void {
    if (process.env.FAULTS_VERBOSE) console.log(`--- ${label}\n${output}--- end of ${label}`);
  }

  /** Checks that none of `secrets` is in the service's log, then prints it when FAULTS_VERBOSE is set. */
  checkLogClean(name: string, log: string, secrets: (string | undefined)[]): boolean {
    const leaks = leaked(log, secrets);
    const ok = this.check(name, leaks.length === 0, leaks.length ? `found: ${leaks.map((leak) => leak.slice(0, 12)).join(', ')}` : `${log.split('\n').length - 1} log lines scanned`);
    this.log('service log', log);
    return ok;
  }

  finish(error?: unknown): void {
    if (error) this.check('script ran to the end', false, error instanceof Error ? (error.stack ?? error.message).split('\n').slice(0, 6).join(' | ') : String(error));
    const seconds = ((Date.now() - this.started) / 1000).toFixed(1);
    const verdict = this.failed === 0 && this.checks.length > 0 ? 'BEHAVED' : 'MISBEHAVED';
    console.log(`RESULT ${this.title}: ${verdict} (${this.checks.length - this.failed}/${this.checks.length} checks, ${seconds} s)`);
    process.exitCode = verdict === 'BEHAVED' ? 0 : 1;
  }
}

/** Fails when any of `values` occurs in `text` (tokens, provider bodies in logs or answers). */
export function leaked(text: string, values: (string | undefined)[]): string[] {
  return values.filter((v): v is string => typeof v === 'string' && v.length > 0 && text.includes(v));
}
