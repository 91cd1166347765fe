/**
 * Service tokens (`tss_…`, docs/contract.md §5d): one credential for a product's backend across
 * all its customers' organizations. A system administrator creates, lists and revokes them;
 * the authentication step checks them (`checkServiceToken`) as one more credential kind, and
 * what they may do is the list in service-token-rights.ts.
 */
import { and, desc, eq, isNull } from 'drizzle-orm';
import { auditInsert, nextAuditId, recordAudit } from '../audit/audit.ts';
import { type Db, HotStatement, sql } from '../db/client.ts';
import { connectSessions, serviceTokens } from '../db/schema.ts';
import type { Principal } from '../http/context.ts';
import { AppError } from '../http/errors.ts';
import type { Work } from '../http/unit-of-work.ts';
import { newId } from '../lib/ids.ts';
import { assertFuture, assertName, type Created, type TokenInfo, tokenInfo } from './access-tokens.ts';
import { requireUser } from './authorize.ts';
import { type CallerColumns, principalFromCaller } from './caller-check.ts';
import { hashToken, newOpaqueToken, SERVICE_TOKEN_PREFIX } from './credentials.ts';
import { serviceTokenRoute } from './service-token-rights.ts';

/**
 * The organization id audit rows of the deployment itself are filed under (service tokens
 * created or revoked, a service token's request that acts in no organization). Organization
 * ids are ULIDs (upper case): no organization has it.
 */
export const DEPLOYMENT = 'deployment';

/** The caller, if a system administrator with their own session or PAT (not impersonated). */
function requireSystemAdmin(principal: Principal | null): Principal & { userId: string } {
  const user = requireUser(principal);
  if (user.impersonatorId) throw new AppError('FORBIDDEN', { message: 'Not allowed while impersonating' });
  if (!user.systemAdmin) throw new AppError('FORBIDDEN', { message: 'Only system administrators manage service tokens' });
  return user;
}

/** Creates a service token: its value is in the answer, this once only. */
export async function createServiceToken(work: Work, input: { name: string; expiresAt?: Date | null }): Promise<Created<TokenInfo>> {
  const admin = requireSystemAdmin(work.actor.principal);
  const name = assertName(input.name);
  assertFuture(input.expiresAt);
  const token = newOpaqueToken(SERVICE_TOKEN_PREFIX);
  const [row] = await work.db
    .insert(serviceTokens)
    .values({ id: newId(), name, tokenHash: hashToken(token), lastFour: token.slice(-4), createdBy: admin.userId, expiresAt: input.expiresAt ?? null })
    .returning();
  if (!row) throw new Error('insert returned no row');
  await recordAudit(work.db, work.actor, { organizationId: DEPLOYMENT, action: 'service_token.created', targetType: 'service_token', targetId: row.id });
  return { ...tokenInfo(row, SERVICE_TOKEN_PREFIX), token };
}

/** Every service token, newest first, without values. */
export async function listServiceTokens(work: Work): Promise<TokenInfo[]> {
  requireSystemAdmin(work.actor.principal);
  const rows = await work.db.select().from(serviceTokens).orderBy(desc(serviceTokens.id));
  return rows.map((row) => tokenInfo(row, SERVICE_TOKEN_PREFIX));
}

/**
 * Revokes a service token: it answers 401 from the next request on. The pending connect
 * sessions it minted, in any organization, are revoked with it (decision 97).
 */
export async function revokeServiceToken(work: Work, input: { id: string }): Promise<TokenInfo> {
  requireSystemAdmin(work.actor.principal);
  const [row] = await work.db
    .update(serviceTokens)
    .set({ revokedAt: new Date() })
    .where(and(eq(serviceTokens.id, input.id), isNull(serviceTokens.revokedAt)))
    .returning();
  if (!row) throw new AppError('NOT_FOUND', { message: 'No such active token' });
  // Not led by an organization: a service token mints in any of them, and this runs once per revocation.
  const sessions = await work.db
    .update(connectSessions)
    .set({ status: 'revoked' })
    .where(and(eq(connectSessions.createdByKind, 'service_token'), eq(connectSessions.createdById, row.id), eq(connectSessions.status, 'pending')))
    .returning({ id: connectSessions.id });
  await recordAudit(work.db, work.actor, {
    organizationId: DEPLOYMENT,
    action: 'service_token.revoked',
    targetType: 'service_token',
    targetId: row.id,
    detail: { sessionsRevoked: sessions.length },
  });
  return tokenInfo(row, SERVICE_TOKEN_PREFIX);
}

const p = sql.placeholder;

/**
 * A service token's check, in the caller shape: the token (active or not), the organization
 * `wanted` names (`unknown_organization` when there is none with that id), its use recorded
 * at most once a minute (never waiting on a locked row, like an API token's), and — when
 * `audit` — the audit row of the request, all in one round trip (decision 127). The row is
 * written whatever the route then answers: refused uses are recorded too.
 */
const SERVICE_TOKEN_CHECK = new HotStatement<CallerColumns & { unknown_organization: boolean }>(sql`
  WITH t AS (
    SELECT id, (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())) AS active FROM service_tokens WHERE token_hash = ${p('hash')}
  ), o AS (
    SELECT id FROM organizations WHERE id = ${p('wanted')}::text
  ), c AS (
    SELECT t.active AS caller_active, 'admin'::text AS caller_role, NULL::text AS caller_user_id, false AS caller_system_admin,
           COALESCE(o.id, '') AS caller_organization_id, t.id AS caller_credential_id,
           (${p('wanted')}::text IS NOT NULL AND o.id IS NULL) AS unknown_organization
    FROM t LEFT JOIN o ON true
  ), touch AS (
    UPDATE service_tokens SET last_used_at = now()
    WHERE id IN (
      SELECT s.id FROM service_tokens s JOIN t ON t.id = s.id
      WHERE t.active AND (s.last_used_at IS NULL OR s.last_used_at < now() - interval '60 seconds')
      FOR UPDATE OF s SKIP LOCKED)
    RETURNING 1
  ), audit AS (${auditInsert(
    {
      organizationId: sql`CASE WHEN caller_organization_id = '' THEN ${DEPLOYMENT}::text ELSE caller_organization_id END`,
      id: p('auditId'),
      actorUserId: sql`NULL`,
      impersonatorUserId: sql`NULL`,
      credentialKind: sql`'service_token'`,
      credentialId: sql`caller_credential_id`,
      action: sql`'service_token.request'`,
      targetType: sql`NULL`,
      targetId: sql`NULL`,
      requestId: p('requestId'),
      detail: sql`${p('detail')}::jsonb`,
    },
    sql`c WHERE caller_active AND NOT unknown_organization AND ${p('audit')}::boolean`,
  )})
  SELECT * FROM c`);

/** What checking a service token needs from its request. */
export interface ServiceTokenRequest {
  token: string;
  /** `X-Organization-ID`, checked for shape; null when absent. */
  wanted: string | null;
  method: string;
  /** The route's pattern (`/v1/integrations/:provider/token`). */
  route: string | undefined;
  requestId: string;
}

/**
 * The principal of a service token's request: `admin` in the organization `X-Organization-ID`
 * names, or in none on a route that manages organizations. 401 for an unknown, expired or
 * revoked token; 403 on a route not on its list; 400 without the header where it is needed;
 * 404 for an organization that does not exist.
 */
export async function checkServiceToken(db: Db, request: ServiceTokenRequest): Promise<Principal> {
  const route = serviceTokenRoute(request.method, request.route);
  const [row] = await SERVICE_TOKEN_CHECK.rows(db, {
    hash: hashToken(request.token),
    wanted: request.wanted,
    audit: route?.auditsItself !== true,
    auditId: nextAuditId(),
    requestId: request.requestId,
    detail: JSON.stringify({ method: request.method, route: request.route ?? null, ...(route ? {} : { refused: true }) }),
  });
  const principal = principalFromCaller({ kind: 'service_token' }, row);
  if (!route) throw new AppError('FORBIDDEN', { message: 'Service tokens cannot do this' });
  if (route.scope === 'organization' && request.wanted === null) {
    throw new AppError('INVALID_INPUT', {
      message: 'A service token needs X-Organization-ID here',
      details: [{ path: 'headers.x-organization-id', message: 'required with a service token' }],
    });
  }
  if (row?.unknown_organization) throw new AppError('NOT_FOUND', { message: 'No such organization' });
  return principal;
}
