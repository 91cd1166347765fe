import type { FakeProviderOptions } from '../common.ts';
import { json, startScreenFake } from '../toolkit.ts';

// From Bitbucket Cloud's OAuth 2.0 and REST 2.0 docs: HTTP Basic client authentication,
// two-hour access tokens, rotating refresh tokens, and `{type:"error",error:{message}}` errors.
const error = (status: number, message: string, detail?: unknown) => json(status, { type: 'error', error: { message, ...(detail ? { detail } : {}) } });

/** A loopback fake of Bitbucket Cloud: `/site/oauth2/authorize`, `/site/oauth2/access_token`, the API under `/2.0`. */
export function startFakeBitbucket(options: FakeProviderOptions = {}) {
  return startScreenFake(
    {
      id: 'bitbucket',
      displayName: 'Bitbucket',
      clientId: 'BbFakeConsumerKey01',
      clientSecret: 'bitbucketfakeconsumersecret000000000001',
      paths: { authorize: '/site/oauth2/authorize', token: '/site/oauth2/access_token', api: '/2.0' },
      clientAuth: 'basic',
      access: { ttl: 7200 },
      refresh: 'rotate',
      userId: (n) => `{0000000${n}-fa4e-4b1c-8e0d-bitbucketfake}`,
      tokenAnswer: (family) => ({
        access_token: family.accessToken,
        scopes: 'account email repository',
        expires_in: family.profile.accessTtlSeconds,
        refresh_token: family.refreshToken,
        token_type: 'bearer',
        state: 'authorization_code',
      }),
      tokenError: (failure) => json(failure === 'invalid_client' ? 401 : 400, { error: failure, error_description: failure === 'invalid_grant' ? 'Invalid refresh_token' : 'Client credentials missing' }),
      api: {
        'GET /user': ({ user }) => json(200, { type: 'user', uuid: user.id, account_id: `5f${user.id.slice(1, 9)}`, nickname: user.login, display_name: user.name }),
        'GET /user/emails': ({ user }) => json(200, { values: user.email ? [{ type: 'email', email: user.email, is_primary: true, is_confirmed: true }] : [], pagelen: 10, page: 1, size: 1 }),
        'GET /repositories': () => json(200, { values: [], pagelen: 10, size: 0, page: 1 }),
      },
      deadToken: () => error(401, 'Access token expired.'),
      missingScope: () => error(403, 'Your credentials lack one or more required privilege scopes.', { required: ['repository:write'], granted: ['account', 'repository'] }),
      rateLimited: () => error(429, 'Rate limit for this resource has been exceeded'),
    },
    options,
  );
}
