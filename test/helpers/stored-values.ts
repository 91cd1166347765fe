// Everything the database holds, as text: every row of every table in the public schema (the
// secrets scan's view of what a dump of the database would show).
import { sql } from 'drizzle-orm';
import { type Database, queryRows } from '../../src/db/client.ts';

/** Each row of each table of the public schema as its text form, joined; drizzle's bookkeeping included. */
export async function everyStoredValue(database: Database): Promise<string> {
  const tables = await queryRows<{ table_schema: string; table_name: string }>(
    database.db,
    sql`SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`,
  );
  const parts: string[] = [];
  for (const { table_schema, table_name } of tables) {
    const rows = await queryRows<{ row: string }>(database.db, sql.raw(`SELECT t::text AS row FROM "${table_schema}"."${table_name}" t`));
    parts.push(`${table_name}:`, ...rows.map((r) => r.row));
  }
  return parts.join('\n');
}
