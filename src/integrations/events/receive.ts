/**
 * Receiving a provider's event delivery (docs/contract.md §5b): the one place deliveries are
 * acted on. The signature is checked over the raw body before anything is parsed or looked
 * up; a revocation makes every integration it names `invalid` — across organizations, end
 * users' too — through the token lifecycle (policy.ts point `event`), in one transaction with
 * the delivery's id, so a retry of a failed delivery acts again and a duplicate acts never. A
 * provider whose signature covers no freshness (GitHub, `EventsSpec.replay`) also has each
 * revocation body's digest kept: the same bytes under a new id act only where a live check,
 * run before that transaction, finds GitHub refusing (decision 241). Revocations that arrive
 * together share that transaction, one statement per step for all of them (grouped.ts, decision
 * 331); each is still answered only after it commits.
 */
import { createHash } from 'node:crypto';
import { and, eq, inArray, ne, type SQL, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { AuditActor } from '../../ground/work.ts';
import type { Db } from '../../db/client.ts';
import { integrations, providerEventBodies, providerEventDeliveries } from '../../db/schema.ts';
import type { Outbox } from '../../events/outbox.ts';
import { AppError } from '../../ground/errors.ts';
import { systemUnitOfWork } from '../../ground/work.ts';
import { valueAt } from '../providers/json.ts';
import type { EventsSpec } from '../providers/spec.ts';
import type { CheckOutcome, TokenLifecycle } from '../tokens/lifecycle.ts';
import { judge } from '../tokens/policy.ts';
import type { GroupedDeliveries } from './grouped.ts';
import { checkSignature, type Delivery, deliveryIdOf, handshakeAnswer, handshakeOf, matchingRule, namesClient, occurredAtOf, parseBody, targetsOf, tokenScheme } from './delivery.ts';
import { KeysUnavailable, SetRefused, type TokenKeys, verifySecurityEventToken } from './security-event-token.ts';

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
  /**
   * Checks one integration live without settling the outcome (TokenLifecycle.check with `settle:
   * false`): a body seen before, of a provider whose signature covers no freshness
   * (`EventsSpec.replay`). Null when the integration is gone.
   */
  liveCheck?: (organizationId: string, integrationId: string, actor: AuditActor) => Promise<CheckOutcome | null>;
  /** Acts on revocations together with those arriving at the same time (grouped.ts, one per process); without it each acts alone. */
  group?: Pick<GroupedDeliveries, 'run'>;
}

/** The outcome label of `tessera_provider_events_total` (docs/contract.md §5b). */
export type EventOutcome = 'matched' | 'unmatched' | 'rejected_signature' | 'stale' | 'duplicate' | 'unverified';

/**
 * What a live check says of a revocation: GitHub `confirms` it (the token or the installation
 * refused: the verdict's `dead`), `refutes` it (the token works, or the provider judged it and
 * found it merely forbidden: `counts`), or gives no verdict (rate limited, unreachable, our own
 * credentials refused).
 */
type LiveVerdict = 'confirms' | 'refutes' | 'none';

function liveVerdict(outcome: CheckOutcome): LiveVerdict {
  if (outcome.kind === 'valid' || outcome.kind === 'refreshed') return 'refutes';
  // Not asked: the account's provider budget is known exhausted (docs/contract.md §5f) — no verdict, like a rate limit.
  if (outcome.kind === 'budgetExhausted') return 'none';
  if (outcome.failure.verdict.dead) return 'confirms';
  return outcome.failure.verdict.counts ? 'refutes' : 'none';
}

interface Named {
  organizationId: string;
  id: string;
}

/**
 * The app whose route received the delivery (docs/contract.md §5e): its events act only on the
 * integrations it made — of its organization alone, when it is an organization's own.
 */
export interface ReceivingApp {
  id: string;
  clientId: string;
  organizationId?: string;
  /** Where its events secret is set, for the log line of a refused signature (a setting's name, or the app's id; never the value). */
  secretSetting: string;
}

export interface IncomingDelivery extends Delivery {
  provider: string;
  /** The route's app. A security event token acts for the app its `aud` names, among `audience`. */
  app: ReceivingApp;
  events: EventsSpec;
  /** The app's events secret (`INTEGRATION_OAUTH_<P>_EVENTS_SECRET` for the default app): an HMAC scheme's. */
  secret?: string;
  /** A security event token's keys (providers/spec.ts `SecurityEventTokenSpec`). */
  keys?: TokenKeys;
  /** The apps a security event token may name by its `aud` at this route (default: the route's app). */
  audience?: readonly ReceivingApp[];
  requestId: string;
}

/** The answer's body: a handshake's own fields, else `{success: true}`. */
export type EventAnswer = Record<string, string | boolean>;

/** A type label for deliveries refused before they were read, and for those Tessera does not act on (bounded label values). */
const UNVERIFIED = 'unverified';
const OTHER = 'other';

const notAnEvent = () => new AppError('INVALID_INPUT', { message: 'The delivery is not an event this provider sends', details: [{ path: 'body', message: 'not a recognised event delivery' }] });

/**
 * Receives one delivery: refused with 401 when unsigned, wrongly signed or stale (nothing
 * read, nothing looked up); a handshake answered; an event acted on and committed before this
 * returns. An unknown account, an event type not acted on and a duplicate all answer the same.
 * A security event token (Google) is refused with SetRefused instead (RFC 8935's 400), or
 * KeysUnavailable when its keys cannot be had, and acts for the app its `aud` names.
 */
export async function receiveDelivery(deps: EventDeps, delivery: IncomingDelivery, nowMs = Date.now()): Promise<EventAnswer> {
  const { provider, events } = delivery;
  const scheme = tokenScheme(events);
  // A security event token is refused in RFC 8935's words, never §2's (the route renders SetRefused).
  const notWhatTheProviderSends = () => (scheme ? new SetRefused('invalid_request', 'The token is not a security event this receiver reads') : notAnEvent());
  let app = delivery.app;
  let body: Record<string, unknown> | undefined;
  if (scheme) {
    if (!delivery.keys) throw new Error('a security event token needs its keys');
    const audience = delivery.audience ?? [app];
    try {
      const verified = await verifySecurityEventToken(
        scheme,
        delivery.raw,
        delivery.keys,
        audience.map((candidate) => candidate.clientId),
        nowMs,
      );
      app = audience.find((candidate) => candidate.clientId === verified.audience) as ReceivingApp;
      body = verified.body;
    } catch (error) {
      if (error instanceof SetRefused) {
        deps.metrics?.providerEvent(provider, UNVERIFIED, error.outcome);
        deps.logger.warn({ provider, app: app.id, outcome: error.outcome, refusal: error.err }, `provider event refused: ${error.message}`);
      } else if (error instanceof KeysUnavailable) {
        deps.logger.warn({ provider, app: app.id }, `provider event keys unavailable: ${error.message}`);
      }
      throw error;
    }
  } else {
    const signature = delivery.secret === undefined ? 'rejected_signature' : checkSignature(events, delivery.secret, delivery, nowMs);
    if (signature !== 'ok') {
      deps.metrics?.providerEvent(provider, UNVERIFIED, signature);
      // Names the setting, never its value: a deployment whose secret is wrong sees every delivery refused here.
      deps.logger.warn({ provider, app: app.id, outcome: signature }, `provider event refused: signature missing, wrong or stale (check ${app.secretSetting})`);
      throw new AppError('UNAUTHENTICATED', { message: 'The delivery is not signed by the provider' });
    }
    body = parseBody(delivery.raw);
  }
  await deps.limit?.();
  if (!body) throw notWhatTheProviderSends();
  const handshake = handshakeAnswer(events, delivery.secret ?? '', delivery, body);
  if (handshake === undefined) throw notWhatTheProviderSends();
  if (handshake) {
    const logged = handshakeOf(events, delivery, body)?.log;
    if (logged !== undefined) {
      const value = valueAt(body, logged);
      // A value the receiver chose when it asked for the handshake (Google's verification `state`): no secret of anyone's.
      deps.logger.info({ provider, app: app.id, [logged.split('.').at(-1) as string]: typeof value === 'string' ? value.slice(0, 200) : null }, 'provider event handshake received');
    }
    return handshake;
  }
  const rule = matchingRule(events, delivery, body);
  if (!rule) {
    deps.metrics?.providerEvent(provider, OTHER, 'unmatched');
    return { success: true };
  }
  // An event naming another registration's client (Linear's `oauthClientId`) is that app's to act on, never this one's.
  if (!namesClient(rule, body, app.clientId)) {
    deps.metrics?.providerEvent(provider, rule.type, 'unmatched');
    deps.logger.info({ provider, app: app.id, type: rule.type, outcome: 'unmatched' }, 'provider event received for another app');
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
  // Only the integrations this app made (docs/contract.md §5e): another app's events secret is another registration's word.
  const conditions: SQL[] = [eq(integrations.provider, provider), eq(integrations.appId, app.id)];
  if (app.organizationId !== undefined) conditions.push(eq(integrations.organizationId, app.organizationId));
  if (targets.workspace !== undefined) conditions.push(eq(integrations.providerWorkspaceId, targets.workspace));
  if (targets.accounts !== undefined) conditions.push(inArray(integrations.providerAccountId, targets.accounts));
  // Across organizations by design: the provider names its account, not our tenant. Each change is then led by its organization.
  // In key order: two deliveries naming the same rows (tokens_revoked and app_uninstalled at once) lock them in the same order.
  const named = (db: Db, extra: SQL[] = []): Promise<Named[]> =>
    targets.accounts?.length === 0
      ? Promise.resolve([])
      : db
          .select({ organizationId: integrations.organizationId, id: integrations.id })
          .from(integrations)
          .where(and(...conditions, ...extra))
          .orderBy(integrations.organizationId, integrations.id);

  // A signature that covers no freshness (GitHub): the body's digest says whether these bytes were seen before.
  const digest = events.replay === 'live_check' && !revalidate ? `sha256:${createHash('sha256').update(delivery.raw).digest('hex')}` : undefined;
  const received = (outcome: EventOutcome, changed: number): EventAnswer => {
    deps.metrics?.providerEvent(provider, rule.type, outcome);
    deps.logger.info({ provider, app: app.id, type: rule.type, deliveryId, outcome, integrations: changed }, 'provider event received');
    return { success: true };
  };
  // Revocations that arrive together act together, one transaction for all (decision 331). A revalidating rule, and a
  // body seen before under a new id (`replayed`: it records nothing there), take the path below, one by one.
  if (deps.group && !revalidate) {
    const grouped = await deps.group.run({
      provider,
      deliveryId,
      digest,
      appId: app.id,
      organizationId: app.organizationId,
      targets,
      transition,
      occurredAt,
      actor,
    });
    if (grouped.outcome !== 'replayed') return received(grouped.outcome, grouped.named.length);
  }
  const replayed = digest !== undefined && !(await seen(deps.db, providerEventDeliveries, provider, deliveryId)) && (await seen(deps.db, providerEventBodies, provider, digest));
  // Seen before under another id: never acts alone. Each named integration not yet invalid is checked live — outside any
  // transaction — and only GitHub's refusal lets the revocation act; no verdict leaves the status and asks for a validation now.
  const confirmed: Named[] = [];
  const unverified: Named[] = [];
  if (replayed) {
    const liveCheck = deps.liveCheck;
    if (!liveCheck) throw new Error('a provider whose events replay needs deps.liveCheck');
    for (const row of await named(deps.db, [ne(integrations.status, 'invalid')])) {
      const outcome = await liveCheck(row.organizationId, row.id, actor);
      const verdict = outcome ? liveVerdict(outcome) : 'refutes';
      if (verdict === 'confirms') confirmed.push(row);
      else if (verdict === 'none') unverified.push(row);
    }
  }

  const { outcome, named: acted } = await systemUnitOfWork(deps.db, deps.outbox, actor, async (work) => {
    // The delivery's id first: a duplicate costs this one statement, and waits for (then loses to) one in flight.
    const fresh = await work.db.insert(providerEventDeliveries).values({ provider, deliveryId }).onConflictDoNothing().returning({ one: sql<number>`1` });
    if (fresh.length === 0) return { outcome: 'duplicate' as const, named: [] };
    if (digest !== undefined) await work.db.insert(providerEventBodies).values({ provider, digest }).onConflictDoNothing();
    if (replayed) {
      for (const row of confirmed) await deps.lifecycle.transitionIn(work, row.organizationId, row.id, transition, occurredAt);
      // The next validation pass takes them at once (docs/contract.md §5b: validated at the next pass).
      for (const row of unverified) {
        await work.db
          .update(integrations)
          .set({ nextValidationAt: sql`now()` })
          .where(and(eq(integrations.organizationId, row.organizationId), eq(integrations.id, row.id)));
      }
      const label = confirmed.length > 0 ? ('matched' as const) : unverified.length > 0 ? ('unverified' as const) : ('duplicate' as const);
      return { outcome: label, named: confirmed };
    }
    const rows = await named(work.db);
    if (!revalidate) for (const row of rows) await deps.lifecycle.transitionIn(work, row.organizationId, row.id, transition, occurredAt);
    return { outcome: rows.length > 0 ? ('matched' as const) : ('unmatched' as const), named: rows };
  });
  // Validation asks the provider: never inside the transaction. Each validation commits its own outcome before
  // the answer; one that cannot finish forgets the delivery, so the provider's retry acts again.
  if (revalidate) {
    try {
      for (const row of acted) await revalidate(row.organizationId, row.id, actor);
    } catch (error) {
      await deps.db.delete(providerEventDeliveries).where(and(eq(providerEventDeliveries.provider, provider), eq(providerEventDeliveries.deliveryId, deliveryId)));
      throw error;
    }
  }
  return received(outcome, acted.length);
}

/** Whether `key` is kept in `table` (provider delivery ids, body digests) for `provider`. */
async function seen(db: Db, table: typeof providerEventDeliveries | typeof providerEventBodies, provider: string, key: string): Promise<boolean> {
  const column = 'digest' in table ? table.digest : table.deliveryId;
  const rows = await db.select({ one: sql<number>`1` }).from(table).where(and(eq(table.provider, provider), eq(column, key))).limit(1);
  return rows.length > 0;
}
