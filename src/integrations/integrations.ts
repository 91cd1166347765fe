import { and, asc, eq, sql } from 'drizzle-orm';
import { newId as ulid } from '../lib/ids.ts';
import type { Db } from '../db/client.ts';
import { type ConnectedVia, type IntegrationStatus, integrations } from '../db/schema.ts';

export type IntegrationRow = typeof integrations.$inferSelect;

/** The organization's integration for a provider, or null. */
export async function findIntegrationByProvider(db: Db, organizationId: string, provider: string): Promise<IntegrationRow | null> {
  const [row] = await db.select().from(integrations).where(and(eq(integrations.organizationId, organizationId), eq(integrations.provider, provider)));
  return row ?? null;
}

/** The organization's integration with that id, or null (another organization's id is null too). */
export async function findIntegrationById(db: Db, organizationId: string, id: string): Promise<IntegrationRow | null> {
  const [row] = await db.select().from(integrations).where(and(eq(integrations.organizationId, organizationId), eq(integrations.id, id)));
  return row ?? null;
}

/** Every integration of the organization, oldest first. */
export async function listIntegrations(db: Db, organizationId: string): Promise<IntegrationRow[]> {
  return db.select().from(integrations).where(eq(integrations.organizationId, organizationId)).orderBy(asc(integrations.createdAt), asc(integrations.id));
}

export type IntegrationSummary = Pick<IntegrationRow, 'id' | 'name' | 'provider' | 'description' | 'status' | 'tokenExpiresAt' | 'metadata' | 'connectedVia' | 'createdAt' | 'updatedAt'>;

/** The listing's columns only (the list of 100 integrations is a hot path). */
export async function listIntegrationSummaries(db: Db, organizationId: string): Promise<IntegrationSummary[]> {
  return db
    .select({
      id: integrations.id,
      name: integrations.name,
      provider: integrations.provider,
      description: integrations.description,
      status: integrations.status,
      tokenExpiresAt: integrations.tokenExpiresAt,
      metadata: integrations.metadata,
      connectedVia: integrations.connectedVia,
      createdAt: integrations.createdAt,
      updatedAt: integrations.updatedAt,
    })
    .from(integrations)
    .where(eq(integrations.organizationId, organizationId))
    .orderBy(asc(integrations.createdAt), asc(integrations.id));
}

export interface ConnectedIntegration {
  organizationId: string;
  provider: string;
  name: string;
  description: string;
  scopes: string[];
  providerAccountId: string;
  tokenExpiresAt: Date | null;
  refreshTokenExpiresAt: Date | null;
  hasRefreshToken: boolean;
  nextValidationAt: Date;
  metadata: Record<string, unknown>;
  /** The connect session this connection came through, or null (an owner or admin connected it). */
  connectedVia: ConnectedVia | null;
}

/**
 * Creates the organization's one integration for the provider, or resets the existing
 * one to `connected` with new metadata — keeping its id. Returns the row as it was
 * before (null when new) and after.
 */
export async function upsertConnectedIntegration(
  tx: Db,
  input: ConnectedIntegration,
): Promise<{ before: IntegrationRow | null; after: IntegrationRow }> {
  const before = await findIntegrationByProvider(tx, input.organizationId, input.provider);
  const now = new Date();
  const values = {
    name: input.name,
    description: input.description,
    scopes: input.scopes,
    providerAccountId: input.providerAccountId,
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
    .values({ organizationId: input.organizationId, id: ulid(), provider: input.provider, ...values })
    .onConflictDoUpdate({
      target: [integrations.organizationId, integrations.provider],
      set: { ...values, tokenVersion: sql`${integrations.tokenVersion} + 1` },
    })
    .returning();
  if (!after) throw new Error('upsert returned no row');
  return { before, after };
}
