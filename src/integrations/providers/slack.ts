import { defineProvider } from './engine.ts';
import { parseJson, textAt, valueAt } from './json.ts';
import type { ProviderContext } from './types.ts';

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
const DEAD_TOKEN = ['invalid_auth', 'token_revoked', 'token_expired', 'account_inactive', 'not_authed'];

/** users.info shows the e-mail only with users:read.email; without it, none is stored. */
async function profileEmail(context: ProviderContext, accessToken: string, answer: unknown): Promise<string | undefined> {
  const user = textAt(answer, 'user_id');
  if (!user) return undefined;
  const response = await context.request(`${context.resolve('{apiUrl}')}/users.info?user=${encodeURIComponent(user)}`, { method: 'GET', headers: { authorization: `Bearer ${accessToken}` } });
  const body = response.status === 200 ? parseJson(response.body) : undefined;
  return valueAt(body, 'ok') === true ? textAt(body, 'user.profile.email') : undefined;
}

/**
 * Slack, acting as the user who authorized: scopes go in `user_scope` and the user token
 * comes back under `authed_user` (refreshes answer it at the top level). Slack answers
 * HTTP 200 `{ok:false,error}` for refusals, dead tokens and most rate limits.
 */
export const slack = defineProvider({
  id: 'slack',
  displayName: 'Slack',
  endpoints: { authUrl: 'https://slack.com/oauth/v2/authorize', tokenUrl: 'https://slack.com/api/oauth.v2.access', apiUrl: 'https://slack.com/api' },
  defaultScopes: ['channels:read', 'chat:write', 'users:read'],
  scopeSeparator: ',',
  scopeParam: 'user_scope',
  // PKCE makes a Slack app a public client whose refresh tokens expire.
  pkce: false,
  token: { errors: 'body', okField: 'ok', userTokenPath: 'authed_user', metadata: { workspaceId: 'team.id' }, clientErrors: ['invalid_client_id', 'bad_client_secret', 'invalid_client'] },
  account: { url: '{apiUrl}/auth.test', method: 'POST', id: '{team_id}:{user_id}', username: ['user', 'user_id'], fetchEmail: profileEmail, metadata: { workspaceId: 'team_id' }, workspaceId: 'team_id' },
  api: {
    missingScope: [{ body: { path: 'error', equals: 'missing_scope' } }],
    deadToken: [{ status: 401 }, { body: { path: 'error', equals: DEAD_TOKEN } }],
    rateLimit: [{ body: { path: 'error', equals: 'ratelimited' } }],
  },
  // Cursor pagination: `response_metadata.next_cursor`, '' on the last page, sent back as `cursor`.
  pagination: { type: 'cursor', from: 'response_metadata.next_cursor', param: 'cursor' },
  revoke: { url: '{apiUrl}/auth.revoke', auth: 'bearer' },
  // The Events API (request signing v0; `tokens_revoked`, `app_uninstalled`); Slack retries a delivery with the same `event_id`.
  events: {
    signature: { header: 'x-slack-signature', prefix: 'v0=', signed: 'v0:{timestamp}:{body}', timestampHeader: 'x-slack-request-timestamp' },
    deliveryId: { path: 'event_id' },
    handshakes: [{ when: [{ path: 'type', equals: 'url_verification' }], answer: { challenge: 'challenge' } }],
    rules: [
      {
        type: 'tokens_revoked',
        when: [{ path: 'type', equals: 'event_callback' }, { path: 'event.type', equals: 'tokens_revoked' }],
        // The user tokens revoked, by user id (`event.tokens.bot` are bot users: Tessera holds user tokens only).
        match: { accounts: '{team_id}:{event.tokens.oauth[]}' },
        occurredAt: { path: 'event_time', format: 'seconds' },
      },
      {
        type: 'app_uninstalled',
        when: [{ path: 'type', equals: 'event_callback' }, { path: 'event.type', equals: 'app_uninstalled' }],
        match: { workspace: '{team_id}' },
        occurredAt: { path: 'event_time', format: 'seconds' },
      },
    ],
  },
  isWrite(_method, segments) {
    const [name, ...rest] = segments;
    const reads = name !== undefined && rest.length === 0 && (READ_METHODS.has(name) || READ_SUFFIXES.some((suffix) => name.endsWith(suffix)));
    return !reads;
  },
});
