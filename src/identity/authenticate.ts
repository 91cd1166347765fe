import type {} from '@fastify/cookie';
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config/load.ts';
import type { SQL } from 'drizzle-orm';
import { type Db, HotStatement, queryRows, sql } from '../db/client.ts';
import { recordAudit } from '../audit/audit.ts';
import type { Principal, Role } from '../http/context.ts';
import { AppError } from '../http/errors.ts';
import { remember } from '../lib/bounded.ts';
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
    /**
     * Set instead of `principal` on routes with `deferCredentialCheck`: the credential
     * passed every check that needs no database, and the route checks the rest in its
     * own statement (`callerCheck`, then `principalFromCaller`).
     */
    deferredCredential?: DeferredCredential;
    /** What the rate limiter counts against: the user (`user:<id>`), or the API token's hash. */
    credentialKey?: string;
  }
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route folds the session/API-token check into its own statement, saving a round
     * trip on a hot path. Only header credentials without X-Organization-ID or
     * X-Impersonate-User are deferred; anything else takes the usual path.
     */
    deferCredentialCheck?: boolean;
    /** The route checks a password: its 401s count as failed authentications of the client IP. */
    signIn?: boolean;
  }
}

/**
 * A credential whose database check the route runs itself. An API token's `touch` says
 * whether the check also records its use (`last_used_at`, kept to the minute).
 */
export type DeferredCredential =
  | { kind: 'jwt'; sessionId: string; userId: string; organizationId: string }
  | { kind: 'api_token'; hash: string; touch: boolean };

export interface IdentityDeps {
  config: Config;
  db: Db;
  sessionTokens: SessionTokens;
  rateLimiter: RateLimiter;
}

/** The pipeline's steps 6–9 (CONTRACT.md §4), filled by the identity feature. */
export function identitySlots(deps: IdentityDeps): PipelineSlots {
  const allowedOrigins = new Set([deps.config.server.publicOrigin, ...deps.config.oauth.redirectOrigins, ...deps.config.server.corsOrigins]);
  const knownApiTokens = new KnownTokens();
  return {
    impersonation: (request) => {
      // Only noted here: the decision waits until the caller is authenticated.
      const header = request.headers['x-impersonate-user'];
      if (header !== undefined) request.ctx.impersonateUserId = typeof header === 'string' ? header : '';
    },
    authentication: async (request) => {
      // An address over its limit of failures is refused before any lookup.
      deps.rateLimiter.failures.assertAllowed(request.ip);
      const deferred = request.routeOptions.config.deferCredentialCheck ? deferrable(deps, request, knownApiTokens) : null;
      if (deferred) {
        request.ctx.deferredCredential = deferred;
        request.ctx.credentialKey = deferred.kind === 'jwt' ? `user:${deferred.userId}` : `api_token:${deferred.hash}`;
        return;
      }
      let principal = await authenticate(deps, request);
      if (principal.kind === 'api_token') {
        const hash = hashToken(bearerToken(request) ?? '');
        knownApiTokens.add(hash, Date.now());
        request.ctx.credentialKey = `api_token:${hash}`;
      } else {
        // A user's sessions and PATs share one budget (the caller's, before any impersonation).
        request.ctx.credentialKey = `user:${principal.userId}`;
      }
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
    authenticationFailed: (request) => {
      // A guess: credentials were presented (a bearer value, a session cookie, a password), not merely missing.
      const presented = request.headers.authorization !== undefined || Boolean(request.cookies?.[SESSION_COOKIE]) || request.routeOptions.config.signIn === true;
      if (presented) deps.rateLimiter.failures.record(request.ip);
    },
  };
}

/** A session JWT's database-free part: its verified claims, or 401. */
function sessionCredential(deps: Pick<IdentityDeps, 'sessionTokens'>, token: string): DeferredCredential {
  const claims = deps.sessionTokens.verify(token);
  if (!claims) throw new AppError('UNAUTHENTICATED', { message: 'Invalid or expired session token' });
  return { kind: 'jwt', sessionId: claims.sid, userId: claims.sub, organizationId: claims.org };
}

/** The `caller` CTE's own columns. */
export const CALLER_COLUMNS = sql.raw('caller_active, caller_role, caller_user_id, caller_system_admin, caller_organization_id, caller_credential_id');

/** `callerCheck`'s source for one credential, from the placeholders `callerValues` fills. */
const CALLER_PARAMS = {
  jwt: sql`SELECT ${sql.placeholder('org')}::text AS org, ${sql.placeholder('sid')}::text AS sid, ${sql.placeholder('usr')}::text AS usr`,
  api_token: sql`SELECT ${sql.placeholder('hash')}::text AS hash`,
} as const;

/**
 * Records the use of the API tokens in `q`, at most once a minute each, and only where no
 * other transaction holds the token's row (a revocation, another statement recording a
 * use): a best-effort record never waits, so it cannot stall the reads sharing its
 * statement, nor deadlock against another batch.
 */
const TOUCH_API_TOKEN = sql`, touch AS (
          UPDATE api_tokens SET last_used_at = now()
          WHERE (organization_id, id) IN (
            SELECT organization_id, id FROM api_tokens
            WHERE token_hash IN (SELECT hash FROM q) AND revoked_at IS NULL
              AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
            FOR UPDATE SKIP LOCKED)
          RETURNING 1
        )`;

/** The usual path: a credential's `callerCheck` as a statement of its own. */
const CALLER_CHECK = {
  jwt: new HotStatement<CallerColumns>(sql`WITH ${callerCheck('jwt', CALLER_PARAMS.jwt)} SELECT ${CALLER_COLUMNS} FROM caller`),
  api_token: new HotStatement<CallerColumns>(sql`WITH ${callerCheck('api_token', CALLER_PARAMS.api_token)} SELECT ${CALLER_COLUMNS} FROM caller`),
};

async function checkCredential(db: Db, credential: DeferredCredential, viaCookie = false): Promise<Principal> {
  const [row] = await CALLER_CHECK[credential.kind].rows(db, callerValues(credential));
  return principalFromCaller(credential, row, viaCookie);
}

/** The session JWT's caller, or 401; a removed member gets 403 at once. */
export function principalFromSessionToken(deps: Pick<IdentityDeps, 'db' | 'sessionTokens'>, token: string, viaCookie: boolean): Promise<Principal> {
  return checkCredential(deps.db, sessionCredential(deps, token), viaCookie);
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

/**
 * For public routes that accept credentials without requiring them (the OAuth
 * callback): the caller when valid credentials were sent, null when none or invalid ones
 * were. Anything else (the database is gone) is not "anonymous": it throws.
 */
export async function authenticateOptional(deps: Pick<IdentityDeps, 'db' | 'sessionTokens'>, request: FastifyRequest): Promise<Principal | null> {
  if (request.headers.authorization === undefined && !request.cookies[SESSION_COOKIE]) return null;
  try {
    return await authenticate(deps, request);
  } catch (error) {
    if (error instanceof AppError && (error.code === 'UNAUTHENTICATED' || error.code === 'FORBIDDEN' || error.code === 'INVALID_INPUT')) return null;
    throw error;
  }
}

/** The bearer token of the Authorization header; null without one, 401 when malformed. */
function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (header === undefined) return null;
  const match = /^Bearer +([^\s]+) *$/i.exec(header);
  if (!match?.[1]) throw new AppError('UNAUTHENTICATED', { message: 'Authorization must be "Bearer <token>"' });
  return match[1];
}

/** How often an API token's use is recorded (the SQL's own condition says the same). */
const TOUCH_INTERVAL_MS = 60_000;

/**
 * Hashes of API tokens this process has seen pass the usual check (the most recent
 * 10,000). Only those are deferred: the rate limiter counts a deferred token by its hash
 * before the database has seen it, and made-up tokens must not get counters of their own
 * (they would also push real ones out of the limiter's store).
 */
class KnownTokens {
  /** Hash → when this process last had the token's use recorded (ms). */
  private readonly touched = new Map<string, number>();

  /** A token that passed the usual check, which also recorded its use. */
  add(hash: string, now: number): void {
    remember(this.touched, hash, now, 10_000);
  }

  /**
   * The deferred credential for a known token, or null. Its use is recorded again (by the
   * route's statement) only once the last record is a minute old, as the usual check does;
   * until then the statement leaves the token's row alone, sparing it an UPDATE per read.
   */
  deferred(hash: string, now: number): DeferredCredential | null {
    const last = this.touched.get(hash);
    if (last === undefined) return null;
    const touch = now - last >= TOUCH_INTERVAL_MS;
    if (touch) this.touched.set(hash, now);
    return { kind: 'api_token', hash, touch };
  }
}

/**
 * The credential's database-free part, for a route that checks the rest itself: a
 * session JWT's signature and claims, or the hash of an API token seen valid before. Null
 * (take the usual path) for cookies, PATs, API tokens not seen yet, and requests naming
 * an organization or a user to impersonate.
 */
function deferrable(deps: Pick<IdentityDeps, 'sessionTokens'>, request: FastifyRequest, knownApiTokens: KnownTokens): DeferredCredential | null {
  if (request.headers['x-organization-id'] !== undefined || request.ctx.impersonateUserId !== null) return null;
  const token = bearerToken(request);
  if (token === null || token.startsWith(PAT_PREFIX)) return null;
  if (token.startsWith(API_TOKEN_PREFIX)) {
    return knownApiTokens.deferred(hashToken(token), Date.now());
  }
  return sessionCredential(deps, token);
}

/**
 * Credential checks as CTEs: `q` is `source` — one row per credential, with the columns
 * org, sid and usr (the session JWT's organization, session and user) or hash (the API
 * token's), and any others the statement needs — and `caller` is each row of `q` with
 * `CALLER_COLUMNS` added, null when the session or token does not exist. Each lookup is
 * a lateral `LIMIT 1`, so it stays an index probe per row however many rows `q` has. An
 * API token's use is recorded as on the usual path, unless `touch` is false.
 */
export function callerCheck(kind: DeferredCredential['kind'], source: SQL, touch = true): SQL {
  const lookup =
    kind === 'jwt'
      ? sql`SELECT (s.revoked_at IS NULL AND s.expires_at > now()) AS caller_active, m.role::text AS caller_role, u.id AS caller_user_id,
                   u.system_admin AS caller_system_admin, q.org AS caller_organization_id, s.id AS caller_credential_id
            FROM sessions s
            JOIN users u ON u.id = s.user_id
            LEFT JOIN memberships m ON m.organization_id = q.org AND m.user_id = s.user_id
            WHERE s.id = q.sid AND s.user_id = q.usr`
      : sql`SELECT (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())) AS caller_active, 'admin'::text AS caller_role,
                   NULL::text AS caller_user_id, false AS caller_system_admin, organization_id AS caller_organization_id, id AS caller_credential_id
            FROM api_tokens WHERE token_hash = q.hash`;
  return sql`q AS (${source}), caller AS (SELECT q.*, c.* FROM q LEFT JOIN LATERAL (${lookup} LIMIT 1) c ON true)${kind === 'api_token' && touch ? TOUCH_API_TOKEN : sql``}`;
}

/** A credential as `callerCheck` reads it: the placeholders of `CALLER_PARAMS`, or a row of a batch's `q`. */
export function callerValues(credential: DeferredCredential): { org: string; sid: string; usr: string } | { hash: string } {
  return credential.kind === 'jwt' ? { org: credential.organizationId, sid: credential.sessionId, usr: credential.userId } : { hash: credential.hash };
}

/** The `caller` CTE's columns as a statement returns them. */
export interface CallerColumns {
  caller_active: boolean | null;
  caller_role: Role | null;
  caller_user_id: string | null;
  caller_system_admin: boolean | null;
  caller_organization_id: string | null;
  caller_credential_id: string | null;
}

/** The principal a `callerCheck` row establishes, with the usual path's 401 and 403. */
export function principalFromCaller(credential: DeferredCredential, row: CallerColumns | undefined, viaCookie = false): Principal {
  if (!row?.caller_active || !row.caller_organization_id || !row.caller_credential_id) {
    throw new AppError('UNAUTHENTICATED', { message: credential.kind === 'jwt' ? 'The session has ended; sign in again' : 'Invalid, expired or revoked token' });
  }
  if (!row.caller_role) throw new AppError('FORBIDDEN', { message: 'You are no longer a member of this organization' });
  return {
    kind: credential.kind,
    userId: row.caller_user_id,
    organizationId: row.caller_organization_id,
    role: row.caller_role,
    credentialId: row.caller_credential_id,
    systemAdmin: row.caller_system_admin === true,
    viaCookie,
  };
}

async function authenticate(deps: Pick<IdentityDeps, 'db' | 'sessionTokens'>, request: FastifyRequest): Promise<Principal> {
  const token = bearerToken(request);
  // An Authorization header, even an invalid one, never falls back to the cookie.
  if (token !== null) {
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

const PAT_CHECK = new HotStatement<PatRow>(
  sql`WITH t AS (
        SELECT p.id, p.user_id, p.organization_ids, u.system_admin,
               (p.revoked_at IS NULL AND (p.expires_at IS NULL OR p.expires_at > now())) AS active,
               COALESCE(${sql.placeholder('wanted')}::text, p.organization_ids[1]) AS organization_id
        FROM personal_access_tokens p JOIN users u ON u.id = p.user_id
        WHERE p.token_hash = ${sql.placeholder('hash')}
      ), touch AS (
        UPDATE personal_access_tokens SET last_used_at = now()
        WHERE token_hash = ${sql.placeholder('hash')} AND revoked_at IS NULL
          AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
        RETURNING 1
      )
      SELECT t.*, m.role FROM t
      LEFT JOIN memberships m ON m.organization_id = t.organization_id AND m.user_id = t.user_id`,
);

async function personalAccessToken(db: Db, request: FastifyRequest, token: string): Promise<Principal> {
  const [row] = await PAT_CHECK.rows(db, { wanted: organizationHeader(request), hash: hashToken(token) });
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
  const principal = await checkCredential(db, { kind: 'api_token', hash: hashToken(token), touch: true });
  assertOrganizationHeader(request, principal.organizationId);
  return principal;
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
