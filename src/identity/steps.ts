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
import type { CredentialKind, Principal } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import type { PipelineSlots } from '../http/pipeline.ts';
import type { RateLimiter } from '../http/rate-limit.ts';
import { authenticate, bearerToken, deferrable, KnownTokens, organizationHeader, SESSION_COOKIE } from './authenticate.ts';
import { type CallerColumns, principalFromCaller } from './caller-check.ts';
import { CREDENTIAL_KINDS, type DeferredCredential, KIND, type RateCaller } from './credential-kinds.ts';
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
    /** What the rate limiter counts against: the rate key of the credential's kind (credential-kinds.ts); a capability, its subject's. */
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
        request.ctx.credentialKey = rateKey(credential.kind, {
          userId: 'userId' in credential ? credential.userId : null,
          credentialId: 'credentialId' in credential ? credential.credentialId : '',
          ...('hash' in credential ? { hash: credential.hash } : {}),
        });
        request.ctx.organizationKey = deferred.organizationId;
        return;
      }
      let principal = await authenticate(deps, request);
      // A token the deferred path takes (one that records its use) is remembered by its hash, which is also an API token's rate key.
      const hash = CREDENTIAL_KINDS[principal.kind].deferred?.touch ? hashToken(bearerToken(request) ?? '') : '';
      // A capability counts against its subject (docs/contract.md §4): minting more never buys capacity.
      request.ctx.credentialKey = principal.capability?.rateKey ?? rateKey(principal.kind, { userId: principal.userId, credentialId: principal.credentialId, hash });
      // Remembered for the deferred path (each deferrable token kind keeps its own); a service token acting in no organization never is.
      if (principal.kind === KIND.api_token) knownApiTokens.add(hash, principal.organizationId, Date.now());
      else if (principal.kind === KIND.service_token && principal.organizationId !== '') knownServiceTokens.add(hash, principal.credentialId, principal.organizationId, Date.now());
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

/** The rate limiter's key of a caller of `kind`: its row's (a capability's is its subject's, `CapabilityGrant.rateKey`). */
function rateKey(kind: CredentialKind, caller: RateCaller): string {
  const key = CREDENTIAL_KINDS[kind].rateKey;
  return key ? key(caller) : `user:${caller.userId}`;
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
