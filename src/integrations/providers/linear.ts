import { Kind, parse } from 'graphql';
import { defineProvider } from './engine.ts';
import { restIsWrite } from './types.ts';

/**
 * A call to Linear's GraphQL endpoint writes when its document holds a mutation (or is not
 * a document we can read); queries only read, whatever the HTTP method (always POST).
 */
function isWrite(method: string, segments: readonly string[], body: unknown): boolean {
  if (segments.join('/') !== 'graphql') return restIsWrite(method);
  const query = body && typeof body === 'object' ? (body as { query?: unknown }).query : undefined;
  if (typeof query !== 'string') return restIsWrite(method);
  try {
    return parse(query, { maxTokens: 5000 }).definitions.some((definition) => definition.kind !== Kind.OPERATION_DEFINITION || definition.operation !== 'query');
  } catch {
    return true;
  }
}

/**
 * Linear: a GraphQL API that reports failures in the body (`errors[].extensions.type`)
 * whatever the HTTP status. Refresh tokens rotate (since 2026-04); legacy connections may
 * hold long-lived tokens without one. Revocation authenticates with the token itself.
 */
export const linear = defineProvider({
  id: 'linear',
  displayName: 'Linear',
  endpoints: {
    authUrl: 'https://linear.app/oauth/authorize',
    tokenUrl: 'https://api.linear.app/oauth/token',
    apiUrl: 'https://api.linear.app',
    revokeUrl: 'https://api.linear.app/oauth/revoke',
  },
  defaultScopes: ['read'],
  scopeSeparator: ',',
  authorizeParams: { actor: 'user', prompt: 'consent' },
  account: {
    url: '{apiUrl}/graphql',
    method: 'POST',
    body: { query: '{ viewer { id name email } organization { id name urlKey } }' },
    id: 'data.viewer.id',
    username: ['data.viewer.name', 'data.viewer.email'],
    email: 'data.viewer.email',
    metadata: { organizationId: 'data.organization.id', organizationName: 'data.organization.name', urlKey: 'data.organization.urlKey' },
    // The Linear organization: what an `OAuthApp` revocation names (docs/contract.md §5b).
    workspaceId: 'data.organization.id',
  },
  api: {
    missingScope: [{ body: { path: 'errors[].extensions.type', matches: '^forbidden$' } }],
    deadToken: [{ status: 401 }, { body: { path: 'errors[].extensions.type', matches: '^authentication' } }],
    rateLimit: [{ body: { path: 'errors[].extensions.type', matches: '^ratelimited$' } }],
  },
  revoke: { url: '{revokeUrl}', auth: 'bearer' },
  // The OAuth application's webhook: the raw body signed (hex, no prefix), its `webhookTimestamp`
  // within 60 s. A revocation names the Linear organization and the app's client id — another
  // app's revocation is not this app's to act on (docs/contract.md §5e).
  events: {
    signature: { header: 'linear-signature', prefix: '', bodyTimestamp: { path: 'webhookTimestamp', format: 'milliseconds' }, toleranceSeconds: 60 },
    deliveryId: { header: 'linear-delivery' },
    rules: [
      {
        type: 'oauth_app_revoked',
        when: [{ path: 'type', equals: 'OAuthApp' }, { path: 'action', equals: 'revoked' }],
        match: { workspace: '{organizationId}', client: 'oauthClientId' },
      },
    ],
  },
  isWrite,
});
