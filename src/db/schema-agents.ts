/**
 * Agent capabilities (`tsc_…`, docs/contract.md §9): short-lived, narrowed bearer tokens a
 * product's backend mints for an AI agent by token exchange. A tenant table: each capability
 * belongs to one organization and leads its key with it. The value is stored only as a hash.
 */
import { sql } from 'drizzle-orm';
import { index, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
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
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.organizationId, t.id] }),
    uniqueIndex('agent_capabilities_hash_key').on(t.tokenHash),
    // Retention may find dead ones across organizations by their end of life.
    index('agent_capabilities_expires_idx').on(t.expiresAt),
  ],
);
