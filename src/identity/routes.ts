import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { recordAudit } from '../audit/audit.ts';
import { sessions, users } from '../db/schema.ts';
import { AppError } from '../http/errors.ts';
import type { TypedFastify } from '../http/typed.ts';
import { type UnitOfWork, unitOfWork } from '../http/unit-of-work.ts';
import { createOrganization, getOrganization, membershipOf, type OrganizationWithRole, organizationsOf } from '../organizations/organizations.ts';
import type { Services } from '../services.ts';
import { newId as ulid } from '../lib/ids.ts';
import { SESSION_COOKIE } from './authenticate.ts';
import { CSRF_COOKIE } from './csrf.ts';
import { requireUser } from './authorize.ts';
import { type SessionGrant, sessionBody, switchOrganization } from './sessions.ts';
import { Email, OrganizationSchema, OrganizationWithRoleSchema, Password, SessionResponse, UserSchema } from './schemas.ts';
import { findUserById, findUserByEmail, insertUser, publicUser, setDefaultOrganization, type UserRow } from './users.ts';

const INVALID_LOGIN = 'Invalid e-mail or password';

/** Registration, login, logout, CSRF and account routes (CONTRACT.md §3). */
export function identityRoutes(app: TypedFastify, services: Services): void {
  const { config, passwords, sessionTokens, rateLimiter } = services;
  const cookieBase = { path: '/', sameSite: 'lax' as const, secure: config.isProduction };

  /** The grant's session token, in the answer's body and in the `session` cookie (with the session's CSRF token). */
  function issueSession(reply: FastifyReply, grant: SessionGrant) {
    const { sessionId, sessionExpiresAt, ...body } = sessionBody(sessionTokens, grant);
    reply.header('cache-control', 'no-store');
    const maxAge = Math.max(0, Math.floor((sessionExpiresAt.getTime() - Date.now()) / 1000));
    reply.setCookie(SESSION_COOKIE, body.accessToken, { ...cookieBase, httpOnly: true, maxAge });
    reply.setCookie(CSRF_COOKIE, sessionTokens.csrfFor(`session:${sessionId}`), { ...cookieBase, httpOnly: false, maxAge });
    return body;
  }

  app.post(
    '/v1/register',
    {
      config: { auth: 'public', errors: ['CONFLICT'] },
      schema: {
        summary: 'Create a user and a personal organization',
        tags: ['identity'],
        body: Type.Object({ email: Email, password: Password, name: Type.Optional(Type.String({ maxLength: 100 })) }, { additionalProperties: false }),
        response: { 201: Type.Object({ success: Type.Literal(true), user: UserSchema, organization: OrganizationSchema }) },
      },
    },
    async (request, reply) => {
      const body = request.body;
      await rateLimiter.checkEmail(request, reply, body.email);
      // Hash before opening the transaction: never hold the database across 0.4 s of scrypt.
      const passwordHash = await passwords.hash(body.password, request.ip);
      const name = (body.name ?? '').trim();
      const user = await insertUser(await request.ctx.tx(), { email: body.email, name, passwordHash });
      const work = await unitOfWork(request, services, user.id);
      const orgName = `${name || body.email.trim().split('@')[0] || 'My'}'s organization`.slice(0, 100);
      const organization = await createOrganization(work, { name: orgName, ownerUserId: user.id });
      await setDefaultOrganization(work.db, user.id, organization.id);
      await recordAudit(work.db, work.actor, { organizationId: organization.id, action: 'user.registered', targetType: 'user', targetId: user.id });
      reply.code(201);
      return { success: true as const, user: publicUser(user), organization };
    },
  );

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
    async (request, reply) => {
      // An address over its limit of failed sign-ins is refused before the password is hashed.
      rateLimiter.failures.assertAllowed(request.ip);
      const body = request.body;
      await rateLimiter.checkEmail(request, reply, body.email);
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
      return issueSession(reply, { user, organizationId: organization.id, sessionId, expiresAt });
    },
  );

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
      reply.setCookie(CSRF_COOKIE, csrf, { ...cookieBase, httpOnly: false });
      return { success: true as const, csrf };
    },
  );

  app.get(
    '/v1/account/access',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'Who is calling, in which organization, with which role',
        tags: ['identity'],
        response: {
          200: Type.Object({
            success: Type.Literal(true),
            user: Type.Union([Type.Object({ id: Type.String(), email: Type.String(), name: Type.String(), systemAdmin: Type.Boolean() }), Type.Null()]),
            organization: OrganizationWithRoleSchema,
            organizations: Type.Array(OrganizationWithRoleSchema),
            authMethod: Type.Union([Type.Literal('jwt'), Type.Literal('pat'), Type.Literal('api_token')]),
            impersonator: Type.Optional(Type.Object({ id: Type.String(), email: Type.String() })),
          }),
        },
      },
    },
    async (request) => {
      const principal = request.ctx.principal;
      if (!principal) throw new AppError('UNAUTHENTICATED');
      const db = services.db;
      const organization = await getOrganization(db, principal.organizationId);
      if (!organization) throw new AppError('FORBIDDEN');
      const current: OrganizationWithRole = { ...organization, role: principal.role };
      const user = principal.userId ? await findUserById(db, principal.userId) : null;
      const organizations = user ? await organizationsOf(db, user.id) : [current];
      const impersonator = principal.impersonatorId ? await findUserById(db, principal.impersonatorId) : null;
      return {
        success: true as const,
        user: user ? { ...publicUser(user), systemAdmin: user.systemAdmin } : null,
        organization: current,
        organizations,
        authMethod: principal.kind,
        ...(impersonator ? { impersonator: { id: impersonator.id, email: impersonator.email } } : {}),
      };
    },
  );

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
      return issueSession(reply, grant);
    },
  );

  app.post(
    '/v1/organizations',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'Create an organization; the caller becomes its owner',
        tags: ['organizations'],
        body: Type.Object({ name: Type.String({ minLength: 1, maxLength: 1000 }) }, { additionalProperties: false }),
        response: { 201: Type.Object({ success: Type.Literal(true), organization: OrganizationSchema }) },
      },
    },
    async (request, reply) => {
      const principal = requireUser(request.ctx.principal);
      const organization = await createOrganization(await unitOfWork(request, services), { name: request.body.name, ownerUserId: principal.userId });
      reply.code(201);
      return { success: true as const, organization };
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
