import type { FakeProviderOptions } from '../common.ts';
import { clientAuthenticated, json, revokeToken, startScreenFake } from '../toolkit.ts';

// From Zoom's OAuth and REST API docs: HTTP Basic client authentication, strictly rotating
// refresh tokens, the API host in the token answer (`api_url`), `{code,message}` errors with
// 124 for a bad token and 4711 (HTTP 400) for a missing scope, and a daily limit whose
// Retry-After is a timestamp.

/** A loopback fake of Zoom: `/oauth/{authorize,token,revoke}`, the API under `/v2` on the `api_url` it hands out (itself). */
export function startFakeZoom(options: FakeProviderOptions = {}) {
  return startScreenFake(
    {
      id: 'zoom',
      displayName: 'Zoom',
      clientId: 'fakeZoomClientId0001',
      clientSecret: 'fakeZoomClientSecret00000000000001',
      paths: { authorize: '/oauth/authorize', token: '/oauth/token', api: '/v2' },
      clientAuth: 'basic',
      access: { prefix: 'eyJzdiI6IjAwMDAwMSIs.', ttl: 3599 },
      refresh: 'rotate',
      userId: (n) => `KDcuGIm1QgePTO8WbOqwI${n}`,
      tokenAnswer: (family, _user, _kind, core) => ({ access_token: family.accessToken, token_type: 'bearer', refresh_token: family.refreshToken, expires_in: family.profile.accessTtlSeconds, scope: 'user:read meeting:read', api_url: core.url }),
      tokenError: (failure) =>
        failure === 'invalid_client' ? json(401, { reason: 'Invalid client_id or client_secret', error: 'invalid_client' }) : json(400, { reason: 'Invalid Token!', error: 'invalid_request' }),
      api: {
        'GET /users/me': ({ user }) => json(200, { id: user.id, account_id: 'fakeAccount0001', email: user.email, display_name: user.name, type: 1, status: 'active' }),
        'GET /users/me/meetings': () => json(200, { page_size: 30, total_records: 0, meetings: [] }),
      },
      // Zoom's revoke takes the app's credentials as HTTP Basic.
      other: {
        'POST /oauth/revoke': (ctx, core, params) => {
          if (!clientAuthenticated(ctx, core, params, 'basic')) return json(401, { reason: 'Invalid client_id or client_secret', error: 'invalid_client' });
          return revokeToken(core, params.token) ? json(200, { status: 'success' }) : json(400, { reason: 'Invalid Token!', error: 'invalid_request' });
        },
      },
      deadToken: () => json(401, { code: 124, message: 'Invalid access token.' }),
      missingScope: () => json(400, { code: 4711, message: 'Invalid access token, does not contain scopes:[meeting:write:admin].' }),
      rateLimited: () => json(429, { code: 429, message: "You have reached the maximum daily rate limit for this API." }, { 'x-ratelimit-category': 'Light', 'x-ratelimit-type': 'Daily-limit', 'retry-after': new Date(Date.now() + 45_000).toISOString() }),
    },
    options,
  );
}
