import { FakeAuthorizeError, type FakeProviderOptions } from '../common.ts';
import { clientAuthenticated, json, revokeToken, startScreenFake } from '../toolkit.ts';

// From Notion's authorization guide and API reference: owner=user, HTTP Basic with a JSON body
// at the token endpoint, an answer naming the bot, the workspace and the owner (no expires_in),
// `Notion-Version` required on every call, and `{object:"error",status,code,message}` errors.
const notionError = (status: number, code: string, message: string, headers: Record<string, string> = {}) => json(status, { object: 'error', status, code, message, request_id: 'fake-request' }, headers);

/** A loopback fake of Notion: `/v1/oauth/{authorize,token,revoke}` and the API under `/v1`. `refresh: 'none'` for the older, never-expiring tokens. */
export function startFakeNotion(options: FakeProviderOptions & { refresh?: 'rotate' | 'none' } = {}) {
  return startScreenFake(
    {
      id: 'notion',
      displayName: 'Notion',
      clientId: '1a2b3c4d-fake-notion-client-000000000001',
      clientSecret: 'secret_fakeNotionClientSecret000000000000000001',
      paths: { authorize: '/v1/oauth/authorize', token: '/v1/oauth/token', api: '/v1' },
      clientAuth: 'basic',
      tokenBody: 'json',
      access: { prefix: 'ntn_', ttl: null },
      refresh: options.refresh ?? 'rotate',
      checkAuthorize(request) {
        if (request.params?.owner !== 'user') throw new FakeAuthorizeError('owner must be user');
      },
      userId: (n) => `f0e1d2c3-0000-4000-8000-${String(n).padStart(12, '0')}`,
      tokenAnswer: (family, user) => ({
        access_token: family.accessToken,
        token_type: 'bearer',
        ...(family.refreshToken ? { refresh_token: family.refreshToken } : {}),
        bot_id: `b0700000-0000-4000-8000-${String(family.id).padStart(12, '0')}`,
        workspace_name: 'Fake Workspace',
        workspace_icon: null,
        workspace_id: 'a1b2c3d4-fake-4000-8000-workspace0001',
        owner: { type: 'user', user: { object: 'user', id: user.id, name: user.name, type: 'person', person: { email: user.email } } },
        duplicated_template_id: null,
        request_id: 'fake-request',
      }),
      tokenError: (failure) => json(failure === 'invalid_client' ? 401 : 400, { error: failure, error_description: failure }),
      api: {
        'GET /users/me': ({ user, family, ctx }) =>
          ctx.req.headers['notion-version']
            ? json(200, { object: 'user', id: `b0700000-0000-4000-8000-${String(family.id).padStart(12, '0')}`, name: 'Tessera', type: 'bot', bot: { owner: { type: 'user', user: { object: 'user', id: user.id, name: user.name, type: 'person', person: { email: user.email } } }, workspace_name: 'Fake Workspace' } })
            : notionError(400, 'missing_version', 'Notion-Version header failed validation: Notion-Version header should be defined, instead was `undefined`.'),
        'POST /search': () => json(200, { object: 'list', results: [], next_cursor: null, has_more: false }),
      },
      // Notion's revoke takes the integration's credentials as HTTP Basic.
      other: {
        'POST /v1/oauth/revoke': (ctx, core, params) => {
          if (!clientAuthenticated(ctx, core, params, 'basic')) return notionError(401, 'unauthorized', 'Invalid client credentials');
          return revokeToken(core, params.token) ? json(200, {}) : notionError(400, 'invalid_request', 'Invalid token');
        },
      },
      deadToken: () => notionError(401, 'unauthorized', 'API token is invalid.'),
      missingScope: () => notionError(403, 'restricted_resource', 'Insufficient permissions for this endpoint.'),
      rateLimited: () => notionError(429, 'rate_limited', 'You have been rate limited. Please try again in a few minutes.', { 'retry-after': '3' }),
    },
    options,
  );
}
