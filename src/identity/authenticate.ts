/**
 * From a request's credentials to its caller (docs/contract.md §3): the `Authorization`
 * header (a PAT, an API token, a service token, an agent capability or a session JWT, told
 * apart by prefix), else the `session` cookie. The SQL checks are caller-check.ts,
 * service-tokens.ts and capabilities.ts; the pipeline steps, steps.ts.
 */
import type {} from '@fastify/cookie';
import type { FastifyRequest } from 'fastify';
import type { Db } from '../db/client.ts';
import type { Principal } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import { remember } from '../lib/bounded.ts';
import { checkCredential, PAT_CHECK, principalFromCaller } from './caller-check.ts';
import { checkCapability } from './capabilities.ts';
import { CREDENTIAL_KINDS, type DeferredCredential, KIND, kindOfToken, type PrefixedKind } from './credential-kinds.ts';
import { hashToken, type SessionTokens } from './credentials.ts';
import { enterOrganization } from './enter.ts';
import { TOKEN_EXCHANGE_RIGHTS } from './service-token-rights.ts';
import { checkServiceToken, type KnownServiceTokens } from './service-tokens.ts';

/** The HttpOnly cookie holding the session JWT; used only when no `Authorization` header is sent. */
export const SESSION_COOKIE = 'session';

/** What checking a credential needs: the root handle (checks never join the request's transaction) and the JWT keys. */
export interface CredentialDeps {
  db: Db;
  sessionTokens: SessionTokens;
}

/** Where a bearer token is presented, as its kind's check reads it. */
export interface Presented {
  /** The organization it names (`X-Organization-ID`, or the token exchange's `organization`): read only when the check needs it, so a bad credential is a 401 before a bad header is a 400. */
  wanted: () => string | null;
  method: string;
  /** The route's pattern (`/v1/integrations/:provider/token`). */
  route: string | undefined;
  requestId: string;
  /** The request impersonates someone: impersonation reads the organization header itself. */
  impersonating: boolean;
  /** `exchange`: the subject of a token exchange (docs/contract.md §9), which mints for the organization named and audits the minting itself. */
  purpose: 'request' | 'exchange';
}

/** How a bearer token of each kind with a prefix is checked: one function per row of credential-kinds.ts, so the compiler asks for the check of a new kind. */
const TOKEN_CHECKS: { [K in PrefixedKind]: (db: Db, token: string, at: Presented) => Promise<Principal> } = {
  pat: (db, token, at) => personalAccessToken(db, hashToken(token), at.wanted()),
  api_token: async (db, token, at) => boundTo(at, await checkCredential(db, { kind: KIND.api_token, hash: hashToken(token), touch: true })),
  // Acts in whichever organization is named: there is no binding to check it against.
  service_token: (db, token, at) =>
    checkServiceToken(db, { token, wanted: at.wanted(), method: at.method, route: at.route, requestId: at.requestId, ...(at.purpose === 'exchange' ? { rights: TOKEN_EXCHANGE_RIGHTS } : {}) }),
  capability: async (db, token, at) => boundTo(at, await checkCapability(db, { token, method: at.method, route: at.route, requestId: at.requestId })),
};

/**
 * The principal of a bearer token with a prefix, checked by its kind's check: 401/403 (and a
 * service token's 400/404) as `AppError`s; null when no kind has its prefix (a session JWT).
 * Authentication and the token exchange's subject both ask here.
 */
export function checkToken(db: Db, token: string, at: Presented): Promise<Principal> | null {
  const kind = kindOfToken(token);
  return kind === null ? null : TOKEN_CHECKS[kind](db, token, at);
}

/** The caller of `request`, or 401/403; an invalid header never falls back to the cookie. */
export async function authenticate(deps: CredentialDeps, request: FastifyRequest): Promise<Principal> {
  const token = bearerToken(request);
  const checked =
    token === null
      ? null
      : checkToken(deps.db, token, {
          wanted: () => organizationHeader(request),
          method: request.method,
          route: request.routeOptions.url,
          requestId: request.id,
          impersonating: Boolean(request.ctx.impersonateUserId),
          purpose: 'request',
        });
  if (checked !== null) return checked;
  const credential = sessionCredential(deps.sessionTokens, token ?? sessionCookie(request));
  const principal = await checkCredential(deps.db, credential, token === null);
  const wanted = organizationHeader(request);
  // A system administrator's own session enters any organization, to read there (docs/contract.md §11).
  if (wanted && wanted !== principal.organizationId && principal.systemAdmin && !request.ctx.impersonateUserId) {
    return enterOrganization(deps.db, request, principal, wanted);
  }
  assertOrganizationHeader(request, wanted, principal.organizationId);
  return principal;
}

/** `principal`, if acting where `at` names (a credential bound to one organization cannot pick another); else 403. */
function boundTo(at: Presented, principal: Principal): Principal {
  const wanted = at.wanted();
  if (wanted && wanted !== principal.organizationId && !at.impersonating) {
    throw new AppError('FORBIDDEN', { message: 'This credential is bound to another organization' });
  }
  return principal;
}

/**
 * For public routes that accept credentials without requiring them (the OAuth
 * callback): the caller when valid credentials were sent, null when none or invalid ones
 * were. Anything else (the database is gone) is not "anonymous": it throws.
 */
export async function authenticateOptional(deps: CredentialDeps, request: FastifyRequest): Promise<Principal | null> {
  if (request.headers.authorization === undefined && !request.cookies[SESSION_COOKIE]) return null;
  try {
    return await authenticate(deps, request);
  } catch (error) {
    if (error instanceof AppError && (error.code === 'UNAUTHENTICATED' || error.code === 'FORBIDDEN' || error.code === 'INVALID_INPUT')) return null;
    throw error;
  }
}

/** The bearer token of the Authorization header; null without one, 401 when malformed. */
export function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (header === undefined) return null;
  const match = /^Bearer +([^\s]+) *$/i.exec(header);
  if (!match?.[1]) throw new AppError('UNAUTHENTICATED', { message: 'Authorization must be "Bearer <token>"' });
  return match[1];
}

function sessionCookie(request: FastifyRequest): string {
  const cookie = request.cookies[SESSION_COOKIE];
  if (!cookie) throw new AppError('UNAUTHENTICATED');
  return cookie;
}

/** A session JWT's database-free part: its verified claims, or 401. */
function sessionCredential(sessionTokens: SessionTokens, token: string): Extract<DeferredCredential, { kind: 'jwt' }> {
  const claims = sessionTokens.verify(token);
  if (!claims) throw new AppError('UNAUTHENTICATED', { message: 'Invalid or expired session token' });
  return { kind: 'jwt', sessionId: claims.sid, userId: claims.sub, organizationId: claims.org };
}

async function personalAccessToken(db: Db, hash: string, wanted: string | null): Promise<Principal> {
  const [row] = await PAT_CHECK.rows(db, { wanted, hash });
  if (row?.caller_active && !row.organization_ids.includes(row.caller_organization_id ?? '')) {
    throw new AppError('FORBIDDEN', { message: 'This token is not valid for that organization' });
  }
  return principalFromCaller({ kind: KIND.pat }, row);
}

/** How often an API token's use is recorded (the SQL's own condition says the same). */
const TOUCH_INTERVAL_MS = 60_000;

/**
 * Hashes of API tokens this process has seen pass the usual check (the most recent
 * 10,000). Only those are deferred: the rate limiter counts a deferred token by its hash
 * before the database has seen it, and made-up tokens must not get counters of their own
 * (they would also push real ones out of the limiter's store).
 */
export class KnownTokens {
  /** Hash → the token's organization, and when this process last had its use recorded (ms). */
  private readonly touched = new Map<string, { organizationId: string; at: number }>();

  /** A token that passed the usual check, which also recorded its use. */
  add(hash: string, organizationId: string, now: number): void {
    remember(this.touched, hash, { organizationId, at: now }, 10_000);
  }

  /**
   * The deferred credential for a known token, or null. Its use is recorded again (by the
   * route's statement) only once the last record is a minute old, as the usual check does;
   * until then the statement leaves the token's row alone, sparing it an UPDATE per read.
   */
  deferred(hash: string, now: number): Deferred | null {
    const known = this.touched.get(hash);
    if (known === undefined) return null;
    const touch = now - known.at >= TOUCH_INTERVAL_MS;
    if (touch) known.at = now;
    return { credential: { kind: KIND.api_token, hash, touch }, organizationId: known.organizationId };
  }
}

/** A deferred credential and the organization it acts in (a token's, as last checked; a JWT's claim). */
export interface Deferred {
  credential: DeferredCredential;
  organizationId: string;
}

/**
 * The credential's database-free part, for a route that checks the rest itself: a
 * session JWT's signature and claims, the hash of an API token seen valid before, or a
 * service token seen acting in the organization `X-Organization-ID` names. Null (take the
 * usual path) for cookies, PATs, capabilities, tokens not seen yet, requests impersonating,
 * and session JWTs and API tokens naming an organization.
 */
export function deferrable(sessionTokens: SessionTokens, request: FastifyRequest, knownApiTokens: KnownTokens, knownServiceTokens: KnownServiceTokens): Deferred | null {
  if (request.ctx.impersonateUserId !== null) return null;
  const token = bearerToken(request);
  const kind = token === null ? null : kindOfToken(token);
  if (token !== null && kind === KIND.service_token) {
    // Service tokens act wherever the header says: the read's statement checks that organization (400 without one: the usual path).
    const wanted = organizationHeader(request);
    const credential = wanted === null ? null : knownServiceTokens.deferred(hashToken(token), wanted, request.method, request.routeOptions.url, Date.now());
    return credential === null ? null : { credential, organizationId: credential.organizationId };
  }
  if (request.headers['x-organization-id'] !== undefined) return null;
  if (token === null || (kind !== null && CREDENTIAL_KINDS[kind].deferred === null)) return null;
  if (kind === KIND.api_token) return knownApiTokens.deferred(hashToken(token), Date.now());
  const credential = sessionCredential(sessionTokens, token);
  return { credential, organizationId: credential.organizationId };
}

/** `X-Organization-ID`: null when absent, 400 when it cannot be an organization id. */
export function organizationHeader(request: FastifyRequest): string | null {
  const header = request.headers['x-organization-id'];
  if (header === undefined) return null;
  if (typeof header !== 'string' || !/^[0-9A-Za-z_-]{1,64}$/.test(header)) {
    throw new AppError('INVALID_INPUT', { details: [{ path: 'headers.x-organization-id', message: 'must be an organization id' }] });
  }
  return header;
}

function assertOrganizationHeader(request: FastifyRequest, wanted: string | null, organizationId: string): void {
  // Impersonation reads the header itself; otherwise a credential bound to one organization cannot pick another.
  if (wanted && wanted !== organizationId && !request.ctx.impersonateUserId) {
    throw new AppError('FORBIDDEN', { message: 'This credential is bound to another organization' });
  }
}
