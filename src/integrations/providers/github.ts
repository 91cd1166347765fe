import { defineProvider } from './engine.ts';
import { parseJson } from './json.ts';
import type { ProviderContext } from './types.ts';

const API_HEADERS = { accept: 'application/vnd.github+json' };

/** `/user` shows only a public e-mail; `/user/emails` (scope `user:email`) lists the primary one. */
async function primaryEmail(context: ProviderContext, accessToken: string): Promise<string | undefined> {
  const response = await context.request(context.resolve('{apiUrl}/user/emails'), { method: 'GET', headers: { ...API_HEADERS, authorization: `token ${accessToken}` } });
  const list = response.status === 200 ? parseJson(response.body) : undefined;
  if (!Array.isArray(list)) return undefined;
  const entries = list as { email?: unknown; primary?: unknown; verified?: unknown }[];
  const found = entries.find((entry) => entry.primary === true && entry.verified === true) ?? entries.find((entry) => entry.verified === true);
  return typeof found?.email === 'string' ? found.email : undefined;
}

/** GitHub (and GitHub Enterprise through the endpoint overrides). */
export const github = defineProvider({
  id: 'github',
  displayName: 'GitHub',
  endpoints: { authUrl: 'https://github.com/login/oauth/authorize', tokenUrl: 'https://github.com/login/oauth/access_token', apiUrl: 'https://api.github.com' },
  defaultScopes: ['read:user', 'user:email', 'repo'],
  // GitHub answers the token endpoint form-encoded unless asked for JSON, and refuses with HTTP 200 and `{error}`.
  tokenHeaders: { accept: 'application/json' },
  token: { errors: 'body', clientErrors: ['incorrect_client_credentials', 'invalid_client', 'unauthorized_client'] },
  account: { url: '{apiUrl}/user', id: 'id', username: 'login', email: 'email', fetchEmail: primaryEmail },
  api: {
    scheme: 'token',
    headers: API_HEADERS,
    // A 403 is a rate limit when GitHub says so (no requests left, a Retry-After, a "secondary rate limit"): the engine's rule for any provider.
  },
  // List answers page by `Link: <…>; rel="next"` (docs.github.com, "Using pagination in the REST API").
  pagination: { type: 'link' },
  revoke: { url: '{apiUrl}/applications/{clientId}/grant', method: 'DELETE', param: 'access_token', format: 'json', auth: 'basic', okStatuses: [204, 404] },
  // A GitHub App's webhook (the `github` provider configured with a GitHub App's client). GitHub signs neither a
  // timestamp nor the delivery id: the id stops a redelivery, and a body seen before under a new id acts only once
  // the user's token is checked live and refused (`replay`). `installation` events belong to `githubapp` (§5c).
  events: {
    signature: { header: 'x-hub-signature-256', prefix: 'sha256=' },
    deliveryId: { header: 'x-github-delivery' },
    replay: 'live_check',
    rules: [
      {
        type: 'github_app_authorization',
        when: [{ header: 'x-github-event', equals: 'github_app_authorization' }, { path: 'action', equals: 'revoked' }],
        match: { accounts: '{sender.id}' },
      },
    ],
  },
});
