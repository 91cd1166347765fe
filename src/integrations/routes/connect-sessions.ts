import { Type } from 'typebox';
import type { TypedFastify } from '../../http/typed.ts';
import { unitOfWork } from '../../http/unit-of-work.ts';
import type { Services } from '../../services.ts';
import type { Principal } from '../../ground/principal.ts';
import { AppError } from '../../ground/errors.ts';
import { requireRole } from '../../identity/authorize.ts';
import { findSession, listSessions, mintSession, revokeSession, SESSION_EXPIRY, sessionView } from '../sessions/sessions.ts';
import { AppIdSchema, EndUserSchema, IdParams } from './shared.ts';

const StatusSchema = Type.Union([Type.Literal('pending'), Type.Literal('completed'), Type.Literal('expired'), Type.Literal('revoked')]);

const SessionSchema = Type.Object({
  id: Type.String(),
  status: StatusSchema,
  expiresAt: Type.String({ format: 'date-time' }),
  allowedProviders: Type.Array(Type.String()),
  endUser: Type.Union([EndUserSchema, Type.Null()]),
  integrationId: Type.Optional(Type.String()),
  error: Type.Optional(Type.String({ description: 'The error code of the last failed attempt' })),
});

/**
 * Who mints, reads, lists and revokes connect sessions (docs/contract.md §5a): an API or service
 * token, or an owner or admin — with header credentials, or the console's cookie session (whose
 * writes pass the CSRF check) — never while impersonating.
 */
function requireMinter(principal: Principal | null): Principal {
  if (!principal) throw new AppError('UNAUTHENTICATED');
  if (principal.impersonatorId) throw new AppError('FORBIDDEN', { message: 'Connect sessions are not for impersonated requests' });
  return requireRole(principal, principal.organizationId, 'admin');
}

/** Connect sessions (docs/contract.md §5a, §11): minted, listed, read and revoked by the organization's backend or its owners and admins. */
export function connectSessionRoutes(app: TypedFastify, services: Services): void {
  app.post(
    '/v1/connect/sessions',
    {
      config: { auth: 'authenticated', noStore: true, errors: ['INVALID_REDIRECT_URI', 'PROVIDER_NOT_CONFIGURED', 'INVALID_INPUT'] },
      schema: {
        summary: "Mint a connect session: a link through which the product's end user connects one integration",
        tags: ['connect'],
        body: Type.Object(
          {
            redirectUri: Type.String({ minLength: 1, maxLength: 2048 }),
            allowedProviders: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: 64 })),
            app: Type.Optional(AppIdSchema),
            endUser: Type.Optional(EndUserSchema),
            expiresIn: Type.Optional(Type.Integer({ minimum: SESSION_EXPIRY.min, maximum: SESSION_EXPIRY.max, description: 'Seconds (default 1800)' })),
          },
          { additionalProperties: false },
        ),
        response: {
          201: Type.Object({
            success: Type.Literal(true),
            session: Type.Object({ id: Type.String(), url: Type.String({ description: 'Shown this once: it holds the secret' }), expiresAt: Type.String({ format: 'date-time' }), allowedProviders: Type.Array(Type.String()), endUser: Type.Union([EndUserSchema, Type.Null()]) }),
          }),
        },
      },
    },
    async (request, reply) => {
      requireMinter(request.ctx.principal);
      const minted = await mintSession(services, await unitOfWork(request, services), request.body);
      reply.code(201);
      return { success: true as const, session: { id: minted.id, url: minted.url, expiresAt: minted.expiresAt, allowedProviders: minted.allowedProviders, endUser: minted.endUser } };
    },
  );

  app.get(
    '/v1/connect/sessions',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: "The organization's connect sessions, newest first, a page at a time (never their secrets)",
        tags: ['connect'],
        querystring: Type.Object(
          {
            status: Type.Optional(StatusSchema),
            first: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Page size, 1–100 (default 20)' })),
            after: Type.Optional(Type.String({ maxLength: 64, description: 'The endCursor of the page before' })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            success: Type.Literal(true),
            sessions: Type.Array(Type.Object({ ...SessionSchema.properties, createdAt: Type.String({ format: 'date-time' }) })),
            pageInfo: Type.Object({ endCursor: Type.Union([Type.String(), Type.Null()]), hasNextPage: Type.Boolean() }),
          }),
        },
      },
    },
    async (request) => {
      const principal = requireMinter(request.ctx.principal);
      const { status, first = 20, after } = request.query;
      const page = await listSessions(services.db, principal.organizationId, { first, ...(status ? { status } : {}), ...(after === undefined ? {} : { after }) });
      return { success: true as const, ...page };
    },
  );

  app.get(
    '/v1/connect/sessions/:id',
    {
      config: { auth: 'authenticated', errors: ['NOT_FOUND'] },
      schema: { summary: 'A connect session: its status and, once completed, its integration', tags: ['connect'], params: IdParams, response: { 200: Type.Object({ success: Type.Literal(true), session: SessionSchema }) } },
    },
    async (request) => {
      const principal = requireMinter(request.ctx.principal);
      return { success: true as const, session: sessionView(await findSession(services.db, principal.organizationId, request.params.id)) };
    },
  );

  app.delete(
    '/v1/connect/sessions/:id',
    {
      config: { auth: 'authenticated', errors: ['NOT_FOUND', 'CONFLICT'] },
      schema: { summary: 'Revoke a pending connect session', tags: ['connect'], params: IdParams, response: { 200: Type.Object({ success: Type.Literal(true), session: SessionSchema }) } },
    },
    async (request) => {
      const principal = requireMinter(request.ctx.principal);
      const revoked = await revokeSession(await unitOfWork(request, services), principal.organizationId, request.params.id);
      return { success: true as const, session: sessionView(revoked) };
    },
  );
}
