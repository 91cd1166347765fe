/**
 * A system administrator entering an organization (docs/contract.md §11): `X-Organization-ID` on
 * their own session makes them read there as a member would — lists, statuses, the audit log —
 * never a token read or a write, and every such request leaves an audit row in that organization.
 */
import type { FastifyRequest } from 'fastify';
import { actorValues, auditInsert } from '../audit/audit.ts';
import { type Db, queryRows, sql } from '../db/client.ts';
import type { Principal } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';

/** Routes that hand out or use an integration's token: reads, yet never for someone who only entered. */
const TOKEN_ROUTES: ReadonlySet<string> = new Set(['/v1/integrations/:provider/token', '/v1/integrations/:provider/proxy/*']);

/** Whether the request only reads: a GET or HEAD, or GraphQL (whose mutations the schema refuses to an entered caller). */
function readsOnly(request: FastifyRequest): boolean {
  const route = request.routeOptions.url ?? '';
  if (TOKEN_ROUTES.has(route)) return false;
  return request.method === 'GET' || request.method === 'HEAD' || (request.method === 'POST' && route === '/query');
}

/**
 * The system administrator `admin` (a session JWT, checked) acting in `organizationId` with a
 * member's reads: 403 for anything but a read, 404 for an organization that does not exist.
 * The existence check and the audit row are one statement, committed on its own so the trail
 * survives the request's failure (as an impersonated request's does).
 */
export async function enterOrganization(db: Db, request: FastifyRequest, admin: Principal, organizationId: string): Promise<Principal> {
  if (!readsOnly(request)) {
    throw new AppError('FORBIDDEN', { message: 'A system administrator who entered an organization only reads there; writes and token reads are for its own people' });
  }
  const entered: Principal = { ...admin, organizationId, role: 'member', entered: true };
  const written = await queryRows(
    db,
    auditInsert(
      {
        organizationId: sql`o.id`,
        ...actorValues({ principal: entered, requestId: request.id }),
        action: sql`'system_admin.request'::text`,
        targetType: sql`'organization'::text`,
        targetId: sql`o.id`,
        detail: sql`${JSON.stringify({ method: request.method, route: request.routeOptions.url ?? null })}::jsonb`,
      },
      sql`organizations o WHERE o.id = ${organizationId}`,
    ),
  );
  if (written.length === 0) throw new AppError('NOT_FOUND', { message: 'No such organization' });
  return entered;
}
