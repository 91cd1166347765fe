/**
 * PostgreSQL's connection slots against what Tessera's pools can take (issue 35, decision 253):
 * start-up and `tessera doctor` warn when the instances × DB_POOL_MAX, with the connections other
 * clients hold, can exceed the slots a non-superuser may use. At run time a full slot table is a
 * 503 (db/failure.ts); this says so before it happens.
 */
import { type Db, INSTANCE_APPLICATION_PREFIX, queryRows, sql } from './client.ts';

export interface ConnectionSlots {
  /** `max_connections`. */
  maxConnections: number;
  /** `superuser_reserved_connections` + `reserved_connections` (PostgreSQL 16+; 0 before). */
  reserved: number;
  /** The slots ordinary roles may use: `maxConnections - reserved`. */
  usable: number;
  /** Other Tessera instances with a connection open now (distinct `application_name` `tessera/…`). */
  otherInstances: number;
  /** Connections held now by clients that are not Tessera instances (this check's own excluded). */
  otherConnections: number;
}

/** Reads the server's slots and who holds connections now. `self`: this instance's `application_name` (null: the caller is not an instance, e.g. `doctor`). */
export async function readConnectionSlots(db: Db, self: string | null): Promise<ConnectionSlots> {
  const like = `${INSTANCE_APPLICATION_PREFIX}%`;
  const [row] = await queryRows<{ max: number; superuser: number; reserved: number; instances: number; others: number }>(
    db,
    sql`SELECT current_setting('max_connections')::int AS max,
               current_setting('superuser_reserved_connections')::int AS superuser,
               coalesce(nullif(current_setting('reserved_connections', true), ''), '0')::int AS reserved,
               (SELECT count(DISTINCT application_name)::int FROM pg_stat_activity
                 WHERE application_name LIKE ${like} AND application_name IS DISTINCT FROM ${self}) AS instances,
               (SELECT count(*)::int FROM pg_stat_activity
                 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
                   AND coalesce(application_name, '') NOT LIKE ${like} AND application_name IS DISTINCT FROM ${self}) AS others`,
  );
  if (!row) throw new Error('the connection-slot query returned no row');
  const reserved = Number(row.superuser) + Number(row.reserved);
  return {
    maxConnections: Number(row.max),
    reserved,
    usable: Number(row.max) - reserved,
    otherInstances: Number(row.instances),
    otherConnections: Number(row.others),
  };
}

/**
 * The warning, with the numbers and the fix, when `instances` pools of `poolMax` connections,
 * plus what other clients hold now, can exceed the usable slots; null when they fit.
 */
export function connectionSlotsWarning(slots: ConnectionSlots, instances: number, poolMax: number): string | null {
  const wanted = instances * poolMax + slots.otherConnections;
  if (wanted <= slots.usable) return null;
  const free = Math.max(0, slots.usable - slots.otherConnections);
  const fitting = Math.floor(free / instances);
  const lower = fitting >= 1 ? `lower DB_POOL_MAX to ${fitting} or less` : 'stop some of the other clients';
  const others = slots.otherConnections > 0 ? ` + ${slots.otherConnections} held by other clients` : '';
  return (
    `connection slots: ${instances} Tessera instance${instances === 1 ? '' : 's'} × DB_POOL_MAX ${poolMax}${others} = ${wanted} connections can exceed the ${slots.usable} ` +
    `PostgreSQL allows (max_connections ${slots.maxConnections} − ${slots.reserved} reserved); when they are all taken requests answer 503. ` +
    `Fix: ${lower}, or raise max_connections to at least ${wanted + slots.reserved}`
  );
}
