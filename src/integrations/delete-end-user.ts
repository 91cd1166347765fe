import { and, asc, eq } from 'drizzle-orm';
import { integrations } from '../db/schema.ts';
import { AppError } from '../ground/errors.ts';
import type { UnitOfWork } from '../ground/work.ts';
import { requireRole } from '../identity/authorize.ts';
import type { Services } from '../services.ts';
import { deleteIntegration } from './delete.ts';
import { endUserKey } from './integrations.ts';

/**
 * Deletes every integration of one end user of the caller's organization (owner/admin, API
 * token; docs/contract.md §5d), each exactly as a single delete does — secrets and entity, audit
 * row, `integration.deleted`, the grant revoked after the commit — all in the request's
 * transaction. Returns how many there were (0 is not an error: the end user has none).
 */
export async function deleteEndUserIntegrations(services: Services, work: UnitOfWork, endUserId: string): Promise<number> {
  const principal = work.actor.principal;
  if (!principal) throw new AppError('UNAUTHENTICATED');
  const organizationId = principal.organizationId;
  requireRole(principal, organizationId, 'admin');
  // Locked, so a concurrent delete of one of them waits for this one and then finds it gone, instead of both claiming it.
  const rows = await work.db
    .select({ id: integrations.id })
    .from(integrations)
    .where(and(eq(integrations.organizationId, organizationId), eq(integrations.endUserKey, endUserKey(endUserId))))
    .orderBy(asc(integrations.id))
    .for('update');
  for (const row of rows) await deleteIntegration(services, work, row.id);
  return rows.length;
}
