import type { FakeProviderOptions } from '../common.ts';
import { bearerOf, json, revokeToken, startScreenFake } from '../toolkit.ts';

// From Linear's OAuth and GraphQL API docs: comma-separated scopes, rotating refresh tokens,
// revocation with the token as a bearer, and failures told in `errors[].extensions.type`
// whatever the HTTP status (400 here, as Linear answers rate limits and bad tokens).
const gqlError = (status: number, type: string, message: string, headers: Record<string, string> = {}) =>
  json(status, { errors: [{ message, extensions: { type, code: type.toUpperCase().replace(/ /g, '_'), userPresentableMessage: message } }], data: null }, headers);

/** A loopback fake of Linear: `/oauth/authorize`, `/oauth/token`, `/oauth/revoke`, GraphQL at `/api/graphql`. */
export function startFakeLinear(options: FakeProviderOptions = {}) {
  return startScreenFake(
    {
      id: 'linear',
      displayName: 'Linear',
      clientId: 'fake0linear0client0id000000000001',
      clientSecret: 'fake0linear0client0secret00000001',
      paths: { authorize: '/oauth/authorize', token: '/oauth/token', api: '/api' },
      clientAuth: 'body',
      scopeSeparator: ',',
      access: { prefix: 'lin_oauth_', ttl: 86399 },
      refresh: 'rotate',
      userId: (n) => `3c6f2d7e-0000-4000-9000-${String(n).padStart(12, '0')}`,
      tokenAnswer: (family) => ({ access_token: family.accessToken, token_type: 'Bearer', expires_in: family.profile.accessTtlSeconds, scope: family.scopes, refresh_token: family.refreshToken }),
      tokenError: (failure) => json(400, { error: failure, error_description: failure === 'invalid_grant' ? 'Invalid or expired grant' : 'Invalid client' }),
      api: {
        'POST /graphql': ({ user, body }) => {
          const query = String((body as { query?: unknown } | undefined)?.query ?? '');
          if (/^\s*mutation\b/.test(query)) return json(200, { data: { issueCreate: { success: true } } });
          const data: Record<string, unknown> = {};
          if (query.includes('viewer')) data.viewer = { id: user.id, name: user.name, email: user.email };
          if (query.includes('organization')) data.organization = { id: 'org-fake-0001', name: 'Fake Org', urlKey: 'fake-org' };
          return json(200, { data });
        },
      },
      other: {
        'POST /oauth/revoke': (ctx, core) => (revokeToken(core, bearerOf(ctx)) ? json(200, { success: true }) : json(400, { error: 'invalid_token' })),
      },
      deadToken: () => gqlError(400, 'authentication error', 'Authentication required, not authenticated'),
      missingScope: () => gqlError(400, 'forbidden', 'Invalid scope: `write` required'),
      rateLimited: () => gqlError(400, 'ratelimited', 'Rate limit exceeded', { 'x-ratelimit-requests-limit': '1500', 'x-ratelimit-requests-remaining': '0', 'x-ratelimit-requests-reset': String(Date.now() + 20_000) }),
    },
    options,
  );
}
