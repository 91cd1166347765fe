/**
 * Agent capabilities (`tsc_…`, docs/contract.md §9) as a credential kind: the one statement that
 * checks one — live, and its subject still able to mint it (grantor.ts) — and writes the audit
 * row of its use, and the short list of what a capability may reach at all. Minting them is the
 * agents feature's (src/agents/exchange.ts); what they may do there, `capabilityAccess` below.
 */
import { auditInsert, nextAuditId } from '../audit/audit.ts';
import { type Db, HotStatement, sql } from '../db/client.ts';
import type { CapabilityGrant, Principal } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import { type CallerColumns, principalFromCaller } from './caller-check.ts';
import { CREDENTIAL_KINDS, credentialKind, KIND, kindLiteral } from './credential-kinds.ts';
import { hashToken } from './credentials.ts';
import { grantorAuthorized } from './grantor.ts';

/** A capability scope: `integrations:<provider>:read` or `integrations:<provider>:write` (write includes read). */
export const CAPABILITY_SCOPE = /^integrations:([a-z][a-z0-9]{1,31}):(read|write)$/;

/** Provider → access, from granted scopes (the wider access wins when a provider is named twice). */
export function providersOf(scopes: readonly string[]): Map<string, 'read' | 'write'> {
  const providers = new Map<string, 'read' | 'write'>();
  for (const scope of scopes) {
    const match = CAPABILITY_SCOPE.exec(scope);
    if (!match?.[1]) continue;
    if (match[2] === 'write' || !providers.has(match[1])) providers.set(match[1], match[2] as 'read' | 'write');
  }
  return providers;
}

/**
 * The routes a capability authenticates at all (`METHOD url`, Fastify's pattern): the proxy, for
 * its own providers (checked there, `capabilityAccess`), and the MCP endpoint. Everything else —
 * token reads, management, GraphQL, a route added later — is refused with 403.
 */
function capabilityRoute(method: string, url: string | undefined): boolean {
  if (url === '/v1/integrations/:provider/proxy/*') return true;
  return method === 'POST' && url === '/mcp';
}

const p = sql.placeholder;

/** Its subject needs to manage (owner or admin) when any scope writes. */
const WRITES = sql`EXISTS (SELECT 1 FROM unnest(c.scopes) s WHERE s LIKE '%:write')`;

type CapabilityRow = CallerColumns & {
  agent: string | null;
  scopes: string[];
  end_user_id: string | null;
  subject_kind: string;
  subject_id: string;
  subject_hash: string | null;
  grant_id: string | null;
};

/**
 * A capability's check, in the caller shape: live (neither revoked nor expired) and its subject
 * still able to mint it (`grantorAuthorized`: the token still valid, the person still a member,
 * still owner or admin for a capability that writes), its narrowing, the subject API token's
 * hash (the rate limiter's key for it), and — for a live one — the audit row of this use, naming
 * the agent, the subject and an MCP client's grant, refused uses included, and that grant's
 * last use (to the minute, never waiting on a locked row): one round trip.
 */
const CAPABILITY_CHECK = new HotStatement<CapabilityRow>(sql`
  WITH c AS (
    SELECT c.organization_id, c.id, c.agent, c.scopes, c.end_user_id, c.subject_kind, c.subject_id, c.subject_user_id, c.grant_id,
           (c.revoked_at IS NULL AND c.expires_at > now()
             AND ${grantorAuthorized(sql`c.organization_id`, { kind: sql`c.subject_kind`, credentialId: sql`c.subject_id`, userId: sql`c.subject_user_id` }, WRITES)}) AS live,
           CASE c.subject_kind WHEN ${kindLiteral(KIND.api_token)} THEN (SELECT a.token_hash FROM api_tokens a WHERE a.organization_id = c.organization_id AND a.id = c.subject_id) END AS subject_hash
    FROM agent_capabilities c WHERE c.token_hash = ${p('hash')}
  ), k AS (
    SELECT live AS caller_active, 'member'::text AS caller_role, subject_user_id AS caller_user_id, false AS caller_system_admin,
           organization_id AS caller_organization_id, id AS caller_credential_id, agent, scopes, end_user_id, subject_kind, subject_id, subject_hash, grant_id
    FROM c
  ), touch AS (
    UPDATE oauth_grants SET last_used_at = now()
    WHERE (organization_id, id) IN (
      SELECT gr.organization_id, gr.id FROM oauth_grants gr JOIN k ON k.caller_active AND gr.organization_id = k.caller_organization_id AND gr.id = k.grant_id
      WHERE gr.last_used_at IS NULL OR gr.last_used_at < now() - interval '60 seconds'
      FOR UPDATE OF gr SKIP LOCKED)
    RETURNING 1
  ), audit AS (${auditInsert(
    {
      organizationId: sql`caller_organization_id`,
      id: p('auditId'),
      actorUserId: sql`caller_user_id`,
      impersonatorUserId: sql`NULL`,
      credentialKind: kindLiteral(KIND.capability),
      credentialId: sql`caller_credential_id`,
      action: sql.raw(`'${CREDENTIAL_KINDS.capability.auditsUse}'`),
      targetType: sql`NULL`,
      targetId: sql`NULL`,
      requestId: p('requestId'),
      detail: sql`jsonb_build_object('agent', agent, 'subject', jsonb_build_object('kind', subject_kind, 'id', subject_id, 'userId', caller_user_id))
        || CASE WHEN grant_id IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('grant', grant_id) END || ${p('detail')}::jsonb`,
    },
    sql`k WHERE caller_active`,
  )})
  SELECT * FROM k`);

/** What checking a capability needs from its request. */
export interface CapabilityRequest {
  token: string;
  method: string;
  /** The route's pattern (`/v1/integrations/:provider/proxy/*`). */
  route: string | undefined;
  requestId: string;
}

/**
 * The principal of a capability's request: `member` rights in its organization, narrowed by its
 * grant. 401 for an unknown, expired or revoked one, or one whose subject could no longer mint it;
 * 403 on any route but the proxy and `/mcp`.
 */
export async function checkCapability(db: Db, request: CapabilityRequest): Promise<Principal> {
  const allowed = capabilityRoute(request.method, request.route);
  const [row] = await CAPABILITY_CHECK.rows(db, {
    hash: hashToken(request.token),
    auditId: nextAuditId(),
    requestId: request.requestId,
    detail: JSON.stringify({ method: request.method, route: request.route ?? null, ...(allowed ? {} : { refused: true }) }),
  });
  const principal = principalFromCaller({ kind: KIND.capability }, row);
  if (!row) throw new AppError('UNAUTHENTICATED');
  principal.capability = {
    agent: row.agent,
    providers: providersOf(row.scopes),
    endUserId: row.end_user_id,
    subject: { kind: row.subject_kind, id: row.subject_id, userId: row.caller_user_id },
    rateKey: subjectRateKey(row),
  };
  if (!allowed) throw new AppError('FORBIDDEN', { message: CREDENTIAL_KINDS.capability.refused });
  return principal;
}

/** The rate limiter's key of the subject (docs/contract.md §4: a capability counts against its subject), as steps.ts keys the subject itself. */
function subjectRateKey(row: CapabilityRow): string {
  const rateKey = credentialKind(row.subject_kind)?.rateKey;
  const caller = { userId: row.caller_user_id ?? '', credentialId: row.subject_id, hash: row.subject_hash ?? '' };
  return rateKey ? rateKey(caller) : `user:${caller.userId}`;
}

/**
 * What a capability may do with a provider's integration (docs/contract.md §9): the provider must
 * be one of its scopes, a call that writes needs `write`, and a capability narrowed to an end user
 * reaches only that end user's integration (`endUserId` absent: its own end user). Returns the end
 * user to use; 403 otherwise.
 */
export function capabilityAccess(grant: CapabilityGrant, provider: string, writes: boolean, endUserId: string | null): string | null {
  const access = grant.providers.get(provider);
  if (!access) throw new AppError('FORBIDDEN', { message: `This capability does not reach ${provider}` });
  if (writes && access !== 'write') throw new AppError('FORBIDDEN', { message: `This capability only reads ${provider}: this call writes` });
  if (grant.endUserId === null) return endUserId;
  if (endUserId !== null && endUserId !== grant.endUserId) throw new AppError('FORBIDDEN', { message: "This capability reaches only its own end user's integrations" });
  return grant.endUserId;
}
