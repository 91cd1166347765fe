import type { FakeProviderOptions } from '../common.ts';
import { bearerUser, json, revokeToken, startScreenFake } from '../toolkit.ts';

// From Google's OAuth 2.0 for web server apps, OpenID Connect and API error docs: a refresh
// token only with access_type=offline, refresh answers without a new refresh token (the old one
// keeps working), and 403s whose `error.errors[].reason` tells a rate limit from a missing scope.
const apiError = (status: number, message: string, reason: string, state: string, details: unknown[] = []) =>
  json(status, { error: { code: status, message, errors: [{ message, domain: 'global', reason }], status: state, details } });

/** A loopback fake of Google: `/o/oauth2/v2/auth`, `/token`, `/revoke`, `/v1/userinfo`, the APIs under `/googleapis`. */
export function startFakeGoogle(options: FakeProviderOptions = {}) {
  return startScreenFake(
    {
      id: 'google',
      displayName: 'Google',
      clientId: '1234567890-fake.apps.googleusercontent.com',
      clientSecret: 'GOCSPX-fakeGoogleClientSecret0001',
      paths: { authorize: '/o/oauth2/v2/auth', token: '/token', api: '/googleapis' },
      clientAuth: 'either',
      access: { prefix: 'ya29.', ttl: 3599 },
      refresh: 'keep',
      refreshGranted: (request) => request.params?.access_type === 'offline',
      userId: (n) => String(109876543210000000000n + BigInt(n)),
      tokenAnswer: (family, _user, kind) => ({
        access_token: family.accessToken,
        expires_in: family.profile.accessTtlSeconds,
        ...(kind === 'exchange' && family.refreshToken ? { refresh_token: family.refreshToken } : {}),
        scope: family.scopes.join(' '),
        token_type: 'Bearer',
      }),
      tokenError: (failure) => json(failure === 'invalid_client' ? 401 : 400, { error: failure, error_description: failure === 'invalid_grant' ? 'Token has been expired or revoked.' : 'Bad Request' }),
      api: {
        'GET /drive/v3/about': ({ user }) => json(200, { user: { kind: 'drive#user', displayName: user.name, emailAddress: user.email, permissionId: user.id } }),
      },
      other: {
        'GET /v1/userinfo': (ctx, core) => {
          const user = bearerUser(ctx, core);
          if (!user) return json(401, { error: 'invalid_request', error_description: 'Invalid Credentials' });
          return json(200, { sub: user.id, name: user.name, email: user.email, email_verified: true });
        },
        'POST /revoke': (_ctx, core, params) => (revokeToken(core, params.token) ? json(200, {}) : json(400, { error: 'invalid_token', error_description: 'Token expired or revoked' })),
      },
      deadToken: () => apiError(401, 'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.', 'authError', 'UNAUTHENTICATED'),
      missingScope: () =>
        apiError(403, 'Request had insufficient authentication scopes.', 'insufficientPermissions', 'PERMISSION_DENIED', [
          { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'ACCESS_TOKEN_SCOPE_INSUFFICIENT', domain: 'googleapis.com' },
        ]),
      rateLimited: () => apiError(403, 'User Rate Limit Exceeded', 'userRateLimitExceeded', 'PERMISSION_DENIED'),
    },
    options,
  );
}
