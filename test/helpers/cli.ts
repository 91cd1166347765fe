import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { buildApp } from '../../src/app.ts';
import { type Database, openPglite, openPostgres, queryRows, sql } from '../../src/db/client.ts';
import { createLogger } from '../../src/http/logging.ts';
import type { FakeProvider } from '../fakes/common.ts';
import { LogCapture, testConfig } from './app.ts';
import { createPgDatabase, dropPgDatabase, newDataDir, onDiskPglite, TEST_DATABASE_URL } from './database.ts';
import { registerAndLogin } from './identity.ts';
import { ROOT, SHORT_RUN_NODE_FLAGS } from './process.ts';
import { connect, providerEnv } from './providers.ts';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `tessera <args>` as `npx tessera` would (bin/tessera.mjs on the pinned Node), with only `env` and PATH/HOME; resolves when it exits. */
export function runCli(args: string[], env: Record<string, string> = {}, options: { timeoutMs?: number; command?: string[] } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const [program, ...prefix] = options.command ?? [process.execPath, 'bin/tessera.mjs'];
    const child = spawn(program as string, [...prefix, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`tessera ${args.join(' ')} still running after ${options.timeoutMs ?? 60_000} ms:\n${stdout}\n${stderr}`));
    }, options.timeoutMs ?? 60_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      // The pipes may still hold the last chunk when the process is gone.
      setImmediate(() => resolve({ code, stdout, stderr }));
    });
  });
}

/** Starts `tessera <args>` and leaves it running (fakes, serve). */
export function startCli(args: string[], env: Record<string, string> = {}): { child: ChildProcess; output(): { stdout: string; stderr: string }; stop(): Promise<number | null> } {
  const child = spawn(process.execPath, [...SHORT_RUN_NODE_FLAGS, 'bin/tessera.mjs', ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const kill = () => child.kill('SIGKILL');
  process.on('exit', kill);
  return {
    child,
    output: () => ({ stdout, stderr }),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
      const code = await exited;
      process.off('exit', kill);
      return code;
    },
  };
}

/** A database for the local commands: a DATA_DIR of its own (PGlite), or a fresh PostgreSQL database when TEST_DATABASE_URL is set. */
export interface Store {
  /** DATA_DIR or DATABASE_URL, for the command's environment. */
  env: Record<string, string>;
  open(): Promise<Database>;
  /** Whether anything was created in it (a migration ran). */
  created(): Promise<boolean>;
  drop(): Promise<void>;
}

/** Whether a migration ever ran on the database `open` opens: its first table exists. */
async function hasSchema(open: () => Promise<Database>): Promise<boolean> {
  const database = await open();
  try {
    const [row] = await queryRows<{ present: boolean }>(database.db, sql`SELECT to_regclass('public.organizations') IS NOT NULL AS present`);
    return row?.present === true;
  } finally {
    await database.close();
  }
}

/** An empty store: for PGlite a new DATA_DIR (`newDataDir`: past PGlite's initdb, nothing of Tessera's; `initdb`: an empty directory). */
export async function emptyStore(options: { initdb?: boolean } = {}): Promise<Store> {
  if (TEST_DATABASE_URL) {
    const url = await createPgDatabase();
    const open = () => openPostgres({ url, poolMax: 2, statementTimeout: 30, connectTimeout: 5 });
    return {
      env: { DATABASE_URL: url },
      open,
      created: () => hasSchema(open),
      drop: () => dropPgDatabase(url),
    };
  }
  const dataDir = newDataDir('tessera-cli-', options);
  const open = async () => openPglite({ dataDir, ...(await onDiskPglite()) });
  return {
    env: { DATA_DIR: dataDir },
    open,
    created: async () => existsSync(join(dataDir, 'pglite')) && (await hasSchema(open)),
    drop: async () => rmSync(dataDir, { recursive: true, force: true }),
  };
}

export const KEY_OLD = `old:${Buffer.alloc(32, 11).toString('base64')}`;
export const KEY_NEW = `new:${Buffer.alloc(32, 12).toString('base64')}`;

/** A migrated store holding one GitHub integration's secrets, encrypted under `KEY_OLD` (connected through `fake` as `login`). */
export async function seededStore(fake: FakeProvider, login: string): Promise<Store> {
  const store = await emptyStore();
  const database = await store.open();
  try {
    await database.migrate();
    const config = testConfig({ ...providerEnv(fake), ENCRYPTION_KEYS: KEY_OLD });
    const app = await buildApp({ config, database, logger: createLogger({ level: 'warn', stream: new LogCapture() }) });
    try {
      const account = await registerAndLogin(app.fastify, 'cli-seed');
      const connected = await connect(app.fastify, account.token, fake, login);
      if (connected.statusCode !== 200) throw new Error(`seeding failed: ${connected.body}`);
    } finally {
      await app.fastify.close();
    }
  } finally {
    await database.close();
  }
  return store;
}

/** The key ids the store's secrets are encrypted under, sorted. */
export async function storedKeyIds(store: Store): Promise<string[]> {
  const database = await store.open();
  try {
    const rows = await queryRows<{ key_id: string }>(database.db, sql`SELECT key_id FROM integration_secrets ORDER BY key_id`);
    return rows.map((row) => row.key_id);
  } finally {
    await database.close();
  }
}
