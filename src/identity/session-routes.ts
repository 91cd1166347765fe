/** Routes that issue, show or end session tokens (docs/contract.md §3); identityRoutes (routes.ts) registers them in order. */
import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { recordAudit } from '../audit/audit.ts';
import { sessions, users } from '../db/schema.ts';
import { AppError } from '../ground/errors.ts';
import type { TypedFastify } from '../http/typed.ts';
import type { UnitOfWork } from '../ground/work.ts';
import { unitOfWork } from '../http/unit-of-work.ts';
import { newId as ulid } from '../lib/ids.ts';
import { createOrganization, membershipOf, normalizeEmail, type OrganizationWithRole, organizationsOf } from '../organizations/organizations.ts';
import type { Services } from '../services.ts';
import { SESSION_COOKIE } from './authenticate.ts';
import { CSRF_COOKIE } from './csrf.ts';
import { SessionResponse } from './schemas.ts';
import { type SessionBody, type SessionGrant, sessionBody, switchOrganization } from './sessions.ts';
import { findUserByEmail, setDefaultOrganization, type UserRow } from './users.ts';

const INVALID_LOGIN = 'Invalid e-mail or password';

/** Attributes the session and CSRF cookies share. */
function cookieBase(services: Services) {
  return { path: '/', sameSite: 'lax' as const, secure: services.config.isProduction };
}

/** The grant's session token, in the answer's body and in the `session` cookie (with the session's CSRF token). */
export function issueSession(services: Services, reply: FastifyReply, grant: SessionGrant): Omit<SessionBody, 'sessionId' | 'sessionExpiresAt'> {
  const { sessionId, sessionExpiresAt, ...body } = sessionBody(services.sessionTokens, grant);
  reply.header('cache-control', 'no-store');
  const maxAge = Math.max(0, Math.floor((sessionExpiresAt.getTime() - Date.now()) / 1000));
  reply.setCookie(SESSION_COOKIE, body.accessToken, { ...cookieBase(services), httpOnly: true, maxAge });
  reply.setCookie(CSRF_COOKIE, services.sessionTokens.csrfFor(`session:${sessionId}`), { ...cookieBase(services), httpOnly: false, maxAge });
  return body;
}

/** `POST /v1/login`: a new session, bound to the organization `loginOrganization` picks. */
export function login(app: TypedFastify, services: Services): void {
  app.post(
    '/v1/login',
    {
      config: { auth: 'public', signIn: true, errors: ['UNAUTHENTICATED'] },
      schema: {
        summary: 'Sign in with e-mail and password',
        tags: ['identity'],
        body: Type.Object({ email: Type.String({ minLength: 1, maxLength: 254 }), password: Type.String({ minLength: 1, maxLength: 256 }) }, { additionalProperties: false }),
        response: { 200: SessionResponse },
      },
    },
    async (request, reply) => issueSession(services, reply, await passwordSignIn(services, request, reply, request.body)),
  );
}

/**
 * A sign-in by e-mail and password under §3's and §4's rules — an address over its limit of
 * failures refused before any hashing, the per-e-mail limit, the same answer and work whether or
 * not the e-mail exists — opening a session bound to the login organization, in the request's
 * transaction. 401 `UNAUTHENTICATED` on wrong credentials (a route with `signIn` counts it as a
 * failure of the address; another caller records it), 429 over a limit. `POST /v1/login` and the
 * MCP consent page (src/agents/consent-page.ts) both sign in here; the caller issues the cookie.
 */
export async function passwordSignIn(services: Services, request: FastifyRequest, reply: FastifyReply, body: { email: string; password: string }): Promise<SessionGrant> {
  const { config, passwords, rateLimiter } = services;
  // An address over its limit of failed sign-ins is refused before the password is hashed.
  rateLimiter.failures.assertAllowed(request.ip);
  await rateLimiter.checkEmail(request, reply, normalizeEmail(body.email));
  const user = await findUserByEmail(services.db, body.email);
  // Unknown e-mails cost the same scrypt work and get the same answer.
  const valid = user ? await passwords.verify(body.password, user.passwordHash, request.ip) : await passwords.verifyDummy(body.password, request.ip);
  if (!user || !valid) throw new AppError('UNAUTHENTICATED', { message: INVALID_LOGIN });
  // A hash made at another cost would make this user's logins time differently from unknown e-mails.
  const newHash = passwords.needsRehash(user.passwordHash) ? await passwords.hash(body.password, request.ip) : null;
  const work = await unitOfWork(request, services, user.id);
  if (newHash) await work.db.update(users).set({ passwordHash: newHash }).where(eq(users.id, user.id));
  const organization = await loginOrganization(work, user);
  const sessionId = ulid();
  const expiresAt = new Date(Date.now() + config.auth.sessionTtl * 1000);
  await work.db.insert(sessions).values({ id: sessionId, userId: user.id, expiresAt });
  await recordAudit(work.db, work.actor, { organizationId: organization.id, action: 'session.created', targetType: 'session', targetId: sessionId });
  return { user, organizationId: organization.id, sessionId, expiresAt };
}

/** `POST /v1/logout`: ends the session, every token of it. */
export function logout(app: TypedFastify, services: Services): void {
  app.post(
    '/v1/logout',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'End the session (every token of it)',
        tags: ['identity'],
        response: { 200: Type.Object({ success: Type.Literal(true), message: Type.String() }) },
      },
    },
    async (request, reply) => {
      const principal = request.ctx.principal;
      if (principal?.kind !== 'jwt') throw new AppError('FORBIDDEN', { message: 'Only sessions sign out; revoke tokens instead' });
      const work = await unitOfWork(request, services);
      await work.db.update(sessions).set({ revokedAt: new Date() }).where(eq(sessions.id, principal.credentialId));
      await recordAudit(work.db, work.actor, {
        organizationId: principal.organizationId,
        action: 'session.revoked',
        targetType: 'session',
        targetId: principal.credentialId,
      });
      reply.clearCookie(SESSION_COOKIE, { path: '/' });
      reply.clearCookie(CSRF_COOKIE, { path: '/' });
      return { success: true as const, message: 'Signed out' };
    },
  );
}

/** `GET /v1/csrf`: the CSRF token bound to the session cookie, or an anonymous one. */
export function csrfToken(app: TypedFastify, services: Services): void {
  const { sessionTokens } = services;
  app.get(
    '/v1/csrf',
    {
      config: { auth: 'public', errors: [] },
      schema: {
        summary: 'The CSRF token for cookie sessions (also set as the csrf_token cookie)',
        tags: ['identity'],
        response: { 200: Type.Object({ success: Type.Literal(true), csrf: Type.String() }) },
      },
    },
    async (request, reply) => {
      const cookie = request.cookies[SESSION_COOKIE];
      const claims = cookie ? sessionTokens.verify(cookie) : null;
      const csrf = sessionTokens.csrfFor(claims ? `session:${claims.sid}` : `anonymous:${randomBytes(16).toString('base64url')}`);
      reply.setCookie(CSRF_COOKIE, csrf, { ...cookieBase(services), httpOnly: false });
      return { success: true as const, csrf };
    },
  );
}

/** `POST /v1/account/switch`: a new token of the same session, bound to another organization. */
export function switchTo(app: TypedFastify, services: Services): void {
  app.post(
    '/v1/account/switch',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'A new token of the same session, bound to another organization',
        tags: ['identity'],
        body: Type.Object({ organizationId: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false }),
        response: { 200: SessionResponse },
      },
    },
    async (request, reply) => {
      const grant = await switchOrganization(await unitOfWork(request, services), { organizationId: request.body.organizationId });
      return issueSession(services, reply, grant);
    },
  );
}

/** The organization a login binds to: the default if still a member, else the first, else a new personal one. */
async function loginOrganization(work: UnitOfWork, user: UserRow): Promise<OrganizationWithRole> {
  if (user.defaultOrganizationId) {
    const membership = await membershipOf(work.db, user.defaultOrganizationId, user.id);
    if (membership) return membership;
  }
  const [first] = await organizationsOf(work.db, user.id);
  if (first) return first;
  const organization = await createOrganization(work, { name: `${user.name || user.email.split('@')[0]}'s organization`.slice(0, 100), ownerUserId: user.id });
  await setDefaultOrganization(work.db, user.id, organization.id);
  return { ...organization, role: 'owner' };
}
