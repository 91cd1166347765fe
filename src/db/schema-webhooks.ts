/**
 * Webhook endpoints made through the API (docs/contract.md §7): the deployment's, like service
 * tokens — no organization leads their keys (decision 282). Their signing secrets are sealed
 * under the keyring, one row each: the current one (`expiresAt` null) and, during a rotation's
 * overlap, the one before it.
 */
import { boolean, foreignKey, index, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { createdAt, time, updatedAt } from './columns.ts';

export const webhookEndpoints = pgTable('webhook_endpoints', {
  /** `whe_<ULID>`: also the `webhook_id` of its deliveries. */
  id: text('id').primaryKey(),
  url: text('url').notNull(),
  /** The URL without userinfo, query or fragment: what the delivery log shows. */
  endpoint: text('endpoint').notNull(),
  description: text('description'),
  /** The event types it receives; null: every type. */
  eventTypes: text('event_types').array(),
  enabled: boolean('enabled').notNull().default(true),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
});

export const webhookEndpointSecrets = pgTable(
  'webhook_endpoint_secrets',
  {
    endpointId: text('endpoint_id').notNull(),
    /** A ULID: the newest row is the current secret. */
    id: text('id').notNull(),
    keyId: text('key_id').notNull(),
    envelope: text('envelope').notNull(),
    /** Null for the current secret; the end of the overlap for the one a rotation replaced. */
    expiresAt: time('expires_at'),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.endpointId, t.id] }),
    foreignKey({ name: 'webhook_endpoint_secrets_endpoint_fk', columns: [t.endpointId], foreignColumns: [webhookEndpoints.id] }).onDelete('cascade'),
    index('webhook_endpoint_secrets_key_idx').on(t.keyId),
  ],
);
