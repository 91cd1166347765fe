import { defineProvider } from './engine.ts';

/**
 * Microsoft Entra ID and Graph. The tenant comes from configuration
 * (`INTEGRATION_OAUTH_MICROSOFT_TENANT`: `common`, `organizations`, `consumers` or a tenant
 * id); a refresh token needs `offline_access`. There is no per-app revoke endpoint: deleting
 * drops the tokens. `interaction_required` at refresh (MFA, new consent) also needs the person
 * to sign in again, so it reads as a dead grant.
 */
export const microsoft = defineProvider({
  id: 'microsoft',
  displayName: 'Microsoft',
  endpoints: {
    authUrl: 'https://login.microsoftonline.com/{tenant}/oauth2/v2.0/authorize',
    tokenUrl: 'https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token',
    apiUrl: 'https://graph.microsoft.com/v1.0',
  },
  defaults: { tenant: 'common' },
  defaultScopes: ['openid', 'profile', 'email', 'offline_access', 'User.Read'],
  token: { idTokenClaims: { tenantId: 'tid' } },
  // `mail` may be null; the user principal name always exists.
  account: { url: '{apiUrl}/me', id: 'id', username: ['userPrincipalName', 'displayName'], email: ['mail', 'userPrincipalName'] },
  api: {
    deadToken: [{ status: 401 }],
    // SharePoint answers 503 with Retry-After when it throttles.
    rateLimit: [{ status: 503, header: { name: 'retry-after' } }],
  },
  // Graph answers `@odata.nextLink`: the whole URL of the next page.
  pagination: { type: 'next_url', from: '@odata.nextLink' },
});
