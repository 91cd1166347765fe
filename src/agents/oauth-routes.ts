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
import { ACCESS_TOKEN_TYPE, type ExchangeParams, LIFETIME, mintCapability, OAuthError, revokeCapability, TOKEN_EXCHANGE } from './exchange.ts';

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
  };
}

const OAuthErrorSchema = Type.Object(
  {
    error: Type.Union([Type.Literal('invalid_request'), Type.Literal('invalid_scope'), Type.Literal('unsupported_grant_type'), Type.Literal('invalid_target')]),
    error_description: Type.String(),
  },
  { description: 'RFC 6749 §5.2: invalid_request (a bad parameter; an invalid, expired or revoked subject), invalid_scope, unsupported_grant_type, invalid_target' },
);

const text = (description: string) => Type.Optional(Type.String({ description }));

const TokenRequest = Type.Object(
  {
    grant_type: text(TOKEN_EXCHANGE),
    subject_token: text('An API token (tsa_…), or a personal access token (tsp_…) or service token (tss_…) with organization'),
    subject_token_type: text(ACCESS_TOKEN_TYPE),
    scope: text('Space-separated integrations:<provider>:read or integrations:<provider>:write (write includes read)'),
    organization: text("The organization's id: needed with a personal access token or a service token"),
    resource: text('<PUBLIC_URL>/mcp, when given'),
    expires_in: text(`Seconds, ${LIFETIME.min}–${LIFETIME.max} (default ${LIFETIME.default})`),
    agent: text('The agent it is for (1–64 printable characters), named in the audit log'),
    end_user: text("Reach only this end user's integrations"),
    requested_token_type: text(ACCESS_TOKEN_TYPE),
  },
  { additionalProperties: true },
);

const Minted = Type.Object({
  access_token: Type.String({ description: 'The capability (tsc_…); shown this once' }),
  issued_token_type: Type.Literal(ACCESS_TOKEN_TYPE),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer(),
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
          summary: 'Exchange an API token, PAT or service token for a short-lived agent capability (RFC 8693)',
          tags: ['agents'],
          consumes: ['application/x-www-form-urlencoded'],
          body: TokenRequest,
          response: { 200: Minted, 400: OAuthErrorSchema },
        },
      },
      async (request, reply) => {
        try {
          return await mintCapability({ db: services.db, providers: services.providers, mcpResource: urls.mcp }, unitOfWorkAs(request, services), formParams(request), request.id);
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
          summary: 'End an agent capability early (RFC 7009): holding its value is enough; 200 whether or not it was live',
          tags: ['agents'],
          consumes: ['application/x-www-form-urlencoded'],
          body: Type.Object({ token: text('The capability (tsc_…)'), token_type_hint: text('Ignored') }, { additionalProperties: true }),
          response: { 200: Type.Object({}), 400: Type.Object({ error: Type.Literal('invalid_request'), error_description: Type.String() }, { description: 'RFC 6749 §5.2: invalid_request (no token)' }) },
        },
      },
      async (request, reply) => {
        try {
          const { token } = formParams(request);
          if (!token) throw new OAuthError('invalid_request', 'token is required');
          await revokeCapability(await unitOfWork(request, services), token);
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
        summary: 'Authorization server metadata (RFC 8414): where capabilities are minted and revoked',
        tags: ['agents'],
        response: {
          200: Type.Object({
            issuer: Type.String(),
            token_endpoint: Type.String(),
            revocation_endpoint: Type.String(),
            grant_types_supported: Type.Array(Type.String()),
            response_types_supported: Type.Array(Type.String()),
            token_endpoint_auth_methods_supported: Type.Array(Type.String()),
            revocation_endpoint_auth_methods_supported: Type.Array(Type.String()),
            scopes_supported: Type.Array(Type.String()),
          }),
        },
      },
    },
    async () => ({
      issuer: urls.issuer,
      token_endpoint: urls.token,
      revocation_endpoint: urls.revoke,
      grant_types_supported: [TOKEN_EXCHANGE],
      // No authorization endpoint: capabilities are minted by exchange only.
      response_types_supported: [],
      // The subject token is the client's credential; holding a capability is enough to revoke it.
      token_endpoint_auth_methods_supported: ['none'],
      revocation_endpoint_auth_methods_supported: ['none'],
      scopes_supported: services.providers.list().flatMap((provider) => [`integrations:${provider.id}:read`, `integrations:${provider.id}:write`]),
    }),
  );
}
