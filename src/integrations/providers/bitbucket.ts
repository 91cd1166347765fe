import { defineProvider } from './engine.ts';
import { parseJson } from './json.ts';
import type { ProviderContext } from './types.ts';

/** `/2.0/user` has no e-mail; `/2.0/user/emails` (scope `email`) lists them, the primary one marked. */
async function primaryEmail(context: ProviderContext, accessToken: string): Promise<string | undefined> {
  const response = await context.request(context.resolve('{apiUrl}/user/emails'), { method: 'GET', headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' } });
  const page = response.status === 200 ? (parseJson(response.body) as { values?: { email?: unknown; is_primary?: unknown; is_confirmed?: unknown }[] }) : undefined;
  const found = page?.values?.find((entry) => entry.is_primary === true && entry.is_confirmed !== false);
  return typeof found?.email === 'string' ? found.email : undefined;
}

/**
 * Bitbucket Cloud. Scopes are set on the OAuth consumer (none are sent by default); the
 * client authenticates with HTTP Basic; refresh tokens rotate (since 2026-05); there is no
 * revocation API (the user revokes in their settings).
 */
export const bitbucket = defineProvider({
  id: 'bitbucket',
  displayName: 'Bitbucket',
  endpoints: { authUrl: 'https://bitbucket.org/site/oauth2/authorize', tokenUrl: 'https://bitbucket.org/site/oauth2/access_token', apiUrl: 'https://api.bitbucket.org/2.0' },
  defaultScopes: [],
  pkce: false,
  clientAuth: 'client_secret_basic',
  // `uuid` ("{…}") is stable; nicknames and display names change.
  account: { url: '{apiUrl}/user', id: 'uuid', username: ['nickname', 'username', 'display_name'], fetchEmail: primaryEmail, metadata: { accountId: 'account_id' } },
  api: {
    missingScope: [{ status: 403, body: { path: 'error.message', matches: 'scope' } }],
    deadToken: [{ status: 401 }],
  },
  // Paginated answers carry `next`: the whole URL of the next page.
  pagination: { type: 'next_url', from: 'next' },
});
