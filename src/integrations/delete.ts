import { and, eq } from 'drizzle-orm';
import { type AuditActor, recordAudit } from '../audit/audit.ts';
import type { Db } from '../db/client.ts';
import { integrationSecrets, integrations } from '../db/schema.ts';
import { AppError } from '../http/errors.ts';
import { requireRole } from '../identity/authorize.ts';
import { ULID } from '../lib/ids.ts';
import type { Services } from '../services.ts';
import { findIntegrationById } from './integrations.ts';
import { readSecrets } from './secrets.ts';

/** The request's share of a delete: its transaction (opened on first use), its after-commit queue, and who acts. */
export interface DeleteWork {
  tx(): Promise<Db>;
  afterCommit(fn: () => unknown): void;
  actor: AuditActor;
}

/**
 * Deletes an integration of the caller's organization (owner/admin or API token) in the
 * request's transaction: secrets and entity, an audit row, `integration.deleted`; after the
 * commit, the grant is revoked at the provider (best effort, logged). An unknown, malformed
 * or other organization's id is 404.
 */
export async function deleteIntegration(services: Services, work: DeleteWork, id: string): Promise<{ displayName: string }> {
  const principal = work.actor.principal;
  if (!principal) throw new AppError('UNAUTHENTICATED');
  const organizationId = principal.organizationId;
  requireRole(principal, organizationId, 'admin');
  if (!ULID.test(id)) throw new AppError('INTEGRATION_NOT_FOUND');
  const tx = await work.tx();
  const row = await findIntegrationById(tx, organizationId, id);
  if (!row) throw new AppError('INTEGRATION_NOT_FOUND');
  const secrets = await readSecrets(tx, services.config.keyring, { organizationId, integrationId: id, provider: row.provider });
  await tx.delete(integrationSecrets).where(and(eq(integrationSecrets.organizationId, organizationId), eq(integrationSecrets.integrationId, id)));
  await tx.delete(integrations).where(and(eq(integrations.organizationId, organizationId), eq(integrations.id, id)));
  await recordAudit(tx, work.actor, { organizationId, action: 'integration.deleted', targetType: 'integration', targetId: id, detail: { provider: row.provider } });
  await services.outbox.emit(tx, (fn) => work.afterCommit(fn), {
    organizationId,
    type: 'integration.deleted',
    data: { integration: { id, provider: row.provider, name: row.name } },
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
