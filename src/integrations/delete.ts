import { and, eq } from 'drizzle-orm';
import { recordAudit } from '../audit/audit.ts';
import { integrationSecrets, integrations } from '../db/schema.ts';
import { AppError } from '../http/errors.ts';
import type { UnitOfWork } from '../http/unit-of-work.ts';
import { requireRole } from '../identity/authorize.ts';
import { ULID } from '../lib/ids.ts';
import type { Services } from '../services.ts';
import { findIntegrationById } from './integrations.ts';
import { readSecrets } from './secrets.ts';

/**
 * Deletes an integration of the caller's organization (owner/admin or API token) in the
 * request's transaction: secrets and entity, an audit row, `integration.deleted`; after the
 * commit, the grant is revoked at the provider (best effort, logged). An unknown, malformed
 * or other organization's id is 404.
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
  const provider = services.providers.get(row.provider);
  const accessToken = secrets.access_token;
  const revoke = provider?.definition.revoke;
  if (provider && revoke && accessToken) {
    work.afterCommit(async () => {
      try {
        await revoke(provider.contextFor(row.metadata), { accessToken, ...(secrets.refresh_token ? { refreshToken: secrets.refresh_token } : {}) });
        services.logger.info({ integrationId: id, provider: row.provider }, 'grant revoked at the provider');
      } catch (error) {
        services.logger.warn({ integrationId: id, provider: row.provider, kind: (error as { kind?: string }).kind }, 'could not revoke the grant at the provider');
      }
    });
  }
  return { displayName: provider?.displayName ?? row.provider };
}
