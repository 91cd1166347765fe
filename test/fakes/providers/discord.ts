import type { FakeProviderOptions } from '../common.ts';
import { json, revokeAnyway, startScreenFake } from '../toolkit.ts';

// From Discord's OAuth2 and API docs: seven-day access tokens, a new refresh token on every
// refresh, `{message, code}` errors, and rate limits with a fractional `retry_after`.

/** A loopback fake of Discord: `/oauth2/authorize`, `/api/oauth2/token` (+ `/revoke`), the API under `/api/v10`. */
export function startFakeDiscord(options: FakeProviderOptions = {}) {
  return startScreenFake(
    {
      id: 'discord',
      displayName: 'Discord',
      clientId: '1100000000000000001',
      clientSecret: 'discordFakeClientSecret000000001',
      paths: { authorize: '/oauth2/authorize', token: '/api/oauth2/token', api: '/api/v10' },
      clientAuth: 'either',
      access: { ttl: 604800 },
      refresh: 'rotate',
      userId: (n) => String(80351110224678912n + BigInt(n)),
      tokenAnswer: (family) => ({ access_token: family.accessToken, token_type: 'Bearer', expires_in: family.profile.accessTtlSeconds, refresh_token: family.refreshToken, scope: family.scopes.join(' ') }),
      tokenError: (failure) => json(failure === 'invalid_client' ? 401 : 400, { error: failure, error_description: failure === 'invalid_grant' ? 'Invalid "refresh_token" in request.' : undefined }),
      api: {
        'GET /users/@me': ({ user }) => json(200, { id: user.id, username: user.login, global_name: user.name, discriminator: '0', email: user.email, verified: true }),
        'GET /users/@me/guilds': () => json(200, []),
      },
      other: { 'POST /api/oauth2/token/revoke': (_ctx, core, params) => revokeAnyway(core, params.token) },
      deadToken: () => json(401, { message: '401: Unauthorized', code: 0 }),
      missingScope: () => json(403, { message: 'Missing Access', code: 50001 }),
      rateLimited: () =>
        json(429, { message: 'You are being rate limited.', retry_after: 1.5, global: false }, { 'retry-after': '2', 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset-after': '1.5', 'x-ratelimit-bucket': 'abcd1234' }),
    },
    options,
  );
}
