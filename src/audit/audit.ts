import { and, desc, eq, lt, type Placeholder, type SQL, sql } from 'drizzle-orm';
import { monotonicIds } from '../lib/ids.ts';
import type { Db } from '../db/client.ts';
import { auditLogs } from '../db/schema.ts';
import type { AuditActor } from '../ground/work.ts';

/** Monotonic: entries of one millisecond still sort in the order they were written. */
const nextId = monotonicIds();

/** A new audit entry id (for statements that write the audit row themselves). */
export function nextAuditId(): string {
  return nextId();
}

export interface AuditEntry {
  organizationId: string;
  action: string;
  targetType?: string;
  targetId?: string;
  /** Small, never secret: ids, names, outcomes. */
  detail?: Record<string, unknown>;
}

/** An SQL expression for one column: a parameter, a placeholder of a statement built once, or a column of its source. */
type Expression = SQL | Placeholder;

/** The value of each audit column. */
export interface AuditValues {
  organizationId: Expression;
  actorUserId: Expression;
  impersonatorUserId: Expression;
  credentialKind: Expression;
  credentialId: Expression;
  action: Expression;
  targetType: Expression;
  targetId: Expression;
  requestId: Expression;
  detail: Expression;
  /** Default: a new id as a parameter (statements built once pass a placeholder). */
  id?: Expression;
}

/**
 * The one way an audit row is written: `INSERT INTO audit_logs … SELECT <values> [FROM
 * <from>] RETURNING 1`. Hot statements embed it as a data-modifying CTE over their own rows
 * (`from`), so the row commits with the change it records in one round trip; `recordAudit`
 * runs it on its own.
 */
export function auditInsert(values: AuditValues, from?: SQL): SQL {
  const row = [
    values.organizationId,
    values.id ?? sql`${nextId()}`,
    values.actorUserId,
    values.impersonatorUserId,
    values.credentialKind,
    values.credentialId,
    values.action,
    values.targetType,
    values.targetId,
    values.requestId,
    values.detail,
  ];
  return sql`INSERT INTO audit_logs (organization_id, id, actor_user_id, impersonator_user_id, credential_kind, credential_id, action, target_type, target_id, request_id, detail)
    SELECT ${sql.join(row, sql`, `)}${from ? sql` FROM ${from}` : sql``} RETURNING 1`;
}

/** The actor's columns as parameters: who acted, as whom, with which credential. */
export function actorValues(actor: AuditActor): Pick<AuditValues, 'actorUserId' | 'impersonatorUserId' | 'credentialKind' | 'credentialId' | 'requestId'> {
  const principal = actor.principal;
  return {
    actorUserId: sql`${principal?.userId ?? actor.userId ?? null}::text`,
    impersonatorUserId: sql`${principal?.impersonatorId ?? null}::text`,
    credentialKind: sql`${principal?.kind ?? (actor.provider ? 'provider' : actor.operator ? 'operator' : null)}::text`,
    credentialId: sql`${principal?.credentialId ?? actor.provider ?? null}::text`,
    requestId: sql`${actor.requestId}::text`,
  };
}

/** Writes one audit row with `db` (the transaction of the change, or its own). */
export async function recordAudit(db: Db, actor: AuditActor, entry: AuditEntry): Promise<void> {
  await db.execute(
    auditInsert({
      organizationId: sql`${entry.organizationId}::text`,
      ...actorValues(actor),
      action: sql`${entry.action}::text`,
      targetType: sql`${entry.targetType ?? null}::text`,
      targetId: sql`${entry.targetId ?? null}::text`,
      detail: sql`${JSON.stringify(entry.detail ?? {})}::jsonb`,
    }),
  );
}

export type AuditRow = typeof auditLogs.$inferSelect;

/**
 * An organization's audit log, newest first, `first` rows after the cursor `after` (an entry
 * id), optionally only the rows about one integration, of one action, by one actor, or about one
 * type of target.
 */
export async function listAudit(
  db: Db,
  organizationId: string,
  options: { first: number; after?: string; integrationId?: string | undefined; action?: string | undefined; actorUserId?: string | undefined; targetType?: string | undefined },
): Promise<AuditRow[]> {
  const where = [eq(auditLogs.organizationId, organizationId)];
  if (options.after) where.push(lt(auditLogs.id, options.after));
  // An integration's rows name it as their target (connect, refresh, token read, status change, delete).
  if (options.integrationId) where.push(eq(auditLogs.targetType, 'integration'), eq(auditLogs.targetId, options.integrationId));
  if (options.action) where.push(eq(auditLogs.action, options.action));
  if (options.actorUserId) where.push(eq(auditLogs.actorUserId, options.actorUserId));
  if (options.targetType) where.push(eq(auditLogs.targetType, options.targetType));
  return db.select().from(auditLogs).where(and(...where)).orderBy(desc(auditLogs.id)).limit(options.first);
}
