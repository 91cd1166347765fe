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
import type { Principal } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import type { Work } from '../ground/work.ts';
import { newId } from '../lib/ids.ts';
import { assertFuture, assertName, type Created, type TokenInfo, tokenInfo } from './access-tokens.ts';
import { requireSystemAdmin } from './authorize.ts';
import { remember } from '../lib/bounded.ts';
import { type CallerColumns, principalFromCaller } from './caller-check.ts';
import { CREDENTIAL_KINDS, type DeferredCredential, KIND, kindLiteral } from './credential-kinds.ts';
import { hashToken, newOpaqueToken, SERVICE_TOKEN_PREFIX } from './credentials.ts';
import { type ServiceTokenRoute, serviceTokenRoute } from './service-token-rights.ts';

/** This module's kind: also the audit rows' target type for a service token. */
const SERVICE_TOKEN = KIND.service_token;

/**
 * The organization id audit rows of the deployment itself are filed under (service tokens
 * created or revoked, a service token's request that acts in no organization). Organization
 * ids are ULIDs (upper case): no organization has it.
 */
export const DEPLOYMENT = 'deployment';

/**
 * Who manages service tokens: a system administrator (their user id, the token's creator), or the
 * deployment's operator at the command line on the database (`tessera service-tokens`: no user).
 */
function requireManager(actor: Work['actor']): { userId: string | null } {
  if (actor.operator && actor.principal === null) return { userId: null };
  return requireSystemAdmin(actor.principal);
}

/** Creates a service token: its value is in the answer, this once only. */
export async function createServiceToken(work: Work, input: { name: string; expiresAt?: Date | null }): Promise<Created<TokenInfo>> {
  const admin = requireManager(work.actor);
  const name = assertName(input.name);
  assertFuture(input.expiresAt);
  const token = newOpaqueToken(SERVICE_TOKEN_PREFIX);
  const [row] = await work.db
    .insert(serviceTokens)
    .values({ id: newId(), name, tokenHash: hashToken(token), lastFour: token.slice(-4), createdBy: admin.userId, expiresAt: input.expiresAt ?? null })
    .returning();
  if (!row) throw new Error('insert returned no row');
  await recordAudit(work.db, work.actor, { organizationId: DEPLOYMENT, action: 'service_token.created', targetType: SERVICE_TOKEN, targetId: row.id });
  return { ...tokenInfo(row, SERVICE_TOKEN_PREFIX), token };
}

/** Every service token, newest first, without values. */
export async function listServiceTokens(work: Work): Promise<TokenInfo[]> {
  requireManager(work.actor);
  const rows = await work.db.select().from(serviceTokens).orderBy(desc(serviceTokens.id));
  return rows.map((row) => tokenInfo(row, SERVICE_TOKEN_PREFIX));
}

/**
 * Revokes a service token: it answers 401 from the next request on. The pending connect
 * sessions it minted, in any organization, are revoked with it (decision 97).
 */
export async function revokeServiceToken(work: Work, input: { id: string }): Promise<TokenInfo> {
  requireManager(work.actor);
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
    .where(and(eq(connectSessions.createdByKind, SERVICE_TOKEN), eq(connectSessions.createdById, row.id), eq(connectSessions.status, 'pending')))
    .returning({ id: connectSessions.id });
  await recordAudit(work.db, work.actor, {
    organizationId: DEPLOYMENT,
    action: 'service_token.revoked',
    targetType: SERVICE_TOKEN,
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
      credentialKind: kindLiteral(SERVICE_TOKEN),
      credentialId: sql`caller_credential_id`,
      action: sql.raw(`'${CREDENTIAL_KINDS.service_token.auditsUse}'`),
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
  /** What the token may do here when that is not its list's to say (the token exchange's `TOKEN_EXCHANGE_RIGHTS`); else the list's entry for the route. */
  rights?: ServiceTokenRoute;
}

/**
 * The principal of a service token's request: `admin` in the organization `X-Organization-ID`
 * names, or in none on a route that manages organizations. 401 for an unknown, expired or
 * revoked token; 403 on a route not on its list; 400 without the header where it is needed;
 * 404 for an organization that does not exist.
 */
export async function checkServiceToken(db: Db, request: ServiceTokenRequest): Promise<Principal> {
  const route = request.rights ?? serviceTokenRoute(request.method, request.route);
  const [row] = await SERVICE_TOKEN_CHECK.rows(db, {
    hash: hashToken(request.token),
    wanted: request.wanted,
    audit: route?.auditsItself !== true,
    auditId: nextAuditId(),
    requestId: request.requestId,
    detail: JSON.stringify({ method: request.method, route: request.route ?? null, ...(route ? {} : { refused: true }) }),
  });
  const principal = principalFromCaller({ kind: SERVICE_TOKEN }, row);
  if (!route) throw new AppError('FORBIDDEN', { message: CREDENTIAL_KINDS.service_token.refused });
  if (route.scope === 'organization' && request.wanted === null) {
    throw new AppError('INVALID_INPUT', {
      message: 'A service token needs X-Organization-ID here',
      details: [{ path: 'headers.x-organization-id', message: 'required with a service token' }],
    });
  }
  if (row?.unknown_organization) throw new AppError('NOT_FOUND', { message: 'No such organization' });
  return principal;
}

/** How often a service token's use is recorded (SERVICE_TOKEN_CHECK's own condition says the same). */
const TOUCH_INTERVAL_MS = 60_000;

/**
 * The (service token, organization) pairs this process has seen pass `checkServiceToken`
 * (the most recent 10,000), so that a route with `deferCredentialCheck` may fold the token's
 * check into its own statement (fast-read.ts), as an API token's is. Only seen pairs are
 * deferred: the rate limiter counts a deferred request by the token's id and the organization
 * the header names before the database has seen either, and made-up tokens or organization
 * ids must not get counters of their own (they would push real ones out of its store).
 */
export class KnownServiceTokens {
  /** Hash → the token's id, and when this process last had its use recorded (ms). */
  private readonly tokens = new Map<string, { id: string; at: number }>();
  /** `<hash> <organization id>` of the pairs seen. */
  private readonly acting = new Map<string, true>();

  /** A token that passed the usual check acting in `organizationId` (which also recorded its use). */
  add(hash: string, id: string, organizationId: string, now: number): void {
    remember(this.tokens, hash, { id, at: now }, 10_000);
    remember(this.acting, `${hash} ${organizationId}`, true, 10_000);
  }

  /**
   * The deferred credential of a seen pair on `method url` (a route pattern), or null (the
   * usual path). Only where the token's rights list says the route acts in an organization
   * and writes its own audit row, as the deferred statement does. Its use is recorded again
   * only once the last record is a minute old, as the usual check does.
   */
  deferred(hash: string, organizationId: string, method: string, url: string | undefined, now: number): Extract<DeferredCredential, { kind: typeof SERVICE_TOKEN }> | null {
    const route = serviceTokenRoute(method, url);
    if (route?.scope !== 'organization' || route.auditsItself !== true) return null;
    const known = this.tokens.get(hash);
    if (known === undefined || !this.acting.has(`${hash} ${organizationId}`)) return null;
    const touch = now - known.at >= TOUCH_INTERVAL_MS;
    if (touch) known.at = now;
    return { kind: SERVICE_TOKEN, hash, organizationId, credentialId: known.id, touch };
  }
}
