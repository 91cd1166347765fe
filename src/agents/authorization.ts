/**
 * Tessera as the authorization server of its MCP endpoint (docs/contract.md §9a): an MCP client's
 * authorization request, the decision on it (a person at the consent page, or a product's token
 * at the handoff), the code and refresh grants, and the grants themselves. Every access token is
 * a §9 capability issued by the one function a token exchange uses (`issueCapability`); its
 * subject is the person who consented (grantor kind `user`) or the product's approving token.
 * Consumers — the consent page, the token endpoint, the grants and handoff routes — parse, call
 * one function here, and format.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { and, desc, eq, isNull, sql } from 'drizzle-orm';
import { recordAudit } from '../audit/audit.ts';
import { type Db, queryRows } from '../db/client.ts';
import { agentCapabilities, oauthAuthorizations, oauthGrants, oauthRefreshTokens } from '../db/schema.ts';
import { AppError } from '../ground/errors.ts';
import type { Principal } from '../ground/principal.ts';
import type { Work } from '../ground/work.ts';
import { roleAtLeast } from '../identity/authorize.ts';
import { CAPABILITY_SCOPE, providersOf } from '../identity/capabilities.ts';
import { hashToken, newOpaqueToken } from '../identity/credentials.ts';
import { grantorAuthorized, PERSON_GRANTOR } from '../identity/grantor.ts';
import type { ProviderRegistry } from '../integrations/providers/registry.ts';
import { newId, newSecret, PRODUCT_ID, SECRET, ULID } from '../lib/ids.ts';
import { type ClientDeps, clientHost, type McpClient, redirectRegistered, resolveClient } from './clients.ts';
import { checkScopes, issueCapability, LIFETIME, OAuthError } from './exchange.ts';

/** A refresh token's prefix (docs/contract.md §9a). */
export const REFRESH_PREFIX = 'tsr_';
/** An authorization request lives 10 minutes; its code 60 seconds. */
const REQUEST_TTL_S = 600;
const CODE_TTL_S = 60;
/** A grant's lifetime, seconds: at most 30 days; the handoff's bounds and default. */
export const GRANT_LIFETIME = { min: 3600, max: 30 * 24 * 3600, default: 30 * 24 * 3600 } as const;
const PKCE_VALUE = /^[A-Za-z0-9._~-]{43,128}$/;

/** What the authorization server's use cases need. */
export interface AuthorizationDeps extends ClientDeps {
  providers: ProviderRegistry;
  /** `PUBLIC_URL`: the `iss` of every authorization response (RFC 9207). */
  issuer: string;
  /** `<PUBLIC_URL>/mcp`: the one resource (RFC 8707). */
  resource: string;
}

/** `redirect_uri` with `params` added to its query (its own kept). */
export function redirectWith(redirectUri: string, params: Record<string, string | null | undefined>): string {
  const url = new URL(redirectUri);
  for (const [name, value] of Object.entries(params)) if (value !== null && value !== undefined) url.searchParams.set(name, value);
  return url.href;
}

/** A pending request as the consent page and the handoff show it. */
export interface PendingAuthorization {
  idHash: string;
  client: { id: string; name: string; host: string };
  redirectUri: string;
  scopes: string[];
  expiresAt: Date;
  status: 'pending' | 'approved' | 'denied';
}

/** What `GET /oauth/authorize` leads to: the 400 page (never a redirect), a redirect back with an error, or a pending request. */
export type AuthorizeOutcome =
  | { kind: 'refused'; message: string }
  | { kind: 'redirect'; location: string }
  | { kind: 'pending'; requestId: string; request: PendingAuthorization; client: McpClient };

/**
 * Opens an authorization request: the client and its redirect URI first (neither known → the
 * page, never a redirect), then every other parameter (→ a redirect with `error`, `state` and
 * `iss`), then a pending request of 10 minutes whose id only the caller learns.
 */
export async function openAuthorization(deps: AuthorizationDeps, db: Db, query: Record<string, string | undefined>): Promise<AuthorizeOutcome> {
  const clientId = query.client_id;
  if (!clientId) return { kind: 'refused', message: 'The request names no client (client_id).' };
  const client = await resolveClient({ ...deps, db }, clientId);
  if (!client) return { kind: 'refused', message: 'The application asking for access is unknown, or its description could not be fetched.' };
  const redirectUri = query.redirect_uri ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
  if (!redirectUri || !redirectRegistered(client.redirectUris, redirectUri)) return { kind: 'refused', message: 'The address the application asked to return to is not one it registered.' };
  const back = (error: string, description: string): AuthorizeOutcome => ({
    kind: 'redirect',
    location: redirectWith(redirectUri, { error, error_description: description, state: query.state, iss: deps.issuer }),
  });
  if (query.response_type !== 'code') return back('unsupported_response_type', 'response_type must be code');
  if (!query.code_challenge) return back('invalid_request', 'code_challenge is required (PKCE, S256)');
  if (query.code_challenge_method !== 'S256') return back('invalid_request', 'code_challenge_method must be S256');
  if (!PKCE_VALUE.test(query.code_challenge)) return back('invalid_request', 'code_challenge is malformed');
  // RFC 6749 §A.5: VSCHAR only.
  if (query.state !== undefined && (query.state.length > 1000 || !/^[\x20-\x7e]*$/.test(query.state))) return back('invalid_request', 'state must be at most 1000 printable ASCII characters');
  if (query.resource !== deps.resource) return back('invalid_target', `resource must be ${deps.resource}`);
  const scopes = [...new Set((query.scope ?? '').split(' ').filter((scope) => scope !== ''))];
  const unknown = scopes.find((scope) => {
    const match = CAPABILITY_SCOPE.exec(scope);
    return !match?.[1] || !deps.providers.get(match[1]);
  });
  if (unknown !== undefined) return back('invalid_scope', `Unknown scope ${unknown.slice(0, 100)}`);
  const requestId = newSecret();
  const expiresAt = new Date(Date.now() + REQUEST_TTL_S * 1000);
  // Requests a day past their end go, a few at a time: a replayed code is told from an unknown one for that long (decision 311).
  await db.execute(sql`DELETE FROM oauth_authorizations WHERE id_hash IN (
      SELECT id_hash FROM oauth_authorizations WHERE expires_at < now() - interval '1 day' LIMIT 100 FOR UPDATE SKIP LOCKED)`);
  await db.insert(oauthAuthorizations).values({
    idHash: hashToken(requestId),
    clientId: client.id,
    clientName: client.name,
    redirectUri,
    codeChallenge: query.code_challenge,
    state: query.state ?? null,
    scopes,
    resource: query.resource,
    expiresAt,
  });
  return {
    kind: 'pending',
    requestId,
    client,
    request: { idHash: hashToken(requestId), client: { id: client.id, name: client.name, host: clientHost(client.id, redirectUri) }, redirectUri, scopes, expiresAt, status: 'pending' },
  };
}

/** The request `requestId` names, whatever its status, while it lives; null when there is none (unknown, malformed, expired). */
export async function findAuthorization(db: Db, requestId: string): Promise<PendingAuthorization | null> {
  if (!SECRET.test(requestId)) return null;
  const [row] = await db.select().from(oauthAuthorizations).where(eq(oauthAuthorizations.idHash, hashToken(requestId)));
  if (!row || row.expiresAt <= new Date()) return null;
  return { idHash: row.idHash, client: { id: row.clientId, name: row.clientName, host: clientHost(row.clientId, row.redirectUri) }, redirectUri: row.redirectUri, scopes: row.scopes, expiresAt: row.expiresAt, status: row.status };
}

/** What the person (or the product's token) chose. */
export interface Approval {
  organizationId: string;
  /** Who approves: their role there decides what they may grant (a member reads only, §9). */
  approver: Pick<Principal, 'role' | 'organizationId'>;
  subject: { kind: string; id: string; userId: string | null };
  scopes: string[];
  endUserId: string | null;
  grantSeconds: number;
}

/**
 * Checks a choice against the request and the approver, in `invalid_scope` words a page can show:
 * well-formed scopes, within those the client asked for (when it named any), each provider
 * configured and connected there (for that end user), and write only for an owner or admin,
 * an API or service token (`checkScopes`, the token exchange's check).
 */
export async function checkApproval(deps: AuthorizationDeps, db: Db, request: PendingAuthorization, approval: Approval): Promise<void> {
  if (approval.scopes.length === 0) throw new OAuthError('invalid_scope', 'Choose at least one service');
  if (approval.scopes.some((scope) => !CAPABILITY_SCOPE.test(scope))) throw new OAuthError('invalid_scope', 'Unknown scope');
  if (request.scopes.length > 0) {
    const asked = providersOf(request.scopes);
    for (const [provider, access] of providersOf(approval.scopes)) {
      const allowed = asked.get(provider);
      if (!allowed || (access === 'write' && allowed !== 'write')) throw new OAuthError('invalid_scope', `The application did not ask for ${provider} ${access} access`);
    }
  }
  if (approval.endUserId !== null && !PRODUCT_ID.test(approval.endUserId)) throw new OAuthError('invalid_scope', 'The end user id must be 1–128 printable characters');
  if (!(approval.grantSeconds >= GRANT_LIFETIME.min && approval.grantSeconds <= GRANT_LIFETIME.max)) throw new OAuthError('invalid_scope', 'The duration must be 1 hour to 30 days');
  await checkScopes({ db, providers: deps.providers }, approval.approver, { scopes: approval.scopes, endUserId: approval.endUserId });
}

/** A decided request's way back to the client. */
export interface Decided {
  redirectTo: string;
}

/**
 * Decides a pending request once: approve (a code of 60 seconds bound to the client, redirect
 * URI, PKCE challenge, resource and these choices) or deny (`access_denied`). 404 when there is
 * no such live request, 409 when it was decided already.
 */
export async function decideAuthorization(deps: Pick<AuthorizationDeps, 'issuer'>, work: Work, idHash: string, decision: Approval | 'deny'): Promise<Decided> {
  const code = decision === 'deny' ? null : newSecret();
  const set =
    decision === 'deny'
      ? { status: 'denied' as const }
      : {
          status: 'approved' as const,
          organizationId: decision.organizationId,
          subjectKind: decision.subject.kind,
          subjectId: decision.subject.id,
          subjectUserId: decision.subject.userId,
          grantedScopes: [...providersOf(decision.scopes)].map(([provider, access]) => `integrations:${provider}:${access}`),
          endUserId: decision.endUserId,
          grantSeconds: decision.grantSeconds,
          codeHash: hashToken(code ?? ''),
          codeExpiresAt: new Date(Date.now() + CODE_TTL_S * 1000),
        };
  const [row] = await work.db
    .update(oauthAuthorizations)
    .set(set)
    .where(and(eq(oauthAuthorizations.idHash, idHash), eq(oauthAuthorizations.status, 'pending'), sql`${oauthAuthorizations.expiresAt} > now()`))
    .returning();
  if (!row) {
    const [seen] = await work.db.select({ status: oauthAuthorizations.status, expiresAt: oauthAuthorizations.expiresAt }).from(oauthAuthorizations).where(eq(oauthAuthorizations.idHash, idHash));
    if (!seen || seen.expiresAt <= new Date()) throw new AppError('NOT_FOUND', { message: 'No such authorization request (unknown or expired)' });
    throw new AppError('CONFLICT', { message: 'This authorization request was decided already' });
  }
  if (decision !== 'deny') {
    await recordAudit(work.db, work.actor, {
      organizationId: decision.organizationId,
      action: 'oauth_authorization.approved',
      targetType: 'oauth_client',
      targetId: row.clientId.slice(0, 200),
      detail: { client: { id: row.clientId.slice(0, 200), name: row.clientName }, scopes: set.grantedScopes ?? [], endUser: decision.endUserId, expiresIn: decision.grantSeconds },
    });
  }
  return {
    redirectTo:
      code === null
        ? redirectWith(row.redirectUri, { error: 'access_denied', error_description: 'The request was denied', state: row.state, iss: deps.issuer })
        : redirectWith(row.redirectUri, { code, state: row.state, iss: deps.issuer }),
  };
}

/** A token response (RFC 6749 §5.1). */
export interface TokenPair {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
}

type GrantRow = typeof oauthGrants.$inferSelect;

/** The grant still stands: not revoked, not expired, and its subject still able to grant it (a person a member, owner or admin where it writes; a token live). */
async function grantStands(db: Db, grant: Pick<GrantRow, 'organizationId' | 'scopes' | 'subjectKind' | 'subjectId' | 'subjectUserId' | 'expiresAt' | 'revokedAt'>): Promise<boolean> {
  if (grant.revokedAt !== null || grant.expiresAt <= new Date()) return false;
  const writes = grant.scopes.some((scope) => scope.endsWith(':write'));
  const [row] = await queryRows<{ ok: boolean }>(
    db,
    sql`SELECT ${grantorAuthorized(
      sql`${grant.organizationId}::text`,
      { kind: sql`${grant.subjectKind}::text`, credentialId: sql`${grant.subjectId}::text`, userId: sql`${grant.subjectUserId}::text` },
      sql`${writes}::boolean`,
    )} AS ok`,
  );
  return row?.ok === true;
}

/** Ends a grant and every token of it (its capabilities, its refresh tokens), with the audit row; false when it had ended already. */
async function endGrant(work: Work, organizationId: string, grantId: string, reason: string): Promise<boolean> {
  const now = new Date();
  const [ended] = await work.db
    .update(oauthGrants)
    .set({ revokedAt: now })
    .where(and(eq(oauthGrants.organizationId, organizationId), eq(oauthGrants.id, grantId), isNull(oauthGrants.revokedAt)))
    .returning({ clientId: oauthGrants.clientId, clientName: oauthGrants.clientName });
  await work.db
    .update(agentCapabilities)
    .set({ revokedAt: now })
    .where(and(eq(agentCapabilities.organizationId, organizationId), eq(agentCapabilities.grantId, grantId), isNull(agentCapabilities.revokedAt)));
  await work.db
    .update(oauthRefreshTokens)
    .set({ usedAt: now })
    .where(and(eq(oauthRefreshTokens.organizationId, organizationId), eq(oauthRefreshTokens.grantId, grantId), isNull(oauthRefreshTokens.usedAt)));
  if (!ended) return false;
  await recordAudit(work.db, work.actor, {
    organizationId,
    action: 'oauth_grant.revoked',
    targetType: 'oauth_grant',
    targetId: grantId,
    detail: { client: { id: ended.clientId.slice(0, 200), name: ended.clientName }, reason },
  });
  return true;
}

/** A new access token (a capability, at most an hour and never past the grant) and refresh token of `grant`. */
async function issuePair(work: Work, grant: GrantRow): Promise<TokenPair> {
  const remaining = Math.floor((grant.expiresAt.getTime() - Date.now()) / 1000);
  const expiresIn = Math.max(1, Math.min(LIFETIME.max, remaining));
  const { token } = await issueCapability(work, {
    organizationId: grant.organizationId,
    agent: grant.clientName.slice(0, 64),
    scopes: grant.scopes,
    endUserId: grant.endUserId,
    subject: { kind: grant.subjectKind, id: grant.subjectId, userId: grant.subjectUserId },
    expiresIn,
    grantId: grant.id,
  });
  const refresh = newOpaqueToken(REFRESH_PREFIX);
  await work.db.insert(oauthRefreshTokens).values({ tokenHash: hashToken(refresh), organizationId: grant.organizationId, grantId: grant.id });
  return { access_token: token, token_type: 'Bearer', expires_in: expiresIn, refresh_token: refresh, scope: grant.scopes.join(' ') };
}

/** RFC 7636 S256: BASE64URL(SHA256(verifier)) equals the challenge, compared in constant time. */
function verifierMatches(verifier: string, challenge: string): boolean {
  if (!PKCE_VALUE.test(verifier)) return false;
  const computed = Buffer.from(createHash('sha256').update(verifier).digest('base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}

/**
 * `grant_type=authorization_code`: the code, once, within 60 seconds, by its client with its
 * redirect URI, PKCE verifier and resource → the grant and its first pair. A code presented
 * again ends the grant its first use made (RFC 9700 §4.4.1.1 … a replayed code is a stolen one).
 */
export async function exchangeCode(deps: AuthorizationDeps, work: Work, params: Partial<Record<string, string>>): Promise<TokenPair> {
  if (!params.client_id) throw new OAuthError('invalid_client', 'client_id is required');
  if (!params.code || !params.code_verifier || !params.redirect_uri) throw new OAuthError('invalid_request', 'code, code_verifier and redirect_uri are required');
  if (params.resource !== undefined && params.resource !== deps.resource) throw new OAuthError('invalid_target', `The only resource is ${deps.resource}`);
  const [row] = await work.db.select().from(oauthAuthorizations).where(eq(oauthAuthorizations.codeHash, hashToken(params.code)));
  if (!row || row.status !== 'approved' || row.organizationId === null || row.subjectKind === null || row.subjectId === null || row.grantedScopes === null || row.grantSeconds === null) {
    throw new OAuthError('invalid_grant', 'The code is invalid, expired or used');
  }
  if (row.codeUsedAt !== null) {
    if (row.grantId !== null) await endGrant(work, row.organizationId, row.grantId, 'code_reused');
    throw new OAuthError('invalid_grant', 'The code is invalid, expired or used');
  }
  if (row.codeExpiresAt === null || row.codeExpiresAt <= new Date()) throw new OAuthError('invalid_grant', 'The code is invalid, expired or used');
  if (row.clientId !== params.client_id) throw new OAuthError('invalid_grant', 'The code was issued to another client');
  if (row.redirectUri !== params.redirect_uri) throw new OAuthError('invalid_grant', 'redirect_uri does not match the authorization request');
  if (!verifierMatches(params.code_verifier, row.codeChallenge)) throw new OAuthError('invalid_grant', 'code_verifier does not match the code challenge');
  const values = {
    organizationId: row.organizationId,
    id: newId(),
    clientId: row.clientId,
    clientName: row.clientName,
    scopes: row.grantedScopes,
    endUserId: row.endUserId,
    subjectKind: row.subjectKind,
    subjectId: row.subjectId,
    subjectUserId: row.subjectUserId,
    expiresAt: new Date(Date.now() + row.grantSeconds * 1000),
    revokedAt: null,
  };
  if (!(await grantStands(work.db, values))) throw new OAuthError('invalid_grant', 'Whoever approved it can no longer grant this access');
  // One statement: of two presentations racing with one code, exactly one takes it.
  const [taken] = await work.db
    .update(oauthAuthorizations)
    .set({ codeUsedAt: new Date(), grantId: values.id })
    .where(and(eq(oauthAuthorizations.idHash, row.idHash), isNull(oauthAuthorizations.codeUsedAt)))
    .returning({ idHash: oauthAuthorizations.idHash });
  if (!taken) {
    // The other presentation won (this statement waited for it to commit): a code used twice ends what its first use made, whichever came first.
    const [winner] = await work.db.select({ grantId: oauthAuthorizations.grantId }).from(oauthAuthorizations).where(eq(oauthAuthorizations.idHash, row.idHash));
    if (winner?.grantId) await endGrant(work, row.organizationId, winner.grantId, 'code_reused');
    throw new OAuthError('invalid_grant', 'The code is invalid, expired or used');
  }
  const [grant] = await work.db.insert(oauthGrants).values(values).returning();
  if (!grant) throw new Error('grant not stored');
  await recordAudit(work.db, work.actor, {
    organizationId: grant.organizationId,
    action: 'oauth_grant.created',
    targetType: 'oauth_grant',
    targetId: grant.id,
    detail: { client: { id: grant.clientId.slice(0, 200), name: grant.clientName }, scopes: grant.scopes, endUser: grant.endUserId, subject: { kind: grant.subjectKind, id: grant.subjectId } },
  });
  return issuePair(work, grant);
}

/**
 * `grant_type=refresh_token`: a live refresh token of a standing grant, by its client → a new
 * pair; the token presented is used up. A used one presented again ends the grant and every
 * token of it (RFC 9700 §4.14.2), and the caller must commit that despite the error.
 */
export async function refreshGrant(deps: AuthorizationDeps, work: Work, params: Partial<Record<string, string>>): Promise<TokenPair> {
  if (!params.client_id) throw new OAuthError('invalid_client', 'client_id is required');
  if (!params.refresh_token) throw new OAuthError('invalid_request', 'refresh_token is required');
  if (params.resource !== undefined && params.resource !== deps.resource) throw new OAuthError('invalid_target', `The only resource is ${deps.resource}`);
  const invalid = () => new OAuthError('invalid_grant', 'The refresh token is invalid, expired or revoked');
  const [held] = await work.db.select().from(oauthRefreshTokens).where(eq(oauthRefreshTokens.tokenHash, hashToken(params.refresh_token)));
  if (!held) throw invalid();
  const [grant] = await work.db.select().from(oauthGrants).where(and(eq(oauthGrants.organizationId, held.organizationId), eq(oauthGrants.id, held.grantId)));
  if (!grant) throw invalid();
  if (grant.clientId !== params.client_id) throw new OAuthError('invalid_grant', 'The refresh token was issued to another client');
  const [used] = await work.db
    .update(oauthRefreshTokens)
    .set({ usedAt: new Date() })
    .where(and(eq(oauthRefreshTokens.tokenHash, held.tokenHash), isNull(oauthRefreshTokens.usedAt)))
    .returning({ tokenHash: oauthRefreshTokens.tokenHash });
  if (!used) {
    if (grant.revokedAt === null) await endGrant(work, grant.organizationId, grant.id, 'refresh_reused');
    throw new OAuthError('invalid_grant', 'The refresh token was used already: every token of this grant is revoked');
  }
  if (!(await grantStands(work.db, grant))) throw invalid();
  return issuePair(work, grant);
}

/** RFC 7009 with a refresh token: ends its grant (holding the value is enough). Anything else changes nothing. */
export async function revokeByRefreshToken(work: Work, token: string): Promise<void> {
  if (!token.startsWith(REFRESH_PREFIX)) return;
  const [held] = await work.db.select().from(oauthRefreshTokens).where(eq(oauthRefreshTokens.tokenHash, hashToken(token)));
  if (held) await endGrant(work, held.organizationId, held.grantId, 'revoked');
}

/** A capability presented to RFC 7009 that belongs to a grant ends the grant with it. */
export async function revokeGrantOfCapability(work: Work, token: string): Promise<void> {
  const [row] = await work.db
    .select({ organizationId: agentCapabilities.organizationId, grantId: agentCapabilities.grantId })
    .from(agentCapabilities)
    .where(eq(agentCapabilities.tokenHash, hashToken(token)));
  if (row?.grantId) await endGrant(work, row.organizationId, row.grantId, 'revoked');
}

/** A grant as `GET /v1/oauth/grants` lists it. */
export interface GrantView {
  id: string;
  client: { id: string; name: string };
  scope: string;
  providers: string[];
  access: 'read' | 'write';
  endUser: { id: string } | null;
  createdAt: string;
  expiresAt: string;
  lastUsedAt: string | null;
}

function grantView(row: GrantRow): GrantView {
  const providers = providersOf(row.scopes);
  return {
    id: row.id,
    client: { id: row.clientId, name: row.clientName },
    scope: row.scopes.join(' '),
    providers: [...providers.keys()],
    access: [...providers.values()].includes('write') ? 'write' : 'read',
    endUser: row.endUserId === null ? null : { id: row.endUserId },
    createdAt: row.createdAt.toISOString(),
    expiresAt: row.expiresAt.toISOString(),
    lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
  };
}

/** Whose grants the caller sees and revokes: an owner, an admin or an API or service token, the organization's; a person, their own. */
function grantFilter(principal: Principal) {
  const manager = roleAtLeast(principal.role, 'admin');
  if (manager) return and(eq(oauthGrants.organizationId, principal.organizationId));
  return and(eq(oauthGrants.organizationId, principal.organizationId), eq(oauthGrants.subjectKind, PERSON_GRANTOR), eq(oauthGrants.subjectId, principal.userId ?? ''));
}

/** The live grants the caller may see, newest first (docs/contract.md §9a). */
export async function listGrants(work: Work): Promise<GrantView[]> {
  const principal = callerOf(work);
  const rows = await work.db
    .select()
    .from(oauthGrants)
    .where(and(grantFilter(principal), isNull(oauthGrants.revokedAt), sql`${oauthGrants.expiresAt} > now()`))
    .orderBy(desc(oauthGrants.createdAt), desc(oauthGrants.id))
    .limit(500);
  return rows.map(grantView);
}

/** Revokes one grant the caller may see, and every token of it; 404 when there is no such live one. */
export async function revokeGrant(work: Work, grantId: string): Promise<void> {
  const principal = callerOf(work);
  if (!ULID.test(grantId)) throw new AppError('NOT_FOUND', { message: 'No such grant' });
  const [row] = await work.db
    .select({ id: oauthGrants.id })
    .from(oauthGrants)
    .where(and(grantFilter(principal), eq(oauthGrants.id, grantId), isNull(oauthGrants.revokedAt)));
  if (!row || !(await endGrant(work, principal.organizationId, grantId, 'revoked'))) throw new AppError('NOT_FOUND', { message: 'No such grant' });
}

function callerOf(work: Work): Principal {
  const principal = work.actor.principal;
  if (!principal || principal.organizationId === '') throw new AppError('FORBIDDEN', { message: 'Grants are listed within an organization' });
  return principal;
}
