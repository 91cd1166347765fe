import { defineProvider } from './engine.ts';

/**
 * Zoom. The API host comes with the token (`api_url`, kept as metadata; default
 * https://api.zoom.us); scopes are set on the app. Refresh tokens rotate strictly, and a new
 * authorization of the same user revokes the earlier tokens. A token without a scope a call
 * needs gets HTTP 400 with code 4711; the daily rate limit's Retry-After is a timestamp.
 */
export const zoom = defineProvider({
  id: 'zoom',
  displayName: 'Zoom',
  endpoints: { authUrl: 'https://zoom.us/oauth/authorize', tokenUrl: 'https://zoom.us/oauth/token', apiUrl: '{apiUrl}/v2', revokeUrl: 'https://zoom.us/oauth/revoke' },
  defaults: { apiUrl: 'https://api.zoom.us' },
  metadataHosts: ['api.zoom.us', '.zoom.us', 'api.zoomgov.com'],
  defaultScopes: [],
  clientAuth: 'client_secret_basic',
  token: { metadata: { apiUrl: 'api_url' } },
  account: { url: '{apiUrl}/users/me', id: 'id', username: ['display_name', 'email'], email: 'email', metadata: { accountId: 'account_id' } },
  api: {
    missingScope: [{ status: 400, body: { path: 'code', equals: 4711 } }],
    deadToken: [{ status: 401 }],
  },
  // The token goes in the form body, never the query.
  revoke: { url: '{revokeUrl}', param: 'token', auth: 'basic' },
});
