import type {} from '@fastify/cookie';
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config/load.ts';
import { type Db, queryRows, sql } from '../db/client.ts';
import { recordAudit } from '../audit/audit.ts';
import type { Principal, Role } from '../http/context.ts';
import { AppError } from '../http/errors.ts';
import type { PipelineSlots } from '../http/pipeline.ts';
import type { RateLimiter } from '../http/rate-limit.ts';
import { API_TOKEN_PREFIX, hashToken, PAT_PREFIX, type SessionTokens } from './credentials.ts';

export const SESSION_COOKIE = 'session';
export const CSRF_COOKIE = 'csrf_token';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

declare module '../http/context.ts' {
  interface RequestContext {
    /** Set by the system-admin step: the effective caller is a system administrator. */
    systemAdmin?: boolean;
  }
}

export interface IdentityDeps {
  config: Config;
  db: Db;
  sessionTokens: SessionTokens;
  rateLimiter: RateLimiter;
}

/** The pipeline's steps 6–9 (CONTRACT.md §4), filled by the identity feature. */
export function identitySlots(deps: IdentityDeps): PipelineSlots {
  const allowedOrigins = new Set([deps.config.server.publicOrigin, ...deps.config.oauth.redirectOrigins, ...deps.config.server.corsOrigins]);
  return {
    impersonation: (request) => {
      // Only noted here: the decision waits until the caller is authenticated.
      const header = request.headers['x-impersonate-user'];
      if (header !== undefined) request.ctx.impersonateUserId = typeof header === 'string' ? header : '';
    },
    authentication: async (request) => {
      let principal = await authenticate(deps, request);
      if (request.ctx.impersonateUserId !== null) principal = await impersonate(deps.db, request, principal, request.ctx.impersonateUserId);
      request.ctx.principal = principal;
    },
    systemAdmin: (request) => {
      request.ctx.systemAdmin = request.ctx.principal?.systemAdmin === true;
    },
    csrf: (request) => {
      if (!deps.config.csrf.enabled || SAFE_METHODS.has(request.method)) return;
      const principal = request.ctx.principal;
      // Header credentials are exempt: a browser never attaches them by itself.
      if (principal && !principal.viaCookie) return;
      const origin = request.headers.origin;
      if (origin !== undefined && !allowedOrigins.has(origin)) throw new AppError('CSRF_INVALID', { message: 'Origin not allowed' });
      if (!principal) return;
      const contentType = request.headers['content-type'] ?? '';
      if (!/^application\/json\s*(;|$)/i.test(contentType)) throw new AppError('CSRF_INVALID', { message: 'Cookie-authenticated requests must be application/json' });
      const header = request.headers['x-csrf-token'];
      const cookie = request.cookies[CSRF_COOKIE];
      const sessionId = principal.kind === 'jwt' ? principal.credentialId : '';
      if (typeof header !== 'string' || !header || header !== cookie || !deps.sessionTokens.csrfMatches(`session:${sessionId}`, header)) {
        throw new AppError('CSRF_INVALID');
      }
    },
    rateLimit: (request, reply) => deps.rateLimiter.check(request, reply),
  };
}

interface SessionRow {
  user_id: string;
  system_admin: boolean;
  active: boolean;
  role: Role | null;
}

/** The session JWT's caller, or 401; a removed member gets 403 at once. */
export async function principalFromSessionToken(deps: Pick<IdentityDeps, 'db' | 'sessionTokens'>, token: string, viaCookie: boolean): Promise<Principal> {
  const claims = deps.sessionTokens.verify(token);
  if (!claims) throw new AppError('UNAUTHENTICATED', { message: 'Invalid or expired session token' });
  const [row] = await queryRows<SessionRow>(
    deps.db,
    sql`SELECT u.id AS user_id, u.system_admin, (s.revoked_at IS NULL AND s.expires_at > now()) AS active, m.role
        FROM sessions s
        JOIN users u ON u.id = s.user_id
        LEFT JOIN memberships m ON m.organization_id = ${claims.org} AND m.user_id = s.user_id
        WHERE s.id = ${claims.sid} AND s.user_id = ${claims.sub}`,
  );
  if (!row?.active) throw new AppError('UNAUTHENTICATED', { message: 'The session has ended; sign in again' });
  if (!row.role) throw new AppError('FORBIDDEN', { message: 'You are no longer a member of this organization' });
  return {
    kind: 'jwt',
    userId: row.user_id,
    organizationId: claims.org,
    role: row.role,
    credentialId: claims.sid,
    systemAdmin: row.system_admin,
    viaCookie,
  };
}

interface PatRow {
  id: string;
  user_id: string;
  organization_ids: string[];
  active: boolean;
  system_admin: boolean;
  organization_id: string;
  role: Role | null;
}

interface ApiTokenRow {
  organization_id: string;
  id: string;
  active: boolean;
}

/**
 * For public routes that accept credentials without requiring them (the OAuth
 * callback): the caller when valid credentials were sent, else null.
 */
export async function authenticateOptional(deps: Pick<IdentityDeps, 'db' | 'sessionTokens'>, request: FastifyRequest): Promise<Principal | null> {
  if (request.headers.authorization === undefined && !request.cookies[SESSION_COOKIE]) return null;
  try {
    return await authenticate(deps, request);
  } catch {
    return null;
  }
}

async function authenticate(deps: Pick<IdentityDeps, 'db' | 'sessionTokens'>, request: FastifyRequest): Promise<Principal> {
  const header = request.headers.authorization;
  // An Authorization header, even an invalid one, never falls back to the cookie.
  if (header !== undefined) {
    const match = /^Bearer +([^\s]+) *$/i.exec(header);
    if (!match?.[1]) throw new AppError('UNAUTHENTICATED', { message: 'Authorization must be "Bearer <token>"' });
    const token = match[1];
    if (token.startsWith(PAT_PREFIX)) return personalAccessToken(deps.db, request, token);
    if (token.startsWith(API_TOKEN_PREFIX)) return apiToken(deps.db, request, token);
    const principal = await principalFromSessionToken(deps, token, false);
    assertOrganizationHeader(request, principal.organizationId);
    return principal;
  }
  const cookie = request.cookies[SESSION_COOKIE];
  if (!cookie) throw new AppError('UNAUTHENTICATED');
  const principal = await principalFromSessionToken(deps, cookie, true);
  assertOrganizationHeader(request, principal.organizationId);
  return principal;
}

async function personalAccessToken(db: Db, request: FastifyRequest, token: string): Promise<Principal> {
  const wanted = organizationHeader(request);
  const hash = hashToken(token);
  const [row] = await queryRows<PatRow>(
    db,
    sql`WITH t AS (
          SELECT p.id, p.user_id, p.organization_ids, u.system_admin,
                 (p.revoked_at IS NULL AND (p.expires_at IS NULL OR p.expires_at > now())) AS active,
                 COALESCE(${wanted}::text, p.organization_ids[1]) AS organization_id
          FROM personal_access_tokens p JOIN users u ON u.id = p.user_id
          WHERE p.token_hash = ${hash}
        ), touch AS (
          UPDATE personal_access_tokens SET last_used_at = now()
          WHERE token_hash = ${hash} AND revoked_at IS NULL
            AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
          RETURNING 1
        )
        SELECT t.*, m.role FROM t
        LEFT JOIN memberships m ON m.organization_id = t.organization_id AND m.user_id = t.user_id`,
  );
  if (!row?.active) throw new AppError('UNAUTHENTICATED', { message: 'Invalid, expired or revoked token' });
  if (!row.organization_ids.includes(row.organization_id)) {
    throw new AppError('FORBIDDEN', { message: 'This token is not valid for that organization' });
  }
  if (!row.role) throw new AppError('FORBIDDEN', { message: 'You are no longer a member of this organization' });
  return {
    kind: 'pat',
    userId: row.user_id,
    organizationId: row.organization_id,
    role: row.role,
    credentialId: row.id,
    systemAdmin: row.system_admin,
    viaCookie: false,
  };
}

async function apiToken(db: Db, request: FastifyRequest, token: string): Promise<Principal> {
  const hash = hashToken(token);
  const [row] = await queryRows<ApiTokenRow>(
    db,
    sql`WITH t AS (
          SELECT organization_id, id, (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())) AS active
          FROM api_tokens WHERE token_hash = ${hash}
        ), touch AS (
          UPDATE api_tokens SET last_used_at = now()
          WHERE token_hash = ${hash} AND revoked_at IS NULL
            AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
          RETURNING 1
        )
        SELECT * FROM t`,
  );
  if (!row?.active) throw new AppError('UNAUTHENTICATED', { message: 'Invalid, expired or revoked token' });
  assertOrganizationHeader(request, row.organization_id);
  return {
    kind: 'api_token',
    userId: null,
    organizationId: row.organization_id,
    role: 'admin',
    credentialId: row.id,
    systemAdmin: false,
    viaCookie: false,
  };
}

interface TargetRow {
  id: string;
  system_admin: boolean;
  organization_id: string | null;
  role: Role | null;
}

/**
 * Impersonation is decided once the caller is known: only a system admin, only with a
 * session JWT, never onto another system admin. Every impersonated request is audited.
 */
async function impersonate(db: Db, request: FastifyRequest, caller: Principal, targetId: string): Promise<Principal> {
  if (!targetId || targetId.length > 64) throw new AppError('FORBIDDEN', { message: 'Invalid X-Impersonate-User header' });
  if (caller.kind !== 'jwt' || !caller.systemAdmin || !caller.userId) {
    throw new AppError('FORBIDDEN', { message: 'Only system administrators signed in with a session may impersonate' });
  }
  const wanted = organizationHeader(request);
  const [target] = await queryRows<TargetRow>(
    db,
    sql`SELECT u.id, u.system_admin, o.organization_id, m.role
        FROM users u
        CROSS JOIN LATERAL (SELECT COALESCE(${wanted}::text,
          (SELECT organization_id FROM memberships WHERE user_id = u.id AND organization_id = u.default_organization_id),
          (SELECT organization_id FROM memberships WHERE user_id = u.id ORDER BY created_at, organization_id LIMIT 1)) AS organization_id) o
        LEFT JOIN memberships m ON m.user_id = u.id AND m.organization_id = o.organization_id
        WHERE u.id = ${targetId}`,
  );
  if (!target) throw new AppError('FORBIDDEN', { message: 'No such user to impersonate' });
  if (target.system_admin) throw new AppError('FORBIDDEN', { message: 'System administrators cannot be impersonated' });
  if (!target.organization_id || !target.role) throw new AppError('FORBIDDEN', { message: 'That user is not a member of the organization' });
  const principal: Principal = {
    kind: 'jwt',
    userId: target.id,
    organizationId: target.organization_id,
    role: target.role,
    credentialId: caller.credentialId,
    systemAdmin: false,
    impersonatorId: caller.userId,
    viaCookie: caller.viaCookie,
  };
  // Its own statement, committed at once: the audit trail of an impersonated request survives its failure.
  await recordAudit(db, { principal, requestId: request.id }, {
    organizationId: target.organization_id,
    action: 'impersonation.request',
    targetType: 'user',
    targetId: target.id,
    detail: { method: request.method, route: request.routeOptions.url ?? null },
  });
  return principal;
}

function organizationHeader(request: FastifyRequest): string | null {
  const header = request.headers['x-organization-id'];
  if (header === undefined) return null;
  if (typeof header !== 'string' || !/^[0-9A-Za-z_-]{1,64}$/.test(header)) {
    throw new AppError('INVALID_INPUT', { details: [{ path: 'headers.x-organization-id', message: 'must be an organization id' }] });
  }
  return header;
}

function assertOrganizationHeader(request: FastifyRequest, organizationId: string): void {
  const wanted = organizationHeader(request);
  // Impersonation reads the header itself; otherwise a credential bound to one organization cannot pick another.
  if (wanted && wanted !== organizationId && !request.ctx.impersonateUserId) {
    throw new AppError('FORBIDDEN', { message: 'This credential is bound to another organization' });
  }
}
