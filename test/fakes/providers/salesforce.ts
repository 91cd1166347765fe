import type { FakeProviderOptions } from '../common.ts';
import { bearerUser, json, revokeAsGiven, startScreenFake } from '../toolkit.ts';

// From Salesforce's OAuth 2.0 web server flow and REST API docs: an answer with `instance_url`
// and no `expires_in` (the session timeout decides), refresh answers without a refresh token
// (no rotation configured), arrays of `{message,errorCode}` for errors, and
// REQUEST_LIMIT_EXCEEDED as a 403.
const sfError = (status: number, errorCode: string, message: string) => json(status, [{ message, errorCode }]);

/** A loopback fake of a Salesforce login host and instance: `/services/oauth2/*`, the REST API under `/services/data/v62.0`. */
export function startFakeSalesforce(options: FakeProviderOptions & { sessionSeconds?: number } = {}) {
  return startScreenFake(
    {
      id: 'salesforce',
      displayName: 'Salesforce',
      clientId: '3MVG9fakeSalesforceConsumerKey000000000000000000000001',
      clientSecret: 'FAKESALESFORCECONSUMERSECRET0000000000000000000001',
      paths: { authorize: '/services/oauth2/authorize', token: '/services/oauth2/token', api: '/services/data/v62.0' },
      clientAuth: 'either',
      access: { prefix: '00Dfake0000001!', ttl: options.sessionSeconds ?? 7200 },
      refresh: 'keep',
      userId: (n) => `005fake00000${String(n).padStart(6, '0')}`,
      tokenAnswer: (family, user, kind, core) => ({
        access_token: family.accessToken,
        ...(kind === 'exchange' ? { refresh_token: family.refreshToken } : {}),
        signature: 'fakeSignature=',
        scope: 'api refresh_token openid',
        instance_url: core.url,
        id: `${core.url}/id/00Dfake000000001/${user.id}`,
        token_type: 'Bearer',
        issued_at: String(core.now()),
      }),
      tokenError: (failure) => json(400, { error: failure, error_description: failure === 'invalid_grant' ? 'expired access/refresh token' : 'invalid client credentials' }),
      api: {
        'GET /limits': () => json(200, { DailyApiRequests: { Max: 15000, Remaining: 14999 } }),
        'GET /sobjects': () => json(200, { encoding: 'UTF-8', sobjects: [] }),
      },
      other: {
        'GET /services/oauth2/userinfo': (ctx, core) => {
          const user = bearerUser(ctx, core);
          if (!user) return json(403, 'Bad_OAuth_Token');
          return json(200, { sub: `${core.url}/id/00Dfake000000001/${user.id}`, user_id: user.id, organization_id: '00Dfake000000001', preferred_username: `${user.login}@example.com`, email: user.email, name: user.name });
        },
        // "If an access token is included, Salesforce invalidates it and revokes the token. If a refresh token is
        // included, Salesforce revokes it and any associated access tokens": only the refresh token ends the grant.
        'POST /services/oauth2/revoke': (_ctx, core, params) => (revokeAsGiven(core, params.token) ? json(200, {}) : json(400, { error: 'invalid_token', error_description: 'Token was invalid' })),
      },
      deadToken: () => sfError(401, 'INVALID_SESSION_ID', 'Session expired or invalid'),
      missingScope: () => sfError(403, 'INSUFFICIENT_ACCESS', 'The OAuth token does not have the api scope.'),
      rateLimited: () => ({ ...sfError(403, 'REQUEST_LIMIT_EXCEEDED', 'TotalRequests Limit exceeded.'), headers: { 'sforce-limit-info': 'api-usage=15000/15000' } }),
    },
    options,
  );
}
