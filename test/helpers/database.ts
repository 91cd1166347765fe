import pg from 'pg';
import { ulid } from 'ulidx';
import { type Database, openPglite, openPostgres } from '../../src/db/client.ts';

/** Set by .ci/run for the PostgreSQL pass: an admin URL of a throwaway server. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;
export const backend: 'pg' | 'pglite' = TEST_DATABASE_URL ? 'pg' : 'pglite';

export interface TestDatabase {
  database: Database;
  /** The URL of this test's own PostgreSQL database (pg backend only). */
  url?: string;
  drop(): Promise<void>;
}

/** A fresh, migrated database of its own for one test file: PGlite in memory, or a new PostgreSQL database. */
export async function createTestDatabase(options: { migrate?: boolean; onQuery?: (query: string) => void } = {}): Promise<TestDatabase> {
  const observe = options.onQuery ? { onQuery: options.onQuery } : {};
  if (!TEST_DATABASE_URL) {
    const database = await openPglite({ dataDir: 'memory://', ...observe });
    if (options.migrate !== false) await database.migrate();
    return { database, drop: () => database.close() };
  }
  const url = await createPgDatabase();
  const database = await openPostgres({ url, poolMax: 10, statementTimeout: 30, connectTimeout: 5, ...observe });
  if (options.migrate !== false) await database.migrate();
  return {
    database,
    url,
    drop: async () => {
      await database.close();
      await dropPgDatabase(url);
    },
  };
}

/** Creates an empty PostgreSQL database on the test server and returns its URL. */
export async function createPgDatabase(): Promise<string> {
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  const name = `tessera_test_${ulid().toLowerCase()}`;
  try {
    await admin.query(`CREATE DATABASE ${name}`);
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
