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
import { checkCredential, type DeferredCredential, PAT_CHECK, principalFromCaller } from './caller-check.ts';
import { checkCapability } from './capabilities.ts';
import { API_TOKEN_PREFIX, CAPABILITY_PREFIX, hashToken, PAT_PREFIX, SERVICE_TOKEN_PREFIX, type SessionTokens } from './credentials.ts';
import { enterOrganization } from './enter.ts';
import { checkServiceToken, type KnownServiceTokens } from './service-tokens.ts';

/** The HttpOnly cookie holding the session JWT; used only when no `Authorization` header is sent. */
export const SESSION_COOKIE = 'session';

/** What checking a credential needs: the root handle (checks never join the request's transaction) and the JWT keys. */
export interface CredentialDeps {
  db: Db;
  sessionTokens: SessionTokens;
}

/** The caller of `request`, or 401/403; an invalid header never falls back to the cookie. */
export async function authenticate(deps: CredentialDeps, request: FastifyRequest): Promise<Principal> {
  const token = bearerToken(request);
  if (token?.startsWith(PAT_PREFIX)) return personalAccessToken(deps.db, request, token);
  if (token?.startsWith(SERVICE_TOKEN_PREFIX)) {
    // Acts in whichever organization the header names: there is no binding to check it against.
    return checkServiceToken(deps.db, { token, wanted: organizationHeader(request), method: request.method, route: request.routeOptions.url, requestId: request.id });
  }
  if (token?.startsWith(CAPABILITY_PREFIX)) {
    const principal = await checkCapability(deps.db, { token, method: request.method, route: request.routeOptions.url, requestId: request.id });
    assertOrganizationHeader(request, organizationHeader(request), principal.organizationId);
    return principal;
  }
  const credential = token?.startsWith(API_TOKEN_PREFIX)
    ? ({ kind: 'api_token', hash: hashToken(token), touch: true } as const)
    : sessionCredential(deps.sessionTokens, token ?? sessionCookie(request));
  const principal = await checkCredential(deps.db, credential, token === null);
  const wanted = organizationHeader(request);
  // A system administrator's own session enters any organization, to read there (docs/contract.md §11).
  if (wanted && wanted !== principal.organizationId && principal.kind === 'jwt' && principal.systemAdmin && !request.ctx.impersonateUserId) {
    return enterOrganization(deps.db, request, principal, wanted);
  }
  assertOrganizationHeader(request, wanted, principal.organizationId);
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

async function personalAccessToken(db: Db, request: FastifyRequest, token: string): Promise<Principal> {
  const [row] = await PAT_CHECK.rows(db, { wanted: organizationHeader(request), hash: hashToken(token) });
  if (row?.caller_active && !row.organization_ids.includes(row.caller_organization_id ?? '')) {
    throw new AppError('FORBIDDEN', { message: 'This token is not valid for that organization' });
  }
  return principalFromCaller({ kind: 'pat' }, row);
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
    return { credential: { kind: 'api_token', hash, touch }, organizationId: known.organizationId };
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
  if (token?.startsWith(SERVICE_TOKEN_PREFIX)) {
    // Service tokens act wherever the header says: the read's statement checks that organization (400 without one: the usual path).
    const wanted = organizationHeader(request);
    const credential = wanted === null ? null : knownServiceTokens.deferred(hashToken(token), wanted, request.method, request.routeOptions.url, Date.now());
    return credential === null ? null : { credential, organizationId: credential.organizationId };
  }
  if (request.headers['x-organization-id'] !== undefined) return null;
  if (token === null || token.startsWith(PAT_PREFIX) || token.startsWith(CAPABILITY_PREFIX)) return null;
  if (token.startsWith(API_TOKEN_PREFIX)) return knownApiTokens.deferred(hashToken(token), Date.now());
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
