import { parseJson, ProviderError, type ProviderDefinition, type ProviderResponse, retryAfterSeconds } from './types.ts';

/**
 * Slack Web API methods that only read (decision 76): `auth.test`, every `*.list`, `*.info`,
 * `*.history`, `*.replies`, and a few named reads. Every other method writes — `auth.revoke`,
 * `chat.postMessage`… — whatever the HTTP method: Slack accepts GET for most of them.
 */
const READ_SUFFIXES = ['.list', '.info', '.history', '.replies'];
const READ_METHODS = new Set([
  'api.test',
  'auth.test',
  'bots.info',
  'conversations.members',
  'dnd.teamInfo',
  'reactions.get',
  'search.all',
  'search.files',
  'search.messages',
  'team.profile.get',
  'users.getPresence',
  'users.identity',
  'users.lookupByEmail',
  'users.profile.get',
]);

/** Slack error codes that mean the token itself is dead. */
const DEAD_TOKEN = new Set(['invalid_auth', 'token_revoked', 'token_expired', 'account_inactive', 'not_authed']);

interface SlackBody {
  ok?: boolean;
  error?: string;
  access_token?: string;
  refresh_token?: string;
  expires_in?: number;
  scope?: string;
  token_type?: string;
  authed_user?: SlackBody & { id?: string };
  user_id?: string;
  user?: string | { profile?: { email?: string } };
  team_id?: string;
}

/**
 * Slack, acting as the user who authorized: scopes go in `user_scope` and the user
 * token comes back under `authed_user` (refreshes answer it at the top level).
 */
export const slack = {
  id: 'slack',
  displayName: 'Slack',
  endpoints: {
    authUrl: 'https://slack.com/oauth/v2/authorize',
    tokenUrl: 'https://slack.com/api/oauth.v2.access',
    apiUrl: 'https://slack.com/api',
  },
  defaultScopes: ['channels:read', 'chat:write', 'users:read'],
  scopeSeparator: ',',
  scopeParam: 'user_scope',
  pkce: false,
  clientAuth: 'client_secret_post',

  parseTokenResponse(response) {
    const body = parseJson(response.body) as SlackBody | undefined;
    if (response.status >= 500 || !body || typeof body !== 'object') {
      throw new ProviderError('transient', 'Slack token endpoint answered badly', { status: response.status });
    }
    if (body.ok !== true) {
      // Slack refuses with HTTP 200 and `ok:false`.
      if (response.status === 429) throw new ProviderError('rateLimited', 'Slack rate limit', { status: 429, retryAfter: retryAfterSeconds(response.headers) });
      throw new ProviderError('revoked', 'Slack refused the grant', { status: response.status, providerCode: body.error ?? 'unknown' });
    }
    const user = body.authed_user?.access_token ? body.authed_user : body;
    if (typeof user.access_token !== 'string' || !user.access_token) {
      throw new ProviderError('transient', 'Slack token response carries no user token', { status: response.status });
    }
    return {
      accessToken: user.access_token,
      ...(typeof user.refresh_token === 'string' && user.refresh_token ? { refreshToken: user.refresh_token } : {}),
      ...(typeof user.expires_in === 'number' ? { expiresIn: user.expires_in } : {}),
      scopes: typeof user.scope === 'string' ? user.scope.split(',').map((scope) => scope.trim()).filter(Boolean) : [],
      tokenType: typeof user.token_type === 'string' ? user.token_type : 'user',
    };
  },

  async validate(context, accessToken) {
    const response = await context.request(`${context.endpoints.apiUrl}/auth.test`, {
      method: 'POST',
      headers: { authorization: `Bearer ${accessToken}` },
    });
    const failure = slack.classify(response);
    if (failure) throw failure;
    const body = parseJson(response.body) as SlackBody | undefined;
    if (response.status !== 200 || body?.ok !== true || typeof body.user_id !== 'string' || typeof body.team_id !== 'string') {
      throw new ProviderError('transient', 'Slack auth.test answered badly', { status: response.status });
    }
    const username = typeof body.user === 'string' ? body.user : body.user_id;
    let email: string | undefined;
    // users.info shows the e-mail only with users:read.email; without it, none is stored.
    const info = await context
      .request(`${context.endpoints.apiUrl}/users.info?user=${encodeURIComponent(body.user_id)}`, { method: 'GET', headers: { authorization: `Bearer ${accessToken}` } })
      .catch(() => undefined);
    const infoBody = info?.status === 200 ? (parseJson(info.body) as SlackBody | undefined) : undefined;
    if (infoBody?.ok === true && typeof infoBody.user === 'object' && typeof infoBody.user.profile?.email === 'string') email = infoBody.user.profile.email;
    return { id: `${body.team_id}:${body.user_id}`, username, ...(email ? { email } : {}) };
  },

  authorization: (accessToken) => `Bearer ${accessToken}`,

  classify(response: ProviderResponse) {
    const { status, headers } = response;
    if (status === 429) return new ProviderError('rateLimited', 'Slack rate limit', { status, retryAfter: retryAfterSeconds(headers) });
    if (status === 401) return new ProviderError('revoked', 'Slack rejected the token', { status });
    if (status >= 500) return new ProviderError('transient', 'Slack answered with a server error', { status });
    if (status === 403) return new ProviderError('forbidden', 'Slack forbade the call', { status });
    const body = parseJson(response.body) as SlackBody | undefined;
    if (body && body.ok === false && typeof body.error === 'string') {
      if (DEAD_TOKEN.has(body.error)) return new ProviderError('revoked', 'Slack rejected the token', { status, providerCode: body.error });
      if (body.error === 'ratelimited') return new ProviderError('rateLimited', 'Slack rate limit', { status, retryAfter: retryAfterSeconds(headers) });
    }
    return null;
  },

  isWrite(_method, segments) {
    const [name, ...rest] = segments;
    const reads = name !== undefined && rest.length === 0 && (READ_METHODS.has(name) || READ_SUFFIXES.some((suffix) => name.endsWith(suffix)));
    return !reads;
  },

  async revoke(context, tokens) {
    const response = await context.request(`${context.endpoints.apiUrl}/auth.revoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.accessToken}` },
    });
    const failure = slack.classify(response);
    if (failure && failure.kind !== 'revoked') throw failure;
  },
} satisfies ProviderDefinition;
