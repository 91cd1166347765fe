import { Type } from 'typebox';
import type { TypedFastify } from '../../http/typed.ts';
import { unitOfWork } from '../../http/unit-of-work.ts';
import type { Services } from '../../services.ts';
import { findSession, mintSession, revokeSession, SESSION_EXPIRY, sessionView } from '../sessions/sessions.ts';
import { EndUserSchema, IdParams, requireTokenReader } from './shared.ts';

const SessionSchema = Type.Object({
  id: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('completed'), Type.Literal('expired'), Type.Literal('revoked')]),
  expiresAt: Type.String({ format: 'date-time' }),
  allowedProviders: Type.Array(Type.String()),
  endUser: Type.Union([EndUserSchema, Type.Null()]),
  integrationId: Type.Optional(Type.String()),
  error: Type.Optional(Type.String({ description: 'The error code of the last failed attempt' })),
});

/**
 * Connect sessions (CONTRACT.md §5a): minted, read and revoked by a product's backend with the
 * organization's API token, or by an owner/admin with header credentials — never a browser's
 * cookie, never while impersonating (the same rule as raw token reads).
 */
export function connectSessionRoutes(app: TypedFastify, services: Services): void {
  app.post(
    '/v1/connect/sessions',
    {
      config: { auth: 'authenticated', noStore: true, errors: ['INVALID_REDIRECT_URI', 'PROVIDER_NOT_CONFIGURED'] },
      schema: {
        summary: "Mint a connect session: a link through which the product's end user connects one integration",
        tags: ['connect'],
        body: Type.Object(
          {
            redirectUri: Type.String({ minLength: 1, maxLength: 2048 }),
            allowedProviders: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, maxItems: 64 })),
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
      requireTokenReader(request.ctx.principal);
      const minted = await mintSession(services, await unitOfWork(request, services), request.body);
      reply.code(201);
      return { success: true as const, session: { id: minted.id, url: minted.url, expiresAt: minted.expiresAt, allowedProviders: minted.allowedProviders, endUser: minted.endUser } };
    },
  );

  app.get(
    '/v1/connect/sessions/:id',
    {
      config: { auth: 'authenticated', errors: ['NOT_FOUND'] },
      schema: { summary: 'A connect session: its status and, once completed, its integration', tags: ['connect'], params: IdParams, response: { 200: Type.Object({ success: Type.Literal(true), session: SessionSchema }) } },
    },
    async (request) => {
      const principal = requireTokenReader(request.ctx.principal);
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
      const principal = requireTokenReader(request.ctx.principal);
      const revoked = await revokeSession(await unitOfWork(request, services), principal.organizationId, request.params.id);
      return { success: true as const, session: sessionView(revoked) };
    },
  );
}
