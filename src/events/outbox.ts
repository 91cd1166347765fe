import { createHash } from 'node:crypto';
import { newId as ulid } from '../lib/ids.ts';
import { type Db, sql } from '../db/client.ts';

export type EventType =
  | 'organization.created'
  | 'organization.deleted'
  | 'organization.member_invited'
  | 'integration.connected'
  | 'integration.status_changed'
  | 'integration.deleted';

/** An event to record. `data` is delivered as is to every webhook: it must never hold a secret. */
export interface NewEvent {
  organizationId: string;
  type: EventType;
  data: Record<string, unknown>;
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
}

/** A short stable id for a webhook, derived from its URL so that config order may change; the URL itself may carry a credential, so only the hash is stored and logged. */
export function webhookId(url: string): string {
  return createHash('sha256').update(url).digest('hex').slice(0, 16);
}

/** Distinct webhook ids of a configuration: the same URL listed twice is one webhook (the delivery key would collide). */
export function webhookIds(webhooks: readonly WebhookSettings[]): string[] {
  return [...new Set(webhooks.map((hook) => webhookId(hook.url)))];
}

/** The transactional outbox: events commit or roll back with the change they describe. */
export function createOutbox(options: { webhooks: readonly WebhookSettings[]; wake: () => void }): Outbox {
  const ids = webhookIds(options.webhooks);
  const wake = options.wake;
  return {
    async emit(tx, afterCommit, event) {
      const id = `evt_${ulid()}`;
      // Every event names its organization: a product with one organization per customer
      // routes what it receives by it (decision 98).
      const data = JSON.stringify({ organizationId: event.organizationId, ...event.data });
      if (ids.length === 0) {
        await tx.execute(sql`INSERT INTO events (organization_id, id, type, data) VALUES (${event.organizationId}, ${id}, ${event.type}, ${data}::jsonb)`);
        return id;
      }
      // One statement: emitting sits on request paths, where each round-trip counts.
      const hooks = sql.join(
        ids.map((hook) => sql`(${hook})`),
        sql`, `,
      );
      await tx.execute(sql`
        WITH event AS (
          INSERT INTO events (organization_id, id, type, data)
          VALUES (${event.organizationId}, ${id}, ${event.type}, ${data}::jsonb)
          RETURNING organization_id, id
        )
        INSERT INTO event_deliveries (organization_id, event_id, webhook_id)
        SELECT event.organization_id, event.id, hook.id FROM event CROSS JOIN (VALUES ${hooks}) AS hook (id)
      `);
      afterCommit(() => wake());
      return id;
    },
  };
}
