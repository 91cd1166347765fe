import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { ulid } from 'ulidx';
import { inject, type ProvidedContext } from 'vitest';
import { type Database, MIGRATIONS_DIR, openPglite, openPostgres, type PgliteOptions } from '../../src/db/client.ts';

/** Set by .ci/run for the PostgreSQL pass: an admin URL of a throwaway server. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;
export const backend: 'pg' | 'pglite' = TEST_DATABASE_URL ? 'pg' : 'pglite';

export interface TestDatabase {
  database: Database;
  /** The URL of this test's own PostgreSQL database (pg backend only). */
  url?: string;
  drop(): Promise<void>;
}

/**
 * A fresh, migrated database of its own for one test file: PGlite in memory, or a new PostgreSQL
 * database. Both start from the templates vitest's global setup built once per run (decision 258):
 * PGlite loads a dumped data directory instead of running initdb, PostgreSQL copies a migrated
 * database (`CREATE DATABASE … TEMPLATE`). `migrate: false` gives a database that never saw a
 * migration (PGlite: the data directory right after initdb; PostgreSQL: an empty database), for the
 * tests of migrations themselves. The database is still the test's own: nothing is shared.
 * `migrate()` still runs on the migrated copy; it finds every migration applied.
 */
export async function createTestDatabase(options: { migrate?: boolean; onQuery?: (query: string) => void } = {}): Promise<TestDatabase> {
  const observe = options.onQuery ? { onQuery: options.onQuery } : {};
  const migrate = options.migrate !== false;
  if (!TEST_DATABASE_URL) {
    const database = await openPglite({ dataDir: 'memory://', ...observe, start: await pgliteStart(migrate), sharedBuffers: TEST_SHARED_BUFFERS });
    if (migrate) await database.migrate();
    return { database, drop: () => database.close() };
  }
  const url = await createPgDatabase(migrate ? (provided('pgTemplate') ?? undefined) : undefined);
  const database = await openPostgres({ url, poolMax: 10, statementTimeout: 30, connectTimeout: 5, ...observe });
  if (migrate) await database.migrate();
  return {
    database,
    url,
    drop: async () => {
      await database.close();
      await dropPgDatabase(url);
    },
  };
}

/**
 * A new DATA_DIR for a spawned `tessera` (or an in-process store) on the embedded database. In a
 * vitest run its `pglite` directory is already past PGlite's own initdb — a copy of the global
 * setup's (0.1 s where initdb into a new directory costs ~10 s of CPU) — and nothing else: no
 * migration, no table, no file of Tessera's, so a first start on it does everything a first start
 * does but PGlite's initdb. `{ initdb: true }` (or outside vitest) gives an empty directory, for the
 * tests of a truly new DATA_DIR.
 */
export function newDataDir(prefix: string, options: { initdb?: boolean } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const templates = provided('pgliteTemplates');
  if (templates && !options.initdb) cpSync(templates.initdb, join(dir, 'pglite'), { recursive: true });
  return dir;
}

/** What vitest's global setup provided; undefined outside a vitest run (then databases start from scratch). */
function provided<K extends 'pgTemplate' | 'pgliteTemplates'>(key: K): ProvidedContext[K] | undefined {
  try {
    return inject(key);
  } catch {
    return undefined;
  }
}

/** The global `WebAssembly` (the project's TypeScript libraries declare its types only). */
const wasmApi = (globalThis as unknown as { WebAssembly: { compile(bytes: Uint8Array): Promise<WebAssembly.Module> } }).WebAssembly;

/**
 * A dumped data directory PGlite reads with one copy of its bytes. PGlite asks the Blob it is given
 * for `arrayBuffer()`, which Node's Blob assembles chunk by chunk: ~0.45 s of CPU for the 42 MB
 * template, at every test database (decision 341).
 */
class TemplateBytes extends Blob {
  readonly #bytes: Uint8Array;
  constructor(bytes: Uint8Array) {
    super([]);
    this.#bytes = bytes;
  }
  override arrayBuffer(): Promise<ArrayBuffer> {
    // A copy of exactly these bytes (a Buffer's own `slice` is a view into a possibly larger, shared one).
    return Promise.resolve(Uint8Array.prototype.slice.call(this.#bytes).buffer as ArrayBuffer);
  }
}

/**
 * A test database's PostgreSQL buffers: 4 MB rather than 128 MB. PostgreSQL zeroes its buffers at
 * every start, ~0.7 s of CPU in PGlite's `memset` per test database; a test's few megabytes of data
 * fit in 4 MB, and a page that does not is read back from PGlite's memory (decision 341).
 */
const TEST_SHARED_BUFFERS = '4MB';

/** Read once per process: the templates' bytes, the compiled WebAssembly module, the file-system bundle. */
const loaded = new Map<string, Promise<Blob>>();
let wasm: Promise<{ pgliteWasmModule: WebAssembly.Module; fsBundle: Blob }> | undefined;

async function pgliteStart(migrated: boolean): Promise<PgliteOptions['start']> {
  const templates = provided('pgliteTemplates');
  if (!templates) return undefined;
  const file = migrated ? templates.migrated : templates.empty;
  let template = loaded.get(file);
  if (!template) {
    template = readFile(file).then((bytes) => new TemplateBytes(bytes));
    loaded.set(file, template);
  }
  return { loadDataDir: await template, ...(await compiledPglite()) };
}

/**
 * PGlite's WebAssembly module compiled, and its file-system bundle read, once per process: a test's
 * in-process store on disk (test/helpers/cli.ts) opens with them, and with a test database's buffers.
 */
export async function onDiskPglite(): Promise<Pick<PgliteOptions, 'start' | 'sharedBuffers'>> {
  return { start: await compiledPglite(), sharedBuffers: TEST_SHARED_BUFFERS };
}

function compiledPglite(): Promise<{ pgliteWasmModule: WebAssembly.Module; fsBundle: Blob }> {
  wasm ??= (async () => {
    const dist = createRequire(import.meta.url).resolve('@electric-sql/pglite').replace(/index\.c?js$/, '');
    const [module, bundle] = await Promise.all([readFile(`${dist}pglite.wasm`).then((bytes) => wasmApi.compile(bytes)), readFile(`${dist}pglite.data`)]);
    return { pgliteWasmModule: module, fsBundle: new Blob([bundle]) };
  })();
  return wasm;
}

/** Creates a PostgreSQL database on the test server (empty, or a copy of `template`) and returns its URL. */
export async function createPgDatabase(template?: string): Promise<string> {
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  const name = `tessera_test_${ulid().toLowerCase()}`;
  try {
    await admin.query(template ? `CREATE DATABASE ${name} TEMPLATE ${template}` : `CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(TEST_DATABASE_URL as string);
  url.pathname = `/${name}`;
  return url.href;
}

export async function dropPgDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/** A migrations folder holding only the journal's entries before `idx` (drizzle applies a journal's entries in order). */
export function migrationsBefore(idx: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-migrations-'));
  mkdirSync(join(dir, 'meta'));
  const journal = JSON.parse(readFileSync(join(MIGRATIONS_DIR, 'meta', '_journal.json'), 'utf8')) as { entries: { idx: number; tag: string }[] };
  const earlier = journal.entries.filter((entry) => entry.idx < idx);
  for (const entry of earlier) copyFileSync(join(MIGRATIONS_DIR, `${entry.tag}.sql`), join(dir, `${entry.tag}.sql`));
  writeFileSync(join(dir, 'meta', '_journal.json'), JSON.stringify({ ...journal, entries: earlier }));
  return dir;
}
