import { defineProvider } from './engine.ts';

/**
 * Microsoft Entra ID and Graph. The tenant comes from configuration
 * (`INTEGRATION_OAUTH_MICROSOFT_TENANT`: `common`, `organizations`, `consumers` or a tenant
 * id); a refresh token needs `offline_access`. There is no per-app revoke endpoint: deleting
 * drops the tokens. `interaction_required` at refresh (MFA, new consent) also needs the person
 * to sign in again, so it reads as a dead grant. Microsoft pushes nothing to an app: what it has
 * is the claims challenge of continuous access evaluation, read on use.
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
  // Continuous access evaluation (docs/contract.md §5b): declaring the `cp1` client capability on every token request
  // is what makes Graph tell a revoked session by a claims challenge, instead of honouring the token until it expires.
  tokenClaims: { access_token: { xms_cc: { values: ['cp1'] } } },
  // `mail` may be null; the user principal name always exists.
  account: { url: '{apiUrl}/me', id: 'id', username: ['userPrincipalName', 'displayName'], email: ['mail', 'userPrincipalName'] },
  api: {
    // A 401 with `error="insufficient_claims"` and `claims`: one refresh carrying them, then `invalid` if challenged again.
    claimsChallenge: { error: 'insufficient_claims' },
    deadToken: [{ status: 401 }],
    // SharePoint answers 503 with Retry-After when it throttles.
    rateLimit: [{ status: 503, header: { name: 'retry-after' } }],
  },
  // Graph answers `@odata.nextLink`: the whole URL of the next page.
  pagination: { type: 'next_url', from: '@odata.nextLink' },
});
