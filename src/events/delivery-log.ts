/**
 * The webhook delivery log (docs/contract.md §11): every attempt, written with its outcome on the
 * delivery in one statement by the dispatcher, and read back for system administrators —
 * deliveries newest first across organizations, filtered and paged, each with its attempts.
 */
import { type Db, queryRows, sql } from '../db/client.ts';
import { AppError } from '../ground/errors.ts';
import { ENDPOINT_ID, NO_ORGANIZATION, settingsEndpoints } from './endpoints.ts';
import type { WebhookSettings } from './outbox.ts';
import { webhookId } from './outbox.ts';
import { type Attempt, publicEndpoint } from './send.ts';

/** A delivery's key: one event to one webhook. */
export interface DeliveryKey {
  organizationId: string;
  eventId: string;
  webhookId: string;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/** Attempts shown per delivery: the most recent ones (a receiver down for days makes hundreds). */
export const ATTEMPTS_SHOWN = 20;

interface RetryPlan {
  delayMs: number;
  /** The event's time: a delivery still failing `maxAgeSeconds` after it becomes `failed`. */
  occurredAt: string;
  maxAgeSeconds: number;
  error: string;
}

/**
 * Logs attempt `number` of a delivery and records its outcome on the delivery, in one
 * statement (so one transaction): delivered — done (a failed one too); failed — due again
 * after `retry.delayMs`, or `failed` for good once its event is `maxAgeSeconds` old. The
 * outcome is recorded only while the claim is still this attempt's (`attempts` unchanged): a
 * dispatcher that took over after the lease decides. Answers whether the delivery is failed now.
 */
export async function recordAttempt(db: Db, key: DeliveryKey, number: number, attempt: Attempt, options: { replay: boolean; retry?: RetryPlan }): Promise<boolean> {
  const where = sql`organization_id = ${key.organizationId} AND event_id = ${key.eventId} AND webhook_id = ${key.webhookId}`;
  const logged = sql`
    WITH logged AS (
      INSERT INTO event_delivery_attempts (organization_id, event_id, webhook_id, number, at, response_status, error, duration_ms, replay)
      VALUES (${key.organizationId}, ${key.eventId}, ${key.webhookId}, ${number}, ${attempt.at.toISOString()}::timestamptz, ${attempt.responseStatus}::int,
              ${attempt.error?.slice(0, 200) ?? null}::text, ${attempt.durationMs}::int, ${options.replay})
      ON CONFLICT DO NOTHING
      RETURNING 1
    )`;
  if (!options.retry) {
    await db.execute(sql`${logged} UPDATE event_deliveries SET delivered_at = coalesce(delivered_at, now()), failed_at = NULL, locked_until = NULL WHERE ${where}`);
    return false;
  }
  const { delayMs, occurredAt, maxAgeSeconds, error } = options.retry;
  // A replay that fails leaves a delivered delivery delivered; anything else is retried or given up.
  // One that ended while this attempt was in flight (its endpoint disabled or deleted: that released
  // the claim, `locked_until` NULL) keeps why it ended; the attempt's own error is in its log row. A
  // failed delivery retried by hand was claimed again, and takes the retry's error.
  const rows = await queryRows<{ failed: boolean }>(
    db,
    sql`${logged}
      UPDATE event_deliveries SET
        locked_until = NULL,
        last_error = CASE WHEN failed_at IS NOT NULL AND locked_until IS NULL THEN last_error ELSE ${error.slice(0, 200)} END,
        next_attempt_at = CASE WHEN delivered_at IS NULL THEN now() + ${delayMs}::int * interval '1 millisecond' ELSE next_attempt_at END,
        failed_at = CASE
          WHEN delivered_at IS NOT NULL THEN NULL
          WHEN failed_at IS NOT NULL THEN failed_at
          WHEN ${occurredAt}::timestamptz + ${maxAgeSeconds}::int * interval '1 second' <= now() THEN now()
        END
      WHERE ${where} AND attempts = ${number}
      RETURNING delivered_at IS NULL AND failed_at IS NOT NULL AS failed`,
  );
  return rows[0]?.failed === true;
}

const ID_FORMAT = /^dlv_([0-9A-HJKMNP-TV-Z]{26})_([0-9a-f]{16}|whe_[0-9A-HJKMNP-TV-Z]{26})$/;

/**
 * A delivery's public id: its event's ULID and its webhook's id (a settings' webhook's URL hash,
 * or an endpoint's `whe_` id), so the key needs no column of its own.
 */
export function deliveryId(eventId: string, webhook: string): string {
  return `dlv_${eventId.replace(/^evt_/, '')}_${webhook}`;
}

/** The event and webhook a delivery id names, or null when it cannot be one. */
export function parseDeliveryId(id: string): { eventId: string; webhookId: string } | null {
  const match = ID_FORMAT.exec(id);
  return match ? { eventId: `evt_${match[1]}`, webhookId: match[2] as string } : null;
}

interface DeliveryRow {
  organization_id: string;
  event_id: string;
  webhook_id: string;
  endpoint: string | null;
  type: string;
  attempts: number;
  delivered: boolean;
  failed: boolean;
  next_attempt_at: string;
  last_error: string | null;
}

interface AttemptRow {
  organization_id: string;
  event_id: string;
  webhook_id: string;
  at: string;
  response_status: number | null;
  error: string | null;
  duration_ms: number;
  replay: boolean;
}

/** A delivery as the API shows it. */
export interface DeliveryView {
  id: string;
  eventId: string;
  eventType: string;
  /** Null for what belongs to no organization (a `webhook.test` event). */
  organizationId: string | null;
  endpoint: string;
  /** The endpoint's id (`settings-<n>` or `whe_…`, docs/contract.md §7); null for a settings' webhook no longer configured. */
  endpointId: string | null;
  status: DeliveryStatus;
  /** Why a failed delivery failed: its last attempt's error, or `endpoint_removed`; null otherwise. */
  error: string | null;
  attempts: { at: string; responseStatus: number | null; error: string | null; durationMs: number; replay: boolean }[];
  /** How many attempts were made in all (`attempts` holds the latest ATTEMPTS_SHOWN). */
  attemptCount: number;
  nextAttemptAt: string | null;
}

export interface DeliveryFilter {
  status?: DeliveryStatus;
  eventType?: string;
  first: number;
  after?: string;
}

const STATUS_WHERE: Record<DeliveryStatus, ReturnType<typeof sql>> = {
  pending: sql`d.delivered_at IS NULL AND d.failed_at IS NULL`,
  delivered: sql`d.delivered_at IS NOT NULL`,
  failed: sql`d.delivered_at IS NULL AND d.failed_at IS NOT NULL`,
};

const iso = (column: string) => sql.raw(`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`);

const DELIVERY_COLUMNS = sql`d.organization_id, d.event_id, d.webhook_id, d.endpoint, e.type, d.attempts,
  d.delivered_at IS NOT NULL AS delivered, d.failed_at IS NOT NULL AS failed, ${iso('d.next_attempt_at')} AS next_attempt_at, d.last_error`;

/** Reads deliveries for the log: the deployment's, not one organization's (a system administrator's view). */
export class DeliveryLog {
  private readonly db: Db;
  /** Webhook id → the endpoint shown, for deliveries written before the endpoint was stored with them. */
  private readonly endpoints: Map<string, string>;
  /** A settings' webhook id → its endpoint id, `settings-<n>`. */
  private readonly settingsIds: Map<string, string>;

  constructor(db: Db, webhooks: readonly WebhookSettings[]) {
    this.db = db;
    this.endpoints = new Map(webhooks.map((hook) => [webhookId(hook.url), publicEndpoint(hook.url)]));
    this.settingsIds = new Map(settingsEndpoints(webhooks).map((endpoint) => [endpoint.webhookId, endpoint.id]));
  }

  /** Deliveries newest first (by their event), `first` after the cursor `after` (a delivery id). */
  async list(filter: DeliveryFilter): Promise<{ deliveries: DeliveryView[]; pageInfo: { endCursor: string | null; hasNextPage: boolean } }> {
    const where = [sql`true`];
    if (filter.status) where.push(STATUS_WHERE[filter.status]);
    if (filter.eventType) where.push(sql`e.type = ${filter.eventType}`);
    if (filter.after !== undefined) {
      const cursor = parseDeliveryId(filter.after);
      if (!cursor) throw new AppError('INVALID_INPUT', { details: [{ path: 'querystring.after', message: 'must be an endCursor from an earlier page' }] });
      where.push(sql`(d.event_id, d.webhook_id) < (${cursor.eventId}, ${cursor.webhookId})`);
    }
    const rows = await queryRows<DeliveryRow>(
      this.db,
      sql`SELECT ${DELIVERY_COLUMNS}
          FROM event_deliveries d JOIN events e ON e.organization_id = d.organization_id AND e.id = d.event_id
          WHERE ${sql.join(where, sql` AND `)}
          ORDER BY d.event_id DESC, d.webhook_id DESC
          LIMIT ${filter.first + 1}`,
    );
    const page = rows.slice(0, filter.first);
    const deliveries = await this.withAttempts(page);
    return { deliveries, pageInfo: { endCursor: deliveries.at(-1)?.id ?? null, hasNextPage: rows.length > filter.first } };
  }

  /** The delivery `id` names, or 404. */
  async find(id: string): Promise<DeliveryView & { key: DeliveryKey }> {
    const parsed = parseDeliveryId(id);
    const notFound = new AppError('NOT_FOUND', { message: 'No such delivery' });
    if (!parsed) throw notFound;
    const rows = await queryRows<DeliveryRow>(
      this.db,
      sql`SELECT ${DELIVERY_COLUMNS}
          FROM event_deliveries d JOIN events e ON e.organization_id = d.organization_id AND e.id = d.event_id
          WHERE d.event_id = ${parsed.eventId} AND d.webhook_id = ${parsed.webhookId}
          LIMIT 1`,
    );
    const [view] = await this.withAttempts(rows);
    const row = rows[0];
    if (!view || !row) throw notFound;
    return { ...view, key: { organizationId: row.organization_id, eventId: row.event_id, webhookId: row.webhook_id } };
  }

  private async withAttempts(rows: DeliveryRow[]): Promise<DeliveryView[]> {
    if (rows.length === 0) return [];
    const keys = sql.join(
      rows.map((row) => sql`(${row.organization_id}, ${row.event_id}, ${row.webhook_id})`),
      sql`, `,
    );
    const attempts = await queryRows<AttemptRow>(
      this.db,
      sql`SELECT organization_id, event_id, webhook_id, ${iso('at')} AS at, response_status, error, duration_ms, replay FROM (
            SELECT a.*, row_number() OVER (PARTITION BY organization_id, event_id, webhook_id ORDER BY number DESC) AS recent
            FROM event_delivery_attempts a WHERE (organization_id, event_id, webhook_id) IN (${keys})
          ) AS latest
          WHERE recent <= ${ATTEMPTS_SHOWN}
          ORDER BY number`,
    );
    const byDelivery = new Map<string, DeliveryView['attempts']>();
    for (const attempt of attempts) {
      const key = `${attempt.organization_id}/${attempt.event_id}/${attempt.webhook_id}`;
      const list = byDelivery.get(key) ?? [];
      list.push({ at: attempt.at, responseStatus: attempt.response_status, error: attempt.error, durationMs: attempt.duration_ms, replay: attempt.replay });
      byDelivery.set(key, list);
    }
    return rows.map((row) => {
      const status: DeliveryStatus = row.delivered ? 'delivered' : row.failed ? 'failed' : 'pending';
      return {
        id: deliveryId(row.event_id, row.webhook_id),
        eventId: row.event_id,
        eventType: row.type,
        organizationId: row.organization_id === NO_ORGANIZATION ? null : row.organization_id,
        endpoint: row.endpoint ?? this.endpoints.get(row.webhook_id) ?? '',
        endpointId: ENDPOINT_ID.test(row.webhook_id) ? row.webhook_id : (this.settingsIds.get(row.webhook_id) ?? null),
        status,
        error: status === 'failed' ? row.last_error : null,
        attempts: byDelivery.get(`${row.organization_id}/${row.event_id}/${row.webhook_id}`) ?? [],
        attemptCount: row.attempts,
        nextAttemptAt: status === 'pending' ? row.next_attempt_at : null,
      };
    });
  }
}
