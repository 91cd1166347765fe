import type { FakeProviderOptions } from '../common.ts';
import { bearerUser, json, revokeAsGiven, startScreenFake } from '../toolkit.ts';

// A provider that does exactly what RFC 6749 (and RFC 7009 for revocation) says and nothing
// else: the shape a custom provider definition in configuration is for. Its revocation takes
// RFC 7009 §2.1 at its narrowest: a refresh token ends the grant, an access token only itself.

/** A loopback fake of a plain RFC 6749 provider: `/authorize`, `/token`, `/revoke`, `/userinfo`, an API under `/api`; `refresh: 'none'` issues no refresh tokens. */
export function startFakeRfcProvider(options: FakeProviderOptions & { id?: string; refresh?: 'rotate' | 'none' } = {}) {
  return startScreenFake(
    {
      id: options.id ?? 'acme',
      displayName: 'Acme',
      clientId: 'acme-client-0001',
      clientSecret: 'acme-client-secret-0000000000000001',
      paths: { authorize: '/authorize', token: '/token', api: '/api' },
      clientAuth: 'either',
      access: { ttl: 3600 },
      refresh: options.refresh ?? 'rotate',
      tokenAnswer: (family) => ({ access_token: family.accessToken, token_type: 'Bearer', expires_in: family.profile.accessTtlSeconds, ...(family.refreshToken ? { refresh_token: family.refreshToken } : {}), scope: family.scopes.join(' ') }),
      tokenError: (failure) => json(failure === 'invalid_client' ? 401 : 400, { error: failure }),
      api: { 'GET /things': () => json(200, { things: [] }) },
      other: {
        'GET /userinfo': (ctx, core) => {
          const user = bearerUser(ctx, core);
          if (!user) return json(401, { error: 'invalid_token' });
          return json(200, { sub: user.id, preferred_username: user.login, email: user.email });
        },
        // RFC 7009 §2.2: 200 whether or not the token was known.
        'POST /revoke': (_ctx, core, params) => {
          revokeAsGiven(core, params.token);
          return json(200, {});
        },
      },
      deadToken: () => json(401, { error: 'invalid_token' }, { 'www-authenticate': 'Bearer error="invalid_token"' }),
      missingScope: () => json(403, { error: 'insufficient_scope' }),
      rateLimited: () => json(429, { error: 'rate_limited' }, { 'retry-after': '7' }),
    },
    options,
  );
}
