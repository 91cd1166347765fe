import { and, asc, eq, type SQL, type SQLWrapper, sql } from 'drizzle-orm';
import type { Keyring } from '../config/checks.ts';
import { newId as ulid } from '../lib/ids.ts';
import { type Db, HotStatement } from '../db/client.ts';
import { type ConnectedVia, type EndUser, type IntegrationStatus, integrationSecrets, integrations } from '../db/schema.ts';
import { decryptRows, secretName } from './secrets.ts';

export type IntegrationRow = typeof integrations.$inferSelect;

/**
 * Which end user's integration a lookup means: their id, or null for the organization's own.
 * Stored as `end_user_key`, '' for the organization's own (an end user's id is never empty).
 */
export function endUserKey(endUserId: string | null | undefined): string {
  return endUserId ?? '';
}

/**
 * The one rule that picks an integration by provider (docs/contract.md §5d): organization,
 * provider and end user — never by provider alone. Written once as SQL over the
 * `integrations` columns so the hot path's statements (tokens/fast-read.ts) and every other
 * lookup say the same thing; each value may be a parameter, a placeholder or a column.
 */
export function integrationKey(organizationId: SQLWrapper | string, provider: SQLWrapper | string, key: SQLWrapper | string): SQL {
  return sql`organization_id = ${organizationId} AND provider = ${provider} AND end_user_key = ${key}`;
}

/** The integration of the organization for a provider and an end user (null: the organization's own), or null. */
export async function findIntegrationByProvider(db: Db, organizationId: string, provider: string, endUserId: string | null): Promise<IntegrationRow | null> {
  const [row] = await db.select().from(integrations).where(integrationKey(organizationId, provider, endUserKey(endUserId)));
  return row ?? null;
}

/** The organization's integration with that id, or null (another organization's id is null too). */
export async function findIntegrationById(db: Db, organizationId: string, id: string): Promise<IntegrationRow | null> {
  const [row] = await db.select().from(integrations).where(and(eq(integrations.organizationId, organizationId), eq(integrations.id, id)));
  return row ?? null;
}

/** What a listing may be narrowed to: one provider, one end user (absent: the organization's own and every end user's). */
export interface IntegrationFilter {
  provider?: string;
  endUserId?: string;
}

function listWhere(organizationId: string, filter: IntegrationFilter): SQL | undefined {
  return and(
    eq(integrations.organizationId, organizationId),
    filter.provider !== undefined ? eq(integrations.provider, filter.provider) : undefined,
    filter.endUserId !== undefined ? eq(integrations.endUserKey, endUserKey(filter.endUserId)) : undefined,
  );
}

/** The organization's integrations, oldest first, narrowed by `filter`. */
export async function listIntegrations(db: Db, organizationId: string, filter: IntegrationFilter = {}): Promise<IntegrationRow[]> {
  return db.select().from(integrations).where(listWhere(organizationId, filter)).orderBy(asc(integrations.createdAt), asc(integrations.id));
}

/** A listed integration: its row's listing columns, `createdAt` and `updatedAt` already as the API writes them (ISO 8601, UTC, milliseconds). */
export type IntegrationSummary = Pick<IntegrationRow, 'id' | 'name' | 'provider' | 'appId' | 'description' | 'status' | 'tokenExpiresAt' | 'metadata' | 'connectedVia' | 'endUser'> & {
  createdAt: string;
  updatedAt: string;
};

/** A row of `LIST`, as the driver hands it over: timestamps as text (PGlite: maybe Dates), jsonb parsed. */
interface SummaryRow {
  id: string;
  name: string;
  provider: string;
  app_id: string;
  description: string;
  status: IntegrationStatus;
  token_expires_at: string | Date | null;
  metadata: unknown;
  connected_via: unknown;
  end_user: unknown;
  created_at: string;
  updated_at: string;
}

/**
 * A timestamp as `Date.prototype.toISOString` writes it, formatted by the database: both
 * truncate microseconds to milliseconds. Parsing and formatting two dates per row in the app
 * was a sixth of the list's CPU (docs/benchmarks.md, issue 29).
 */
const iso = (column: string) => sql.raw(`to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS ${column}`);

/**
 * The listing's statements, one per shape of filter, prepared like the hot paths' (decision 60):
 * the list of 100 integrations is a hot path, and Drizzle's generic row mapping cost more app
 * CPU than the rows' own parsing (docs/benchmarks.md, issue 29).
 */
const LIST = (() => {
  const statement = (filter: SQL) =>
    new HotStatement<SummaryRow>(sql`SELECT id, name, provider, app_id, description, status, token_expires_at, metadata, connected_via, end_user, ${iso('created_at')}, ${iso('updated_at')}
      FROM integrations WHERE organization_id = ${sql.placeholder('organizationId')}${filter} ORDER BY created_at, id`);
  const provider = sql` AND provider = ${sql.placeholder('provider')}`;
  const endUser = sql` AND end_user_key = ${sql.placeholder('endUserKey')}`;
  return { all: statement(sql``), provider: statement(provider), endUser: statement(endUser), both: statement(sql`${provider}${endUser}`) };
})();

/** As Drizzle reads a `timestamp with time zone` and a `jsonb` (text → Date, text → parsed), so the answer is the same. */
const asDate = (value: string | Date): Date => (typeof value === 'string' ? new Date(value) : value);
const asJson = <T>(value: unknown): T => (typeof value === 'string' ? JSON.parse(value) : value) as T;

/** The listing's columns only (the list of 100 integrations is a hot path), narrowed by `filter` (the same rule as `listWhere`). */
export async function listIntegrationSummaries(db: Db, organizationId: string, filter: IntegrationFilter = {}): Promise<IntegrationSummary[]> {
  const shape = filter.provider !== undefined ? (filter.endUserId !== undefined ? 'both' : 'provider') : filter.endUserId !== undefined ? 'endUser' : 'all';
  const rows = await LIST[shape].rows(db, { organizationId, provider: filter.provider, endUserKey: endUserKey(filter.endUserId) });
  return rows.map((row) => ({
    id: row.id,
    name: row.name,
    provider: row.provider,
    appId: row.app_id,
    description: row.description,
    status: row.status,
    tokenExpiresAt: row.token_expires_at === null ? null : asDate(row.token_expires_at),
    metadata: asJson(row.metadata),
    connectedVia: row.connected_via === null ? null : asJson(row.connected_via),
    endUser: row.end_user === null ? null : asJson(row.end_user),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  }));
}

export interface ConnectedIntegration {
  organizationId: string;
  provider: string;
  /** The app that made the grant (docs/contract.md §5e). */
  appId: string;
  /** The end user it is for (from the connect session), null for the organization's own. */
  endUser: EndUser | null;
  name: string;
  description: string;
  scopes: string[];
  providerAccountId: string;
  /** The account's workspace at the provider (Slack team, Zoom account), when it has one. */
  providerWorkspaceId: string | null;
  tokenExpiresAt: Date | null;
  refreshTokenExpiresAt: Date | null;
  hasRefreshToken: boolean;
  nextValidationAt: Date;
  metadata: Record<string, unknown>;
  /** The connect session this connection came through, or null (an owner or admin connected it). */
  connectedVia: ConnectedVia | null;
}

/**
 * Creates the one integration for (organization, provider, end user), or resets the
 * existing one to `connected` with new metadata — keeping its id. Returns the row as it was
 * before (null when new; read under a row lock, so two reconnects take turns) and after.
 */
export async function upsertConnectedIntegration(
  tx: Db,
  input: ConnectedIntegration,
): Promise<{ before: IntegrationRow | null; after: IntegrationRow }> {
  const key = endUserKey(input.endUser?.id);
  const [before] = await tx.select().from(integrations).where(integrationKey(input.organizationId, input.provider, key)).for('update');
  const now = new Date();
  const values = {
    appId: input.appId,
    endUser: input.endUser,
    name: input.name,
    description: input.description,
    scopes: input.scopes,
    providerAccountId: input.providerAccountId,
    providerWorkspaceId: input.providerWorkspaceId,
    status: 'connected' as IntegrationStatus,
    tokenValid: true,
    hasRefreshToken: input.hasRefreshToken,
    lastError: null,
    detectedAt: null,
    lastValidatedAt: now,
    tokenExpiresAt: input.tokenExpiresAt,
    refreshTokenExpiresAt: input.refreshTokenExpiresAt,
    nextValidationAt: input.nextValidationAt,
    leaseOwner: null,
    leaseUntil: null,
    metadata: input.metadata,
    connectedVia: input.connectedVia,
    updatedAt: now,
  };
  const [after] = await tx
    .insert(integrations)
    .values({ organizationId: input.organizationId, id: ulid(), provider: input.provider, endUserKey: key, ...values })
    .onConflictDoUpdate({
      target: [integrations.organizationId, integrations.provider, integrations.endUserKey],
      set: { ...values, tokenVersion: sql`${integrations.tokenVersion} + 1` },
    })
    .returning();
  if (!after) throw new Error('upsert returned no row');
  return { before: before ?? null, after };
}

/** The provider account an integration acts as, as a person would recognise it. */
export interface CurrentAccount {
  id: string;
  username: string;
}

/**
 * The accounts connected now for an end user (null: the organization's own), by provider —
 * what the hosted connect page names before a person replaces one (docs/contract.md §5d). The
 * username is read from the integration's encrypted `provider_username` (the account id when
 * there is none).
 */
export async function currentAccounts(deps: { db: Db; config: { keyring: Keyring } }, organizationId: string, endUserId: string | null): Promise<Map<string, CurrentAccount>> {
  const rows = await deps.db
    .select({ id: integrations.id, provider: integrations.provider, accountId: integrations.providerAccountId, keyId: integrationSecrets.keyId, envelope: integrationSecrets.envelope, name: integrationSecrets.name })
    .from(integrations)
    .leftJoin(
      integrationSecrets,
      and(
        eq(integrationSecrets.organizationId, integrations.organizationId),
        eq(integrationSecrets.integrationId, integrations.id),
        eq(integrationSecrets.name, sql`${integrations.provider} || '_provider_username'`),
      ),
    )
    .where(and(eq(integrations.organizationId, organizationId), eq(integrations.endUserKey, endUserKey(endUserId))));
  const accounts = new Map<string, CurrentAccount>();
  for (const row of rows) {
    const ref = { organizationId, integrationId: row.id, provider: row.provider };
    const secret = row.keyId && row.envelope && row.name === secretName(row.provider, 'provider_username') ? [{ name: row.name, keyId: row.keyId, envelope: row.envelope }] : [];
    accounts.set(row.provider, { id: row.accountId, username: decryptRows(deps.config.keyring, ref, secret).provider_username ?? row.accountId });
  }
  return accounts;
}
