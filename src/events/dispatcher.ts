import type { BaseLogger } from 'pino';
import type { Keyring } from '../config/checks.ts';
import { type Db, queryRows, sql } from '../db/client.ts';
import type { OutboundGuard } from '../lib/outbound.ts';
import type { Sealed } from '../secrets/crypto.ts';
import { type DeliveryKey, recordAttempt } from './delivery-log.ts';
import { type EndpointTarget, endpointKeys, endpointTargets } from './endpoints.ts';
import { deliveredData, type WebhookSettings, webhookId, webhookIds } from './outbox.ts';
import { type Attempt, attemptError, notSent, send, signingKey, type Webhook } from './send.ts';

export interface Dispatcher {
  /** Starts the poll timer and runs a first round (the backlog of a previous run). */
  start(): void;
  /** Stops the timers and waits for the running round. */
  stop(): Promise<void>;
  /** Asks for a round soon; wakes that arrive while one runs cause one more right after. */
  wake(): void;
  /** One claim+deliver round; returns how many deliveries it attempted. */
  runOnce(): Promise<number>;
  /**
   * Delivers one delivery again now, whatever its state (docs/contract.md §11): a delivered one is a
   * replay. The attempt is logged like any other; answers what became of it, or why none was made.
   */
  retry(key: DeliveryKey): Promise<{ attempted: true; delivered: boolean } | { attempted: false; reason: 'busy' | 'not_configured' | 'gone' }>;
}

export interface DispatcherOptions {
  db: Db;
  webhooks: readonly WebhookSettings[];
  /** Fallback poll interval; commits wake the dispatcher directly. */
  pollIntervalMs: number;
  /** The service logger: its `err` serializer keeps Drizzle's query parameters out of log lines. */
  logger: Pick<BaseLogger, 'debug' | 'info' | 'warn' | 'error'>;
  /** Per attempt, until the response headers arrive. Default 10 s. */
  timeoutMs?: number;
  /** Exponential back-off with full jitter. Default 1 s doubling up to 10 min. */
  backoff?: { baseMs: number; maxMs: number };
  /** How long a claim keeps other dispatchers off a delivery; must exceed timeoutMs. Default max(60 s, 3 × timeoutMs). */
  leaseMs?: number;
  /** Deliveries claimed per round. Default 20. */
  batchSize?: number;
  /** Seconds after its event a delivery still failing becomes `failed` and is no longer retried (EVENTS_WEBHOOK_MAX_AGE). Default three days. */
  maxAgeSeconds?: number;
  fetch?: typeof fetch;
  /** Called for each delivery that succeeded, with the time since the event occurred (metrics). */
  onDelivered?: (lagMs: number, webhookId: string) => void;
  /** Milliseconds since the epoch, for `webhook-timestamp` (tests move it). */
  clock?: () => number;
  /** Opens events' sealed fields (the outbox's `secretData`) and endpoints' signing secrets. */
  keyring?: Keyring;
  /**
   * The outbound guard (docs/contract.md §1): deliveries to endpoints made through the API go
   * through it (class `webhook`); a refused address is a failed attempt, `outbound_refused`.
   * Without one (unit tests), they use `fetch` like the settings' endpoints.
   */
  guard?: OutboundGuard;
}

interface Claimed {
  organization_id: string;
  event_id: string;
  webhook_id: string;
  attempts: number;
  type: string;
  data: Record<string, unknown>;
  sealed: Sealed | null;
  occurred_at: string;
  /** Delivered before this attempt: a retry by hand replays it. */
  replay: boolean;
}

/** The columns a claim returns, joined with its event. */
const CLAIMED_COLUMNS = sql`c.organization_id, c.event_id, c.webhook_id, c.attempts, c.replay, e.type, e.data, e.sealed,
  to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS occurred_at`;

/**
 * Delivers outbox events to the configured webhooks, at least once, signed per Standard Webhooks.
 * A class of small methods (claim, attempt, record, runOnce, drain, wake) sharing its state:
 * its timers, its loop and the set of failing webhooks.
 */
export function createDispatcher(options: DispatcherOptions): Dispatcher {
  return new WebhookDispatcher(options);
}

class WebhookDispatcher implements Dispatcher {
  private readonly db: Db;
  private readonly logger: DispatcherOptions['logger'];
  private readonly options: DispatcherOptions;
  private readonly timeoutMs: number;
  private readonly backoff: { baseMs: number; maxMs: number };
  private readonly leaseMs: number;
  private readonly batchSize: number;
  private readonly maxAgeSeconds: number;
  private readonly webhooks = new Map<string, Webhook>();
  /**
   * The settings' webhook ids. Deliveries of webhooks no longer configured stay in the table
   * untouched: claiming them would spin. Endpoints made through the API are read at each claim.
   */
  private readonly ids: string[];
  /** Webhooks whose last delivery from this dispatcher failed. */
  private readonly failing = new Set<string>();
  private started = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private wakeTimer: NodeJS.Immediate | undefined;
  private loop: Promise<void> | null = null;
  private again = false;

  constructor(options: DispatcherOptions) {
    this.options = options;
    this.db = options.db;
    this.logger = options.logger;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.backoff = options.backoff ?? { baseMs: 1_000, maxMs: 600_000 };
    this.leaseMs = options.leaseMs ?? Math.max(60_000, 3 * this.timeoutMs);
    this.batchSize = options.batchSize ?? 20;
    this.maxAgeSeconds = options.maxAgeSeconds ?? 259_200;
    for (const hook of options.webhooks) {
      const id = webhookId(hook.url);
      if (!this.webhooks.has(id)) this.webhooks.set(id, { url: hook.url, keys: [signingKey(hook.secret)] });
    }
    this.ids = webhookIds(options.webhooks);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.pollTimer = setInterval(() => this.wake(), this.options.pollIntervalMs);
    this.pollTimer.unref();
    this.wake();
  }

  async stop(): Promise<void> {
    this.started = false;
    clearInterval(this.pollTimer);
    clearImmediate(this.wakeTimer);
    this.wakeTimer = undefined;
    await this.loop;
  }

  wake(): void {
    if (!this.started) return;
    this.again = true;
    if (this.loop || this.wakeTimer) return;
    // Deferred so that a burst of wakes (one commit, several events) makes one round.
    this.wakeTimer = setImmediate(() => {
      this.wakeTimer = undefined;
      this.loop = this.drain().finally(() => {
        this.loop = null;
        if (this.again && this.started) this.wake();
      });
    });
  }

  async runOnce(): Promise<number> {
    const rows = await this.claim();
    const targets = await this.targets(rows);
    await Promise.all(
      rows.map(async (row) => {
        try {
          await this.record(row, await this.attempt(row, targets));
        } catch (error) {
          // The claim lapses after the lease and the delivery is tried again.
          this.logger.error({ eventId: row.event_id, webhookId: row.webhook_id, err: error }, 'recording a webhook delivery failed');
        }
      }),
    );
    return rows.length;
  }

  async retry(key: DeliveryKey): ReturnType<Dispatcher['retry']> {
    if (!this.webhooks.has(key.webhookId)) {
      const target = (await endpointTargets(this.db, this.options.keyring, [key.webhookId])).get(key.webhookId);
      if (!target?.enabled) return { attempted: false, reason: 'not_configured' };
    }
    // Claimed like a round's row, whatever its schedule or state, unless a dispatcher holds it now.
    const [row] = await queryRows<Claimed>(
      this.db,
      sql`
        WITH claimed AS (
          UPDATE event_deliveries AS d
          SET locked_until = now() + ${this.leaseMs}::int * interval '1 millisecond', attempts = d.attempts + 1
          WHERE d.organization_id = ${key.organizationId} AND d.event_id = ${key.eventId} AND d.webhook_id = ${key.webhookId}
            AND (d.locked_until IS NULL OR d.locked_until < now())
          RETURNING d.organization_id, d.event_id, d.webhook_id, d.attempts, d.delivered_at IS NOT NULL AS replay
        )
        SELECT ${CLAIMED_COLUMNS} FROM claimed AS c JOIN events AS e ON e.organization_id = c.organization_id AND e.id = c.event_id
      `,
    );
    if (!row) {
      const [exists] = await queryRows<{ one: number }>(
        this.db,
        sql`SELECT 1 AS one FROM event_deliveries WHERE organization_id = ${key.organizationId} AND event_id = ${key.eventId} AND webhook_id = ${key.webhookId}`,
      );
      return { attempted: false, reason: exists ? 'busy' : 'gone' };
    }
    const attempt = await this.attempt(row, await this.targets([row]));
    await this.record(row, attempt);
    return { attempted: true, delivered: attempt.delivered };
  }

  /** The endpoints made through the API that claimed rows go to: where, and the secrets that sign. */
  private targets(rows: readonly Claimed[]): Promise<Map<string, EndpointTarget>> {
    const ids = [...new Set(rows.map((row) => row.webhook_id).filter((id) => !this.webhooks.has(id)))];
    return endpointTargets(this.db, this.options.keyring, ids);
  }

  private async drain(): Promise<void> {
    while (this.again && this.started) {
      this.again = false;
      try {
        // A full batch means more is probably due: go on without waiting for the timer.
        if ((await this.runOnce()) >= this.batchSize) this.again = true;
      } catch (error) {
        this.logger.error({ err: error }, 'event dispatch round failed');
      }
    }
  }

  private claim(): Promise<Claimed[]> {
    const idList = sql.join(
      this.ids.map((id) => sql`${id}`),
      sql`, `,
    );
    // The settings' webhooks, and the enabled endpoints made through the API (docs/contract.md §7).
    const configured =
      this.ids.length > 0
        ? sql`(webhook_id IN (${idList}) OR webhook_id IN (SELECT id FROM webhook_endpoints WHERE enabled))`
        : sql`webhook_id IN (SELECT id FROM webhook_endpoints WHERE enabled)`;
    // One statement is its own short transaction; SKIP LOCKED and the lease keep other dispatchers off these rows.
    return queryRows<Claimed>(
      this.db,
      sql`
        WITH due AS MATERIALIZED (
          SELECT organization_id, event_id, webhook_id FROM event_deliveries
          WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
            AND (locked_until IS NULL OR locked_until < now())
            AND ${configured}
          ORDER BY next_attempt_at
          LIMIT ${this.batchSize}
          FOR UPDATE SKIP LOCKED
        ), claimed AS (
          UPDATE event_deliveries AS d
          SET locked_until = now() + ${this.leaseMs}::int * interval '1 millisecond', attempts = d.attempts + 1
          FROM due
          WHERE d.organization_id = due.organization_id AND d.event_id = due.event_id AND d.webhook_id = due.webhook_id
          RETURNING d.organization_id, d.event_id, d.webhook_id, d.attempts, false AS replay
        )
        SELECT ${CLAIMED_COLUMNS} FROM claimed AS c JOIN events AS e ON e.organization_id = c.organization_id AND e.id = c.event_id
      `,
    );
  }

  /** One POST of a claimed delivery to its webhook: a settings' one, or an endpoint made through the API (`targets`). */
  private async attempt(row: Claimed, targets: ReadonlyMap<string, EndpointTarget>): Promise<Attempt> {
    let hook = this.webhooks.get(row.webhook_id);
    let fetcher = this.options.fetch ?? fetch;
    if (!hook) {
      const target = targets.get(row.webhook_id);
      // Removed or disabled since the claim: its pending deliveries were ended with it.
      if (!target?.enabled) return notSent('endpoint_removed');
      // Its url is read at each attempt: a PATCHed one applies from the next (docs/contract.md §7).
      if (target.secrets.length === 0) return notSent('signing secret did not open');
      hook = { url: target.url, keys: endpointKeys(target) };
      const guard = this.options.guard;
      if (guard) {
        fetcher = ((url: string, init: RequestInit) =>
          guard.fetch(url, { method: 'POST', headers: init.headers as Record<string, string>, body: init.body as string, ...(init.signal ? { signal: init.signal } : {}) }, 'webhook')) as typeof fetch;
      }
    }
    let data: Record<string, unknown>;
    try {
      data = deliveredData(this.options.keyring, { organizationId: row.organization_id, id: row.event_id, data: row.data, sealed: row.sealed });
    } catch {
      // Sealed under a key no longer in ENCRYPTION_KEYS: retried (the key may come back) until the delivery gives up.
      return notSent('sealed event fields did not open');
    }
    const event = { id: row.event_id, type: row.type, occurredAt: row.occurred_at, data };
    return send(event, hook, {
      timeoutMs: this.timeoutMs,
      fetch: fetcher,
      clock: this.options.clock ?? Date.now,
      spanAttributes: { 'tessera.webhook.id': row.webhook_id, 'tessera.delivery.attempt': row.attempts },
    });
  }

  private async record(row: Claimed, attempt: Attempt): Promise<void> {
    const key = { organizationId: row.organization_id, eventId: row.event_id, webhookId: row.webhook_id };
    if (attempt.delivered) {
      await recordAttempt(this.db, key, row.attempts, attempt, { replay: row.replay });
      this.options.onDelivered?.(Date.now() - Date.parse(row.occurred_at), row.webhook_id);
      if (this.failing.delete(row.webhook_id)) {
        // The receiver is back: its backlog is due now, not at the backed-off times (up to EVENTS_RETRY_MAX away).
        await this.db.execute(sql`
          UPDATE event_deliveries SET next_attempt_at = now()
          WHERE webhook_id = ${row.webhook_id} AND delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at > now()`);
        this.wake();
      }
      return;
    }
    this.failing.add(row.webhook_id);
    const delayMs = Math.round(Math.random() * Math.min(this.backoff.maxMs, this.backoff.baseMs * 2 ** Math.min(row.attempts - 1, 40)));
    const error = attemptError(attempt);
    const failed = await recordAttempt(this.db, key, row.attempts, attempt, {
      replay: row.replay,
      retry: { delayMs, occurredAt: row.occurred_at, maxAgeSeconds: this.maxAgeSeconds, error },
    });
    this.logger.warn(
      { eventId: row.event_id, webhookId: row.webhook_id, attempt: row.attempts, error, ...(failed ? { gaveUp: true } : { retryInMs: delayMs }) },
      failed ? 'webhook delivery failed for good (EVENTS_WEBHOOK_MAX_AGE)' : 'webhook delivery failed',
    );
  }
}
