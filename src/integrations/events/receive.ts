/**
 * Receiving a provider's event delivery (docs/contract.md §5b): the one place deliveries are
 * acted on. The signature is checked over the raw body before anything is parsed or looked
 * up; a revocation makes every integration it names `invalid` — across organizations, end
 * users' too — through the token lifecycle (policy.ts point `event`), in one transaction with
 * the delivery's id, so a retry of a failed delivery acts again and a duplicate acts never.
 */
import { and, eq, inArray, type SQL, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { AuditActor } from '../../audit/audit.ts';
import type { Db } from '../../db/client.ts';
import { integrations, providerEventDeliveries } from '../../db/schema.ts';
import type { Outbox } from '../../events/outbox.ts';
import { AppError } from '../../http/errors.ts';
import { systemUnitOfWork } from '../../http/unit-of-work.ts';
import type { EventsSpec } from '../providers/spec.ts';
import type { TokenLifecycle } from '../tokens/lifecycle.ts';
import { judge } from '../tokens/policy.ts';
import { checkSignature, type Delivery, deliveryIdOf, handshakeAnswer, matchingRule, occurredAtOf, parseBody, targetsOf } from './delivery.ts';

/** What receiving a delivery works with. */
export interface EventDeps {
  db: Db;
  outbox: Outbox;
  lifecycle: Pick<TokenLifecycle, 'transitionIn'>;
  logger: Pick<Logger, 'info' | 'warn'>;
  metrics?: { providerEvent(provider: string, type: string, outcome: EventOutcome): void };
  /** The provider's rate limit, counted once the signature holds: unsigned floods cost no lookup and cannot starve the provider's own deliveries. */
  limit?: () => Promise<void>;
  /** Validates one integration live and persists the outcome (TokenLifecycle.validate): a rule's `revalidate` effect. */
  revalidate?: (organizationId: string, integrationId: string, actor: AuditActor) => Promise<void>;
}

/** The outcome label of `tessera_provider_events_total` (docs/contract.md §5b). */
export type EventOutcome = 'matched' | 'unmatched' | 'rejected_signature' | 'stale' | 'duplicate';

export interface IncomingDelivery extends Delivery {
  provider: string;
  events: EventsSpec;
  /** The provider's events secret (`INTEGRATION_OAUTH_<P>_EVENTS_SECRET`). */
  secret: string;
  requestId: string;
}

/** The answer's body: a handshake's own fields, else `{success: true}`. */
export type EventAnswer = Record<string, string | boolean>;

/** A type label for deliveries refused before they were read, and for those Tessera does not act on (bounded label values). */
const UNVERIFIED = 'unverified';
const OTHER = 'other';

const notWhatTheProviderSends = () => new AppError('INVALID_INPUT', { message: 'The delivery is not an event this provider sends', details: [{ path: 'body', message: 'not a recognised event delivery' }] });

/**
 * Receives one delivery: refused with 401 when unsigned, wrongly signed or stale (nothing
 * read, nothing looked up); a handshake answered; an event acted on and committed before this
 * returns. An unknown account, an event type not acted on and a duplicate all answer the same.
 */
export async function receiveDelivery(deps: EventDeps, delivery: IncomingDelivery, nowMs = Date.now()): Promise<EventAnswer> {
  const { provider, events } = delivery;
  const signature = checkSignature(events, delivery.secret, delivery, nowMs);
  if (signature !== 'ok') {
    deps.metrics?.providerEvent(provider, UNVERIFIED, signature);
    // Names the setting, never its value: a deployment whose secret is wrong sees every delivery refused here.
    deps.logger.warn({ provider, outcome: signature }, `provider event refused: signature missing, wrong or stale (check INTEGRATION_OAUTH_${provider.toUpperCase()}_EVENTS_SECRET)`);
    throw new AppError('UNAUTHENTICATED', { message: 'The delivery is not signed by the provider' });
  }
  await deps.limit?.();
  const body = parseBody(delivery.raw);
  if (!body) throw notWhatTheProviderSends();
  const handshake = handshakeAnswer(events, delivery.secret, delivery, body);
  if (handshake === undefined) throw notWhatTheProviderSends();
  if (handshake) return handshake;
  const rule = matchingRule(events, delivery, body);
  if (!rule) {
    deps.metrics?.providerEvent(provider, OTHER, 'unmatched');
    return { success: true };
  }
  const targets = targetsOf(rule, body);
  const deliveryId = deliveryIdOf(events, delivery, body);
  if (!targets || !deliveryId) throw notWhatTheProviderSends();
  const occurredAt = occurredAtOf(rule, body);
  const actor: AuditActor = { principal: null, requestId: delivery.requestId, provider };
  const revalidate = rule.effect === 'revalidate' ? deps.revalidate : undefined;
  if (rule.effect === 'revalidate' && !revalidate) throw new Error('a revalidating event rule needs deps.revalidate');
  // The provider's word is the revocation: policy.ts says what it does (point `event`), the lifecycle applies it.
  const { transition: revoked } = judge('revoked', 'event');
  if (!revoked) throw new Error('the failure policy names no transition for a revocation event');
  const transition = { ...revoked, deliveryId };
  const { outcome, named } = await systemUnitOfWork(deps.db, deps.outbox, actor, async (work) => {
    // The delivery's id first: a duplicate costs this one statement, and waits for (then loses to) one in flight.
    const fresh = await work.db.insert(providerEventDeliveries).values({ provider, deliveryId }).onConflictDoNothing().returning({ one: sql<number>`1` });
    if (fresh.length === 0) return { outcome: 'duplicate' as const, named: [] };
    if (targets.accounts?.length === 0) return { outcome: 'unmatched' as const, named: [] };
    const conditions: SQL[] = [eq(integrations.provider, provider)];
    if (targets.workspace !== undefined) conditions.push(eq(integrations.providerWorkspaceId, targets.workspace));
    if (targets.accounts !== undefined) conditions.push(inArray(integrations.providerAccountId, targets.accounts));
    // Across organizations by design: the provider names its account, not our tenant. Each change is then led by its organization.
    // In key order: two deliveries naming the same rows (tokens_revoked and app_uninstalled at once) lock them in the same order.
    const rows = await work.db
      .select({ organizationId: integrations.organizationId, id: integrations.id })
      .from(integrations)
      .where(and(...conditions))
      .orderBy(integrations.organizationId, integrations.id);
    if (!revalidate) for (const row of rows) await deps.lifecycle.transitionIn(work, row.organizationId, row.id, transition, occurredAt);
    return { outcome: rows.length > 0 ? ('matched' as const) : ('unmatched' as const), named: rows };
  });
  // Validation asks the provider: never inside the transaction. Each validation commits its own outcome before
  // the answer; one that cannot finish forgets the delivery, so the provider's retry acts again.
  if (revalidate) {
    try {
      for (const row of named) await revalidate(row.organizationId, row.id, actor);
    } catch (error) {
      await deps.db.delete(providerEventDeliveries).where(and(eq(providerEventDeliveries.provider, provider), eq(providerEventDeliveries.deliveryId, deliveryId)));
      throw error;
    }
  }
  const changed = named.length;
  deps.metrics?.providerEvent(provider, rule.type, outcome);
  deps.logger.info({ provider, type: rule.type, deliveryId, outcome, integrations: changed }, 'provider event received');
  return { success: true };
}
