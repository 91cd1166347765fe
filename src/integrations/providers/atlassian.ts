import { defineProvider } from './engine.ts';
import { parseJson } from './json.ts';
import { type Metadata, type ProviderContext, ProviderError } from './types.ts';

/**
 * The sites the grant covers (Jira, Confluence), from `accessible-resources`: one grant can
 * cover several, in no guaranteed order, so they are all kept, sorted by name. Clients call
 * `ex/jira/{id}/…` through the proxy (its base is https://api.atlassian.com).
 */
async function sites(context: ProviderContext, accessToken: string): Promise<Metadata> {
  const response = await context.request(context.resolve('{apiUrl}/oauth/token/accessible-resources'), { method: 'GET', headers: { authorization: `Bearer ${accessToken}`, accept: 'application/json' } });
  const list = response.status === 200 ? parseJson(response.body) : undefined;
  if (!Array.isArray(list)) throw new ProviderError('transient', 'Atlassian accessible-resources answered badly', { status: response.status });
  const found = (list as Record<string, unknown>[])
    .filter((site) => typeof site.id === 'string' && typeof site.url === 'string')
    .map((site) => ({ id: site.id as string, name: typeof site.name === 'string' ? site.name : '', url: site.url as string }))
    .sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
  return { sites: found };
}

/**
 * Atlassian Cloud (Jira, Confluence) through OAuth 2.0 (3LO). A refresh token needs
 * `offline_access`, `audience=api.atlassian.com` and `prompt=consent`; refresh tokens rotate.
 * Atlassian refuses a dead refresh token with HTTP 403 `unauthorized_client` (not 400
 * `invalid_grant`) and our client credentials with 401 `access_denied` (or `invalid_client`), and answers a
 * call the token lacks the scope for with 401 "scope does not match": a warning, not a revocation.
 */
export const atlassian = defineProvider({
  id: 'atlassian',
  displayName: 'Atlassian',
  endpoints: { authUrl: 'https://auth.atlassian.com/authorize', tokenUrl: 'https://auth.atlassian.com/oauth/token', apiUrl: 'https://api.atlassian.com' },
  defaultScopes: ['read:jira-work', 'read:jira-user', 'read:me', 'offline_access'],
  authorizeParams: { audience: 'api.atlassian.com', prompt: 'consent' },
  pkce: false,
  token: { clientErrors: ['invalid_client', 'access_denied'] },
  account: { url: '{apiUrl}/me', id: 'account_id', username: ['nickname', 'name'], email: 'email' },
  api: {
    missingScope: [{ status: 401, body: { path: 'message', matches: 'scope does not match' } }],
    deadToken: [{ status: 401 }],
  },
  discover: sites,
});
