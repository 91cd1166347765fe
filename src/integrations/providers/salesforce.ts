import { defineProvider } from './engine.ts';

/**
 * Salesforce. The instance comes with the token (`instance_url`, kept as metadata: the proxy's
 * base and the user-info host); login, sandbox (test.salesforce.com) and My Domain hosts are
 * set with the endpoint overrides. The token answer has no `expires_in` (the lifetime is the
 * org's session timeout): tokens are refreshed when Salesforce rejects them
 * (`INVALID_SESSION_ID`, decision 88). Without refresh-token rotation the refresh answer has
 * no refresh token and the stored one is kept. 403 `REQUEST_LIMIT_EXCEEDED` is a rate limit.
 */
export const salesforce = defineProvider({
  id: 'salesforce',
  displayName: 'Salesforce',
  endpoints: {
    authUrl: 'https://login.salesforce.com/services/oauth2/authorize',
    tokenUrl: 'https://login.salesforce.com/services/oauth2/token',
    apiUrl: '{instanceUrl}/services/data/v62.0',
    userInfoUrl: '{instanceUrl}/services/oauth2/userinfo',
    revokeUrl: 'https://login.salesforce.com/services/oauth2/revoke',
  },
  metadataHosts: ['.salesforce.com', '.force.com', '.cloudforce.com', '.salesforce-setup.com'],
  defaultScopes: ['api', 'refresh_token', 'openid'],
  token: { metadata: { instanceUrl: 'instance_url' } },
  account: { url: '{userInfoUrl}', id: 'user_id', username: ['preferred_username', 'email'], email: 'email', metadata: { organizationId: 'organization_id' } },
  api: {
    deadToken: [{ status: 401 }],
    rateLimit: [{ status: 403, body: { path: '[].errorCode', equals: 'REQUEST_LIMIT_EXCEEDED' } }],
  },
  // Revoking an access token ends only that session; the refresh token revokes the grant with every access token of it.
  revoke: { url: '{revokeUrl}', token: 'refresh', param: 'token', auth: 'none' },
});
