import { defineProvider } from './engine.ts';

/**
 * Notion. No scopes (capabilities are set on the integration); the token request is JSON
 * with HTTP Basic; the answer has no `expires_in`. Sources disagree on refresh (older: tokens
 * never expire; current: a rotating refresh token): both work — without a refresh token the
 * token is re-validated, with one it is refreshed when Notion rejects the access token. Every
 * API call needs `Notion-Version`. 403 `restricted_resource` and 404 `object_not_found` (a
 * page not shared) are not revocations.
 */
export const notion = defineProvider({
  id: 'notion',
  displayName: 'Notion',
  endpoints: {
    authUrl: 'https://api.notion.com/v1/oauth/authorize',
    tokenUrl: 'https://api.notion.com/v1/oauth/token',
    apiUrl: 'https://api.notion.com/v1',
    revokeUrl: 'https://api.notion.com/v1/oauth/revoke',
  },
  defaultScopes: [],
  authorizeParams: { owner: 'user' },
  pkce: false,
  clientAuth: 'client_secret_basic',
  tokenFormat: 'json',
  token: { metadata: { workspaceId: 'workspace_id', workspaceName: 'workspace_name', botId: 'bot_id' } },
  // `users/me` is the integration's bot user: its id is the bot_id, stable for this authorization.
  account: { url: '{apiUrl}/users/me', id: 'id', username: ['bot.owner.user.name', 'name'], email: 'bot.owner.user.person.email' },
  api: {
    headers: { 'Notion-Version': '2022-06-28' },
    deadToken: [{ status: 401 }],
  },
  // `{has_more, next_cursor}`; the next page is asked for with `start_cursor`.
  pagination: { type: 'cursor', from: 'next_cursor', param: 'start_cursor', while: 'has_more' },
  revoke: { url: '{revokeUrl}', param: 'token', format: 'json', auth: 'basic' },
});
