import { Type } from 'typebox';
import { recordAudit } from '../audit/audit.ts';
import { AppError } from '../ground/errors.ts';
import { NameSchema } from '../ground/names.ts';
import type { TypedFastify } from '../http/typed.ts';
import { unitOfWork } from '../http/unit-of-work.ts';
import { createOrganization, getOrganization, normalizeEmail, type OrganizationWithRole, organizationsOf } from '../organizations/organizations.ts';
import type { Services } from '../services.ts';
import { DIRECT_KINDS, type DirectKind, isDirect } from './credential-kinds.ts';
import { assertMayRegister } from './registration.ts';
import { Email, OrganizationSchema, OrganizationWithRoleSchema, Password, UserSchema } from './schemas.ts';
import { csrfToken, login, logout, switchTo } from './session-routes.ts';
import { findUserById, insertUser, publicUser, setDefaultOrganization } from './users.ts';

/** `authMethod`'s values: every kind but a delegated one (a capability), which never reaches `/v1/account/access`. */
const AUTH_METHODS = DIRECT_KINDS;

/** Registration, login, logout, CSRF and account routes (docs/contract.md §3); organizations have their own (organizations/routes.ts). */
export function identityRoutes(app: TypedFastify, services: Services): void {
  register(app, services);
  login(app, services);
  logout(app, services);
  csrfToken(app, services);
  accountAccess(app, services);
  switchTo(app, services);
}

/** `POST /v1/register`: a user, and a personal organization they own. */
function register(app: TypedFastify, services: Services): void {
  const { passwords, rateLimiter } = services;
  app.post(
    '/v1/register',
    {
      config: { auth: 'public', errors: ['CONFLICT', 'FORBIDDEN'] },
      schema: {
        summary: 'Create a user and a personal organization (as REGISTRATION allows)',
        tags: ['identity'],
        body: Type.Object({ email: Email, password: Password, name: Type.Optional(NameSchema({ maxLength: 100 })) }, { additionalProperties: false }),
        response: { 201: Type.Object({ success: Type.Literal(true), user: UserSchema, organization: OrganizationSchema }) },
      },
    },
    async (request, reply) => {
      const body = request.body;
      await rateLimiter.checkEmail(request, reply, normalizeEmail(body.email));
      // Before the hash and outside the request's transaction (not open yet): a refusal costs no scrypt.
      await assertMayRegister(services.db, services.config.auth.registration, normalizeEmail(body.email));
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
}

/** `GET /v1/account/access`: who is calling, in which organization, with which role. */
function accountAccess(app: TypedFastify, services: Services): void {
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
            authMethod: Type.Unsafe<DirectKind>(Type.Union(AUTH_METHODS.map((kind) => Type.Literal(kind)))),
            impersonator: Type.Optional(Type.Object({ id: Type.String(), email: Type.String() })),
          }),
        },
      },
    },
    async (request) => {
      const principal = request.ctx.principal;
      if (!principal) throw new AppError('UNAUTHENTICATED');
      // The authentication step refuses a capability here already (docs/contract.md §3, §9); this says so to the types.
      const authMethod = principal.kind;
      if (!isDirect(authMethod)) throw new AppError('FORBIDDEN');
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
        authMethod,
        ...(impersonator ? { impersonator: { id: impersonator.id, email: impersonator.email } } : {}),
      };
    },
  );
}
