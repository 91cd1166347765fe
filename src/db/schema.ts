/**
 * The database schema. Every tenant table carries `organization_id` and leads its
 * primary key and indexes with it, so the data can be sharded by organization later.
 * snake_case in SQL, camelCase in TypeScript.
 */
import { sql } from 'drizzle-orm';
import { boolean, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

const time = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });
const createdAt = () => time('created_at').notNull().defaultNow();
const updatedAt = () => time('updated_at').notNull().defaultNow();

export const organizations = pgTable(
  'organizations',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    /** The product's own id for this organization (provisioning), unique per creating user. */
    externalId: text('external_id'),
    /** Who created it: the scope of `external_id`'s uniqueness. */
    createdByUserId: text('created_by_user_id'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [uniqueIndex('organizations_creator_external_id_key').on(t.createdByUserId, t.externalId).where(sql`external_id IS NOT NULL`)],
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
    occurredAt: time('occurred_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.organizationId, t.id] })],
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
    lastError: text('last_error'),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.eventId, t.webhookId] }),
    index('event_deliveries_due_idx').on(t.nextAttemptAt).where(sql`delivered_at IS NULL`),
  ],
);

export type IntegrationStatus = 'connected' | 'expired' | 'invalid' | 'warning';

/** One integration per (organization, provider). */
export const integrations = pgTable(
  'integrations',
  {
    organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    id: text('id').notNull(),
    provider: text('provider').notNull(),
    name: text('name').notNull(),
    description: text('description').notNull(),
    /** Scopes the provider reported as granted. */
    scopes: text('scopes').array().notNull().default(sql`'{}'::text[]`),
    /** The provider account's stable id (GitHub numeric id; Slack team:user). */
    providerAccountId: text('provider_account_id').notNull(),
    status: text('status').$type<IntegrationStatus>().notNull().default('connected'),
    /** Whether the last validation accepted the token (the status object's `tokenValid`). */
    tokenValid: boolean('token_valid').notNull().default(true),
    /** Whether a refresh token is stored (without decrypting anything). */
    hasRefreshToken: boolean('has_refresh_token').notNull().default(false),
    /** Our words for the last failure, never the provider's raw text. */
    lastError: text('last_error'),
    detectedAt: time('detected_at'),
    lastValidatedAt: time('last_validated_at'),
    /** Access-token expiry in plain (not secret): for scheduling refreshes. */
    tokenExpiresAt: time('token_expires_at'),
    refreshTokenExpiresAt: time('refresh_token_expires_at'),
    /** When the provider last issued a token by refresh: refreshes close together share it. */
    lastRefreshedAt: time('last_refreshed_at'),
    /** Bumped whenever the secrets are replaced: refreshes compare-and-set on it. */
    tokenVersion: integer('token_version').notNull().default(1),
    nextValidationAt: time('next_validation_at'),
    /** Cross-process refresh lease: which instance may call the provider, until when. */
    leaseOwner: text('lease_owner'),
    leaseUntil: time('lease_until'),
    /** Non-secret, provider-defined values a client needs to use the token (`instanceUrl`, `sites`…; docs/providers.md). */
    metadata: jsonb('metadata').$type<Record<string, unknown>>().notNull().default({}),
    /** The connect session (and its end user) through which it was last connected, if any. */
    connectedVia: jsonb('connected_via').$type<ConnectedVia | null>(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.id] }),
    uniqueIndex('integrations_organization_provider_key').on(t.organizationId, t.provider),
    index('integrations_next_validation_idx').on(t.nextValidationAt),
  ],
);

/**
 * Encrypted secrets, six names per integration at most. Rows are immutable (a
 * trigger rejects UPDATE): replacing is delete + insert in one transaction.
 */
export const integrationSecrets = pgTable(
  'integration_secrets',
  {
    organizationId: text('organization_id').notNull(),
    integrationId: text('integration_id').notNull(),
    name: text('name').notNull(),
    /** Id of the master key (in ENCRYPTION_KEYS) the row is encrypted under. */
    keyId: text('key_id').notNull(),
    /** `v1.<salt>.<iv>.<ciphertext+tag>`, base64url parts. */
    envelope: text('envelope').notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.integrationId, t.name] }),
    index('integration_secrets_key_id_idx').on(t.keyId),
  ],
);

/** Server-side OAuth state: single use, consumed atomically on callback. */
export const oauthStates = pgTable(
  'oauth_states',
  {
    organizationId: text('organization_id').notNull(),
    /** SHA-256 of the state's random nonce. */
    nonceHash: text('nonce_hash').notNull(),
    /** The user who started the flow; null for a flow started through a connect session. */
    userId: text('user_id'),
    /** The connect session the flow belongs to (an end user without an account), if any. */
    connectSessionId: text('connect_session_id'),
    /** Started in a popup opened by connect.js: the callback answers with a page that tells the opener. */
    popup: boolean('popup').notNull().default(false),
    provider: text('provider').notNull(),
    redirectUri: text('redirect_uri').notNull(),
    scopes: text('scopes').array().notNull(),
    /** The PKCE verifier, encrypted like any secret (null without PKCE). */
    codeVerifier: text('code_verifier'),
    codeVerifierKeyId: text('code_verifier_key_id'),
    /** SHA-256 of the `oauth_tx` cookie value that binds the flow to the browser. */
    txHash: text('tx_hash').notNull(),
    expiresAt: time('expires_at').notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.organizationId, t.nonceHash] }), index('oauth_states_organization_expires_idx').on(t.organizationId, t.expiresAt)],
);

/** Who connected an integration through a connect session. */
export interface ConnectedVia {
  sessionId: string;
  endUser: EndUser | null;
}

/** The product's end user a connect session is for (CONTRACT.md §5a). */
export interface EndUser {
  id: string;
  email?: string;
  displayName?: string;
}

/**
 * Connect sessions (CONTRACT.md §5a): a link a product's backend mints so that its end user,
 * who has no account here, connects one integration for the organization. The secret in the
 * link is stored only as a SHA-256 hash.
 */
export const connectSessions = pgTable(
  'connect_sessions',
  {
    organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    id: text('id').notNull(),
    secretHash: text('secret_hash').notNull(),
    redirectUri: text('redirect_uri').notNull(),
    allowedProviders: text('allowed_providers').array().notNull(),
    endUser: jsonb('end_user').$type<EndUser | null>(),
    /** `pending`, `completed` or `revoked`; `expired` is read from `expires_at`. */
    status: text('status').$type<'pending' | 'completed' | 'revoked'>().notNull().default('pending'),
    integrationId: text('integration_id'),
    /** The error code of the last failed attempt (the session stays usable until it expires). */
    lastError: text('last_error'),
    /** The credential that minted it: kind, id, and its user (null for an API token). */
    createdByKind: text('created_by_kind').notNull(),
    createdById: text('created_by_id').notNull(),
    createdByUserId: text('created_by_user_id'),
    expiresAt: time('expires_at').notNull(),
    completedAt: time('completed_at'),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.organizationId, t.id] }), uniqueIndex('connect_sessions_secret_hash_key').on(t.secretHash)],
);
