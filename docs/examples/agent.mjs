// An agent calling GitHub through Tessera (docs/agents.md): the product's backend mints a capability (RFC 8693 token exchange), the agent uses it with the MCP SDK's own client.
import { pathToFileURL } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/** The backend's part: trade its API token for a capability that reads GitHub for ten minutes. Only the capability goes to the agent. */
export async function mintCapability({ tesseraUrl, apiToken, scope = 'integrations:github:read', agent = 'example-agent', expiresIn = 600 }) {
  const res = await fetch(`${tesseraUrl}/v1/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: apiToken, // or a person's PAT / a service token, with organization: '<organization id>'
      subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      scope, // space-separated integrations:<provider>:read|write
      agent, // named in the audit log
      expires_in: String(expiresIn),
    }),
  });
  const body = await res.json();
  if (!res.ok) throw new Error(`token exchange refused: ${body.error}: ${body.error_description}`);
  return body.access_token; // tsc_…; never log it
}

/** The agent's part: connect to /mcp with the capability, see its tools, call GitHub as the connected account. */
export async function runAgent({ tesseraUrl, capability }) {
  const client = new Client({ name: 'example-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${tesseraUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${capability}` } } }));
  try {
    const { tools } = await client.listTools();
    const { structuredContent: integrations } = await client.callTool({ name: 'list_integrations', arguments: {} });
    const user = await client.callTool({ name: 'github_api', arguments: { method: 'GET', path: '/user' } });
    if (user.isError) throw new Error(`github_api failed: ${user.content[0]?.text}`); // {"code":"TOKEN_VALIDATION_FAILED",…}: a person must reconnect
    return { tools: tools.map((tool) => tool.name), integrations, login: user.structuredContent.body.login };
  } finally {
    await client.close();
  }
}

/** Ends the capability before it expires (RFC 7009): holding the value is enough. */
export async function revokeCapability({ tesseraUrl, capability }) {
  await fetch(`${tesseraUrl}/v1/oauth/revoke`, { method: 'POST', body: new URLSearchParams({ token: capability }) });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { TESSERA_URL: tesseraUrl = 'http://127.0.0.1:8080', TESSERA_API_TOKEN: apiToken } = process.env;
  if (!apiToken) throw new Error('set TESSERA_API_TOKEN to an API token (tsa_…) of an organization with GitHub connected');
  const capability = await mintCapability({ tesseraUrl, apiToken });
  const { tools, login } = await runAgent({ tesseraUrl, capability });
  await revokeCapability({ tesseraUrl, capability });
  console.log(`tools: ${tools.join(', ')}`);
  console.log(`GitHub says the connected account is ${login}`);
}
