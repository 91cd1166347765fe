import { and, eq, sql } from 'drizzle-orm';
import { recordAudit, recordAudits } from '../audit/audit.ts';
import { type Db, HotStatement } from '../db/client.ts';
import { type IntegrationStatus, integrations } from '../db/schema.ts';
import type { AuditActor, UnitOfWork } from '../ground/work.ts';
import type { IntegrationRow } from './integrations.ts';

export type StatusAction = 'reconnect' | 'refresh' | 'configure';

/** Our words for a status the provider caused (never the provider's text); `lastError` holds one. */
export const REASONS = {
  unauthorized: 'token unauthorized',
  refreshRejected: 'refresh token rejected',
  forbidden: 'API access forbidden',
  unreachable: 'provider unreachable during validation',
  misconfigured: "provider rejected this deployment's client credentials",
  revokedAtProvider: 'access revoked at the provider',
} as const;

/** A status's cause, as a key of `REASONS`. */
export type Reason = keyof typeof REASONS;

const REASON_OF_WORDS: ReadonlyMap<string, Reason> = new Map(Object.entries(REASONS).map(([reason, words]) => [words, reason as Reason]));

/**
 * The reason a stored `lastError` records, read back as its key: the column holds `REASONS`'
 * values only (our words, never a provider's), so they are stored values like `status`'s and
 * are never reworded without rewriting the rows (decision 272). Null for none, or words of no reason.
 */
export function reasonOf(lastError: string | null): Reason | null {
  return lastError === null ? null : (REASON_OF_WORDS.get(lastError) ?? null);
}

/** The reasons whose `warning` only this deployment's operator can mend: a refresh cannot help (docs/contract.md §5). */
const CONFIGURATION_REASONS: ReadonlySet<Reason> = new Set(['misconfigured']);

/** The status object the user interface shows (docs/seed.md, docs/contract.md §5). */
export interface StatusObject {
  provider: string;
  connected: boolean;
  status: IntegrationStatus;
  tokenValid: boolean;
  tokenExpired: boolean;
  lastValidated: string | null;
  message: string;
  actions: StatusAction[];
  lastError?: string;
  detectedAt?: string;
}

/** The status value as of `now`: a stored connected/warning token past its expiry reads as `expired`. */
export function effectiveStatus(row: Pick<IntegrationRow, 'status' | 'tokenExpiresAt'>, now = Date.now()): IntegrationStatus {
  const expired = row.tokenExpiresAt !== null && row.tokenExpiresAt.getTime() <= now;
  if (expired && (row.status === 'connected' || row.status === 'warning')) return 'expired';
  return row.status;
}

/** Builds the status object from the stored row. */
export function statusObject(row: IntegrationRow, displayName: string, now = Date.now()): StatusObject {
  const status = effectiveStatus(row, now);
  const reason = reasonOf(row.lastError);
  const tokenExpired = row.tokenExpiresAt !== null && row.tokenExpiresAt.getTime() <= now;
  const base = { provider: row.provider, lastValidated: row.lastValidatedAt?.toISOString() ?? null };
  const failure = {
    ...(row.lastError ? { lastError: row.lastError } : {}),
    ...(row.detectedAt ? { detectedAt: row.detectedAt.toISOString() } : {}),
  };
  switch (status) {
    case 'connected':
      return { ...base, status, connected: true, tokenValid: true, tokenExpired: false, message: `${displayName} is connected.`, actions: [] };
    case 'warning':
      // Rejected client credentials are this deployment's to fix: a refresh cannot help (docs/contract.md §5).
      if (reason !== null && CONFIGURATION_REASONS.has(reason)) {
        return {
          ...base,
          status,
          connected: true,
          tokenValid: row.tokenValid,
          tokenExpired: false,
          message: `${displayName} rejected this deployment's client credentials. An administrator must check the provider's client id and secret in Tessera's configuration.`,
          actions: ['configure'],
          ...failure,
        };
      }
      return {
        ...base,
        status,
        connected: true,
        tokenValid: row.tokenValid,
        tokenExpired: false,
        message: `${displayName} is connected, but its last answer was a problem. Try a refresh; if it persists, check the app's permissions and configuration.`,
        actions: ['refresh', 'configure'],
        ...failure,
      };
    case 'expired':
      return {
        ...base,
        status,
        connected: false,
        tokenValid: false,
        tokenExpired: true,
        message: row.hasRefreshToken
          ? `The ${displayName} token has expired. Refresh it, or reconnect ${displayName}.`
          : `The ${displayName} token has expired. Reconnect ${displayName} to continue.`,
        actions: row.hasRefreshToken ? ['refresh', 'reconnect'] : ['reconnect'],
        ...failure,
        ...(failure.lastError ? {} : { lastError: 'access token expired' }),
      };
    case 'invalid':
      return {
        ...base,
        status,
        connected: false,
        tokenValid: false,
        tokenExpired,
        message: `${displayName} no longer accepts this connection. Reconnect ${displayName} to restore it.`,
        actions: ['reconnect'],
        ...failure,
      };
  }
}

/** How a status change was learnt (docs/contract.md §5b `source`): named in `integration.status_changed`. */
export type TransitionSource = 'refresh' | 'validation' | 'proxy' | 'provider_event' | 'connect';

export interface Transition {
  status: IntegrationStatus;
  /** Our words (`REASONS`): e.g. 'token unauthorized', 'API access forbidden'. */
  lastError: string | null;
  tokenValid?: boolean;
  /** Set when the transition follows a completed validation. */
  validated?: boolean;
  nextValidationAt?: Date;
  source?: TransitionSource;
  /** The provider's delivery id, when its event caused the transition: kept in the audit row. */
  deliveryId?: string;
  /**
   * Applied only while the row's status is still this one (a result held since the row was read,
   * decision 333): a status another request set meanwhile, on newer evidence, stands.
   */
  onlyFrom?: IntegrationStatus;
}

function transitionFields(next: Transition, now: Date) {
  return {
    status: next.status,
    lastError: next.lastError,
    ...(next.tokenValid !== undefined ? { tokenValid: next.tokenValid } : {}),
    ...(next.validated ? { lastValidatedAt: now } : {}),
    ...(next.nextValidationAt ? { nextValidationAt: next.nextValidationAt } : {}),
    updatedAt: sql`now()`,
  };
}

const byId = (organizationId: string, integrationId: string) => and(eq(integrations.organizationId, organizationId), eq(integrations.id, integrationId));

/**
 * The common case of a transition, in one `UPDATE` outside any transaction: the status stays
 * what it is (a connected token validated again, another 403 of a `warning` one), so there is
 * no audit row and no event. Returns the row after, or null when the status would change (or
 * the row is gone): then `applyTransition` does it in a unit of work.
 */
export async function keepStatus(db: Db, organizationId: string, integrationId: string, next: Transition): Promise<IntegrationRow | null> {
  const [unchanged] = await db
    .update(integrations)
    .set({ ...transitionFields(next, new Date()), detectedAt: next.status === 'connected' ? null : sql`coalesce(${integrations.detectedAt}, now())` })
    .where(and(byId(organizationId, integrationId), eq(integrations.status, next.status)))
    .returning();
  return unchanged ?? null;
}

/** A validation that found a token good, to be written with others (`keepConnectedMany`). */
export interface HeldValidation {
  organizationId: string;
  id: string;
  /** When the provider answered. */
  validatedAt: Date;
  nextValidationAt: Date;
  /** The row's status when the check read it. */
  from: IntegrationStatus;
}

const KEEP_CONNECTED = new HotStatement<{ organization_id: string; id: string }>(sql`UPDATE integrations AS i
  SET status = 'connected', last_error = NULL, token_valid = true, last_validated_at = v.validated_at, next_validation_at = v.next_validation_at,
    detected_at = NULL, updated_at = now()
  FROM json_to_recordset(${sql.placeholder('rows')}::text::json) AS v(organization_id text, id text, validated_at timestamptz, next_validation_at timestamptz)
  WHERE i.organization_id = v.organization_id AND i.id = v.id AND i.status = 'connected'
  RETURNING i.organization_id, i.id`);

/**
 * `keepStatus` for many validations that found their tokens good, in one statement (a validation
 * pass's batch, decision 333): each row `connected` is written as `keepStatus` writes it, no audit
 * row and no event. Returns the keys (`organizationId:id`) written; a row not among them is not
 * `connected` (or is gone), and takes `applyTransition` as one validation would.
 */
export async function keepConnectedMany(db: Db, held: readonly HeldValidation[]): Promise<Set<string>> {
  if (held.length === 0) return new Set();
  const rows = held.map((one) => ({
    organization_id: one.organizationId,
    id: one.id,
    validated_at: one.validatedAt.toISOString(),
    next_validation_at: one.nextValidationAt.toISOString(),
  }));
  const written = await KEEP_CONNECTED.rows(db, { rows: JSON.stringify(rows) });
  return new Set(written.map((row) => `${row.organization_id}:${row.id}`));
}

/**
 * Persists a status transition in `work`'s transaction: locks the row, reads the status it
 * changes from, and — only when the status actually changes — writes an audit row and queues
 * `integration.status_changed` (naming its `source`), telling `onChanged`. Returns the row after,
 * or null if it is gone.
 */
export async function applyTransition(
  work: UnitOfWork,
  organizationId: string,
  integrationId: string,
  next: Transition,
  onChanged?: (before: IntegrationRow) => void,
): Promise<IntegrationRow | null> {
  const now = new Date();
  const where = byId(organizationId, integrationId);
  const [before] = await work.db.select().from(integrations).where(where).for('update');
  if (!before) return null;
  if (next.onlyFrom !== undefined && before.status !== next.onlyFrom) return before;
  const changed = before.status !== next.status;
  const [after] = await work.db
    .update(integrations)
    .set({ ...transitionFields(next, now), detectedAt: next.status === 'connected' ? null : changed || !before.detectedAt ? now : before.detectedAt })
    .where(where)
    .returning();
  if (changed && after) {
    onChanged?.(before);
    await recordAudit(work.db, work.actor, statusChangeAudit(before, next));
    await work.outbox.emit(work.db, work.afterCommit, statusChangedEvent(before, next));
  }
  return after ?? null;
}

/** A row to move to `next`, already locked and read (`before`) in the unit of work's transaction. */
export interface LockedTransition {
  before: IntegrationRow;
  next: Transition;
  /** Who the audit row names: each change its own (provider events acted on together, each its request). */
  actor: AuditActor;
  onChanged?: (before: IntegrationRow) => void;
}

/**
 * `applyTransition` for many rows at once, each already locked `FOR UPDATE` and read in `work`'s
 * transaction: one `UPDATE` per distinct set of fields (the deliveries of one batch share one),
 * then the audit rows and `integration.status_changed` events of the rows whose status changes,
 * one statement each — the same rows, values and events as `applyTransition` row by row.
 */
export async function applyLockedTransitions(work: UnitOfWork, changes: readonly LockedTransition[]): Promise<void> {
  if (changes.length === 0) return;
  const now = new Date();
  const groups = new Map<string, LockedTransition[]>();
  for (const change of changes) {
    const { deliveryId: _own, ...fields } = change.next;
    const key = JSON.stringify(fields);
    const group = groups.get(key);
    if (group) group.push(change);
    else groups.set(key, [change]);
  }
  for (const group of groups.values()) {
    const next = (group[0] as LockedTransition).next;
    const keys = JSON.stringify(group.map(({ before }) => ({ o: before.organizationId, i: before.id })));
    // The SET list reads the row before the change: detected now when the status changes or was never detected.
    const detectedAt =
      next.status === 'connected'
        ? null
        : sql`CASE WHEN ${integrations.status} <> ${next.status} OR ${integrations.detectedAt} IS NULL THEN ${now.toISOString()}::timestamptz ELSE ${integrations.detectedAt} END`;
    await work.db
      .update(integrations)
      .set({ ...transitionFields(next, now), detectedAt })
      .where(sql`(${integrations.organizationId}, ${integrations.id}) IN (SELECT o, i FROM json_to_recordset(${keys}::json) AS k(o text, i text))`);
  }
  const changed = changes.filter(({ before, next }) => before.status !== next.status);
  if (changed.length === 0) return;
  for (const { before, onChanged } of changed) onChanged?.(before);
  await recordAudits(
    work.db,
    changed.map(({ before, next, actor }) => ({ actor, entry: statusChangeAudit(before, next) })),
  );
  await work.outbox.emitAll(
    work.db,
    work.afterCommit,
    changed.map(({ before, next }) => statusChangedEvent(before, next)),
  );
}

/** The audit row of a status change of `before`'s integration to `next` (one shape for one row and for many). */
function statusChangeAudit(before: IntegrationRow, next: Transition) {
  return {
    organizationId: before.organizationId,
    action: 'integration.status_changed',
    targetType: 'integration',
    targetId: before.id,
    detail: { from: before.status, to: next.status, reason: next.lastError, ...(next.source ? { source: next.source } : {}), ...(next.deliveryId ? { deliveryId: next.deliveryId } : {}) },
  };
}

/** The `integration.status_changed` event of the same change. */
function statusChangedEvent(before: IntegrationRow, next: Transition) {
  return {
    organizationId: before.organizationId,
    type: 'integration.status_changed' as const,
    data: {
      integration: { id: before.id, provider: before.provider },
      provider: before.provider,
      endUser: before.endUser ?? null,
      from: before.status,
      to: next.status,
      reason: next.lastError,
      ...(next.source ? { source: next.source } : {}),
    },
  };
}
