/**
 * The integrations' tables: the integrations, their encrypted secrets, pending OAuth states
 * and connect sessions. Tenant tables: each leads its keys with `organization_id`.
 */
import { sql } from 'drizzle-orm';
import { boolean, check, foreignKey, index, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { createdAt, time, updatedAt } from './columns.ts';
import { organizations } from './schema.ts';

export type IntegrationStatus = 'connected' | 'expired' | 'invalid' | 'warning';

/**
 * One integration per (organization, provider, end user): the organization's own has no end
 * user (`end_user_key` '' — an end user's id is 1–128 characters, so '' names none of them).
 */
export const integrations = pgTable(
  'integrations',
  {
    organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    id: text('id').notNull(),
    provider: text('provider').notNull(),
    /** The app that made its grant (docs/contract.md §5e): a deployment app's id (the provider's own id for its default), or an organization's app (a ULID). */
    appId: text('app_id').notNull(),
    /** The end user's id, '' for the organization's own integration: part of the key (docs/contract.md §5d). */
    endUserKey: text('end_user_key').notNull().default(''),
    /** The end user as the product described them when they last connected; null for the organization's own. */
    endUser: jsonb('end_user').$type<EndUser | null>(),
    name: text('name').notNull(),
    description: text('description').notNull(),
    /** Scopes the provider reported as granted. */
    scopes: text('scopes').array().notNull().default(sql`'{}'::text[]`),
    /** The provider account's stable id (GitHub numeric id; Slack team:user). */
    providerAccountId: text('provider_account_id').notNull(),
    /** The workspace or account the provider account belongs to (Slack team, Zoom account), when the provider has one: its events name it (docs/contract.md §5b). */
    providerWorkspaceId: text('provider_workspace_id'),
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
    uniqueIndex('integrations_organization_provider_end_user_key').on(t.organizationId, t.provider, t.endUserKey),
    // The key and the description cannot disagree about who the end user is.
    check('integrations_end_user_key_check', sql`${t.endUserKey} = coalesce(${t.endUser}->>'id', '')`),
    index('integrations_next_validation_idx').on(t.nextValidationAt),
    // A provider's events name accounts and workspaces, not organizations: found across them (src/integrations/events/).
    index('integrations_provider_account_idx').on(t.provider, t.providerAccountId),
    index('integrations_organization_app_idx').on(t.organizationId, t.appId),
    index('integrations_provider_workspace_idx').on(t.provider, t.providerWorkspaceId).where(sql`provider_workspace_id IS NOT NULL`),
  ],
);

/**
 * Provider event deliveries already acted on, by the provider's delivery id (docs/contract.md
 * §5b): written in the transaction of their effects, so a duplicate costs one conflicting insert.
 */
export const providerEventDeliveries = pgTable(
  'provider_event_deliveries',
  {
    provider: text('provider').notNull(),
    deliveryId: text('delivery_id').notNull(),
    receivedAt: time('received_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.provider, t.deliveryId] })],
);

/**
 * SHA-256 digests of revocation bodies acted on, for providers whose signature covers no
 * freshness (GitHub: `EventsSpec.replay`): the same bytes under a new delivery id are checked
 * live before they act (docs/contract.md §5b). Written in the transaction of their effects.
 */
export const providerEventBodies = pgTable(
  'provider_event_bodies',
  {
    provider: text('provider').notNull(),
    digest: text('digest').notNull(),
    receivedAt: time('received_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.provider, t.digest] })],
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
    /** The app the flow started with: the callback exchanges the code with its secret (docs/contract.md §5e). */
    appId: text('app_id').notNull(),
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

/** The product's end user a connect session is for (docs/contract.md §5a). */
export interface EndUser {
  id: string;
  email?: string;
  displayName?: string;
}

/**
 * Connect sessions (docs/contract.md §5a): a link a product's backend mints so that its end user,
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
    /** The app chosen for its own provider (docs/contract.md §5e); null: the organization's default. */
    appId: text('app_id'),
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
  (t) => [
    primaryKey({ columns: [t.organizationId, t.id] }),
    uniqueIndex('connect_sessions_secret_hash_key').on(t.secretHash),
    // Retention finds finished sessions across organizations by their end of life.
    index('connect_sessions_expires_idx').on(t.expiresAt),
  ],
);

/**
 * Grants still to revoke at their provider (integrations/revocations.ts): written in the
 * transaction that deletes the integration or its organization, carried out after the commit,
 * retried until done. No foreign key: a row outlives the organization it came from. The tokens
 * are one envelope, encrypted like a secret and bound to this row.
 */
export const grantRevocations = pgTable(
  'grant_revocations',
  {
    organizationId: text('organization_id').notNull(),
    id: text('id').notNull(),
    integrationId: text('integration_id').notNull(),
    provider: text('provider').notNull(),
    /** The app that made the grant: its credentials revoke it (docs/contract.md §5e). */
    appId: text('app_id').notNull(),
    /** An organization's app's credentials, sealed and bound to this row: the app may be deleted before the revocation is done. Null for a deployment app. */
    appKeyId: text('app_key_id'),
    appEnvelope: text('app_envelope'),
    /** What deleted the grant: `integration.deleted`, `organization.deleted`… (for logs). */
    reason: text('reason').notNull(),
    /** The integration's non-secret metadata: some providers' endpoints depend on it. */
    metadata: jsonb('metadata').$type<Record<string, unknown>>().notNull().default({}),
    keyId: text('key_id').notNull(),
    /** The tokens as JSON `{accessToken, refreshToken?}`, sealed (secrets/crypto.ts). */
    envelope: text('envelope').notNull(),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: time('next_attempt_at').notNull().defaultNow(),
    /** An instance's claim: others skip the row until it passes. */
    lockedUntil: time('locked_until'),
    lastError: text('last_error'),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.id] }),
    index('grant_revocations_due_idx').on(t.nextAttemptAt),
    index('grant_revocations_key_id_idx').on(t.keyId),
  ],
);

/**
 * An organization's own OAuth apps (docs/contract.md §5e). The deployment's apps come from the
 * settings and have no row. Secrets live in `oauth_app_secrets`, never here.
 */
export const oauthApps = pgTable(
  'oauth_apps',
  {
    organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    id: text('id').notNull(),
    provider: text('provider').notNull(),
    name: text('name').notNull(),
    clientId: text('client_id').notNull(),
    /** The scopes the app may request; null: the provider's configured set. */
    scopes: text('scopes').array(),
    /** A GitHub App's numeric id (`githubapp`). */
    githubAppId: text('github_app_id'),
    /** A GitHub App's URL name (`githubapp`): its install URL. */
    slug: text('slug'),
    hasEventsSecret: boolean('has_events_secret').notNull().default(false),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.id] }),
    index('oauth_apps_organization_provider_idx').on(t.organizationId, t.provider),
    // An app's events route names the app alone (docs/contract.md §5e): its ULID finds it, and is never another organization's too.
    uniqueIndex('oauth_apps_id_idx').on(t.id),
  ],
);

/**
 * An organization app's secrets — `{clientSecret?, eventsSecret?, privateKey?}` as JSON — in one
 * envelope sealed like a token's and bound to the app and its organization. Never updated in
 * place: a change deletes and inserts; key rotation re-seals it.
 */
export const oauthAppSecrets = pgTable(
  'oauth_app_secrets',
  {
    organizationId: text('organization_id').notNull(),
    appId: text('app_id').notNull(),
    keyId: text('key_id').notNull(),
    envelope: text('envelope').notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.appId] }),
    foreignKey({ name: 'oauth_app_secrets_app_fk', columns: [t.organizationId, t.appId], foreignColumns: [oauthApps.organizationId, oauthApps.id] }).onDelete('cascade'),
    index('oauth_app_secrets_key_id_idx').on(t.keyId),
  ],
);

/** Each organization's default app per provider (docs/contract.md §5e): at most one, a deployment app's id or one of its own. */
export const organizationDefaultApps = pgTable(
  'organization_default_apps',
  {
    organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    provider: text('provider').notNull(),
    appId: text('app_id').notNull(),
  },
  (t) => [primaryKey({ columns: [t.organizationId, t.provider] })],
);

/**
 * What a provider last said about an account's rate limit (docs/contract.md §5f), read by every
 * instance before it calls: per (`scope`, provider account) — the app that made the grant, or
 * `integration:<id>` for the §5c modes. Written only when what it means for the next call changes
 * (decision 319). `organization_id` is set for an organization's app and a §5c integration, null for a
 * deployment app, whose budget is the provider account's across organizations (decision 318).
 */
export const providerBudgets = pgTable(
  'provider_budgets',
  {
    scope: text('scope').notNull(),
    accountId: text('account_id').notNull(),
    organizationId: text('organization_id').references(() => organizations.id, { onDelete: 'cascade' }),
    provider: text('provider').notNull(),
    remaining: integer('remaining'),
    resetAt: time('reset_at'),
    /** No API call is sent before this time: remaining 0 until its reset, or a `Retry-After`. */
    blockedUntil: time('blocked_until'),
    updatedAt: updatedAt(),
  },
  (t) => [primaryKey({ columns: [t.scope, t.accountId] }), index('provider_budgets_organization_idx').on(t.organizationId).where(sql`organization_id IS NOT NULL`)],
);
