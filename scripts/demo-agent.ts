// The demo's "agent" command (scripts/demo.ts): an agent capability for the demo organization, and how to use it (docs/agents.md).

/**
 * Mints a read capability for the demo organization's GitHub with the demo backend's API token
 * (docs/agents.md), and says how to point an MCP client at it.
 */
export async function agentCapability(url: string, apiToken: string): Promise<string> {
  const res = await fetch(`${url}/v1/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: apiToken,
      subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      scope: 'integrations:github:read',
      agent: 'demo-agent',
      expires_in: '3600',
    }),
  });
  const body = (await res.json()) as { access_token?: string; error?: string; error_description?: string };
  if (!body.access_token) return `No capability: ${body.error_description ?? body.error} (connect GitHub on the page first).\n`;
  return [
    '',
    'An agent capability: reads GitHub for this organization for an hour, nothing else.',
    `  MCP endpoint   ${url}/mcp   (Streamable HTTP)`,
    `  Header         Authorization: Bearer ${body.access_token}`,
    `  As JSON        {"mcpServers":{"tessera":{"type":"http","url":"${url}/mcp","headers":{"Authorization":"Bearer ${body.access_token}"}}}}`,
    `  Or run         TESSERA_URL=${url} TESSERA_API_TOKEN=<an API token> node docs/examples/agent.mjs`,
    `  Tools: list_integrations, github_api, integration_status. End it early: curl -d token=<it> ${url}/v1/oauth/revoke`,
    '',
  ].join('\n');
}
