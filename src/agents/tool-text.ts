/**
 * What a model reads about a provider's API tool (docs/contract.md §9): what the API is, where
 * its reference lives, how to call it here, and what this credential allows. The reference
 * links are prose for the model, not behaviour: a provider without one is described without it.
 */
import type { ConfiguredProvider } from '../integrations/providers/registry.ts';

/** The public API reference of the built-in providers. */
const API_DOCS: Readonly<Record<string, string>> = {
  github: 'https://docs.github.com/en/rest',
  slack: 'https://api.slack.com/methods',
  gitlab: 'https://docs.gitlab.com/ee/api/rest/',
  bitbucket: 'https://developer.atlassian.com/cloud/bitbucket/rest/',
  discord: 'https://discord.com/developers/docs/reference',
  google: 'https://developers.google.com/apis-explorer',
  microsoft: 'https://learn.microsoft.com/en-us/graph/api/overview',
  atlassian: 'https://developer.atlassian.com/cloud/jira/platform/rest/v3/',
  linear: 'https://developers.linear.app/docs/graphql/working-with-the-graphql-api',
  notion: 'https://developers.notion.com/reference',
  zoom: 'https://developers.zoom.us/docs/api/',
  salesforce: 'https://developer.salesforce.com/docs/atlas.en-us.api_rest.meta/api_rest/',
};

/** The `<provider>_api` tool's description. */
export function providerGuide(provider: ConfiguredProvider, access: 'read' | 'write', methods: readonly string[], endUserId: string | null): string {
  const docs = API_DOCS[provider.id];
  const base = provider.context.endpoints.apiUrl;
  return [
    `Calls the ${provider.displayName} API (base URL ${base}) as the ${provider.displayName} account connected in this organization${endUserId !== null ? ` by end user ${endUserId}` : ''}.`,
    docs ? `Its reference: ${docs}.` : '',
    `Give the path under the base (e.g. "/user"), optional query parameters and a JSON body; Tessera adds the account's token, refreshes it when due, and returns {status, body} with the provider's own status and answer.`,
    access === 'read'
      ? `This credential may only read: ${methods.join(', ')}${methods.includes('POST') ? ` — POST only for the API's read methods` : ''}. A call that writes is refused with FORBIDDEN.`
      : 'This credential may read and write (every method): act only as the task needs.',
    'A failure returns an error with a code: TOKEN_VALIDATION_FAILED (the account must be reconnected by a person), PROVIDER_RATE_LIMITED (wait and retry), PROVIDER_ERROR (the provider failed; retry later).',
  ]
    .filter((line) => line !== '')
    .join(' ');
}
