/**
 * Provider deliveries that arrive together, acted on together (decision 331): the deliveries
 * waiting while every slot is busy go in one transaction, with one statement per step — their
 * ids (and body digests) recorded, the integrations they name found and locked, the status
 * changes written with their audit rows and events — instead of a transaction and seven
 * statements each. Natural batching (db/batch.ts): a delivery that finds a slot free goes at
 * once, nothing waits for a timer, and each is answered only after the transaction carrying it
 * has committed. A batch that fails is retried delivery by delivery, so one delivery's failure
 * fails no other.
 */
import { sql } from 'drizzle-orm';
import { Batcher, Slots } from '../../db/batch.ts';
import { type Db, HotStatement } from '../../db/client.ts';
import { databaseUnavailable } from '../../db/failure.ts';
import type { Outbox } from '../../events/outbox.ts';
import { AppError } from '../../ground/errors.ts';
import { type AuditActor, systemUnitOfWork } from '../../ground/work.ts';
import type { IntegrationRow } from '../integrations.ts';
import type { Transition } from '../status.ts';
import type { TokenLifecycle } from '../tokens/lifecycle.ts';
import { integrationFromJson } from '../tokens/loaded.ts';

const p = sql.placeholder;

/** A revocation to act on, read and checked by receive.ts: everything its transaction needs. */
export interface GroupedDelivery {
  provider: string;
  deliveryId: string;
  /** The raw body's digest, kept when the provider's signature covers no freshness (`EventsSpec.replay`, decision 241). */
  digest?: string | undefined;
  /** The receiving app: only its integrations, of its organization alone when it is an organization's own (§5e). */
  appId: string;
  organizationId?: string | undefined;
  targets: { workspace?: string; accounts?: string[] };
  /** The revocation, naming this delivery's id. */
  transition: Transition;
  occurredAt?: Date | undefined;
  actor: AuditActor;
}

/** An integration a delivery named. */
export interface NamedIntegration {
  organizationId: string;
  id: string;
}

/**
 * What became of a grouped delivery, once its transaction committed: acted on (`matched`, or
 * `unmatched` when it named no integration), a `duplicate` of an id already recorded, or
 * `replayed` — a body seen before under a new id, recorded nowhere and left to receive.ts's own
 * path (a live check before its transaction, decision 241).
 */
export type GroupedOutcome = { outcome: 'matched' | 'unmatched' | 'duplicate'; named: NamedIntegration[] } | { outcome: 'replayed' };

/**
 * Records the batch's delivery ids, each batch sorted so two batches take the keys in one order.
 * A digest seen before under an id not seen is `replayed` and records nothing; an id seen before
 * (or in flight: the insert waits for it) is `duplicate`; the digests of the fresh ones are kept.
 */
const RECORD = new HotStatement<{ n: number; state: 'fresh' | 'duplicate' | 'replayed' }>(sql`WITH
  d AS (SELECT * FROM json_to_recordset(${p('batch')}::json) AS d(n int, provider text, delivery_id text, digest text)),
  r AS (
    SELECT d.n, d.provider, d.delivery_id, d.digest,
           d.digest IS NOT NULL
           AND EXISTS (SELECT 1 FROM provider_event_bodies b WHERE b.provider = d.provider AND b.digest = d.digest)
           AND NOT EXISTS (SELECT 1 FROM provider_event_deliveries x WHERE x.provider = d.provider AND x.delivery_id = d.delivery_id) AS replayed
    FROM d),
  fresh AS (
    INSERT INTO provider_event_deliveries (provider, delivery_id)
    SELECT provider, delivery_id FROM r WHERE NOT replayed ORDER BY provider, delivery_id
    ON CONFLICT DO NOTHING RETURNING provider, delivery_id),
  bodies AS (
    INSERT INTO provider_event_bodies (provider, digest)
    SELECT r.provider, r.digest FROM r JOIN fresh f ON f.provider = r.provider AND f.delivery_id = r.delivery_id
    WHERE r.digest IS NOT NULL ORDER BY 1, 2
    ON CONFLICT DO NOTHING RETURNING 1)
  SELECT r.n, CASE WHEN r.replayed THEN 'replayed' WHEN f.delivery_id IS NULL THEN 'duplicate' ELSE 'fresh' END AS state
  FROM r LEFT JOIN fresh f ON f.provider = r.provider AND f.delivery_id = r.delivery_id`);

/**
 * The integrations each fresh delivery names — by account, else by workspace, of the receiving
 * app (and its organization) — across organizations as receive.ts's one-by-one query, locked in
 * key order as `applyTransition` locks them, and read as they are once locked. A row per
 * (delivery, integration), in key order. Every lookup is an index probe whatever the row
 * estimates say (a table just filled has none): an account is one (provider, account) key, a
 * named row one primary key.
 */
const NAME = new HotStatement<{ n: number; row: Record<string, unknown> }>(sql`WITH
  d AS (SELECT * FROM json_to_recordset(${p('batch')}::json) AS d(n int, provider text, app text, org text, ws text, accounts text[])),
  m AS (
    SELECT d.n, x.organization_id, x.id FROM d CROSS JOIN LATERAL (
      SELECT i.organization_id, i.id FROM unnest(d.accounts) AS a(account)
      JOIN LATERAL (
        SELECT organization_id, id FROM integrations
        WHERE provider = d.provider AND provider_account_id = a.account
          AND app_id = d.app AND (d.org IS NULL OR organization_id = d.org) AND (d.ws IS NULL OR provider_workspace_id = d.ws)
        OFFSET 0
      ) i ON true
      WHERE d.accounts IS NOT NULL
      UNION ALL
      SELECT organization_id, id FROM integrations
      WHERE d.accounts IS NULL AND d.ws IS NOT NULL AND provider = d.provider AND provider_workspace_id = d.ws
        AND app_id = d.app AND (d.org IS NULL OR organization_id = d.org)
      UNION ALL
      SELECT organization_id, id FROM integrations
      WHERE d.accounts IS NULL AND d.ws IS NULL AND provider = d.provider AND app_id = d.app AND (d.org IS NULL OR organization_id = d.org)
    ) x),
  locked AS (
    SELECT i.* FROM (SELECT DISTINCT organization_id, id FROM m ORDER BY organization_id, id) k
    CROSS JOIN LATERAL (SELECT * FROM integrations WHERE organization_id = k.organization_id AND id = k.id LIMIT 1) i
    ORDER BY i.organization_id, i.id FOR UPDATE OF i)
  SELECT m.n, row_to_json(l) AS row FROM m JOIN locked l ON l.organization_id = m.organization_id AND l.id = m.id
  ORDER BY l.organization_id, l.id, m.n`);

/** The most deliveries one transaction carries. */
const BATCH_MAX = 64;
/** The most deliveries that may wait for a transaction; more answer 503 at once (the provider retries). */
const WAITING_MAX = 4096;

export interface GroupedDeps {
  db: Db;
  outbox: Outbox;
  lifecycle: Pick<TokenLifecycle, 'transitionAllIn'>;
  /** How the database runs statements: PGlite one at a time, PostgreSQL over a pool of `size`. */
  pool: { pglite: boolean; size: number };
}

/** Acts on revocation deliveries in groups; one per process (its batcher holds the waiting deliveries). */
export class GroupedDeliveries {
  private readonly deps: GroupedDeps;
  private readonly batcher: Batcher<GroupedDelivery, GroupedOutcome>;

  constructor(deps: GroupedDeps) {
    this.deps = deps;
    const pglite = deps.pool.pglite;
    this.batcher = new Batcher({
      // PostgreSQL: two transactions at most (one with a pool of four or less), so deliveries queue behind them and group there,
      // while one waiting for a row lock does not hold up every delivery. PGlite runs one statement at a time on this thread: one
      // transaction at once, after taking in what else has arrived.
      slots: new Slots(pglite ? 1 : Math.min(2, Math.ceil(deps.pool.size / 4))),
      maxSize: BATCH_MAX,
      maxWaiting: WAITING_MAX,
      overloaded: () => new AppError('SERVICE_UNAVAILABLE', { message: 'Too many provider deliveries are waiting for the database', headers: { 'retry-after': '1' } }),
      gather: pglite,
      // Each delivery is a transaction of its own when alone: any failure but an unreachable database is retried one by one.
      alone: (error) => !databaseUnavailable(error),
      execute: (items) => this.act(items),
    });
  }

  /** Acts on one delivery with those that arrive with it; settles once their transaction has committed. */
  run(delivery: GroupedDelivery): Promise<GroupedOutcome> {
    return this.batcher.run(delivery);
  }

  /** One transaction for `items`: their outcomes in order. */
  private async act(items: GroupedDelivery[]): Promise<GroupedOutcome[]> {
    // A delivery id twice in one batch acts once: the statement sees each id once, its copies share the first's fate.
    const firstOf = new Map<string, number>();
    const unique: number[] = [];
    for (const [index, item] of items.entries()) {
      const key = `${item.provider}\u0000${item.deliveryId}`;
      if (!firstOf.has(key)) {
        firstOf.set(key, index);
        unique.push(index);
      }
    }
    const first = items[0] as GroupedDelivery;
    // The unit of work's own actor is never written: each change's audit row names its own delivery's (transitionAllIn).
    const outcomes = await systemUnitOfWork(this.deps.db, this.deps.outbox, first.actor, async (work) => {
      const recorded = await RECORD.rows(work.db, {
        batch: JSON.stringify(unique.map((index) => ({ n: index, provider: items[index]?.provider, delivery_id: items[index]?.deliveryId, digest: items[index]?.digest ?? null }))),
      });
      const state = new Map(recorded.map((row) => [row.n, row.state]));
      const fresh = unique.filter((index) => state.get(index) === 'fresh');
      const named = new Map<number, NamedIntegration[]>(fresh.map((index) => [index, []]));
      if (fresh.length > 0) {
        const rows = await NAME.rows(work.db, {
          batch: JSON.stringify(
            fresh.map((index) => {
              const item = items[index] as GroupedDelivery;
              return { n: index, provider: item.provider, app: item.appId, org: item.organizationId ?? null, ws: item.targets.workspace ?? null, accounts: item.targets.accounts ?? null };
            }),
          ),
        });
        // An integration two deliveries name changes once, for the first of them: the second would find it changed already.
        const changes: { before: IntegrationRow; next: Transition; actor: AuditActor; occurredAt?: Date | undefined }[] = [];
        const taken = new Set<string>();
        for (const { n, row } of rows) {
          const before = integrationFromJson(row);
          named.get(n)?.push({ organizationId: before.organizationId, id: before.id });
          const key = `${before.organizationId}\u0000${before.id}`;
          if (taken.has(key)) continue;
          taken.add(key);
          const item = items[n] as GroupedDelivery;
          changes.push({ before, next: item.transition, actor: item.actor, occurredAt: item.occurredAt });
        }
        await this.deps.lifecycle.transitionAllIn(work, changes);
      }
      return unique.map((index): [number, GroupedOutcome] => {
        const kind = state.get(index);
        if (kind === 'replayed') return [index, { outcome: 'replayed' }];
        if (kind !== 'fresh') return [index, { outcome: 'duplicate', named: [] }];
        const list = named.get(index) ?? [];
        return [index, { outcome: list.length > 0 ? 'matched' : 'unmatched', named: list }];
      });
    });
    const byIndex = new Map(outcomes);
    return items.map((item, index) => {
      const own = byIndex.get(index);
      if (own) return own;
      // A copy: a duplicate of its first, or replayed with it (receive.ts's own path then serializes them on the id).
      const of = byIndex.get(firstOf.get(`${item.provider}\u0000${item.deliveryId}`) as number);
      return of?.outcome === 'replayed' ? of : { outcome: 'duplicate', named: [] };
    });
  }
}
