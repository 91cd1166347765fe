import { createHash, randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PGlite, PGliteOptions } from '@electric-sql/pglite';
import { fillPlaceholders, getTableColumns, type SQL, sql } from 'drizzle-orm';
import { type PgDatabase, PgDialect, type PgQueryResultHKT, type PgTable } from 'drizzle-orm/pg-core';
import { tracePglite } from '../telemetry/tracing.ts';
import { installNamedQueries, namedQueries } from './pglite-named.ts';
import * as schema from './schema.ts';

export type Schema = typeof schema;
/** A Drizzle handle: the root database or a transaction, on either backend. */
export type Db = PgDatabase<PgQueryResultHKT, Schema>;

export const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations', import.meta.url));
/** Advisory-lock key that serializes start-up (migrations, bootstrap) across instances. */
const STARTUP_LOCK_KEY = 7_214_003_117;

export interface Database {
  readonly kind: 'pg' | 'pglite';
  /** The `application_name` of its connections on PostgreSQL; null on PGlite. */
  readonly applicationName: string | null;
  readonly db: Db;
  /**
   * Applies the committed SQL migrations, then runs `then` (the other start-up steps), all
   * under one lock: on PostgreSQL an advisory lock held by a connection of its own, so
   * instances starting together take turns and each step sees what the previous instance
   * wrote. PGlite allows one process, so it needs none. Resolves with how many migrations
   * this call applied (0: the schema was up to date).
   */
  migrate(then?: () => Promise<void>): Promise<{ applied: number }>;
  /** Throws when the database cannot answer a trivial query. */
  ping(): Promise<void>;
  poolStats(): { total: number; idle: number; waiting: number };
  close(): Promise<void>;
}

export interface PgOptions {
  url: string;
  poolMax: number;
  /** Seconds. */
  statementTimeout: number;
  /** Seconds. */
  connectTimeout: number;
  /** Sees the text of every statement Drizzle runs (tests count them); nothing when absent. */
  onQuery?: (query: string) => void;
  /**
   * The connections' `application_name`. By default `tessera/<random id>`, one per process: the
   * connection-slot check counts the other instances by it (db/slots.ts, decision 253).
   */
  applicationName?: string;
}

/** `application_name` of a Tessera instance's connections: `tessera/` and an id of this process's pool. */
export const INSTANCE_APPLICATION_PREFIX = 'tessera/';

/**
 * PostgreSQL through a `pg` pool. Drivers load lazily: each costs start-up time the other backend
 * need not pay. `pg` (CommonJS) is loaded through `require`, where OpenTelemetry's pg
 * instrumentation sees it when traces are on (an ESM `import` would pass it by: decision 150).
 */
export async function openPostgres(options: PgOptions): Promise<Database> {
  const pg = createRequire(import.meta.url)('pg') as typeof import('pg');
  const applicationName = options.applicationName ?? `${INSTANCE_APPLICATION_PREFIX}${randomBytes(4).toString('hex')}`;
  const [{ drizzle: drizzlePg }, { migrate: migratePg }] = await Promise.all([import('drizzle-orm/node-postgres'), import('drizzle-orm/node-postgres/migrator')]);
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolMax,
    connectionTimeoutMillis: options.connectTimeout * 1000,
    statement_timeout: options.statementTimeout * 1000,
    idleTimeoutMillis: 30_000,
    application_name: applicationName,
  });
  // An idle client losing its server (e.g. PostgreSQL restarted) must not crash the process.
  pool.on('error', () => {});
  // Nor one checked out between two statements (a request's transaction waiting for its handler): `pg` emits the
  // socket's error on the client, which pg-pool listens to only while the client is idle. The client is then not
  // queryable; its next statement fails with an error db/failure.ts classifies (503), and the pool drops it on release.
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = drizzlePg(pool, { schema, ...queryObserver(options.onQuery) }) as unknown as Db;
  let closing: Promise<void> | undefined;
  return {
    kind: 'pg',
    applicationName,
    db,
    async migrate(then) {
      // Not a pool client: with DB_POOL_MAX=1 the steps under the lock would wait for it forever.
      const client = new pg.Client({ connectionString: options.url, connectionTimeoutMillis: options.connectTimeout * 1000, application_name: applicationName });
      client.on('error', () => {});
      await client.connect();
      try {
        await client.query('SELECT pg_advisory_lock($1)', [STARTUP_LOCK_KEY]);
        const before = await appliedMigrations(client);
        await migratePg(drizzlePg(client, { schema }), { migrationsFolder: MIGRATIONS_DIR });
        const applied = (await appliedMigrations(client)) - before;
        await then?.();
        return { applied };
      } finally {
        // Ending the session releases the lock, also when a step failed.
        await client.end();
      }
    },
    async ping() {
      await pool.query('SELECT 1');
    },
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    // Once: shutdown past its timeout closes it under requests still running, then again at the end.
    close: () => (closing ??= pool.end()),
  };
}

export interface PgliteOptions {
  /** A directory, or `memory://` for a throwaway database (tests). */
  dataDir: string;
  /** Sees the text of every statement Drizzle runs (tests count them); nothing when absent. */
  onQuery?: (query: string) => void;
  /**
   * Tests: start from a dumped data directory (`dumpDataDir('none')`, in memory only) instead of
   * running initdb, with the WebAssembly module and file-system bundle compiled and read once per
   * process (decision 258; on disk too).
   */
  start?: Pick<PGliteOptions, 'loadDataDir' | 'pgliteWasmModule' | 'fsBundle'>;
  /**
   * PostgreSQL's `shared_buffers`; PGlite's 128MB when absent. PostgreSQL zeroes them at every start
   * (~0.5 s of CPU for 128 MB): a command or a test database that does little asks for less (decision 341).
   */
  sharedBuffers?: string;
}

/** Drizzle's logger hook, only when someone observes: the default is no logger at all. */
function queryObserver(onQuery: ((query: string) => void) | undefined): { logger?: { logQuery(query: string): void } } {
  return onQuery ? { logger: { logQuery: (query: string) => onQuery(query) } } : {};
}

/**
 * The embedded PostgreSQL. PGlite has no cross-process lock of its own, so a lock
 * file under DATA_DIR refuses a second process on the same directory.
 */
export async function openPglite(options: PgliteOptions): Promise<Database> {
  const [{ PGlite, protocol, parse }, { drizzle: drizzlePglite }, { migrate: migratePglite }] = await Promise.all([
    import('@electric-sql/pglite'),
    import('drizzle-orm/pglite'),
    import('drizzle-orm/pglite/migrator'),
  ]);
  const withNamed = (created: PGlite) => {
    installNamedQueries(created, protocol, parse.parseResults);
    return created;
  };
  const inMemory = options.dataDir.startsWith('memory://');
  const startParams = options.sharedBuffers ? { startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${options.sharedBuffers}`] } : {};
  let releaseLock = () => {};
  let client: PGlite;
  if (inMemory) {
    client = tracePglite(withNamed(await PGlite.create({ ...options.start, ...startParams })));
  } else {
    mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
    releaseLock = lockDataDir(options.dataDir);
    try {
      const compiled = options.start ? { pgliteWasmModule: options.start.pgliteWasmModule, fsBundle: options.start.fsBundle } : {};
      client = tracePglite(withNamed(await PGlite.create({ dataDir: join(options.dataDir, 'pglite'), ...compiled, ...startParams })));
    } catch (error) {
      releaseLock();
      throw error;
    }
  }
  const db = drizzlePglite(client, { schema, ...queryObserver(options.onQuery) }) as unknown as Db;
  let closed = false;
  return {
    kind: 'pglite',
    applicationName: null,
    db,
    async migrate(then) {
      const before = await appliedMigrations(client);
      await migratePglite(drizzlePglite(client, { schema }), { migrationsFolder: MIGRATIONS_DIR });
      const applied = (await appliedMigrations(client)) - before;
      await then?.();
      return { applied };
    },
    async ping() {
      await client.query('SELECT 1');
    },
    poolStats: () => ({ total: 1, idle: 1, waiting: 0 }),
    async close() {
      if (closed) return;
      closed = true;
      await client.close();
      releaseLock();
    },
  };
}

/** How many migrations Drizzle has recorded as applied (0 before the first). */
async function appliedMigrations(client: { query(text: string): Promise<{ rows: unknown[] }> }): Promise<number> {
  const [present] = (await client.query(`SELECT to_regclass('drizzle.__drizzle_migrations') IS NOT NULL AS present`)).rows as { present: boolean }[];
  if (!present?.present) return 0;
  const [counted] = (await client.query('SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations')).rows as { n: number }[];
  return counted?.n ?? 0;
}

/** Thrown when another live process holds DATA_DIR. */
export class DataDirLockedError extends Error {}

function lockDataDir(dataDir: string): () => void {
  const file = join(dataDir, 'tessera.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(file, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const pid = Number(readFileSync(file, 'utf8').trim());
      if (pid && pid !== process.pid && isAlive(pid)) {
        throw new DataDirLockedError(
          `DATA_DIR ${dataDir} is in use by process ${pid}; stop it, or point DATA_DIR elsewhere (the embedded database allows one process; use DATABASE_URL for several)`,
        );
      }
      // A stale lock left by a process that died: take it over.
      rmSync(file, { force: true });
    }
  }
  throw new DataDirLockedError(`DATA_DIR ${dataDir}: could not take the lock file ${file}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Runs raw SQL and returns its rows, the same shape on both backends. */
export async function queryRows<T>(db: Db, query: SQL): Promise<T[]> {
  const result = (await db.execute(query)) as unknown as { rows: T[] };
  return result.rows;
}

const dialect = new PgDialect();
/** Rows as drizzle's PGlite session returns them (its `rawQueryConfig`): timestamp, timestamptz, interval, date and their arrays (and numeric[]) as text, by type oid. */
const PGLITE_ROWS = {
  rowMode: 'object' as const,
  parsers: Object.fromEntries([1114, 1184, 1186, 1082, 1231, 1115, 1185, 1187, 1182].map((oid) => [oid, (value: string) => value])),
};
const statementName = (text: string) => `t_${createHash('sha1').update(text).digest('base64url')}`;

type Prepared = ReturnType<Db['_']['session']['prepareQuery']>;

/**
 * A statement of the hot paths (authentication, token reads), written once with
 * `sql.placeholder(name)` for its values: its text is built once, and on PostgreSQL it is
 * prepared once per connection, named after its text, so the server parses it once and
 * reuses its plan — planning was most of the database's time on a token read. On PGlite it
 * is prepared once per database the same way (db/pglite-named.ts, decision 330).
 */
export class HotStatement<T> {
  private readonly query: ReturnType<PgDialect['sqlToQuery']>;
  private readonly name: string;
  private readonly byHandle = new WeakMap<object, Prepared>();

  constructor(query: SQL) {
    this.query = dialect.sqlToQuery(query);
    this.name = statementName(this.query.sql);
  }

  async rows(db: Db, values: Record<string, unknown>): Promise<T[]> {
    const session = db._.session;
    const named = namedQueries((session as unknown as { client?: unknown }).client);
    if (named) {
      const params = fillPlaceholders(this.query.params, values);
      (session as unknown as { logger: { logQuery(query: string, params: unknown[]): void } }).logger.logQuery(this.query.sql, params);
      return (await named.queryNamed<T>(this.name, this.query.sql, params, PGLITE_ROWS)).rows;
    }
    let prepared = this.byHandle.get(session);
    if (!prepared) {
      prepared = session.prepareQuery(this.query, undefined, this.name, false);
      this.byHandle.set(session, prepared);
    }
    return ((await prepared.execute(values)) as unknown as { rows: T[] }).rows;
  }
}

export { sql };

/**
 * Reads rows that a statement returned as `row_to_json` (one column instead of one per
 * field: cheaper to describe and parse on the hot paths) into the table's TypeScript shape:
 * snake_case keys to the schema's names, ISO timestamps to Dates. Derived from the table,
 * so it cannot fall out of step with the schema.
 */
export function rowFromJson<T extends PgTable>(table: T): (json: Record<string, unknown>) => T['$inferSelect'] {
  const columns = Object.entries(getTableColumns(table)).map(([key, column]) => ({ key, name: column.name, date: column.dataType === 'date' }));
  return (json) => {
    const row: Record<string, unknown> = {};
    for (const { key, name, date } of columns) {
      const value = json[name] ?? null;
      row[key] = date && value !== null ? new Date(value as string) : value;
    }
    return row as T['$inferSelect'];
  };
}

/** A connection of the pool held by one caller (PostgreSQL), so its statement never waits for one. */
export interface HeldConnection {
  /** Runs `query` on this connection, prepared by name (its text's hash): the server parses and plans it once per connection. */
  rows<T>(query: SQL): Promise<T[]>;
  /** Gives the connection back; `broken` closes it instead (a statement on it failed). Once. */
  release(broken?: boolean): void;
}

interface PgPoolLike {
  connect(): Promise<PgPoolClient>;
  idleCount: number;
  totalCount: number;
  waitingCount: number;
  options: { max: number };
}
interface PgPoolClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  off(event: 'error', listener: (error: Error) => void): unknown;
  release(error?: Error | boolean): void;
}

/** Connections held through `holdConnection` per pool: at most a quarter of the pool (at least one). */
const heldPerPool = new WeakMap<object, number>();

/**
 * Takes a connection of `db`'s pool now, for a statement that must not wait for one later
 * (the store of a rotated token, decision 255). Never queues: null when no connection is idle
 * and none can be opened, when a quarter of the pool is held this way already (a provider
 * that hangs must not take the pool from the requests), or on PGlite (one connection, no pool).
 */
export async function holdConnection(db: Db): Promise<HeldConnection | null> {
  const pool = (db as unknown as { $client?: Partial<PgPoolLike> }).$client;
  if (!pool || typeof pool.connect !== 'function' || typeof pool.idleCount !== 'number' || !pool.options) return null;
  const full = pool as PgPoolLike;
  const held = heldPerPool.get(full) ?? 0;
  const free = full.idleCount > 0 || (full.totalCount ?? 0) < full.options.max;
  if (held >= Math.max(1, Math.floor(full.options.max / 4)) || !free || full.waitingCount > 0) return null;
  heldPerPool.set(full, held + 1);
  let client: PgPoolClient;
  try {
    client = await full.connect();
  } catch {
    heldPerPool.set(full, (heldPerPool.get(full) ?? 1) - 1);
    return null;
  }
  // Checked out, the pool no longer listens: a server that ends the session must not crash the process.
  const ignore = () => {};
  client.on('error', ignore);
  let released = false;
  return {
    async rows<T>(query: SQL): Promise<T[]> {
      const { sql: text, params } = dialect.sqlToQuery(query);
      return (await client.query({ name: statementName(text), text, values: params })).rows as T[];
    },
    release(broken = false) {
      if (released) return;
      released = true;
      heldPerPool.set(full, (heldPerPool.get(full) ?? 1) - 1);
      // A broken connection is closed and may still report its end: it keeps the listener.
      if (!broken) client.off('error', ignore);
      client.release(broken);
    },
  };
}
