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

/** The actor's columns as plain values: who acted, as whom, with which credential. */
function actorColumns(actor: AuditActor) {
  const principal = actor.principal;
  return {
    actor_user_id: principal?.userId ?? actor.userId ?? null,
    impersonator_user_id: principal?.impersonatorId ?? null,
    credential_kind: principal?.kind ?? (actor.provider ? 'provider' : actor.operator ? 'operator' : null),
    credential_id: principal?.credentialId ?? actor.provider ?? null,
    request_id: actor.requestId,
  };
}

/** The actor's columns as parameters: who acted, as whom, with which credential. */
export function actorValues(actor: AuditActor): Pick<AuditValues, 'actorUserId' | 'impersonatorUserId' | 'credentialKind' | 'credentialId' | 'requestId'> {
  const columns = actorColumns(actor);
  return {
    actorUserId: sql`${columns.actor_user_id}::text`,
    impersonatorUserId: sql`${columns.impersonator_user_id}::text`,
    credentialKind: sql`${columns.credential_kind}::text`,
    credentialId: sql`${columns.credential_id}::text`,
    requestId: sql`${columns.request_id}::text`,
  };
}

/**
 * Writes several audit rows with `db` in one statement, each with its own actor (the changes of
 * provider events acted on together, each delivery its own request): the rows `recordAudit` would
 * write one by one, with ids in the order given.
 */
export async function recordAudits(db: Db, rows: readonly { actor: AuditActor; entry: AuditEntry }[]): Promise<void> {
  if (rows.length === 0) return;
  const values = rows.map(({ actor, entry }) => ({
    organization_id: entry.organizationId,
    id: nextId(),
    ...actorColumns(actor),
    action: entry.action,
    target_type: entry.targetType ?? null,
    target_id: entry.targetId ?? null,
    detail: entry.detail ?? {},
  }));
  const column = (name: string) => sql.raw(`a.${name}`);
  await db.execute(
    auditInsert(
      {
        organizationId: column('organization_id'),
        id: column('id'),
        actorUserId: column('actor_user_id'),
        impersonatorUserId: column('impersonator_user_id'),
        credentialKind: column('credential_kind'),
        credentialId: column('credential_id'),
        action: column('action'),
        targetType: column('target_type'),
        targetId: column('target_id'),
        requestId: column('request_id'),
        detail: column('detail'),
      },
      sql`json_to_recordset(${JSON.stringify(values)}::json) AS a(organization_id text, id text, actor_user_id text, impersonator_user_id text, credential_kind text, credential_id text, action text, target_type text, target_id text, request_id text, detail jsonb)`,
    ),
  );
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
