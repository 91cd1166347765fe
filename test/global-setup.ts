import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { ulid } from 'ulidx';
import type { TestProject } from 'vitest/node';
import { MIGRATIONS_DIR, openPostgres } from '../src/db/client.ts';
import { chooseChromium } from './helpers/browser-path.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /**
     * PGlite: files holding dumped data directories, one after initdb only, one migrated (decision 258);
     * and `initdb`, that first one unpacked on disk, which a spawned process's DATA_DIR copies (`newDataDir`).
     */
    pgliteTemplates: { empty: string; migrated: string; initdb: string } | null;
    /** PostgreSQL: the name of a database migrated once, which each test file's database copies (decision 258). */
    pgTemplate: string | null;
  }
}

/**
 * Runs once per run (per project), before the test files run in parallel:
 * - unpacks the bundled Chromium: two workers unpacking it at the same moment could each see the
 *   other's half-written binary;
 * - builds the database templates each test file's database starts from (decision 258): on PGlite
 *   two dumped data directories (initdb alone costs seconds per database), on PostgreSQL a migrated
 *   database of a name unique to this run, dropped at the end.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  await chooseChromium();
  const url = process.env.TEST_DATABASE_URL;
  if (!url) {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-test-templates-'));
    const [{ PGlite }, { drizzle }, { migrate }] = await Promise.all([
      import('@electric-sql/pglite'),
      import('drizzle-orm/pglite'),
      import('drizzle-orm/pglite/migrator'),
    ]);
    const client = await PGlite.create();
    const empty = join(dir, 'empty.tar');
    const migrated = join(dir, 'migrated.tar');
    // A checkpoint first: a copy then starts without WAL to replay.
    const dump = async () => {
      await client.exec('CHECKPOINT');
      return new Uint8Array(await (await client.dumpDataDir('none')).arrayBuffer());
    };
    const initdb = join(dir, 'initdb', 'pglite');
    try {
      const emptyBytes = await dump();
      writeFileSync(empty, emptyBytes);
      mkdirSync(join(dir, 'initdb'));
      // On disk as a DATA_DIR holds it: PGlite's initdb into a new directory costs ~10 s of CPU, a copy of this 0.1 s.
      await (await PGlite.create({ dataDir: initdb, loadDataDir: new Blob([emptyBytes]) })).close();
      // What openPglite's migrate() runs: the committed migrations through Drizzle's migrator.
      await migrate(drizzle(client), { migrationsFolder: MIGRATIONS_DIR });
      writeFileSync(migrated, await dump());
    } finally {
      await client.close();
    }
    project.provide('pgliteTemplates', { empty, migrated, initdb });
    project.provide('pgTemplate', null);
    return async () => rmSync(dir, { recursive: true, force: true });
  }
  const name = `tessera_template_${ulid().toLowerCase()}`;
  await admin(url, `CREATE DATABASE ${name}`);
  const templateUrl = new URL(url);
  templateUrl.pathname = `/${name}`;
  const database = await openPostgres({ url: templateUrl.href, poolMax: 1, statementTimeout: 60, connectTimeout: 10 });
  try {
    await database.migrate();
  } finally {
    await database.close();
  }
  project.provide('pgliteTemplates', null);
  project.provide('pgTemplate', name);
  return () => admin(url, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}

async function admin(url: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}
