import { defineProvider } from './engine.ts';

/**
 * GitLab (gitlab.com, or a self-managed host through the endpoint overrides). Every refresh
 * retires the old access and refresh token at once: refreshes must be single-flight.
 */
export const gitlab = defineProvider({
  id: 'gitlab',
  displayName: 'GitLab',
  endpoints: {
    authUrl: 'https://gitlab.com/oauth/authorize',
    tokenUrl: 'https://gitlab.com/oauth/token',
    apiUrl: 'https://gitlab.com/api/v4',
    revokeUrl: 'https://gitlab.com/oauth/revoke',
  },
  defaultScopes: ['read_user', 'read_api'],
  // Some GitLab versions leave out expires_in; their tokens last two hours.
  token: { expiresInDefault: 7200 },
  account: { url: '{apiUrl}/user', id: 'id', username: 'username', email: ['email', 'public_email'] },
  api: {
    // 403 insufficient_scope is a token without the scope, not a dead one.
    missingScope: [{ status: 403, body: { path: 'error', equals: 'insufficient_scope' } }],
    deadToken: [{ status: 401 }],
  },
  // RFC 7009 (Doorkeeper): a token's row holds both tokens, so either ends the grant; the refresh token outlives the access token.
  // Offset pagination answers with `Link` (and `x-next-page`); keyset pagination only with `Link`.
  pagination: { type: 'link' },
  revoke: { url: '{revokeUrl}', token: 'refresh', param: 'token', auth: 'body' },
});
