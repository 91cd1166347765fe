import type { FakeProviderOptions } from '../common.ts';
import { clientAuthenticated, json, revokeAnyway, startScreenFake } from '../toolkit.ts';

// From GitLab's OAuth 2.0 provider and REST API docs: Doorkeeper-style errors, a two-hour
// access token, and a refresh that retires the old access and refresh token together.
const INVALID_GRANT =
  'The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client.';

/** A loopback fake of gitlab.com: `/oauth/authorize`, `/oauth/token`, `/oauth/revoke`, the REST API under `/api/v4`. */
export function startFakeGitLab(options: FakeProviderOptions = {}) {
  return startScreenFake(
    {
      id: 'gitlab',
      displayName: 'GitLab',
      clientId: 'gitlab-fake-application-id-0001',
      clientSecret: 'gloas-fake-gitlab-secret-000000000000000000000001',
      paths: { authorize: '/oauth/authorize', token: '/oauth/token', api: '/api/v4' },
      clientAuth: 'either',
      access: { ttl: 7200 },
      refresh: 'rotate',
      userId: (n) => String(1000 + n),
      tokenAnswer: (family, _user, _kind, core) => ({
        access_token: family.accessToken,
        token_type: 'Bearer',
        expires_in: family.profile.accessTtlSeconds,
        refresh_token: family.refreshToken,
        scope: family.scopes.join(' '),
        created_at: Math.floor(core.now() / 1000),
      }),
      tokenError: (failure) =>
        failure === 'invalid_client'
          ? json(401, { error: 'invalid_client', error_description: 'Client authentication failed due to unknown client, no client authentication included, or unsupported authentication method.' })
          : json(400, { error: failure, error_description: INVALID_GRANT }),
      api: {
        'GET /user': ({ user }) => json(200, { id: Number(user.id), username: user.login, name: user.name, state: 'active', email: user.email, public_email: null }),
        'GET /projects': () => json(200, []),
      },
      // Doorkeeper's revoke authenticates the client like its token endpoint.
      other: {
        'POST /oauth/revoke': (ctx, core, params) =>
          clientAuthenticated(ctx, core, params, 'body') ? revokeAnyway(core, params.token) : json(401, { error: 'invalid_client', error_description: 'Client authentication failed' }),
      },
      deadToken: () => json(401, { error: 'invalid_token', error_description: 'Token was revoked. You have to re-authorize from the user.' }, { 'www-authenticate': 'Bearer realm="Doorkeeper", error="invalid_token"' }),
      missingScope: () => json(403, { error: 'insufficient_scope', error_description: 'The request requires higher privileges than provided by the access token.', scope: 'api read_api' }),
      rateLimited: () => ({ status: 429, headers: { 'content-type': 'text/plain', 'retry-after': '30', 'ratelimit-limit': '2000', 'ratelimit-remaining': '0', 'ratelimit-reset': String(Math.floor(Date.now() / 1000) + 30) }, text: 'Retry later' }),
    },
    options,
  );
}
