import { and, eq, sql } from 'drizzle-orm';
import { type AuditActor, recordAudit } from '../audit/audit.ts';
import type { Logger } from 'pino';
import type { Db } from '../db/client.ts';
import { type IntegrationStatus, integrations } from '../db/schema.ts';
import type { Outbox } from '../events/outbox.ts';
import type { IntegrationRow } from './integrations.ts';

export type StatusAction = 'reconnect' | 'refresh' | 'configure';

/** The status object the user interface shows (SEED.md, CONTRACT.md §5). */
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

export interface Transition {
  status: IntegrationStatus;
  /** Our words: e.g. 'token unauthorized', 'API access forbidden'. */
  lastError: string | null;
  tokenValid?: boolean;
  /** Set when the transition follows a completed validation. */
  validated?: boolean;
  nextValidationAt?: Date;
}

export interface TransitionDeps {
  db: Db;
  outbox: Outbox;
  actor: AuditActor;
  /** Hears of each status change, once committed (decision 147). */
  logger?: Pick<Logger, 'info'>;
}

/**
 * Persists a status transition, with an audit row and an `integration.status_changed` event
 * only when the status actually changes. The common case — the status stays what it is (a
 * connected token validated again, another 403 of a `warning` one) — is one `UPDATE`; a change
 * takes a short transaction of its own (it must survive an error response) that locks the row
 * and reads the status it changes from. Returns the row after, or null if it is gone.
 */
export async function applyTransition(deps: TransitionDeps, organizationId: string, integrationId: string, next: Transition): Promise<IntegrationRow | null> {
  const now = new Date();
  const fields = {
    status: next.status,
    lastError: next.lastError,
    ...(next.tokenValid !== undefined ? { tokenValid: next.tokenValid } : {}),
    ...(next.validated ? { lastValidatedAt: now } : {}),
    ...(next.nextValidationAt ? { nextValidationAt: next.nextValidationAt } : {}),
    updatedAt: sql`now()`,
  };
  const where = and(eq(integrations.organizationId, organizationId), eq(integrations.id, integrationId));
  const [unchanged] = await deps.db
    .update(integrations)
    .set({ ...fields, detectedAt: next.status === 'connected' ? null : sql`coalesce(${integrations.detectedAt}, now())` })
    .where(and(where, eq(integrations.status, next.status)))
    .returning();
  if (unchanged) return unchanged;
  const pending: (() => unknown)[] = [];
  const result = await deps.db.transaction(async (tx) => {
    const [before] = await tx
      .select()
      .from(integrations)
      .where(where)
      .for('update');
    if (!before) return null;
    const changed = before.status !== next.status;
    const [after] = await tx
      .update(integrations)
      .set({ ...fields, detectedAt: next.status === 'connected' ? null : changed || !before.detectedAt ? now : before.detectedAt })
      .where(where)
      .returning();
    if (changed && after) {
      pending.push(() =>
        deps.logger?.info({ provider: before.provider, integrationId, organizationId, from: before.status, to: next.status, reason: next.lastError }, `integration status changed to ${next.status}`),
      );
      await recordAudit(tx as Db, deps.actor, {
        organizationId,
        action: 'integration.status_changed',
        targetType: 'integration',
        targetId: integrationId,
        detail: { from: before.status, to: next.status, reason: next.lastError },
      });
      await deps.outbox.emit(tx as Db, (fn) => pending.push(fn), {
        organizationId,
        type: 'integration.status_changed',
        data: { integration: { id: integrationId, provider: before.provider }, provider: before.provider, endUser: before.endUser ?? null, from: before.status, to: next.status, reason: next.lastError },
      });
    }
    return after ?? null;
  });
  for (const fn of pending) fn();
  return result;
}
