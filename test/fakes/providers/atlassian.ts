import { FakeAuthorizeError, type FakeProviderOptions } from '../common.ts';
import { json, startScreenFake } from '../toolkit.ts';

// From Atlassian's OAuth 2.0 (3LO) docs: audience=api.atlassian.com, a refresh token only with
// offline_access, rotating refresh tokens refused with HTTP 403, the sites a grant covers at
// accessible-resources, and a 401 "scope does not match" that is not a dead token.
const SITES = [
  { id: '1324a887-45db-1bf4-1e99-ef0ff456d421', name: 'Zeta Works', url: 'https://zeta-works.atlassian.net', scopes: ['read:jira-work'], avatarUrl: 'https://site-admin-avatar-cdn.prod.public.atl-paas.net/avatars/240/flag.png' },
  { id: '0b3c5f2e-1111-4c3d-9e8f-aaaabbbbcccc', name: 'Acme Corp', url: 'https://acme-corp.atlassian.net', scopes: ['read:jira-work'], avatarUrl: 'https://site-admin-avatar-cdn.prod.public.atl-paas.net/avatars/240/rocket.png' },
];

/** A loopback fake of Atlassian's auth host and API gateway: `/authorize`, `/oauth/token`, the gateway under `/gateway`. */
export function startFakeAtlassian(options: FakeProviderOptions = {}) {
  return startScreenFake(
    {
      id: 'atlassian',
      displayName: 'Atlassian',
      clientId: 'AtlassianFakeClientId000000000001',
      clientSecret: 'ATOAfakeAtlassianClientSecret000000000000000000001',
      paths: { authorize: '/authorize', token: '/oauth/token', api: '/gateway' },
      clientAuth: 'body',
      tokenBody: 'either',
      access: { ttl: 3600 },
      refresh: 'rotate',
      refreshGranted: (request) => request.scopes.includes('offline_access'),
      checkAuthorize(request) {
        if (request.params?.audience !== 'api.atlassian.com') throw new FakeAuthorizeError('audience is required: api.atlassian.com');
      },
      userId: (n) => `5b10ac8d82e05b22cc7d4e${String(n).padStart(2, '0')}`,
      tokenAnswer: (family) => ({ access_token: family.accessToken, expires_in: family.profile.accessTtlSeconds, token_type: 'Bearer', ...(family.refreshToken ? { refresh_token: family.refreshToken } : {}), scope: family.scopes.join(' ') }),
      tokenError: (failure, kind) =>
        failure === 'invalid_client'
          ? json(401, { error: 'access_denied', error_description: 'Unauthorized' })
          : kind === 'refresh'
            ? json(403, { error: 'unauthorized_client', error_description: 'refresh_token is invalid' })
            : json(403, { error: 'invalid_grant', error_description: 'Invalid authorization code' }),
      api: {
        'GET /me': ({ user }) => json(200, { account_type: 'atlassian', account_id: user.id, email: user.email, name: user.name, nickname: user.login, account_status: 'active' }),
        'GET /oauth/token/accessible-resources': () => json(200, SITES),
        'GET /ex/jira/:cloudId/rest/api/3/myself': ({ user, ctx }) => json(200, { accountId: user.id, displayName: user.name, self: `${ctx.path}` }),
      },
      deadToken: () => json(401, { code: 401, message: 'Unauthorized' }),
      missingScope: () => json(401, { code: 401, message: 'Unauthorized; scope does not match' }),
      rateLimited: () => json(429, { code: 429, message: 'Too Many Requests' }, { 'retry-after': '5', 'x-ratelimit-limit': '100', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': new Date(Date.now() + 5000).toISOString() }),
    },
    options,
  );
}
