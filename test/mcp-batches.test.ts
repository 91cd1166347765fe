// MCP batches (docs/contract.md §9, issue 35): a JSON-RPC batch is refused whole with the
// contract's 400 before any tool runs, so one request to /mcp makes at most one tool call, and
// every request is charged against the rate limits of §4/§6 — the caller's (a capability's
// subject, an API token itself) and its organization's. The fake GitHub counts the calls.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { bearer } from './helpers/identity.ts';
import { providerEnv, startFlow } from './helpers/providers.ts';

const REFUSED = '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batches are not supported"}}';
const CREATE_API_TOKEN = 'mutation($name: String!) { createAPIToken(name: $name) { token } }';

const initialize = (id: number) => ({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'batcher', version: '1' } } });
const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };
const getUser = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'github_api', arguments: { method: 'GET', path: '/user' } } });

/**
 * An organization with GitHub connected as `octo`, and `tokens` API tokens: set up from an address
 * of its own (registration, login and the callback count against the address).
 */
async function organization(t: TestApp, gh: FakeProvider, name: string, tokens: number, remoteAddress: string): Promise<{ organizationId: string; apiTokens: string[] }> {
  const email = `${name}@example.com`;
  const password = `correct horse battery ${name}`;
  expect((await t.fastify.inject({ method: 'POST', url: '/v1/register', remoteAddress, payload: { email, password, name } })).statusCode).toBe(201);
  const login = await t.fastify.inject({ method: 'POST', url: '/v1/login', remoteAddress, payload: { email, password } });
  expect(login.statusCode, login.body).toBe(200);
  const owner: string = login.json().accessToken;
  const started = await startFlow(t.fastify, owner, gh.id);
  const approved = gh.authorize(started.authUrl, 'octo');
  const callback = await t.fastify.inject({
    method: 'POST',
    url: '/v1/integrations/oauth/callback',
    remoteAddress,
    headers: { cookie: `oauth_tx=${started.txCookie}` },
    payload: { provider: gh.id, code: approved.code, state: approved.state },
  });
  expect(callback.statusCode, callback.body).toBe(200);
  const apiTokens: string[] = [];
  for (let i = 0; i < tokens; i++) apiTokens.push((await graphqlData(t.fastify, owner, CREATE_API_TOKEN, { name: `${name}-${i}` })).createAPIToken.token);
  return { organizationId: login.json().organizationId, apiTokens };
}

/** A capability minted from `subject` (the token endpoint is public: it counts against the address given, not the subject). */
async function mint(t: TestApp, subject: string, scope: string, remoteAddress: string): Promise<string> {
  const res = await t.fastify.inject({
    method: 'POST',
    url: '/v1/oauth/token',
    remoteAddress,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: subject,
      subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      scope,
    }).toString(),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().access_token;
}

function mcp(t: TestApp, token: string, body: unknown) {
  return t.fastify.inject({
    method: 'POST',
    url: '/mcp',
    headers: { ...bearer(token), 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    payload: JSON.stringify(body),
  });
}

function providerCalls(gh: FakeProvider, since: number): string[] {
  return gh.requests.slice(since).map((r) => `${r.method} ${r.path}`);
}

describe('a JSON-RPC batch at /mcp', () => {
  let t: TestApp;
  let gh: FakeProvider;
  let apiToken: string;
  let capability: string;
  let organizationId: string;

  beforeAll(async () => {
    gh = await startFakeGitHub();
    gh.addUser({ login: 'octo', email: 'octo@example.com' });
    t = await createTestApp({ env: { ...providerEnv(gh), RATE_LIMIT_MAX: '0' } });
    const org = await organization(t, gh, 'batches', 1, '10.1.0.1');
    organizationId = org.organizationId;
    apiToken = org.apiTokens[0] as string;
    capability = await mint(t, apiToken, 'integrations:github:write', '10.1.1.1');
  });

  afterAll(async () => {
    await t?.close();
    await gh?.close();
  });

  const shapes: [string, () => string, unknown[]][] = [
    ['a batch of tool calls, with a capability', () => capability, [getUser(1), getUser(2), getUser(3), getUser(4), getUser(5)]],
    ['a batch of tool calls, with an API token', () => apiToken, [getUser(1), getUser(2), getUser(3)]],
    ['a batch of one tool call', () => capability, [getUser(1)]],
    ['an empty array, with an API token', () => apiToken, []],
    ['an empty array, with a capability', () => capability, []],
    ['a batch mixing initialize and tools/call', () => capability, [initialize(1), initialized, getUser(2), getUser(3)]],
    ['a batch of initialize alone, with an API token', () => apiToken, [initialize(1)]],
    ['a batch of a notification and tools/list', () => apiToken, [initialized, { jsonrpc: '2.0', id: 1, method: 'tools/list' }]],
  ];

  for (const [name, token, batch] of shapes) {
    it(`refuses ${name}: 400 with the contract's JSON-RPC error, and no call reaches the provider`, async () => {
      const before = gh.requests.length;
      const res = await mcp(t, token(), batch);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).toBe(REFUSED);
      expect(providerCalls(gh, before)).toEqual([]);
    });
  }

  it('runs no tool for a refused batch (no tool call audited), while a single message still calls the provider once', async () => {
    const audited = async () =>
      (await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM audit_logs WHERE organization_id = ${organizationId} AND action = 'mcp.tool_call'`))[0]?.n ?? 0;
    const before = await audited();
    const since = gh.requests.length;
    expect((await mcp(t, capability, [getUser(1), getUser(2)])).body).toBe(REFUSED);
    expect(await audited()).toBe(before);

    const single = await mcp(t, capability, getUser(7));
    expect(single.statusCode, single.body).toBe(200);
    expect(single.json()).toMatchObject({ jsonrpc: '2.0', id: 7, result: { structuredContent: { status: 200, body: { login: 'octo' } } } });
    expect(providerCalls(gh, since)).toEqual(['GET /api/user']);
    expect(await audited()).toBe(before + 1);
  });
});

describe('the rate limits at /mcp', () => {
  let t: TestApp;
  let gh: FakeProvider;

  beforeAll(async () => {
    gh = await startFakeGitHub();
    gh.addUser({ login: 'octo', email: 'octo@example.com' });
    t = await createTestApp({ env: { ...providerEnv(gh), RATE_LIMIT_MAX: '3', RATE_LIMIT_ORGANIZATION_MAX: '8', RATE_LIMIT_WINDOW: '600' } });
  });

  afterAll(async () => {
    await t?.close();
    await gh?.close();
  });

  function expectLimited(res: Awaited<ReturnType<typeof mcp>>): void {
    expect(res.statusCode, res.body).toBe(429);
    expect(res.json().code).toBe('RATE_LIMITED');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  }

  it("charges every request, batch or not: a capability and its API token share the token's 3, then 429 with Retry-After; the provider saw at most one call a request", async () => {
    const { apiTokens } = await organization(t, gh, 'limited', 1, '10.2.0.1');
    const token = apiTokens[0] as string;
    const capability = await mint(t, token, 'integrations:github:read', '10.2.1.1');
    const since = gh.requests.length;
    const statuses = [
      (await mcp(t, token, getUser(1))).statusCode,
      (await mcp(t, capability, [getUser(1), getUser(2), getUser(3), getUser(4), getUser(5)])).statusCode,
      (await mcp(t, capability, getUser(2))).statusCode,
    ];
    expect(statuses).toEqual([200, 400, 200]);
    // The 4th request — by the capability or by its subject — is over the token's RATE_LIMIT_MAX.
    expectLimited(await mcp(t, capability, getUser(3)));
    expectLimited(await mcp(t, token, getUser(4)));
    expectLimited(await mcp(t, capability, [getUser(5), getUser(6)]));
    // Another capability of the same subject has no budget of its own.
    expectLimited(await mcp(t, await mint(t, token, 'integrations:github:read', '10.2.1.2'), getUser(7)));
    expect(providerCalls(gh, since)).toEqual(['GET /api/user', 'GET /api/user']);
  });

  it("charges the organization's budget too: a second API token, under its own limit, is refused once the organization's is spent", async () => {
    // Setting up spends 3 of the organization's 8: the connect start and two createAPIToken requests.
    const { apiTokens } = await organization(t, gh, 'org-limited', 2, '10.3.0.1');
    const [first, second] = apiTokens as [string, string];
    const capability = await mint(t, second, 'integrations:github:read', '10.3.1.1');
    const since = gh.requests.length;
    const statuses = [
      (await mcp(t, first, [getUser(1), getUser(2), getUser(3)])).statusCode,
      (await mcp(t, first, getUser(2))).statusCode,
      (await mcp(t, first, getUser(3))).statusCode,
      (await mcp(t, capability, getUser(4))).statusCode,
      (await mcp(t, capability, [])).statusCode,
    ];
    expect(statuses).toEqual([400, 200, 200, 200, 400]);
    // The organization's 8 are spent: the second token, at 2 of its own 3, is refused, and so is its capability.
    expectLimited(await mcp(t, second, getUser(5)));
    expectLimited(await mcp(t, capability, getUser(6)));
    expect(providerCalls(gh, since)).toEqual(['GET /api/user', 'GET /api/user', 'GET /api/user']);
  });
});
