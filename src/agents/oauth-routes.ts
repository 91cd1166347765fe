/**
 * The OAuth side of agent access (docs/contract.md §9): the token endpoint (RFC 8693 token
 * exchange), revocation (RFC 7009), and the two metadata documents an MCP client reads to find
 * them — the protected resource's (RFC 9728) and the authorization server's (RFC 8414).
 * Form-encoded bodies are parsed in this context only; every other route keeps answering 415.
 */
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { utf8Body } from '../http/json-limits.ts';
import type { TypedFastify } from '../http/typed.ts';
import { unitOfWork, unitOfWorkAs } from '../http/unit-of-work.ts';
import type { Services } from '../services.ts';
import { type AuthorizationDeps, exchangeCode, refreshGrant, revokeByRefreshToken, revokeGrantOfCapability } from './authorization.ts';
import { ACCESS_TOKEN_TYPE, type ExchangeParams, LIFETIME, mintCapability, OAuthError, revokeCapability, TOKEN_EXCHANGE } from './exchange.ts';

/** Paths an MCP host in a browser calls while signing in, and the MCP endpoint: CORS for any origin, without credentials (docs/contract.md §9a). */
const OPEN_CORS = new Set(['/oauth/register', '/v1/oauth/token', '/v1/oauth/revoke', '/mcp']);
export function openCorsPath(path: string): boolean {
  return path.startsWith('/.well-known/') || OPEN_CORS.has(path);
}

/** What the authorization server's use cases need, from the services. */
export function authorizationDeps(services: Services): AuthorizationDeps {
  const urls = agentUrls(services.config.server.publicUrl);
  return {
    db: services.db,
    outbound: services.outbound,
    isProduction: services.config.isProduction,
    providers: services.providers,
    issuer: urls.issuer,
    resource: urls.mcp,
    onDocumentRefused: (url, reason) => services.logger.warn({ clientMetadata: url, reason }, 'an MCP client metadata document could not be used'),
  };
}

/** Token requests are a few parameters. */
const FORM_BODY_LIMIT = 8 * 1024;

/** Where the agents' endpoints live under PUBLIC_URL. */
export function agentUrls(publicUrl: string) {
  const base = publicUrl.replace(/\/$/, '');
  return {
    issuer: base,
    mcp: `${base}/mcp`,
    resourceMetadata: `${base}/.well-known/oauth-protected-resource/mcp`,
    token: `${base}/v1/oauth/token`,
    revoke: `${base}/v1/oauth/revoke`,
    authorize: `${base}/oauth/authorize`,
    register: `${base}/oauth/register`,
  };
}

const OAuthErrorSchema = Type.Object(
  {
    error: Type.Union([
      Type.Literal('invalid_request'),
      Type.Literal('invalid_scope'),
      Type.Literal('unsupported_grant_type'),
      Type.Literal('invalid_target'),
      Type.Literal('invalid_grant'),
      Type.Literal('invalid_client'),
    ]),
    error_description: Type.String(),
  },
  {
    description:
      'RFC 6749 §5.2: invalid_request (a bad parameter; an invalid, expired or revoked subject), invalid_scope, unsupported_grant_type, invalid_target, invalid_grant (a code or refresh token invalid, expired, used, or bound to another client, redirect URI or verifier), invalid_client (no client_id)',
  },
);

const text = (description: string) => Type.Optional(Type.String({ description }));

const TokenRequest = Type.Object(
  {
    grant_type: text(`${TOKEN_EXCHANGE}, authorization_code or refresh_token`),
    subject_token: text('An API token (tsa_…), or a personal access token (tsp_…) or service token (tss_…) with organization'),
    subject_token_type: text(ACCESS_TOKEN_TYPE),
    scope: text('Space-separated integrations:<provider>:read or integrations:<provider>:write (write includes read)'),
    organization: text("The organization's id: needed with a personal access token or a service token"),
    resource: text('<PUBLIC_URL>/mcp, when given'),
    expires_in: text(`Seconds, ${LIFETIME.min}–${LIFETIME.max} (default ${LIFETIME.default})`),
    agent: text('The agent it is for (1–64 printable characters), named in the audit log'),
    end_user: text("Reach only this end user's integrations"),
    requested_token_type: text(ACCESS_TOKEN_TYPE),
    code: text('authorization_code: the code the authorization endpoint gave'),
    code_verifier: text('authorization_code: the PKCE verifier'),
    client_id: text('authorization_code, refresh_token: the client'),
    redirect_uri: text('authorization_code: the redirect URI of the authorization request'),
    refresh_token: text('refresh_token: the refresh token (tsr_…), used up by this request'),
  },
  { additionalProperties: true },
);

const Minted = Type.Object({
  access_token: Type.String({ description: 'The capability (tsc_…); shown this once' }),
  issued_token_type: Type.Optional(Type.Literal(ACCESS_TOKEN_TYPE, { description: 'token exchange only' })),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer(),
  refresh_token: Type.Optional(Type.String({ description: 'authorization_code and refresh_token: the next refresh token (tsr_…); the one presented is used up' })),
  scope: Type.String(),
});

/** The parameters of a form post, each once (RFC 6749 §3.2: a repeated one is an invalid request); anything but text is too. */
function formParams(request: FastifyRequest): ExchangeParams {
  if (request.validationError) throw new OAuthError('invalid_request', 'The request must be form-encoded parameters');
  const body = (request.body ?? {}) as Record<string, unknown>;
  const params: ExchangeParams = {};
  for (const [name, value] of Object.entries(body)) {
    if (typeof value !== 'string') throw new OAuthError('invalid_request', `${name.slice(0, 64)} must be given once, as text`);
    params[name] = value;
  }
  return params;
}

/** The answer of a refused OAuth request: RFC 6749 §5.2's shape, 400. */
function refusal(error: unknown, reply: { code(status: number): unknown }) {
  if (!(error instanceof OAuthError)) throw error;
  reply.code(400);
  return { error: error.error, error_description: error.message };
}

/** `POST /v1/oauth/token`, `POST /v1/oauth/revoke` and the metadata documents (docs/contract.md §9). */
export function oauthRoutes(app: TypedFastify, services: Services): void {
  const urls = agentUrls(services.config.server.publicUrl);
  app.register(async (forms) => {
    forms.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer', bodyLimit: FORM_BODY_LIMIT }, (_request, body, done) => {
      let text: string;
      try {
        text = utf8Body(body as Buffer, true);
      } catch (error) {
        return done(error as Error, undefined);
      }
      const params: Record<string, string | string[]> = {};
      for (const [name, value] of new URLSearchParams(text)) {
        const seen = params[name];
        params[name] = seen === undefined ? value : [...(Array.isArray(seen) ? seen : [seen]), value];
      }
      done(null, params);
    });
    const typed = forms as unknown as TypedFastify;

    typed.post(
      '/v1/oauth/token',
      {
        config: { auth: 'public', noStore: true, errors: [] },
        attachValidation: true,
        schema: {
          summary: 'Exchange an API token, PAT or service token for a short-lived agent capability (RFC 8693), or an MCP client\'s code or refresh token for one (§9a)',
          tags: ['agents'],
          consumes: ['application/x-www-form-urlencoded'],
          body: TokenRequest,
          response: { 200: Minted, 400: OAuthErrorSchema },
        },
      },
      async (request, reply) => {
        try {
          const params = formParams(request);
          if (params.grant_type === 'authorization_code') return await exchangeCode(authorizationDeps(services), await unitOfWork(request, services), params);
          if (params.grant_type === 'refresh_token') return await refreshGrant(authorizationDeps(services), await unitOfWork(request, services), params);
          return await mintCapability({ db: services.db, providers: services.providers, mcpResource: urls.mcp }, unitOfWorkAs(request, services), params, request.id);
        } catch (error) {
          return refusal(error, reply);
        }
      },
    );

    typed.post(
      '/v1/oauth/revoke',
      {
        config: { auth: 'public', noStore: true, errors: [] },
        attachValidation: true,
        schema: {
          summary: "End an agent capability early (RFC 7009), or an MCP client's grant with either of its tokens: holding the value is enough; 200 whether or not it was live",
          tags: ['agents'],
          consumes: ['application/x-www-form-urlencoded'],
          body: Type.Object({ token: text('The capability (tsc_…) or refresh token (tsr_…)'), token_type_hint: text('Ignored') }, { additionalProperties: true }),
          response: { 200: Type.Object({}), 400: Type.Object({ error: Type.Literal('invalid_request'), error_description: Type.String() }, { description: 'RFC 6749 §5.2: invalid_request (no token)' }) },
        },
      },
      async (request, reply) => {
        try {
          const { token } = formParams(request);
          if (!token) throw new OAuthError('invalid_request', 'token is required');
          const work = await unitOfWork(request, services);
          // A grant's token ends the grant, every token of it (docs/contract.md §9a).
          await revokeGrantOfCapability(work, token);
          await revokeByRefreshToken(work, token);
          await revokeCapability(work, token);
          return {};
        } catch (error) {
          return refusal(error, reply);
        }
      },
    );
  });

  app.get(
    '/.well-known/oauth-protected-resource/mcp',
    {
      config: { auth: 'unauthenticated', errors: [] },
      schema: {
        summary: "The MCP endpoint's protected-resource metadata (RFC 9728)",
        tags: ['agents'],
        response: {
          200: Type.Object({
            resource: Type.String(),
            authorization_servers: Type.Array(Type.String()),
            scopes_supported: Type.Array(Type.String()),
            bearer_methods_supported: Type.Array(Type.String()),
          }),
        },
      },
    },
    async () => ({
      resource: urls.mcp,
      authorization_servers: [urls.issuer],
      scopes_supported: services.providers.list().flatMap((provider) => [`integrations:${provider.id}:read`, `integrations:${provider.id}:write`]),
      bearer_methods_supported: ['header'],
    }),
  );

  app.get(
    '/.well-known/oauth-authorization-server',
    {
      config: { auth: 'unauthenticated', errors: [] },
      schema: {
        summary: 'Authorization server metadata (RFC 8414): where MCP clients sign in, and where capabilities are minted and revoked',
        tags: ['agents'],
        response: {
          200: Type.Object({
            issuer: Type.String(),
            authorization_endpoint: Type.String(),
            token_endpoint: Type.String(),
            revocation_endpoint: Type.String(),
            registration_endpoint: Type.Optional(Type.String({ description: 'Only while MCP_CLIENT_REGISTRATION is open' })),
            grant_types_supported: Type.Array(Type.String()),
            response_types_supported: Type.Array(Type.String()),
            code_challenge_methods_supported: Type.Array(Type.String()),
            token_endpoint_auth_methods_supported: Type.Array(Type.String()),
            revocation_endpoint_auth_methods_supported: Type.Array(Type.String()),
            scopes_supported: Type.Array(Type.String()),
            client_id_metadata_document_supported: Type.Boolean(),
            authorization_response_iss_parameter_supported: Type.Boolean(),
          }),
        },
      },
    },
    async () => ({
      issuer: urls.issuer,
      authorization_endpoint: urls.authorize,
      token_endpoint: urls.token,
      revocation_endpoint: urls.revoke,
      ...(services.config.mcp.clientRegistration === 'open' ? { registration_endpoint: urls.register } : {}),
      grant_types_supported: ['authorization_code', 'refresh_token', TOKEN_EXCHANGE],
      response_types_supported: ['code'],
      code_challenge_methods_supported: ['S256'],
      // Clients are public (PKCE); a token exchange's subject token is its credential; holding a token is enough to revoke it.
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      scopes_supported: services.providers.list().flatMap((provider) => [`integrations:${provider.id}:read`, `integrations:${provider.id}:write`]),
      client_id_metadata_document_supported: true,
      authorization_response_iss_parameter_supported: true,
    }),
  );
}
