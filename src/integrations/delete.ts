import { and, eq } from 'drizzle-orm';
import { recordAudit } from '../audit/audit.ts';
import { type Db, queryRows, sql } from '../db/client.ts';
import { integrationSecrets, integrations } from '../db/schema.ts';
import { AppError } from '../ground/errors.ts';
import type { UnitOfWork } from '../ground/work.ts';
import { requireRole } from '../identity/authorize.ts';
import { ULID } from '../lib/ids.ts';
import type { Services } from '../services.ts';
import { findIntegrationById } from './integrations.ts';
import type { GrantToRevoke } from './revocations.ts';
import { decryptRows, readSecrets, type SecretValues } from './secrets.ts';

/**
 * Deletes an integration of the caller's organization (owner/admin or API token) in the
 * request's transaction: secrets and entity, an audit row, `integration.deleted`, and the grant
 * to revoke at the provider, carried out after the commit (best effort, logged, retried:
 * revocations.ts). An unknown, malformed or other organization's id is 404.
 */
export async function deleteIntegration(services: Services, work: UnitOfWork, id: string): Promise<{ displayName: string }> {
  const principal = work.actor.principal;
  if (!principal) throw new AppError('UNAUTHENTICATED');
  const organizationId = principal.organizationId;
  requireRole(principal, organizationId, 'admin');
  if (!ULID.test(id)) throw new AppError('INTEGRATION_NOT_FOUND');
  const tx = work.db;
  const row = await findIntegrationById(tx, organizationId, id);
  if (!row) throw new AppError('INTEGRATION_NOT_FOUND');
  const secrets = await readSecrets(tx, services.config.keyring, { organizationId, integrationId: id, provider: row.provider });
  await tx.delete(integrationSecrets).where(and(eq(integrationSecrets.organizationId, organizationId), eq(integrationSecrets.integrationId, id)));
  await tx.delete(integrations).where(and(eq(integrations.organizationId, organizationId), eq(integrations.id, id)));
  await recordAudit(tx, work.actor, { organizationId, action: 'integration.deleted', targetType: 'integration', targetId: id, detail: { provider: row.provider } });
  await work.outbox.emit(tx, work.afterCommit, {
    organizationId,
    type: 'integration.deleted',
    data: { integration: { id, provider: row.provider, name: row.name }, provider: row.provider, endUser: row.endUser ?? null },
  });
  await services.revocations.queue(work, grantsToRevoke([{ organizationId, integrationId: id, provider: row.provider, appId: row.appId, metadata: row.metadata, secrets }], 'integration.deleted'));
  return { displayName: services.providers.get(row.provider)?.displayName ?? row.provider };
}

/**
 * Deletes every integration of an organization being offboarded, with their secrets and
 * pending OAuth states, in `work`'s transaction, and queues each grant's revocation (after
 * the commit, like `deleteIntegration`). The caller has authorized it and holds the
 * organization's row. Returns how many integrations there were.
 */
export async function deleteOrganizationIntegrations(services: Services, work: UnitOfWork, organizationId: string): Promise<number> {
  const tx = work.db;
  // Locked first: a refresh storing a rotated token waits, then finds no row to store it in.
  const rows = await queryRows<{ id: string; provider: string; app_id: string; metadata: Record<string, unknown> }>(
    tx,
    sql`SELECT id, provider, app_id, metadata FROM integrations WHERE organization_id = ${organizationId} ORDER BY id FOR UPDATE`,
  );
  const secrets = await tokenSecretsOf(tx, organizationId);
  const grants = rows.map((row) => ({
    organizationId,
    integrationId: row.id,
    provider: row.provider,
    appId: row.app_id,
    metadata: row.metadata,
    secrets: decryptRows(services.config.keyring, { organizationId, integrationId: row.id, provider: row.provider }, secrets.get(row.id) ?? []),
  }));
  await tx.delete(integrationSecrets).where(eq(integrationSecrets.organizationId, organizationId));
  await tx.execute(sql`DELETE FROM oauth_states WHERE organization_id = ${organizationId}`);
  await tx.delete(integrations).where(eq(integrations.organizationId, organizationId));
  await services.revocations.queue(work, grantsToRevoke(grants, 'organization.deleted'));
  return rows.length;
}

/** The access and refresh tokens' secret rows of an organization, by integration: only they are decrypted. */
async function tokenSecretsOf(db: Db, organizationId: string): Promise<Map<string, { name: string; keyId: string; envelope: string }[]>> {
  const rows = await queryRows<{ integration_id: string; name: string; key_id: string; envelope: string }>(
    db,
    sql`SELECT integration_id, name, key_id, envelope FROM integration_secrets
        WHERE organization_id = ${organizationId} AND (name LIKE '%\\_access\\_token' OR name LIKE '%\\_refresh\\_token')`,
  );
  const byIntegration = new Map<string, { name: string; keyId: string; envelope: string }[]>();
  for (const row of rows) {
    const list = byIntegration.get(row.integration_id) ?? [];
    list.push({ name: row.name, keyId: row.key_id, envelope: row.envelope });
    byIntegration.set(row.integration_id, list);
  }
  return byIntegration;
}

/** The grants among `removed` that hold an access token to revoke with (through `services.revocations.queue`). */
export function grantsToRevoke(
  removed: { organizationId: string; integrationId: string; provider: string; appId: string; metadata: Record<string, unknown>; secrets: SecretValues }[],
  reason: string,
): GrantToRevoke[] {
  return removed.flatMap(({ secrets, ...grant }) =>
    secrets.access_token ? [{ ...grant, reason, accessToken: secrets.access_token, ...(secrets.refresh_token ? { refreshToken: secrets.refresh_token } : {}) }] : [],
  );
}
