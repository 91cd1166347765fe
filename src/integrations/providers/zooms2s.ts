import { defineProvider } from './engine.ts';

/**
 * Zoom Server-to-Server OAuth: an organization's own app credentials — account id, client id
 * and client secret — mint account tokens with the `account_credentials` grant (parameters in
 * the query, the client in HTTP Basic, as Zoom documents it). There is no refresh token: a new
 * token (an hour's life) is minted when the cached one is about to expire. The API host comes
 * with the token (`api_url`), as for the `zoom` provider.
 */
export const zooms2s = defineProvider({
  id: 'zooms2s',
  displayName: 'Zoom Server-to-Server',
  authMode: {
    mode: 'client_credentials',
    credentials: [
      { name: 'accountId', label: 'Account ID', secret: false },
      { name: 'clientId', label: 'Client ID', secret: false },
      { name: 'clientSecret', label: 'Client secret', secret: true },
    ],
    metadata: ['accountId'],
    grant: { grantType: 'account_credentials', params: { account_id: '{accountId}' }, paramsIn: 'query', clientAuth: 'client_secret_basic' },
    accountFromFields: { id: '{accountId}' },
  },
  endpoints: { authUrl: '', tokenUrl: 'https://zoom.us/oauth/token', apiUrl: '{apiUrl}/v2' },
  defaults: { apiUrl: 'https://api.zoom.us' },
  metadataHosts: ['api.zoom.us', '.zoom.us', 'api.zoomgov.com'],
  defaultScopes: [],
  token: { metadata: { apiUrl: 'api_url' } },
  api: {
    missingScope: [{ status: 400, body: { path: 'code', equals: 4711 } }],
    deadToken: [{ status: 401 }],
  },
});
