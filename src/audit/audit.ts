import { and, desc, eq, lt } from 'drizzle-orm';
import { monotonicIds } from '../lib/ids.ts';
import type { Db } from '../db/client.ts';
import { auditLogs } from '../db/schema.ts';
import type { Principal } from '../http/context.ts';

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

export interface AuditActor {
  principal: Principal | null;
  requestId: string | null;
  /** The acting user when there is no principal yet (registration, login). */
  userId?: string;
}

/** Writes one audit row with `db` (the transaction of the change, or its own). */
export async function recordAudit(db: Db, actor: AuditActor, entry: AuditEntry): Promise<void> {
  const principal = actor.principal;
  await db.insert(auditLogs).values({
    organizationId: entry.organizationId,
    id: nextId(),
    actorUserId: principal?.userId ?? actor.userId ?? null,
    impersonatorUserId: principal?.impersonatorId ?? null,
    credentialKind: principal?.kind ?? null,
    credentialId: principal?.credentialId ?? null,
    action: entry.action,
    targetType: entry.targetType ?? null,
    targetId: entry.targetId ?? null,
    requestId: actor.requestId,
    detail: entry.detail ?? {},
  });
}

export type AuditRow = typeof auditLogs.$inferSelect;

/** An organization's audit log, newest first, `first` rows after the cursor `after` (an entry id). */
export async function listAudit(db: Db, organizationId: string, options: { first: number; after?: string }): Promise<AuditRow[]> {
  const where = options.after
    ? and(eq(auditLogs.organizationId, organizationId), lt(auditLogs.id, options.after))
    : eq(auditLogs.organizationId, organizationId);
  return db.select().from(auditLogs).where(where).orderBy(desc(auditLogs.id)).limit(options.first);
}
