/**
 * Retention (docs/contract.md §11): finished connect sessions, delivered or failed webhook deliveries
 * (with their attempts, and then the events no delivery needs any more) and expired OAuth states
 * are deleted once they are `RETENTION_DAYS` old, and so are the provider deliveries' ids kept to
 * refuse a repeat (decision 221) — except those of a provider whose signature covers no freshness
 * (GitHub, `EventsSpec.replay`): its delivery ids and body digests stay while integrations of that
 * provider exist (docs/contract.md §5b, decision 242) — and provider budgets no answer has
 * updated for that long, blocking nothing (§5f). Audit rows are kept. A pass is one background
 * job for the whole deployment (`claimJob`), deleting in small batches, each claimed with
 * `FOR UPDATE SKIP LOCKED` so that even overlapping passes delete — and count — a row once.
 */
import { type Db, queryRows, sql } from '../db/client.ts';
import type { Services } from '../services.ts';
import { claimJob } from './claim.ts';

/** What retention purges, as `/metrics` labels them (`tessera_retention_purged_total{kind}`). */
export const PURGE_KINDS = ['connect_sessions', 'deliveries', 'oauth_states'] as const;
export type PurgeKind = (typeof PURGE_KINDS)[number];

export type RetentionResult = Record<PurgeKind, number> & { events: number; provider_deliveries: number; provider_bodies: number; provider_budgets: number };

export interface RetentionOptions {
  /** Rows per statement: short statements keep locks and WAL bursts small. Default 500. */
  batchSize?: number;
  /** Milliseconds the pass may run; what is left waits for the next pass. Default 60 s. */
  budgetMs?: number;
  /**
   * Providers whose delivery ids and body digests are kept while any integration of theirs
   * exists (`EventsSpec.replay`: a captured body could otherwise act again). Default none.
   */
  keptWhileIntegrations?: readonly string[];
}

/** Whether `/metrics` counts what a purge of `kind` deleted. */
const isCounted = (kind: keyof RetentionResult): kind is PurgeKind => (PURGE_KINDS as readonly string[]).includes(kind);

/** Keys of up to `batch` rows matching `where`, locked for deletion unless another pass holds them. */
const batchOf = (table: string, keys: string, where: ReturnType<typeof sql>, batch: number) =>
  sql`SELECT ${sql.raw(keys)} FROM ${sql.raw(table)} WHERE ${where} LIMIT ${batch} FOR UPDATE SKIP LOCKED`;

/**
 * Rows of a provider event table (`d`) old enough to go: older than the cutoff, and not of a
 * provider in `kept` that still has an integration. Every other provider's window is at most
 * 5 minutes, and `RETENTION_DAYS` at least 1: their ids outlive twice the window (§5b).
 */
function providerRowsGone(cutoff: ReturnType<typeof sql>, kept: readonly string[]): ReturnType<typeof sql> {
  if (kept.length === 0) return sql`d.received_at < ${cutoff}`;
  const names = sql.join(
    kept.map((provider) => sql`${provider}`),
    sql`, `,
  );
  return sql`d.received_at < ${cutoff} AND NOT (d.provider IN (${names}) AND EXISTS (SELECT 1 FROM integrations i WHERE i.provider = d.provider))`;
}

/** One purge statement per kind (and the events left without deliveries), given the cutoff. */
function purges(cutoff: ReturnType<typeof sql>, batch: number, kept: readonly string[]): [keyof RetentionResult, ReturnType<typeof sql>][] {
  const deliveries = (where: ReturnType<typeof sql>) =>
    sql`DELETE FROM event_deliveries WHERE (organization_id, event_id, webhook_id) IN (${batchOf('event_deliveries', 'organization_id, event_id, webhook_id', where, batch)}) RETURNING 1`;
  return [
    // A session's expiry bounds its life: completed or revoked ones ended before it.
    ['connect_sessions', sql`DELETE FROM connect_sessions WHERE (organization_id, id) IN (${batchOf('connect_sessions', 'organization_id, id', sql`expires_at < ${cutoff}`, batch)}) RETURNING 1`],
    ['deliveries', deliveries(sql`delivered_at < ${cutoff}`)],
    ['deliveries', deliveries(sql`delivered_at IS NULL AND failed_at < ${cutoff}`)],
    [
      'events',
      sql`DELETE FROM events WHERE (organization_id, id) IN (${batchOf(
        'events e',
        'e.organization_id, e.id',
        sql`e.occurred_at < ${cutoff} AND NOT EXISTS (SELECT 1 FROM event_deliveries d WHERE d.organization_id = e.organization_id AND d.event_id = e.id)`,
        batch,
      )}) RETURNING 1`,
    ],
    // A provider retries a delivery for hours, not weeks: its id stops a repeat long after (decision 221) — unless a
    // captured body could act again while the provider's integrations exist (decision 242).
    [
      'provider_deliveries',
      sql`DELETE FROM provider_event_deliveries WHERE (provider, delivery_id) IN (${batchOf('provider_event_deliveries d', 'd.provider, d.delivery_id', providerRowsGone(cutoff, kept), batch)}) RETURNING 1`,
    ],
    [
      'provider_bodies',
      sql`DELETE FROM provider_event_bodies WHERE (provider, digest) IN (${batchOf('provider_event_bodies d', 'd.provider, d.digest', providerRowsGone(cutoff, kept), batch)}) RETURNING 1`,
    ],
    // A provider budget nobody has touched for the retention period says nothing any more: a block lasts at most a day
    // (budgets.ts), and the next answer teaches the account's budget again.
    [
      'provider_budgets',
      sql`DELETE FROM provider_budgets WHERE (scope, account_id) IN (${batchOf('provider_budgets', 'scope, account_id', sql`updated_at < ${cutoff} AND (blocked_until IS NULL OR blocked_until < now())`, batch)}) RETURNING 1`,
    ],
    // A used state is deleted when it is used; what is left expired unused.
    ['oauth_states', sql`DELETE FROM oauth_states WHERE (organization_id, nonce_hash) IN (${batchOf('oauth_states', 'organization_id, nonce_hash', sql`expires_at < ${cutoff}`, batch)}) RETURNING 1`],
  ];
}

/**
 * One retention pass: each purge runs in batches until a batch comes back short or the budget
 * is spent. Returns what it deleted; `onPurged` hears each batch (metrics).
 */
export async function runRetentionPass(db: Db, days: number, options: RetentionOptions & { onPurged?: (kind: PurgeKind, count: number) => void } = {}): Promise<RetentionResult> {
  const batch = options.batchSize ?? 500;
  const deadline = Date.now() + (options.budgetMs ?? 60_000);
  const cutoff = sql`now() - ${days}::int * interval '1 day'`;
  const result: RetentionResult = { connect_sessions: 0, deliveries: 0, oauth_states: 0, events: 0, provider_deliveries: 0, provider_bodies: 0, provider_budgets: 0 };
  for (const [kind, statement] of purges(cutoff, batch, options.keptWhileIntegrations ?? [])) {
    while (Date.now() < deadline) {
      const deleted = (await queryRows(db, statement)).length;
      result[kind] += deleted;
      if (isCounted(kind) && deleted > 0) options.onPurged?.(kind, deleted);
      if (deleted < batch) break;
    }
  }
  return result;
}

/** How often a pass runs in the deployment, whatever the number of instances. */
const PASS_INTERVAL_SECONDS = 3600;

type RetentionServices = Pick<Services, 'db' | 'config' | 'logger' | 'metrics' | 'providers'>;

/** The configured providers whose events' signature covers no freshness (`EventsSpec.replay`). */
const replayable = (services: RetentionServices): string[] => services.providers.list().filter((provider) => provider.definition.events?.replay !== undefined).map((provider) => provider.id);

/**
 * A pass if this instance claims the deployment's retention job (at most once an hour in
 * total), counted in `/metrics`; null when another instance has it or it is not due.
 */
export async function runRetention(services: RetentionServices, options: RetentionOptions = {}): Promise<RetentionResult | null> {
  if (!(await claimJob(services.db, 'retention', PASS_INTERVAL_SECONDS))) return null;
  const result = await runRetentionPass(services.db, services.config.retention.days, {
    keptWhileIntegrations: replayable(services),
    ...options,
    onPurged: (kind, count) => services.metrics?.retentionPurged(kind, count),
  });
  if (Object.values(result).some((count) => count > 0)) services.logger.info({ purged: result }, 'retention pass purged old rows');
  return result;
}

/**
 * Every `everyMs` each instance asks for the job; the one that claims it (once an hour across
 * instances) runs a pass. stop() waits for a running pass.
 */
export function startRetentionScheduler(services: RetentionServices, everyMs = 300_000): { stop(): Promise<void> } {
  let running: Promise<unknown> | null = null;
  let stopped = false;
  const tick = () => {
    if (running || stopped) return;
    running = runRetention(services)
      .catch((error: unknown) => services.logger.error({ err: error }, 'retention pass failed'))
      .finally(() => {
        running = null;
      });
  };
  const timer = setInterval(tick, everyMs);
  timer.unref();
  setTimeout(tick, Math.min(everyMs, 10_000)).unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
