// The MCP endpoint (docs/contract.md §9) as an agent meets it: the SDK's own client over Streamable
// HTTP against a listening Tessera, with a capability minted by token exchange. Tools follow the
// scope; a provider call goes through the proxy to the fake GitHub; failures are tool errors.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentCapability } from '../scripts/demo-agent.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv } from './helpers/providers.ts';

let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let owner: Account;
let apiToken: string;
let url: string;
const clients: Client[] = [];

async function mint(scope: string, extra: Record<string, string> = {}): Promise<string> {
  const res = await fetch(`${url}/v1/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: apiToken,
      subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      scope,
      ...extra,
    }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** The SDK's client, connected with `token`. */
async function agent(token: string): Promise<Client> {
  const client = new Client({ name: 'test-agent', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  clients.push(client);
  return client;
}

beforeAll(async () => {
  gh = await startFakeGitHub();
  slack = await startFakeSlack();
  gh.addUser({ login: 'octo', email: 'octo@example.com' });
  slack.addUser({ login: 'sam', email: 'sam@example.com' });
  t = await createTestApp({ env: { ...providerEnv(gh), ...providerEnv(slack), RATE_LIMIT_MAX: '0' } });
  await t.fastify.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(t.fastify.server.address() as AddressInfo).port}`;
  owner = await registerAndLogin(t.fastify, 'owner');
  expect((await connect(t.fastify, owner.token, gh, 'octo')).statusCode).toBe(200);
  expect((await connect(t.fastify, owner.token, slack, 'sam')).statusCode).toBe(200);
  apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
});

afterAll(async () => {
  for (const client of clients) await client.close().catch(() => {});
  await t?.close();
  await gh?.close();
  await slack?.close();
});

describe('the MCP endpoint', () => {
  it('answers an unauthenticated client 401 with the RFC 9728 metadata link, and serves that document and the RFC 8414 one', async () => {
    const res = await fetch(`${url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }),
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"');
    await expect(new Client({ name: 'anonymous', version: '1' }).connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)))).rejects.toMatchObject({ code: 401 });

    const resource = await (await fetch(`${url}/.well-known/oauth-protected-resource/mcp`)).json();
    expect(resource).toEqual({
      resource: 'http://127.0.0.1:8080/mcp',
      authorization_servers: ['http://127.0.0.1:8080'],
      scopes_supported: expect.arrayContaining(['integrations:github:read', 'integrations:github:write', 'integrations:slack:read']),
      bearer_methods_supported: ['header'],
    });
    const server = await (await fetch(`${url}/.well-known/oauth-authorization-server`)).json();
    expect(server).toMatchObject({
      issuer: 'http://127.0.0.1:8080',
      token_endpoint: 'http://127.0.0.1:8080/v1/oauth/token',
      revocation_endpoint: 'http://127.0.0.1:8080/v1/oauth/revoke',
      grant_types_supported: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:token-exchange'],
    });
  });

  it('answers a GET (a client asking for a stream this stateless server does not offer) 405 in the error shape of every route, allowing POST', async () => {
    const res = await fetch(`${url}/mcp`, { headers: { accept: 'text/event-stream' } });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
    expect(await res.json()).toMatchObject({ success: false, code: 'METHOD_NOT_ALLOWED', requestId: res.headers.get('x-request-id') });
  });

  it("lists only the tools of the capability's scope, the method enum and readOnlyHint following it", async () => {
    const reader = await agent(await mint('integrations:github:read'));
    const { tools } = await reader.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(['github_api', 'integration_status', 'list_integrations']);
    const github = tools.find((tool) => tool.name === 'github_api');
    expect((github?.inputSchema.properties?.method as { enum: string[] }).enum).toEqual(['GET', 'HEAD']);
    expect(github?.annotations?.readOnlyHint).toBe(true);
    expect(github?.description).toContain(gh.url);
    expect(github?.description).toMatch(/only read/);

    const writer = await agent(await mint('integrations:github:write integrations:slack:read'));
    const written = (await writer.listTools()).tools;
    expect(written.map((tool) => tool.name).sort()).toEqual(['github_api', 'integration_status', 'list_integrations', 'slack_api']);
    const githubWrite = written.find((tool) => tool.name === 'github_api');
    expect((githubWrite?.inputSchema.properties?.method as { enum: string[] }).enum).toEqual(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);
    expect(githubWrite?.annotations?.readOnlyHint).toBe(false);
    // Slack's Web API reads with POST too (conversations.list): a read tool offers it, and each call is judged by the method's name.
    expect((written.find((tool) => tool.name === 'slack_api')?.inputSchema.properties?.method as { enum: string[] }).enum).toEqual(['GET', 'HEAD', 'POST']);
  });

  it("calls GitHub through the proxy: github_api returns the fake's user; a write is a tool error for a read capability", async () => {
    const reader = await agent(await mint('integrations:github:read', { agent: 'mcp-test' }));
    const before = gh.requests.length;
    const result = await reader.callTool({ name: 'github_api', arguments: { method: 'GET', path: '/user' } });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ status: 200, body: { login: 'octo' } });
    expect(gh.requests.slice(before).map((r) => `${r.method} ${r.path}`)).toEqual(['GET /api/user']);

    const listed = await reader.callTool({ name: 'list_integrations', arguments: {} });
    expect(listed.structuredContent).toEqual({ integrations: [expect.objectContaining({ provider: 'github', status: 'connected', account: 'octo' })] });
    expect(JSON.stringify(listed)).not.toMatch(/gh[ou]_/);

    const write = await reader.callTool({ name: 'github_api', arguments: { method: 'POST', path: '/echo/x', body: { a: 1 } } });
    expect(write.isError).toBe(true);
    expect(JSON.parse((write.content as { text: string }[])[0]?.text ?? '{}').code).toBe('FORBIDDEN');
    expect(gh.requests.length).toBe(before + 1);

    const status = await reader.callTool({ name: 'integration_status', arguments: { provider: 'github' } });
    expect(status.structuredContent).toMatchObject({ provider: 'github', connected: true, status: 'connected' });
  });

  it('runs docs/examples/agent.mjs as docs/agents.md shows it: mint, call GitHub, revoke', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['docs/examples/agent.mjs'], { env: { ...process.env, TESSERA_URL: url, TESSERA_API_TOKEN: apiToken }, timeout: 60_000 });
    expect(stdout).toContain('tools: list_integrations, integration_status, github_api');
    expect(stdout).toContain('GitHub says the connected account is octo');
    expect(stdout).not.toMatch(/tsc_|tsa_/);
    const doc = await readFile('docs/agents.md', 'utf8');
    expect(doc).toContain((await readFile('docs/examples/agent.mjs', 'utf8')).trim());
  });

  it("the demo's agent command mints a capability and prints the endpoint and header an MCP client needs", async () => {
    const printed = await agentCapability(url, apiToken);
    expect(printed).toContain(`MCP endpoint   ${url}/mcp`);
    const capability = /Authorization: Bearer (tsc_[A-Za-z0-9_-]{43})/.exec(printed)?.[1] ?? '';
    const { tools } = await (await agent(capability)).listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(['github_api', 'integration_status', 'list_integrations']);
  });

  it('surfaces a revocation at the provider as a tool error with TOKEN_VALIDATION_FAILED', async () => {
    const reader = await agent(await mint('integrations:github:read'));
    gh.revokeUser('octo');
    const result = await reader.callTool({ name: 'github_api', arguments: { method: 'GET', path: '/user' } });
    expect(result.isError).toBe(true);
    expect(JSON.parse((result.content as { text: string }[])[0]?.text ?? '{}').code).toBe('TOKEN_VALIDATION_FAILED');
  });
});
