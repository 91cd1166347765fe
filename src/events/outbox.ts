import { createHash } from 'node:crypto';
import type { Keyring } from '../config/checks.ts';
import { newId as ulid } from '../lib/ids.ts';
import type { SQL } from 'drizzle-orm';
import { type Db, queryRows, sql } from '../db/client.ts';
import { open, type Sealed, type SecretBinding, seal } from '../secrets/crypto.ts';
import { publicEndpoint } from './send.ts';
import type { EventData, EventType } from './types.ts';


/**
 * An event to record, typed by its declaration in types.ts. `data` is delivered to every
 * webhook with `organizationId` and the organization's `externalId` added: it must never hold a
 * secret. `secretData` is for the rare secret an event exists to carry (an invitation's accept
 * token): sealed in the row under the keyring, and merged into `data` only in the delivered body.
 */
export type NewEvent = {
  [T in EventType]: { organizationId: string; type: T } & SplitData<EventData<T>>;
}[EventType];

/** The fields an event may seal (delivered like the rest, stored only encrypted). */
type SecretField = 'acceptToken' | 'acceptUrl';
type SplitData<D> = Extract<keyof D, SecretField> extends never
  ? { data: D; secretData?: never }
  : { data: Omit<D, SecretField>; secretData: Pick<D, Extract<keyof D, SecretField>> };

/** What sealed event fields are bound to: another event's row does not open them. */
function eventBinding(organizationId: string, eventId: string): SecretBinding {
  return { organizationId, recordId: eventId, name: 'event.data' };
}

/** The event's delivered `data`: its stored fields and, opened, its sealed ones (throws SecretDecryptionError). */
export function deliveredData(keyring: Keyring | undefined, event: { organizationId: string; id: string; data: Record<string, unknown>; sealed: Sealed | null }): Record<string, unknown> {
  if (!event.sealed) return event.data;
  if (!keyring) throw new Error('an event with sealed fields needs the keyring to be delivered');
  const secrets = JSON.parse(open(keyring, eventBinding(event.organizationId, event.id), event.sealed)) as Record<string, string>;
  return { ...event.data, ...secrets };
}

export interface WebhookSettings {
  url: string;
  /** `whsec_<base64>` (Standard Webhooks). */
  secret: string;
}

export interface Outbox {
  /**
   * Writes the event (and one event_deliveries row per configured webhook) with `tx`,
   * the transaction of the change it describes; registers
   * `afterCommit(() => dispatcher.wake())`. Returns the event id.
   */
  emit(tx: Db, afterCommit: (fn: () => unknown) => void, event: NewEvent): Promise<string>;
  /** `emit` for several events in one statement (changes made together), their ids in the order given. */
  emitAll(tx: Db, afterCommit: (fn: () => unknown) => void, events: readonly NewEvent[]): Promise<string[]>;
}

/** A short stable id for a webhook, derived from its URL so that config order may change; the URL itself may carry a credential, so only the hash is stored and logged. */
export function webhookId(url: string): string {
  return createHash('sha256').update(url).digest('hex').slice(0, 16);
}

/** Distinct webhook ids of a configuration: the same URL listed twice is one webhook (the delivery key would collide). */
export function webhookIds(webhooks: readonly WebhookSettings[]): string[] {
  return [...new Set(webhooks.map((hook) => webhookId(hook.url)))];
}

/** The transactional outbox: events commit or roll back with the change they describe. `keyring` seals `secretData`. */
export function createOutbox(options: { webhooks: readonly WebhookSettings[]; wake: () => void; keyring?: Keyring }): Outbox {
  const ids = webhookIds(options.webhooks);
  // The endpoint each delivery shows in the log, without userinfo or query (decision 157).
  const endpoints = new Map(options.webhooks.map((hook) => [webhookId(hook.url), publicEndpoint(hook.url)]));
  const { wake, keyring } = options;
  /** The webhooks an event of `type` (an SQL expression) is delivered to: the settings', and every enabled endpoint made through the API whose eventTypes name it. */
  const hooksOf = (type: SQL) => {
    const made = sql`SELECT id, endpoint FROM webhook_endpoints WHERE enabled AND (event_types IS NULL OR ${type} = ANY(event_types))`;
    return ids.length === 0
      ? made
      : sql`SELECT * FROM (VALUES ${sql.join(
          ids.map((hook) => sql`(${hook}, ${endpoints.get(hook) ?? null})`),
          sql`, `,
        )}) AS settings (id, endpoint) UNION ALL ${made}`;
  };
  const sealedOf = (event: NewEvent, id: string): string | null => {
    if (!event.secretData) return null;
    if (!keyring) throw new Error('an event with secret fields needs an outbox with the keyring');
    return JSON.stringify(seal(keyring, eventBinding(event.organizationId, id), JSON.stringify(event.secretData)));
  };
  return {
    async emit(tx, afterCommit, event) {
      const id = `evt_${ulid()}`;
      // Every event names its organization: a product with one organization per customer
      // routes what it receives by it (decision 98).
      const data = JSON.stringify({ organizationId: event.organizationId, ...event.data });
      // …and its external id (the product's key for the customer), read in the same statement; an
      // event that names one itself (an organization being deleted) keeps its own.
      const value = sql`jsonb_build_object('organizationId', ${event.organizationId}::text, 'externalId', (SELECT external_id FROM organizations WHERE id = ${event.organizationId})) || ${data}::jsonb`;
      const sealed = sealedOf(event, id);
      // One statement: emitting sits on request paths, where each round-trip counts.
      const [written] = await queryRows<{ deliveries: number }>(
        tx,
        sql`
        WITH event AS (
          INSERT INTO events (organization_id, id, type, data, sealed)
          VALUES (${event.organizationId}, ${id}, ${event.type}, ${value}, ${sealed}::jsonb)
          RETURNING organization_id, id
        ), delivery AS (
          INSERT INTO event_deliveries (organization_id, event_id, webhook_id, endpoint)
          SELECT event.organization_id, event.id, hook.id, hook.endpoint FROM event CROSS JOIN (${hooksOf(sql`${event.type}::text`)}) AS hook (id, endpoint)
          RETURNING 1
        )
        SELECT count(*)::int AS deliveries FROM delivery
      `,
      );
      if ((written?.deliveries ?? 0) > 0) afterCommit(() => wake());
      return id;
    },
    async emitAll(tx, afterCommit, events) {
      if (events.length === 0) return [];
      const rows = events.map((event, n) => {
        const id = `evt_${ulid()}`;
        return { n, organization_id: event.organizationId, id, type: event.type, data: { organizationId: event.organizationId, ...event.data }, sealed: sealedOf(event, id) };
      });
      // The same rows as `emit`'s, each event's webhooks by its own type; ids (ULIDs) in the order given.
      const [written] = await queryRows<{ deliveries: number }>(
        tx,
        sql`
        WITH input AS (
          SELECT * FROM json_to_recordset(${JSON.stringify(rows)}::json) AS e(n int, organization_id text, id text, type text, data jsonb, sealed text)
        ), event AS (
          INSERT INTO events (organization_id, id, type, data, sealed)
          SELECT organization_id, id, type,
                 jsonb_build_object('organizationId', organization_id, 'externalId', (SELECT external_id FROM organizations o WHERE o.id = input.organization_id)) || data,
                 sealed::jsonb
          FROM input ORDER BY n
          RETURNING organization_id, id, type
        ), delivery AS (
          INSERT INTO event_deliveries (organization_id, event_id, webhook_id, endpoint)
          SELECT event.organization_id, event.id, hook.id, hook.endpoint FROM event CROSS JOIN LATERAL (${hooksOf(sql`event.type`)}) AS hook (id, endpoint)
          RETURNING 1
        )
        SELECT count(*)::int AS deliveries FROM delivery
      `,
      );
      if ((written?.deliveries ?? 0) > 0) afterCommit(() => wake());
      return rows.map((row) => row.id);
    },
  };
}
