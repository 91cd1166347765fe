/**
 * What a service token may do (docs/contract.md §5d), as one short list: the REST routes and the
 * GraphQL root fields it reaches. Everything else — a route or field added later included — is
 * refused with 403: signing in, impersonating, starting an OAuth flow, switching organization,
 * personal access tokens, users and service tokens themselves. The authentication step reads
 * the routes (`serviceTokenRoute`), the GraphQL schema the fields (`SERVICE_TOKEN_FIELDS`), and
 * OpenAPI documents from the routes the 404 of an unknown `X-Organization-ID`.
 */

/**
 * Where a route's service-token request acts: `organization` — in the organization
 * `X-Organization-ID` names (required: 400 without it, 404 for an unknown id), with `admin`
 * rights there; `deployment` — in none (managing organizations themselves).
 */
export type ServiceTokenScope = 'organization' | 'deployment';

export interface ServiceTokenRoute {
  scope: ServiceTokenScope;
  /**
   * The route's own statement writes the audit row naming the token (the token read, decision
   * 127): the authentication step adds none, sparing the hot path an insert.
   */
  auditsItself?: true;
}

const PROXY_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** `METHOD url` (Fastify's route pattern) → what a service token does there. */
const ROUTES = new Map<string, ServiceTokenRoute>([
  ['GET /v1/account/access', { scope: 'organization' }],
  ['POST /v1/organizations', { scope: 'deployment' }],
  ['GET /v1/organizations', { scope: 'deployment' }],
  ['GET /v1/organizations/:id', { scope: 'deployment' }],
  ['PATCH /v1/organizations/:id', { scope: 'deployment' }],
  ['DELETE /v1/organizations/:id', { scope: 'deployment' }],
  // The deployment's configured providers: what a product's backend offers its customers.
  ['GET /v1/providers', { scope: 'deployment' }],
  ['GET /v1/integrations', { scope: 'organization' }],
  ['DELETE /v1/integrations', { scope: 'organization' }],
  ['DELETE /v1/integrations/:id', { scope: 'organization' }],
  ['GET /v1/integrations/:provider/token', { scope: 'organization', auditsItself: true }],
  ['GET /v1/integrations/:provider/status', { scope: 'organization' }],
  ['POST /v1/integrations/:provider/refresh', { scope: 'organization' }],
  // Credentials a customer handed the product (an API key) are connected by its backend (docs/contract.md §5c).
  ['POST /v1/integrations/:provider/credentials', { scope: 'organization' }],
  ...PROXY_METHODS.map((method): [string, ServiceTokenRoute] => [`${method} /v1/integrations/:provider/proxy/*`, { scope: 'organization' }]),
  ['POST /v1/connect/sessions', { scope: 'organization' }],
  ['GET /v1/connect/sessions', { scope: 'organization' }],
  ['GET /v1/connect/sessions/:id', { scope: 'organization' }],
  ['DELETE /v1/connect/sessions/:id', { scope: 'organization' }],
  // An organization's own OAuth apps (docs/contract.md §5e): a product registers its customer's app for it.
  ['GET /v1/apps', { scope: 'organization' }],
  ['POST /v1/apps', { scope: 'organization' }],
  ['GET /v1/apps/:id', { scope: 'organization' }],
  ['PATCH /v1/apps/:id', { scope: 'organization' }],
  ['DELETE /v1/apps/:id', { scope: 'organization' }],
  ['POST /query', { scope: 'organization' }],
  // MCP clients' grants (docs/contract.md §9a): those it approved at a consent handoff, listed and revoked like an owner's.
  ['GET /v1/oauth/grants', { scope: 'organization' }],
  ['DELETE /v1/oauth/grants/:id', { scope: 'organization' }],
  ['GET /v1/oauth/authorizations/:id', { scope: 'deployment' }],
  ['POST /v1/oauth/authorizations/:id/approve', { scope: 'deployment' }],
  ['POST /v1/oauth/authorizations/:id/deny', { scope: 'deployment' }],
  // The deployment's webhooks: its endpoints and its delivery log (docs/contract.md §7, §11; events/access.ts).
  ['GET /v1/webhook-endpoints', { scope: 'deployment' }],
  ['POST /v1/webhook-endpoints', { scope: 'deployment' }],
  ['GET /v1/webhook-endpoints/:id', { scope: 'deployment' }],
  ['PATCH /v1/webhook-endpoints/:id', { scope: 'deployment' }],
  ['DELETE /v1/webhook-endpoints/:id', { scope: 'deployment' }],
  ['POST /v1/webhook-endpoints/:id/rotate-secret', { scope: 'deployment' }],
  ['POST /v1/webhook-endpoints/:id/test', { scope: 'deployment' }],
  ['GET /v1/webhooks/deliveries', { scope: 'deployment' }],
  ['POST /v1/webhooks/deliveries/:id/retry', { scope: 'deployment' }],
]);

/**
 * A service token as a token exchange's subject (docs/contract.md §9): it mints for the
 * organization `organization=<id>` names, and the minting's own audit row names it.
 */
export const TOKEN_EXCHANGE_RIGHTS: ServiceTokenRoute = { scope: 'organization', auditsItself: true };

/** What a service token may do on `method url` (a Fastify route pattern), or null: refused. */
export function serviceTokenRoute(method: string, url: string | undefined): ServiceTokenRoute | null {
  if (url === undefined) return null;
  // Fastify answers HEAD on a GET route: a read like the GET.
  return ROUTES.get(`${method} ${url}`) ?? (method === 'HEAD' ? (ROUTES.get(`GET ${url}`) ?? null) : null);
}

/**
 * The GraphQL root fields a service token may use (with `POST /query` and its
 * `X-Organization-ID`): the organization it acts in, its members and invitations, its
 * integrations, audit log, API tokens and apps. Every other field answers FORBIDDEN.
 */
export const SERVICE_TOKEN_FIELDS: ReadonlySet<string> = new Set([
  'organization',
  'members',
  'invitations',
  'integrations',
  'integration',
  'auditLogs',
  'apiTokens',
  'apps',
  'addMember',
  'revokeInvitation',
  'setMemberRole',
  'removeMember',
  'deleteIntegration',
  'refreshIntegration',
  'createAPIToken',
  'revokeAPIToken',
  'createApp',
  'updateApp',
  'deleteApp',
]);
