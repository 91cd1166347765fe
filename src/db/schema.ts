/**
 * The database schema. Every tenant table carries `organization_id` and leads its
 * primary key and indexes with it, so the data can be sharded by organization later.
 * snake_case in SQL, camelCase in TypeScript.
 */
import { sql } from 'drizzle-orm';
import { boolean, foreignKey, index, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';

import { createdAt, time, updatedAt } from './columns.ts';

// The integrations' tables (integrations, their secrets, OAuth states, connect sessions).
export * from './schema-integrations.ts';
// Agent capabilities (docs/contract.md §9).
export * from './schema-agents.ts';
// Webhook endpoints made through the API (docs/contract.md §7).
export * from './schema-webhooks.ts';

export const organizations = pgTable(
  'organizations',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    /** The product's key for its customer (docs/contract.md §5d): set only by service tokens and system administrators, unique across the deployment. */
    externalId: text('external_id'),
    /** The user who created it, if one did (LIMIT_ORGANIZATIONS_PER_USER counts these). */
    createdByUserId: text('created_by_user_id'),
    /** The service token that created it, if one did. */
    createdByServiceTokenId: text('created_by_service_token_id'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    uniqueIndex('organizations_external_id_key').on(t.externalId).where(sql`external_id IS NOT NULL`),
    index('organizations_created_by_user_idx').on(t.createdByUserId),
  ],
);

/** Users are global (one person, several organizations). */
export const users = pgTable(
  'users',
  {
    id: text('id').primaryKey(),
    email: text('email').notNull(),
    /** Lower-cased e-mail: uniqueness is case-insensitive. */
    emailNormalized: text('email_normalized').notNull(),
    name: text('name').notNull().default(''),
    /** `scrypt$<log2 N>$<r>$<p>$<salt b64>$<hash b64>`. */
    passwordHash: text('password_hash').notNull(),
    systemAdmin: boolean('system_admin').notNull().default(false),
    /** The organization last switched to. */
    defaultOrganizationId: text('default_organization_id'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [uniqueIndex('users_email_normalized_key').on(t.emailNormalized)],
);

export const memberships = pgTable(
  'memberships',
  {
    organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
    role: text('role', { enum: ['owner', 'admin', 'member'] }).notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.organizationId, t.userId] }), index('memberships_user_idx').on(t.userId)],
);

export type InvitationStatus = 'pending' | 'accepted' | 'declined' | 'revoked';

/**
 * Invitations to join an organization: membership needs the invitee's consent. At most one
 * pending invitation per (organization, e-mail); answered ones stay as history. The e-mail
 * index is the one lookup not led by the organization: an invitee finds their invitations
 * across organizations by their account e-mail.
 */
export const invitations = pgTable(
  'invitations',
  {
    organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    id: text('id').notNull(),
    /** As the inviter wrote it (trimmed). */
    email: text('email').notNull(),
    /** Lower-cased: matched against `users.email_normalized`. */
    emailNormalized: text('email_normalized').notNull(),
    role: text('role', { enum: ['owner', 'admin', 'member'] }).notNull(),
    status: text('status').$type<InvitationStatus>().notNull().default('pending'),
    /** The inviting user (null for an API token); renewing names the renewer. */
    invitedBy: text('invited_by'),
    /**
     * SHA-256 of the single-use secret that accepting needs (the e-mail alone proves nothing:
     * addresses are not verified). Each sending replaces it; null only on rows from before it existed.
     */
    acceptTokenHash: text('accept_token_hash'),
    expiresAt: time('expires_at').notNull(),
    /** When it was accepted, declined or revoked. */
    respondedAt: time('responded_at'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.id] }),
    uniqueIndex('invitations_pending_key').on(t.organizationId, t.emailNormalized).where(sql`status = 'pending'`),
    index('invitations_email_idx').on(t.emailNormalized, t.id),
  ],
);

/** Login sessions: every session JWT names one, so logout takes effect at once. */
export const sessions = pgTable(
  'sessions',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
    expiresAt: time('expires_at').notNull(),
    revokedAt: time('revoked_at'),
    createdAt: createdAt(),
  },
  (t) => [index('sessions_user_idx').on(t.userId)],
);

/**
 * Nonces of the pages' forms (src/http/form-guard.ts): one per form shown, used up by the
 * post it allows. Not tenant data — a form may belong to no organization (a sign-in page) —
 * so the key is the nonce's hash, like a session's; rows die with their expiry.
 */
export const formNonces = pgTable(
  'form_nonces',
  {
    nonceHash: text('nonce_hash').primaryKey(),
    /** SHA-256 of the form cookie's value: the browser the nonce was shown to. */
    bindingHash: text('binding_hash').notNull(),
    /** SHA-256 of the path the form posts to: the one form the nonce is good for. */
    actionHash: text('action_hash').notNull(),
    expiresAt: time('expires_at').notNull(),
    createdAt: createdAt(),
  },
  (t) => [index('form_nonces_expires_idx').on(t.expiresAt)],
);

/** A user's personal access tokens (`tsp_…`), stored as SHA-256 hashes only. */
export const personalAccessTokens = pgTable(
  'personal_access_tokens',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    tokenHash: text('token_hash').notNull(),
    /** Last four characters, for display. */
    lastFour: text('last_four').notNull(),
    organizationIds: text('organization_ids').array().notNull(),
    expiresAt: time('expires_at'),
    lastUsedAt: time('last_used_at'),
    revokedAt: time('revoked_at'),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex('personal_access_tokens_hash_key').on(t.tokenHash), index('personal_access_tokens_user_idx').on(t.userId)],
);

/** An organization's API tokens (`tsa_…`), stored as SHA-256 hashes only. */
export const apiTokens = pgTable(
  'api_tokens',
  {
    organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    id: text('id').notNull(),
    name: text('name').notNull(),
    tokenHash: text('token_hash').notNull(),
    lastFour: text('last_four').notNull(),
    createdBy: text('created_by'),
    expiresAt: time('expires_at'),
    lastUsedAt: time('last_used_at'),
    revokedAt: time('revoked_at'),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.organizationId, t.id] }), uniqueIndex('api_tokens_hash_key').on(t.tokenHash)],
);

/** Who did what, when: never holds a secret. */
export const auditLogs = pgTable(
  'audit_logs',
  {
    organizationId: text('organization_id').notNull(),
    /** ULID: time-ordered, so the newest-first listing is an index scan. */
    id: text('id').notNull(),
    actorUserId: text('actor_user_id'),
    impersonatorUserId: text('impersonator_user_id'),
    credentialKind: text('credential_kind'),
    /** The credential's id (session, PAT or API token), never its value. */
    credentialId: text('credential_id'),
    action: text('action').notNull(),
    targetType: text('target_type'),
    targetId: text('target_id'),
    requestId: text('request_id'),
    detail: jsonb('detail').$type<Record<string, unknown>>().notNull().default({}),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.organizationId, t.id] })],
);

/** The outbox: events written in the transaction of the change they describe. */
export const events = pgTable(
  'events',
  {
    organizationId: text('organization_id').notNull(),
    id: text('id').notNull(),
    type: text('type').notNull(),
    data: jsonb('data').$type<Record<string, unknown>>().notNull(),
    /**
     * Fields of `data` that are secrets (an invitation's accept token), sealed under the keyring
     * (`keyId` and envelope as JSON) and opened only to deliver: the table never holds them readable.
     */
    sealed: jsonb('sealed').$type<{ keyId: string; envelope: string }>(),
    occurredAt: time('occurred_at').notNull().defaultNow(),
  },
  // Retention finds old events without their organization (a deployment-wide job).
  (t) => [primaryKey({ columns: [t.organizationId, t.id] }), index('events_occurred_idx').on(t.occurredAt)],
);

/** One row per event and configured webhook: what is still to deliver, and when to try. */
export const eventDeliveries = pgTable(
  'event_deliveries',
  {
    organizationId: text('organization_id').notNull(),
    eventId: text('event_id').notNull(),
    /** Identifies the webhook by its URL (a hash), so config order may change. */
    webhookId: text('webhook_id').notNull(),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: time('next_attempt_at').notNull().defaultNow(),
    /** A dispatcher's claim: others skip the row until it passes. */
    lockedUntil: time('locked_until'),
    deliveredAt: time('delivered_at'),
    /** Set when it was still failing `EVENTS_WEBHOOK_MAX_AGE` after its event: retries stop (a retry by hand may still deliver it). */
    failedAt: time('failed_at'),
    /** The webhook's URL without userinfo or query (it may carry the receiver's credential): what the delivery log shows. */
    endpoint: text('endpoint'),
    lastError: text('last_error'),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.eventId, t.webhookId] }),
    index('event_deliveries_due_idx').on(t.nextAttemptAt).where(sql`delivered_at IS NULL`),
    // The delivery log is the deployment's (system administrators): listed newest first across organizations.
    index('event_deliveries_listing_idx').on(t.eventId, t.webhookId),
    index('event_deliveries_delivered_idx').on(t.deliveredAt).where(sql`delivered_at IS NOT NULL`),
    index('event_deliveries_failed_idx').on(t.failedAt).where(sql`failed_at IS NOT NULL`),
  ],
);

/**
 * The delivery log: one row per attempt to deliver, written by the dispatcher in the statement
 * that records the attempt's outcome on its delivery. Goes with its delivery.
 */
export const eventDeliveryAttempts = pgTable(
  'event_delivery_attempts',
  {
    organizationId: text('organization_id').notNull(),
    eventId: text('event_id').notNull(),
    webhookId: text('webhook_id').notNull(),
    /** The delivery's attempt count when it was made (1, 2, …). */
    number: integer('number').notNull(),
    at: time('at').notNull(),
    /** The receiver's HTTP status; null when none arrived (timeout, network error). */
    responseStatus: integer('response_status'),
    /** Our words for a failure without a status (never the receiver's body). */
    error: text('error'),
    durationMs: integer('duration_ms').notNull(),
    /** A retry by hand of a delivery already delivered. */
    replay: boolean('replay').notNull().default(false),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.eventId, t.webhookId, t.number] }),
    foreignKey({ name: 'event_delivery_attempts_delivery_fk', columns: [t.organizationId, t.eventId, t.webhookId], foreignColumns: [eventDeliveries.organizationId, eventDeliveries.eventId, eventDeliveries.webhookId] }).onDelete('cascade'),
  ],
);

/**
 * Deployment-wide background jobs that run once in total across instances (retention): an
 * instance runs one only after moving its `next_run_at` ahead in the statement that claims it.
 */
export const backgroundJobs = pgTable('background_jobs', {
  name: text('name').primaryKey(),
  nextRunAt: time('next_run_at').notNull().defaultNow(),
  lastRunAt: time('last_run_at'),
});

/**
 * Service tokens (`tss_…`, docs/contract.md §5d): a product's backend across all its customers'
 * organizations, created by a system administrator. A global table, not a tenant one: a token
 * belongs to the deployment, not to an organization. Stored as SHA-256 hashes only.
 */
export const serviceTokens = pgTable(
  'service_tokens',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    tokenHash: text('token_hash').notNull(),
    /** Last four characters, for display. */
    lastFour: text('last_four').notNull(),
    /** The system administrator who created it. */
    createdBy: text('created_by'),
    expiresAt: time('expires_at'),
    lastUsedAt: time('last_used_at'),
    revokedAt: time('revoked_at'),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex('service_tokens_hash_key').on(t.tokenHash)],
);
