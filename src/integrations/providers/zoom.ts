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
  account: { url: '{apiUrl}/users/me', id: 'id', username: ['display_name', 'email'], email: 'email', metadata: { accountId: 'account_id' }, workspaceId: 'account_id' },
  api: {
    missingScope: [{ status: 400, body: { path: 'code', equals: 4711 } }],
    deadToken: [{ status: 401 }],
  },
  // The token goes in the form body, never the query.
  // `next_page_token` in the body, sent back under the same name; '' on the last page.
  pagination: { type: 'cursor', from: 'next_page_token', param: 'next_page_token' },
  revoke: { url: '{revokeUrl}', param: 'token', auth: 'basic' },
  // The app's event notification endpoint (signature v0, `endpoint.url_validation`); a delivery has no id of its own.
  events: {
    signature: { header: 'x-zm-signature', prefix: 'v0=', signed: 'v0:{timestamp}:{body}', timestampHeader: 'x-zm-request-timestamp' },
    deliveryId: { digest: ['event', 'event_ts', 'payload'] },
    handshakes: [{ when: [{ path: 'event', equals: 'endpoint.url_validation' }], answer: { plainToken: 'payload.plainToken', encryptedToken: { hmac: 'payload.plainToken' } } }],
    rules: [
      {
        type: 'app_deauthorized',
        when: [{ path: 'event', equals: 'app_deauthorized' }],
        match: { workspace: '{payload.account_id}', accounts: '{payload.user_id}' },
        occurredAt: { path: 'payload.deauthorization_time', format: 'iso' },
      },
    ],
  },
});
