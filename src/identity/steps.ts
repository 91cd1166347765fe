/**
 * The identity feature's pipeline steps (docs/contract.md §4): 6 impersonation, 7
 * authentication, 8 system-admin context, 9 CSRF and rate limiting, and the count of
 * failed authentications the error handler reports.
 */
import type {} from '@fastify/cookie';
import type { FastifyRequest } from 'fastify';
import { recordAudit } from '../audit/audit.ts';
import type { Config } from '../config/load.ts';
import { type Db, queryRows, sql } from '../db/client.ts';
import type { Principal } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import type { PipelineSlots } from '../http/pipeline.ts';
import { type RateLimiter, SERVICE_TOKEN_KEY } from '../http/rate-limit.ts';
import { authenticate, bearerToken, deferrable, KnownTokens, organizationHeader, SESSION_COOKIE } from './authenticate.ts';
import { type CallerColumns, type DeferredCredential, principalFromCaller } from './caller-check.ts';
import { hashToken, type SessionTokens } from './credentials.ts';
import { csrfCheck } from './csrf.ts';
import { KnownServiceTokens } from './service-tokens.ts';

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
    /** What the rate limiter counts against: the user (`user:<id>`), the API token's hash, or the service token (`SERVICE_TOKEN_KEY`); a capability, its subject's. */
    credentialKey?: string;
    /** The organization the caller acts in: every credential acting there shares one more budget. */
    organizationKey?: string;
  }
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route folds the session/API-token/service-token check into its own statement,
     * saving a round trip on a hot path. Only header credentials without X-Impersonate-User
     * are deferred, and without X-Organization-ID but for service tokens (which need it);
     * anything else takes the usual path.
     */
    deferCredentialCheck?: boolean;
    /** The route checks a password: its 401s count as failed authentications of the client IP. */
    signIn?: boolean;
  }
}

export interface IdentityDeps {
  config: Config;
  db: Db;
  sessionTokens: SessionTokens;
  rateLimiter: RateLimiter;
}

/** The pipeline's steps 6–9, filled by the identity feature. */
export function identitySlots(deps: IdentityDeps): PipelineSlots {
  const knownApiTokens = new KnownTokens();
  const knownServiceTokens = new KnownServiceTokens();
  return {
    impersonation(request) {
      // Only noted here: the decision waits until the caller is authenticated.
      const header = request.headers['x-impersonate-user'];
      if (header !== undefined) request.ctx.impersonateUserId = typeof header === 'string' ? header : '';
    },
    async authentication(request) {
      // An address over its limit of failures is refused before any lookup.
      deps.rateLimiter.failures.assertAllowed(request.ip);
      const deferred = request.routeOptions.config.deferCredentialCheck ? deferrable(deps.sessionTokens, request, knownApiTokens, knownServiceTokens) : null;
      if (deferred) {
        const credential = deferred.credential;
        request.ctx.deferredCredential = credential;
        // The same keys as the usual path's below.
        request.ctx.credentialKey =
          credential.kind === 'jwt' ? `user:${credential.userId}` : credential.kind === 'api_token' ? `api_token:${credential.hash}` : `${SERVICE_TOKEN_KEY}${credential.credentialId}`;
        request.ctx.organizationKey = deferred.organizationId;
        return;
      }
      let principal = await authenticate(deps, request);
      if (principal.kind === 'api_token') {
        const hash = hashToken(bearerToken(request) ?? '');
        knownApiTokens.add(hash, principal.organizationId, Date.now());
        request.ctx.credentialKey = `api_token:${hash}`;
      } else if (principal.capability) {
        // A capability counts against its subject (docs/contract.md §4): minting more never buys capacity.
        request.ctx.credentialKey = principal.capability.rateKey;
      } else if (principal.kind === 'service_token') {
        // Its own budget, RATE_LIMIT_SERVICE_MAX (the limiter tells it by this prefix).
        request.ctx.credentialKey = `${SERVICE_TOKEN_KEY}${principal.credentialId}`;
        if (principal.organizationId !== '') knownServiceTokens.add(hashToken(bearerToken(request) ?? ''), principal.credentialId, principal.organizationId, Date.now());
      } else {
        // A user's sessions and PATs share one budget (the caller's, before any impersonation).
        request.ctx.credentialKey = `user:${principal.userId}`;
      }
      if (request.ctx.impersonateUserId !== null) principal = await impersonate(deps.db, request, principal, request.ctx.impersonateUserId);
      request.ctx.principal = principal;
      // A service token managing organizations acts in none: only its own budget applies (decision 128).
      if (principal.organizationId !== '') request.ctx.organizationKey = principal.organizationId;
    },
    systemAdmin(request) {
      request.ctx.systemAdmin = request.ctx.principal?.systemAdmin === true;
    },
    csrf: csrfCheck(deps.config, deps.sessionTokens),
    rateLimit: (request, reply) => deps.rateLimiter.check(request, reply),
    authenticationFailed(request) {
      // A guess: credentials were presented (a bearer value, a session cookie, a password), not merely missing.
      const presented = request.headers.authorization !== undefined || Boolean(request.cookies?.[SESSION_COOKIE]) || request.routeOptions.config.signIn === true;
      if (presented) deps.rateLimiter.failures.record(request.ip);
    },
  };
}

/**
 * Impersonation is decided once the caller is known: only a system admin, only with a
 * session JWT, never onto another system admin. The target acts in its default
 * organization unless `X-Organization-ID` names another. Every impersonated request is
 * audited.
 */
async function impersonate(db: Db, request: FastifyRequest, caller: Principal, targetId: string): Promise<Principal> {
  if (!targetId || targetId.length > 64) throw new AppError('FORBIDDEN', { message: 'Invalid X-Impersonate-User header' });
  if (caller.kind !== 'jwt' || !caller.systemAdmin || !caller.userId) {
    throw new AppError('FORBIDDEN', { message: 'Only system administrators signed in with a session may impersonate' });
  }
  const wanted = organizationHeader(request);
  const [target] = await queryRows<CallerColumns>(
    db,
    sql`SELECT true AS caller_active, m.role AS caller_role, u.id AS caller_user_id, u.system_admin AS caller_system_admin,
               o.organization_id AS caller_organization_id, ${caller.credentialId}::text AS caller_credential_id
        FROM users u
        CROSS JOIN LATERAL (SELECT COALESCE(${wanted}::text,
          (SELECT organization_id FROM memberships WHERE user_id = u.id AND organization_id = u.default_organization_id),
          (SELECT organization_id FROM memberships WHERE user_id = u.id ORDER BY created_at, organization_id LIMIT 1)) AS organization_id) o
        LEFT JOIN memberships m ON m.user_id = u.id AND m.organization_id = o.organization_id
        WHERE u.id = ${targetId}`,
  );
  if (!target) throw new AppError('FORBIDDEN', { message: 'No such user to impersonate' });
  if (target.caller_system_admin) throw new AppError('FORBIDDEN', { message: 'System administrators cannot be impersonated' });
  if (!target.caller_organization_id || !target.caller_role) throw new AppError('FORBIDDEN', { message: 'That user is not a member of the organization' });
  const principal = principalFromCaller({ kind: 'jwt' }, target, { viaCookie: caller.viaCookie, impersonatorId: caller.userId });
  // Its own statement, committed at once: the audit trail of an impersonated request survives its failure.
  await recordAudit(db, { principal, requestId: request.id }, {
    organizationId: principal.organizationId,
    action: 'impersonation.request',
    targetType: 'user',
    targetId,
    detail: { method: request.method, route: request.routeOptions.url ?? null },
  });
  return principal;
}
