/**
 * The REST side of Tessera's authorization server (docs/contract.md §9a), each a thin adapter
 * over authorization.ts or clients.ts: dynamic client registration (RFC 7591), the grants a
 * person or an owner lists and revokes, and the consent handoff a product answers for its own
 * people.
 */
import { Type } from 'typebox';
import { AppError } from '../ground/errors.ts';
import type { Principal } from '../ground/principal.ts';
import type { TypedFastify } from '../http/typed.ts';
import { unitOfWork } from '../http/unit-of-work.ts';
import { KIND } from '../identity/credential-kinds.ts';
import { PRODUCT_ID_PATTERN, ULID } from '../lib/ids.ts';
import { getOrganization } from '../organizations/organizations.ts';
import type { Services } from '../services.ts';
import { type Approval, checkApproval, decideAuthorization, findAuthorization, GRANT_LIFETIME, listGrants, revokeGrant } from './authorization.ts';
import { RegistrationError, registerClient } from './clients.ts';
import { OAuthError } from './exchange.ts';
import { authorizationDeps } from './oauth-routes.ts';

const GrantSchema = Type.Object({
  id: Type.String(),
  client: Type.Object({ id: Type.String(), name: Type.String() }),
  scope: Type.String({ description: 'integrations:<provider>:read|write, one per provider' }),
  providers: Type.Array(Type.String()),
  access: Type.Union([Type.Literal('read'), Type.Literal('write')], { description: 'The widest access granted' }),
  endUser: Type.Union([Type.Object({ id: Type.String() }), Type.Null()]),
  createdAt: Type.String(),
  expiresAt: Type.String(),
  lastUsedAt: Type.Union([Type.String(), Type.Null()]),
});

const AuthorizationSchema = Type.Object({
  id: Type.String(),
  client: Type.Object({ id: Type.String(), name: Type.String(), host: Type.String() }),
  redirectUri: Type.String(),
  scope: Type.String({ description: 'What the client asked for; empty when it named nothing' }),
  expiresAt: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('approved'), Type.Literal('denied')]),
});

const RequestParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

const ApproveBody = Type.Object(
  {
    organizationId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Required for a service token; an API token approves for its own organization' })),
    endUser: Type.Optional(
      Type.Object(
        { id: Type.String({ pattern: PRODUCT_ID_PATTERN }), email: Type.Optional(Type.String({ maxLength: 254 })), displayName: Type.Optional(Type.String({ maxLength: 200 })) },
        { additionalProperties: false },
      ),
    ),
    scope: Type.String({ minLength: 1, maxLength: 2000, description: 'Space-separated integrations:<provider>:read|write' }),
    expiresIn: Type.Optional(Type.Integer({ minimum: GRANT_LIFETIME.min, maximum: GRANT_LIFETIME.max, description: `Seconds the grant lives (default ${GRANT_LIFETIME.default})` })),
  },
  { additionalProperties: false },
);

/** The product's token that may answer a handoff: an API token (its organization) or a service token (any); anything else 403. */
function handoffToken(principal: Principal | null): Principal {
  if (principal?.kind !== KIND.api_token && principal?.kind !== KIND.service_token) {
    throw new AppError('FORBIDDEN', { message: 'Only an API token or a service token answers a consent handoff' });
  }
  return principal;
}

/** `POST /oauth/register`, `GET|DELETE /v1/oauth/grants…` and the handoff's `/v1/oauth/authorizations/{id}…`. */
export function grantRoutes(app: TypedFastify, services: Services): void {
  const deps = authorizationDeps(services);

  app.post(
    '/oauth/register',
    {
      config: { auth: 'public', noStore: true, errors: [] },
      attachValidation: true,
      schema: {
        summary: 'Register an MCP client (RFC 7591): a public client, no secret; while MCP_CLIENT_REGISTRATION is open',
        tags: ['agents'],
        body: Type.Object(
          {
            client_name: Type.Optional(Type.String()),
            redirect_uris: Type.Optional(Type.Array(Type.String())),
            grant_types: Type.Optional(Type.Array(Type.String())),
            token_endpoint_auth_method: Type.Optional(Type.String()),
          },
          { additionalProperties: true, description: 'Client metadata Tessera does not use (response_types, scope, …) is ignored (RFC 7591 §2)' },
        ),
        response: {
          201: Type.Object({
            client_id: Type.String(),
            client_id_issued_at: Type.Integer(),
            client_name: Type.String(),
            redirect_uris: Type.Array(Type.String()),
            grant_types: Type.Array(Type.String()),
            response_types: Type.Array(Type.String()),
            token_endpoint_auth_method: Type.Literal('none'),
          }),
          400: Type.Object({ error: Type.String({ description: 'invalid_redirect_uri or invalid_client_metadata' }), error_description: Type.String() }),
          403: Type.Object({ error: Type.Literal('access_denied'), error_description: Type.String() }),
        },
      },
    },
    async (request, reply) => {
      if (services.config.mcp.clientRegistration !== 'open') {
        reply.code(403);
        return { error: 'access_denied' as const, error_description: 'registration is closed' };
      }
      try {
        const registered = await registerClient((await unitOfWork(request, services)).db, request.body);
        reply.code(201);
        return registered;
      } catch (error) {
        if (!(error instanceof RegistrationError)) throw error;
        reply.code(400);
        return { error: error.error, error_description: error.message };
      }
    },
  );

  app.get(
    '/v1/oauth/grants',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: "MCP clients' grants: a person's own in the current organization; an owner's, an admin's or a product token's, the organization's",
        tags: ['agents'],
        response: { 200: Type.Object({ success: Type.Literal(true), grants: Type.Array(GrantSchema) }) },
      },
    },
    async (request) => ({ success: true as const, grants: await listGrants(await unitOfWork(request, services)) }),
  );

  app.delete(
    '/v1/oauth/grants/:id',
    {
      config: { auth: 'authenticated', errors: ['NOT_FOUND'] },
      schema: {
        summary: "Revoke an MCP client's grant and every token of it",
        tags: ['agents'],
        params: RequestParams,
        response: { 200: Type.Object({ success: Type.Literal(true) }) },
      },
    },
    async (request) => {
      await revokeGrant(await unitOfWork(request, services), request.params.id);
      return { success: true as const };
    },
  );

  app.get(
    '/v1/oauth/authorizations/:id',
    {
      config: { auth: 'authenticated', errors: ['NOT_FOUND'] },
      schema: {
        summary: "A consent handoff's authorization request (OAUTH_CONSENT_HANDOFF_URL): who asks, for what",
        tags: ['agents'],
        params: RequestParams,
        response: { 200: Type.Object({ success: Type.Literal(true), authorization: AuthorizationSchema }) },
      },
    },
    async (request) => {
      handoffToken(request.ctx.principal);
      const found = await findAuthorization(services.db, request.params.id);
      if (!found) throw new AppError('NOT_FOUND', { message: 'No such authorization request (unknown or expired)' });
      return {
        success: true as const,
        authorization: {
          id: request.params.id,
          client: found.client,
          redirectUri: found.redirectUri,
          scope: found.scopes.join(' '),
          expiresAt: found.expiresAt.toISOString(),
          status: found.status,
        },
      };
    },
  );

  const Decided = Type.Object({ redirectTo: Type.String({ description: "The client's redirect URI with the code (or error=access_denied), state and iss" }) });

  app.post(
    '/v1/oauth/authorizations/:id/approve',
    {
      config: { auth: 'authenticated', errors: ['NOT_FOUND', 'CONFLICT'] },
      schema: {
        summary: "Approve a consent handoff's request for the product's person: the client's redirect with a code",
        tags: ['agents'],
        params: RequestParams,
        body: ApproveBody,
        response: { 200: Decided },
      },
    },
    async (request) => {
      const principal = handoffToken(request.ctx.principal);
      const body = request.body;
      const found = await findAuthorization(services.db, request.params.id);
      if (!found) throw new AppError('NOT_FOUND', { message: 'No such authorization request (unknown or expired)' });
      // Decided once: a second approval is 409 whatever it asks, before its choices are checked.
      if (found.status !== 'pending') throw new AppError('CONFLICT', { message: 'This authorization request was decided already' });
      let organizationId: string;
      if (principal.kind === KIND.service_token) {
        if (!body.organizationId) throw new AppError('INVALID_INPUT', { message: 'A service token names the organization', details: [{ path: 'organizationId', message: 'is required for a service token' }] });
        if (!ULID.test(body.organizationId) || !(await getOrganization(services.db, body.organizationId))) throw new AppError('INVALID_INPUT', { details: [{ path: 'organizationId', message: 'no such organization' }] });
        organizationId = body.organizationId;
      } else {
        if (body.organizationId !== undefined && body.organizationId !== principal.organizationId) {
          throw new AppError('INVALID_INPUT', { details: [{ path: 'organizationId', message: "an API token approves for its own organization only" }] });
        }
        organizationId = principal.organizationId;
      }
      const approval: Approval = {
        organizationId,
        approver: { role: principal.role, organizationId },
        subject: { kind: principal.kind, id: principal.credentialId, userId: null },
        scopes: [...new Set(body.scope.split(' ').filter((scope) => scope !== ''))],
        endUserId: body.endUser?.id ?? null,
        grantSeconds: body.expiresIn ?? GRANT_LIFETIME.default,
      };
      try {
        await checkApproval(deps, services.db, found, approval);
      } catch (error) {
        if (error instanceof OAuthError) throw new AppError('INVALID_INPUT', { message: error.message, details: [{ path: 'scope', message: error.message }] });
        throw error;
      }
      return decideAuthorization(deps, await unitOfWork(request, services), found.idHash, approval);
    },
  );

  app.post(
    '/v1/oauth/authorizations/:id/deny',
    {
      config: { auth: 'authenticated', errors: ['NOT_FOUND', 'CONFLICT'] },
      schema: {
        summary: "Deny a consent handoff's request: the client's redirect with error=access_denied",
        tags: ['agents'],
        params: RequestParams,
        response: { 200: Decided },
      },
    },
    async (request) => {
      handoffToken(request.ctx.principal);
      const found = await findAuthorization(services.db, request.params.id);
      if (!found) throw new AppError('NOT_FOUND', { message: 'No such authorization request (unknown or expired)' });
      return decideAuthorization(deps, await unitOfWork(request, services), found.idHash, 'deny');
    },
  );
}
