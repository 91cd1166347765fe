/**
 * Agent capabilities (`tsc_…`, docs/contract.md §9): short-lived, narrowed bearer tokens a
 * product's backend mints for an AI agent by token exchange. A tenant table: each capability
 * belongs to one organization and leads its key with it. The value is stored only as a hash.
 */
import { sql } from 'drizzle-orm';
import { foreignKey, index, integer, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { createdAt, time } from './columns.ts';
import { organizations } from './schema.ts';

export const agentCapabilities = pgTable(
  'agent_capabilities',
  {
    organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    id: text('id').notNull(),
    /** SHA-256 of the value: the lookup key of every use. */
    tokenHash: text('token_hash').notNull(),
    /** The agent's name as the minter gave it (1–64 printable characters), for the audit trail. */
    agent: text('agent'),
    /** `integrations:<provider>:read|write`, as granted (write includes read). */
    scopes: text('scopes').array().notNull().default(sql`'{}'::text[]`),
    /** The end user whose integrations alone it reaches (docs/contract.md §5d); null: not narrowed. */
    endUserId: text('end_user_id'),
    /** The credential it was exchanged for: its kind (`api_token`, `pat`, `service_token`), id and user. */
    subjectKind: text('subject_kind').notNull(),
    subjectId: text('subject_id').notNull(),
    subjectUserId: text('subject_user_id'),
    expiresAt: time('expires_at').notNull(),
    revokedAt: time('revoked_at'),
    /** The MCP client's grant it was issued under (docs/contract.md §9a); null: minted by token exchange. */
    grantId: text('grant_id'),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.id] }),
    uniqueIndex('agent_capabilities_hash_key').on(t.tokenHash),
    index('agent_capabilities_grant_idx').on(t.organizationId, t.grantId).where(sql`grant_id IS NOT NULL`),
    // Retention may find dead ones across organizations by their end of life.
    index('agent_capabilities_expires_idx').on(t.expiresAt),
  ],
);

/**
 * MCP clients (docs/contract.md §9a): deployment-wide, not a tenant's. `registered`: issued at
 * `POST /oauth/register`, its id a ULID; `document`: its id the URL of its client metadata
 * document, cached until `freshUntil` (the document's caching headers, at most 24 hours).
 */
export const oauthClients = pgTable('oauth_clients', {
  id: text('id').primaryKey(),
  kind: text('kind').notNull().$type<'registered' | 'document'>(),
  name: text('name').notNull(),
  redirectUris: text('redirect_uris').array().notNull(),
  freshUntil: time('fresh_until'),
  createdAt: createdAt(),
});

/**
 * An authorization request of an MCP client (`GET /oauth/authorize`), keyed by the hash of its
 * id (the handoff's `request`, the consent form's hidden field): pending for 10 minutes, decided
 * once; an approval records who approved and what, and the code (its hash, 60 seconds, single
 * use). The grant is made when the code is exchanged (`grantId`).
 */
export const oauthAuthorizations = pgTable(
  'oauth_authorizations',
  {
    idHash: text('id_hash').primaryKey(),
    clientId: text('client_id').notNull(),
    clientName: text('client_name').notNull(),
    redirectUri: text('redirect_uri').notNull(),
    codeChallenge: text('code_challenge').notNull(),
    state: text('state'),
    /** The scopes the client asked for; empty: it named none. */
    scopes: text('scopes').array().notNull().default(sql`'{}'::text[]`),
    resource: text('resource').notNull(),
    status: text('status').notNull().default('pending').$type<'pending' | 'approved' | 'denied'>(),
    expiresAt: time('expires_at').notNull(),
    organizationId: text('organization_id'),
    subjectKind: text('subject_kind'),
    subjectId: text('subject_id'),
    subjectUserId: text('subject_user_id'),
    grantedScopes: text('granted_scopes').array(),
    endUserId: text('end_user_id'),
    grantSeconds: integer('grant_seconds'),
    codeHash: text('code_hash'),
    codeExpiresAt: time('code_expires_at'),
    codeUsedAt: time('code_used_at'),
    grantId: text('grant_id'),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex('oauth_authorizations_code_key').on(t.codeHash), index('oauth_authorizations_expires_idx').on(t.expiresAt)],
);

/**
 * A grant to an MCP client (docs/contract.md §9a): what a person (subject kind `user`) or a
 * product's token (the handoff: `api_token`, `service_token`) approved, living until its expiry,
 * its revocation, or its subject's standing lapses. Its access tokens are capabilities
 * (`agent_capabilities.grant_id`); its refresh tokens rotate (`oauth_refresh_tokens`).
 */
export const oauthGrants = pgTable(
  'oauth_grants',
  {
    organizationId: text('organization_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    id: text('id').notNull(),
    clientId: text('client_id').notNull(),
    clientName: text('client_name').notNull(),
    scopes: text('scopes').array().notNull(),
    endUserId: text('end_user_id'),
    subjectKind: text('subject_kind').notNull(),
    subjectId: text('subject_id').notNull(),
    subjectUserId: text('subject_user_id'),
    expiresAt: time('expires_at').notNull(),
    revokedAt: time('revoked_at'),
    lastUsedAt: time('last_used_at'),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.organizationId, t.id] }), index('oauth_grants_subject_idx').on(t.organizationId, t.subjectId)],
);

/** A grant's refresh tokens, by hash: the live one, and the used ones kept to detect their reuse (RFC 9700 §4.14.2). */
export const oauthRefreshTokens = pgTable(
  'oauth_refresh_tokens',
  {
    tokenHash: text('token_hash').primaryKey(),
    organizationId: text('organization_id').notNull(),
    grantId: text('grant_id').notNull(),
    usedAt: time('used_at'),
    createdAt: createdAt(),
  },
  (t) => [
    foreignKey({ name: 'oauth_refresh_tokens_grant_fk', columns: [t.organizationId, t.grantId], foreignColumns: [oauthGrants.organizationId, oauthGrants.id] }).onDelete('cascade'),
    // Ending a grant marks its refresh tokens, and deleting it cascades: by (organization, grant), not a scan.
    index('oauth_refresh_tokens_grant_idx').on(t.organizationId, t.grantId),
  ],
);
