// An MCP host signing in to Tessera by OAuth (docs/agents.md §6): the MCP SDK's own OAuth client discovers Tessera from a 401, registers, sends the person to the consent page with PKCE, takes the code on a loopback redirect, then calls tools and refreshes by itself.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/** What a host keeps between its steps (here in memory; a real host stores it per server, the tokens encrypted). */
class HostOAuthProvider {
  constructor(redirectUrl, open) {
    this.redirectUrl = redirectUrl;
    this.open = open;
    this.stateValue = randomBytes(16).toString('base64url');
  }
  get clientMetadata() {
    return { client_name: 'Example Host', redirect_uris: [this.redirectUrl], grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'none' };
  }
  state() {
    return this.stateValue;
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(client) {
    this.client = client; // from POST /oauth/register: a public client, no secret
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens; // tsc_… access token (≤ 1 hour) and tsr_… refresh token: never log them
  }
  redirectToAuthorization(url) {
    return this.open(url); // a desktop host opens the system browser here
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** Waits for the one redirect back to `http://127.0.0.1:<port>/callback` and answers the browser. */
function awaitRedirect(port) {
  return new Promise((resolve, reject) => {
    const server = createServer((request, response) => {
      const back = new URL(request.url ?? '/', `http://127.0.0.1:${port}`);
      if (back.pathname !== '/callback') return response.writeHead(404).end();
      response.writeHead(200, { 'content-type': 'text/plain' }).end('You can close this window and return to the app.');
      server.close();
      resolve(back.searchParams);
    });
    server.on('error', reject);
    server.listen(port, '127.0.0.1');
  });
}

/**
 * Signs in and calls the tools. `open(url)` shows the person Tessera's consent page (they sign
 * in there, choose the organization, providers and read or write); the code comes back to the
 * loopback redirect, checked against the state sent and the issuer (RFC 9207) before it is used.
 */
export async function signInAndCall({ tesseraUrl, open, port = 33418 }) {
  const mcpUrl = new URL(`${tesseraUrl}/mcp`);
  const provider = new HostOAuthProvider(`http://127.0.0.1:${port}/callback`, open);
  const redirected = awaitRedirect(port);
  const first = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
  try {
    await new Client({ name: 'example-host', version: '1.0.0' }).connect(first);
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error; // expected: no tokens yet, so the SDK sent the person to sign in
  }
  const back = await redirected;
  if (back.get('state') !== provider.stateValue) throw new Error('the redirect does not answer this sign-in');
  if (back.get('iss') !== tesseraUrl) throw new Error(`the code comes from ${back.get('iss')}, not ${tesseraUrl}`);
  if (back.get('error')) throw new Error(`sign-in refused: ${back.get('error')}`);
  await first.finishAuth(back.get('code') ?? '');

  const client = new Client({ name: 'example-host', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
  try {
    const { tools } = await client.listTools();
    const { structuredContent } = await client.callTool({ name: 'list_integrations', arguments: {} });
    return { tools: tools.map((tool) => tool.name), integrations: structuredContent, scope: provider.saved?.scope };
  } finally {
    await client.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { TESSERA_URL: tesseraUrl = 'http://127.0.0.1:8080' } = process.env;
  const { tools, scope } = await signInAndCall({ tesseraUrl, open: (url) => console.log(`Open this in your browser to sign in:\n  ${url}`) });
  console.log(`granted: ${scope}`);
  console.log(`tools: ${tools.join(', ')}`);
}
