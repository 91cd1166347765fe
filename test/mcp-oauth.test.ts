// MCP clients sign in (docs/contract.md §9a): the official MCP SDK client's own OAuth support
// against a listening Tessera — discovery from a 401, registration or a client metadata document
// (served over https and fetched through the outbound guard), PKCE, the consent page driven over
// HTTP as a browser without JavaScript would, the token, tool calls and a refresh — and each
// refusal: no redirect for an unknown client or redirect URI, a redirect with the error for the
// rest, code and refresh reuse ending the grant, a member granting write, a removed person's grant.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signInAndCall } from '../docs/examples/host-oauth.mjs';
import { queryRows } from '../src/db/client.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { FormBrowser, MemoryOAuthProvider, type Page, pkce } from './helpers/mcp-oauth.ts';
import { freePort } from './helpers/process.ts';
import { connect, providerEnv } from './helpers/providers.ts';

const dir = mkdtempSync(join(tmpdir(), 'tessera-mcp-oauth-'));
const REDIRECT = 'http://127.0.0.1:33333/callback';

let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let url: string;
let mcp: string;
let owner: Account;
let docs: Server;
let docsOrigin: string;
const documentFetches: string[] = [];
const clients: Client[] = [];

/** The client metadata documents the https server serves: path → [status, body, headers]. */
const DOCUMENTS: Record<string, (self: string) => [number, unknown, Record<string, string>]> = {
  '/clients/host.json': (self) => [200, { client_id: self, client_name: 'Document Host', redirect_uris: [REDIRECT] }, { 'cache-control': 'max-age=300' }],
  '/clients/missing.json': () => [404, { error: 'not here' }, {}],
  '/clients/liar.json': () => [200, { client_id: 'https://elsewhere.example/client.json', client_name: 'Liar', redirect_uris: [REDIRECT] }, {}],
};

beforeAll(async () => {
  gh = await startFakeGitHub();
  slack = await startFakeSlack();
  gh.addUser({ login: 'octo', email: 'octo@example.com' });
  slack.addUser({ login: 'sam', email: 'sam@example.com' });
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
    { stdio: 'ignore' },
  );
  const cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
  docs = createServer({ key: readFileSync(join(dir, 'key.pem')), cert }, (request, response) => {
    const path = request.url ?? '';
    documentFetches.push(path);
    const serve = DOCUMENTS[path];
    const [status, body, headers] = serve ? serve(`${docsOrigin}${path}`) : [404, {}, {}];
    response.writeHead(status, { 'content-type': 'application/json', ...headers });
    response.end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => docs.listen(0, '127.0.0.1', resolve));
  docsOrigin = `https://127.0.0.1:${(docs.address() as AddressInfo).port}`;
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  mcp = `${url}/mcp`;
  t = await createTestApp({ env: { ...providerEnv(gh), ...providerEnv(slack), RATE_LIMIT_MAX: '0', PUBLIC_URL: url, OAUTH_REDIRECT_ORIGINS: 'http://127.0.0.1:8080' }, outbound: { ca: cert } });
  await t.fastify.listen({ host: '127.0.0.1', port });
  owner = await registerAndLogin(t.fastify, 'owner');
  expect((await connect(t.fastify, owner.token, gh, 'octo')).statusCode).toBe(200);
  expect((await connect(t.fastify, owner.token, slack, 'sam')).statusCode).toBe(200);
});

afterAll(async () => {
  for (const client of clients) await client.close().catch(() => {});
  await t?.close();
  await gh?.close();
  await slack?.close();
  await new Promise<void>((resolve) => (docs ? docs.close(() => resolve()) : resolve()));
});

/** A person of the owner's organization with `role`, signed in. */
async function colleague(role: 'member' | 'admin'): Promise<Account> {
  const account = await registerAndLogin(t.fastify, role);
  await t.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${owner.organizationId}, ${account.userId}, ${role})`);
  // Their token for the owner's organization (a session token is bound to one).
  const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(account.token), payload: { organizationId: owner.organizationId } });
  expect(switched.statusCode, switched.body).toBe(200);
  return { ...account, token: switched.json().accessToken };
}

/** Registers a client at `POST /oauth/register`; its id. */
async function register(redirectUris = [REDIRECT], name = 'Registered Host'): Promise<string> {
  const res = await fetch(`${url}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: name, redirect_uris: redirectUris, token_endpoint_auth_method: 'none' }) });
  expect(res.status).toBe(201);
  return ((await res.json()) as { client_id: string }).client_id;
}

/** The authorization URL a client builds (every parameter valid unless overridden; `undefined` leaves one out). */
function authorizeUrl(clientId: string, challenge: string, overrides: Record<string, string | undefined> = {}): string {
  const params: Record<string, string | undefined> = {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'state-1',
    scope: 'integrations:github:write integrations:slack:read',
    resource: mcp,
    ...overrides,
  };
  const query = new URLSearchParams(Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined));
  return `${url}/oauth/authorize?${query}`;
}

/** Signs `account` in on the page (when it shows the sign-in form) and answers the consent form with `choices`; the last page. */
async function consent(browser: FormBrowser, authorizationUrl: string | URL, account: Account, choices: Record<string, string>, step = 'approve'): Promise<Page> {
  let page = await browser.get(authorizationUrl);
  expect(page.status, page.html).toBe(200);
  if (page.html.includes('name="step" value="signin"')) {
    page = await browser.post(`${url}/oauth/authorize`, { nonce: page.hidden('nonce'), request: page.hidden('request'), step: 'signin', email: account.email, password: account.password });
    expect(page.status, page.html).toBe(200);
  }
  return browser.post(`${url}/oauth/authorize`, { nonce: page.hidden('nonce'), request: page.hidden('request'), step, organization: owner.organizationId, duration: '2592000', ...choices });
}

/** The code of a redirect back to the client (303), with its `state` and `iss` checked. */
function codeOf(page: Page, state = 'state-1'): string {
  expect(page.status, page.html).toBe(303);
  const back = new URL(page.location ?? '');
  expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
  expect(back.searchParams.get('state')).toBe(state);
  expect(back.searchParams.get('iss')).toBe(url);
  return back.searchParams.get('code') ?? '';
}

async function token(params: Record<string, string>): Promise<{ status: number; body: Record<string, string | number> }> {
  const res = await fetch(`${url}/v1/oauth/token`, { method: 'POST', body: new URLSearchParams(params) });
  return { status: res.status, body: (await res.json()) as Record<string, string | number> };
}

/** A grant made through the page with a registered client: its first token pair and what made it. */
async function granted(account: Account = owner, choices: Record<string, string> = { 'access.github': 'read', 'access.slack': 'none' }) {
  const clientId = await register();
  const { verifier, challenge } = pkce();
  const code = codeOf(await consent(new FormBrowser(), authorizeUrl(clientId, challenge), account, choices));
  const pair = await token({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: clientId, redirect_uri: REDIRECT, resource: mcp });
  expect(pair.status, JSON.stringify(pair.body)).toBe(200);
  return { clientId, code, verifier, pair: pair.body as { access_token: string; refresh_token: string; expires_in: number; scope: string } };
}

/** `/mcp`'s answer to tools/list with `accessToken`. */
async function mcpStatus(accessToken: string): Promise<number> {
  const res = await fetch(mcp, {
    method: 'POST',
    headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  await res.body?.cancel();
  return res.status;
}

/** Runs the SDK's sign-in with `provider` up to the redirect to the authorization endpoint; the URL it built. */
async function sdkRedirect(provider: MemoryOAuthProvider): Promise<URL> {
  const transport = new StreamableHTTPClientTransport(new URL(mcp), { authProvider: provider });
  await expect(new Client({ name: 'host', version: '1' }).connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
  await transport.close();
  expect(provider.authorizationUrl).toBeDefined();
  return provider.authorizationUrl as URL;
}

/** The SDK's client connected with what `provider` holds. */
async function sdkClient(provider: MemoryOAuthProvider): Promise<Client> {
  const client = new Client({ name: 'host', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcp), { authProvider: provider }));
  clients.push(client);
  return client;
}

describe('an MCP host signs in with the SDK’s own OAuth support', () => {
  it('discovers from a 401, registers, sends PKCE, gets the consent over HTTP, calls tools, and refreshes; a used refresh token then ends the grant', async () => {
    const provider = new MemoryOAuthProvider(REDIRECT);
    const authorization = await sdkRedirect(provider);
    // Discovery found the endpoints, registration gave a public client, the request carries PKCE S256 and the resource.
    expect(`${authorization.origin}${authorization.pathname}`).toBe(`${url}/oauth/authorize`);
    expect(provider.client?.client_id).toMatch(/^[0-9A-Z]{26}$/);
    expect((provider.client as { client_secret?: string }).client_secret).toBeUndefined();
    expect(authorization.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorization.searchParams.get('resource')).toBe(mcp);
    expect(authorization.searchParams.get('client_id')).toBe(provider.client?.client_id);

    // The page: framed by nothing, no script, the client named; sign-in first (no session yet).
    const browser = new FormBrowser();
    const first = await browser.get(authorization);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(first.headers.get('x-frame-options')).toBe('DENY');
    expect(first.html).not.toContain('<script');
    expect(first.html).toContain('Test Host');
    expect(first.html).toContain('an app on this computer');
    const signedIn = await browser.post(`${url}/oauth/authorize`, { nonce: first.hidden('nonce'), request: first.hidden('request'), step: 'signin', email: owner.email, password: owner.password });
    expect(signedIn.status, signedIn.html).toBe(200);
    expect(browser.cookies.get('session')).toBeTruthy();
    expect(signedIn.html).toContain(owner.email);
    const approved = await browser.post(`${url}/oauth/authorize`, {
      nonce: signedIn.hidden('nonce'),
      request: signedIn.hidden('request'),
      step: 'approve',
      organization: owner.organizationId,
      'access.github': 'write',
      'access.slack': 'read',
      duration: '86400',
    });
    const code = codeOf(approved, provider.stateValue);

    const transport = new StreamableHTTPClientTransport(new URL(mcp), { authProvider: provider });
    await transport.finishAuth(code);
    expect(provider.stored?.access_token).toMatch(/^tsc_/);
    expect(provider.stored?.refresh_token).toMatch(/^tsr_/);
    expect(provider.stored?.scope).toBe('integrations:github:write integrations:slack:read');
    expect(provider.stored?.expires_in).toBeLessThanOrEqual(3600);

    const client = await sdkClient(provider);
    const tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
    expect(tools).toEqual(['github_api', 'integration_status', 'list_integrations', 'slack_api']);
    const listed = await client.callTool({ name: 'list_integrations', arguments: {} });
    expect(JSON.stringify(listed.structuredContent ?? listed.content)).toContain('octo');
    const user = await client.callTool({ name: 'github_api', arguments: { method: 'GET', path: '/user' } });
    expect(user.isError).toBeFalsy();
    expect((user.structuredContent as { status: number }).status).toBe(200);

    // The grant, as the person sees it; the audit chain names the client and the person.
    const grants = await t.fastify.inject({ url: '/v1/oauth/grants', headers: bearer(owner.token) });
    expect(grants.json().grants).toEqual([
      {
        id: expect.any(String),
        client: { id: provider.client?.client_id, name: 'Test Host' },
        scope: 'integrations:github:write integrations:slack:read',
        providers: ['github', 'slack'],
        access: 'write',
        endUser: null,
        createdAt: expect.any(String),
        expiresAt: expect.any(String),
        lastUsedAt: expect.any(String),
      },
    ]);
    const uses = await queryRows<{ detail: { agent: string; subject: { kind: string; id: string }; grant: string } }>(
      t.database.db,
      sql`SELECT detail FROM audit_logs WHERE action = 'capability.request' AND organization_id = ${owner.organizationId} AND detail->>'grant' = ${grants.json().grants[0].id}`,
    );
    expect(uses.length).toBeGreaterThan(0);
    expect(uses[0]?.detail).toMatchObject({ agent: 'Test Host', subject: { kind: 'user', id: owner.userId } });

    // A refresh: the access token is no longer good, the SDK refreshes on the 401 and retries.
    const firstPair = { ...provider.stored } as { access_token: string; refresh_token: string };
    provider.stored = { ...(provider.stored as object), access_token: 'tsc_expired0000000000000000000000000000000000' } as typeof provider.stored;
    const refreshedClient = await sdkClient(provider);
    expect((await refreshedClient.listTools()).tools.length).toBe(4);
    expect(provider.stored?.refresh_token).toMatch(/^tsr_/);
    expect(provider.stored?.refresh_token).not.toBe(firstPair.refresh_token);
    expect(await mcpStatus(provider.stored?.access_token ?? '')).toBe(200);

    // The first refresh token again: every token of the grant ends (RFC 9700 §4.14.2).
    const reused = await token({ grant_type: 'refresh_token', refresh_token: firstPair.refresh_token, client_id: provider.client?.client_id ?? '' });
    expect(reused).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect(await mcpStatus(provider.stored?.access_token ?? '')).toBe(401);
    expect(await mcpStatus(firstPair.access_token)).toBe(401);
    const latest = await token({ grant_type: 'refresh_token', refresh_token: provider.stored?.refresh_token ?? '', client_id: provider.client?.client_id ?? '' });
    expect(latest).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect((await t.fastify.inject({ url: '/v1/oauth/grants', headers: bearer(owner.token) })).json().grants).toEqual([]);
  });

  it('uses a client metadata document as its client id: fetched through the guard once, cached as its headers say; an existing session goes straight to consent', async () => {
    const documentUrl = `${docsOrigin}/clients/host.json`;
    const provider = new MemoryOAuthProvider(REDIRECT, documentUrl);
    const before = documentFetches.length;
    const authorization = await sdkRedirect(provider);
    expect(authorization.searchParams.get('client_id')).toBe(documentUrl);
    const browser = new FormBrowser();
    browser.cookies.set('session', owner.cookies.session ?? '');
    const page = await browser.get(authorization);
    expect(page.status, page.html).toBe(200);
    expect(page.html).toContain('Document Host');
    expect(page.html).toContain('127.0.0.1:');
    expect(page.html).not.toContain('name="password"');
    const approved = await browser.post(`${url}/oauth/authorize`, {
      nonce: page.hidden('nonce'),
      request: page.hidden('request'),
      step: 'approve',
      organization: owner.organizationId,
      'access.github': 'read',
      'access.slack': 'none',
      duration: '3600',
    });
    const transport = new StreamableHTTPClientTransport(new URL(mcp), { authProvider: provider });
    await transport.finishAuth(codeOf(approved, provider.stateValue));
    const client = await sdkClient(provider);
    expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(['github_api', 'integration_status', 'list_integrations']);
    // A second request within the document's max-age reads the cached copy.
    expect((await browser.get(authorizeUrl(documentUrl, pkce().challenge))).status).toBe(200);
    expect(documentFetches.slice(before).filter((path) => path === '/clients/host.json')).toHaveLength(1);
  });
});

describe('docs/agents.md', () => {
  it('runs docs/examples/host-oauth.mjs as the guide shows it: the SDK signs in through the page, the code comes back to its loopback redirect', async () => {
    const browser = new FormBrowser();
    const result = await signInAndCall({
      tesseraUrl: url,
      port: await freePort(),
      open: async (authorizationUrl) => {
        const approved = await consent(browser, authorizationUrl, owner, { 'access.github': 'read', 'access.slack': 'read' });
        expect(approved.status, approved.html).toBe(303);
        // The browser follows the redirect to the host's loopback listener.
        expect((await browser.get(approved.location ?? '')).status).toBe(200);
      },
    });
    expect(result.scope).toBe('integrations:github:read integrations:slack:read');
    expect(result.tools.sort()).toEqual(['github_api', 'integration_status', 'list_integrations', 'slack_api']);
    expect(JSON.stringify(result.integrations)).toContain('octo');
    expect(await readFile('docs/agents.md', 'utf8')).toContain((await readFile('docs/examples/host-oauth.mjs', 'utf8')).trim());
  });
});

describe('the authorization server’s metadata', () => {
  it('advertises the authorization endpoint, registration, S256, the grant types, metadata documents and iss; the SDK reads both documents', async () => {
    const { discoverOAuthServerInfo } = await import('@modelcontextprotocol/sdk/client/auth.js');
    const info = await discoverOAuthServerInfo(mcp);
    expect(String(info.authorizationServerUrl).replace(/\/$/, '')).toBe(url);
    expect(info.resourceMetadata?.resource).toBe(mcp);
    expect(info.authorizationServerMetadata).toMatchObject({
      issuer: url,
      authorization_endpoint: `${url}/oauth/authorize`,
      registration_endpoint: `${url}/oauth/register`,
      response_types_supported: ['code'],
      grant_types_supported: expect.arrayContaining(['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:token-exchange']),
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      client_id_metadata_document_supported: true,
      authorization_response_iss_parameter_supported: true,
    });
  });
});

describe('refusals at the authorization endpoint', () => {
  it('an unknown client, an unfetchable or lying document, or an unregistered redirect URI: a 400 page, never a redirect', async () => {
    const clientId = await register();
    const { challenge } = pkce();
    for (const [label, address] of [
      ['unknown registered id', authorizeUrl('01JAAAAAAAAAAAAAAAAAAAAAAA', challenge)],
      ['no client', authorizeUrl(clientId, challenge, { client_id: undefined })],
      ['missing document', authorizeUrl(`${docsOrigin}/clients/missing.json`, challenge)],
      ['document naming another client id', authorizeUrl(`${docsOrigin}/clients/liar.json`, challenge)],
      ['unregistered redirect', authorizeUrl(clientId, challenge, { redirect_uri: 'http://127.0.0.1:33333/elsewhere' })],
      ['another host', authorizeUrl(clientId, challenge, { redirect_uri: 'https://attacker.example/callback' })],
    ] as const) {
      const page = await new FormBrowser().get(address);
      expect(page.status, label).toBe(400);
      expect(page.location, label).toBeNull();
      expect(page.headers.get('content-type'), label).toContain('text/html');
      expect(page.html, label).not.toContain('name="nonce"');
    }
    // The loopback port aside (RFC 8252 §7.3), the redirect URI is matched exactly.
    const otherPort = await new FormBrowser().get(authorizeUrl(clientId, challenge, { redirect_uri: 'http://127.0.0.1:44444/callback' }));
    expect(otherPort.status).toBe(200);
  });

  it("shows the host the code goes to: a registered client's name is anyone's, so the page names the request's redirect URI's host, not another of its URIs", async () => {
    const clientId = await register(['https://claude.example/cb', REDIRECT], 'Claude');
    const { challenge } = pkce();
    const page = await new FormBrowser().get(authorizeUrl(clientId, challenge));
    expect(page.status, page.html).toBe(200);
    expect(page.html).toContain(new URL(REDIRECT).host);
    expect(page.html).not.toContain('claude.example');
  });

  it('a missing or plain PKCE challenge, another resource, an unknown scope: a redirect back with the error, state and iss', async () => {
    const clientId = await register();
    const { challenge } = pkce();
    for (const [overrides, error] of [
      [{ code_challenge: undefined }, 'invalid_request'],
      [{ code_challenge_method: 'plain' }, 'invalid_request'],
      [{ code_challenge_method: undefined }, 'invalid_request'],
      [{ resource: 'https://elsewhere.example/mcp' }, 'invalid_target'],
      [{ resource: undefined }, 'invalid_target'],
      [{ scope: 'integrations:nosuch:read' }, 'invalid_scope'],
      [{ scope: 'admin' }, 'invalid_scope'],
    ] as const) {
      const page = await new FormBrowser().get(authorizeUrl(clientId, challenge, overrides));
      expect(page.status, JSON.stringify(overrides)).toBe(302);
      const back = new URL(page.location ?? '');
      expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
      expect(Object.fromEntries(back.searchParams)).toMatchObject({ error, state: 'state-1', iss: url });
      expect(back.searchParams.get('code')).toBeNull();
    }
  });

  it('the consent form starts each provider at read where the organization shown first has connected it, else at no access', async () => {
    const clientId = await register();
    const fresh = await registerAndLogin(t.fastify, 'fresh');
    const selected = (page: Page, provider: string) => new RegExp(`name="access\\.${provider}">(?:(?!</select>).)*<option value="([a-z]+)" selected>`).exec(page.html)?.[1];
    const ownerBrowser = new FormBrowser();
    ownerBrowser.cookies.set('session', owner.cookies.session ?? '');
    const ownerPage = await ownerBrowser.get(authorizeUrl(clientId, pkce().challenge));
    expect([selected(ownerPage, 'github'), selected(ownerPage, 'slack')]).toEqual(['read', 'read']);
    const freshBrowser = new FormBrowser();
    freshBrowser.cookies.set('session', fresh.cookies.session ?? '');
    const freshPage = await freshBrowser.get(authorizeUrl(clientId, pkce().challenge));
    expect([selected(freshPage, 'github'), selected(freshPage, 'slack')]).toEqual(['none', 'none']);
  });

  it('deny: a redirect with access_denied; the request is then decided and its page no longer works', async () => {
    const clientId = await register();
    const browser = new FormBrowser();
    const page = await consent(browser, authorizeUrl(clientId, pkce().challenge), owner, {}, 'deny');
    expect(page.status).toBe(303);
    expect(Object.fromEntries(new URL(page.location ?? '').searchParams)).toMatchObject({ error: 'access_denied', state: 'state-1', iss: url });
  });

  it('the consent form is checked by the page itself: without its nonce, from another site, or posted twice, nothing is decided', async () => {
    const clientId = await register();
    const browser = new FormBrowser();
    browser.cookies.set('session', owner.cookies.session ?? '');
    const page = await browser.get(authorizeUrl(clientId, pkce().challenge));
    const fields = { request: page.hidden('request'), step: 'approve', organization: owner.organizationId, 'access.github': 'read', 'access.slack': 'none', duration: '3600' };
    const noNonce = await browser.post(`${url}/oauth/authorize`, fields);
    expect(noNonce.status).toBe(403);
    expect(noNonce.location).toBeNull();
    const crossSite = await browser.post(`${url}/oauth/authorize`, { ...fields, nonce: page.hidden('nonce') }, { 'sec-fetch-site': 'cross-site', origin: 'https://attacker.example' });
    expect(crossSite.status).toBe(403);
    expect(crossSite.location).toBeNull();
    // The nonce survived the refused posts (they never reached it); used once, it is gone.
    const nonce = noNonce.hidden('nonce');
    expect(codeOf(await browser.post(`${url}/oauth/authorize`, { ...fields, nonce }))).toBeTruthy();
    const replay = await browser.post(`${url}/oauth/authorize`, { ...fields, nonce });
    expect(replay.location).toBeNull();
    expect(replay.status).toBeGreaterThanOrEqual(400);
  });

  it('a wrong password shows the sign-in form again with the same words whether or not the e-mail exists; no session is set', async () => {
    const clientId = await register();
    const texts: string[] = [];
    for (const email of [owner.email, 'nobody-at-all@example.com']) {
      const browser = new FormBrowser();
      const page = await browser.get(authorizeUrl(clientId, pkce().challenge));
      const refused = await browser.post(`${url}/oauth/authorize`, { nonce: page.hidden('nonce'), request: page.hidden('request'), step: 'signin', email, password: 'wrong password entirely' });
      expect(refused.status).toBe(401);
      expect(browser.cookies.get('session')).toBeUndefined();
      texts.push(/role="alert">([^<]*)</.exec(refused.html)?.[1] ?? '');
    }
    expect(texts[0]).toBe('Invalid e-mail or password.');
    expect(texts[1]).toBe(texts[0]);
  });

  it('a member may grant read but not write: write shows the form again, nothing redirects', async () => {
    const member = await colleague('member');
    const clientId = await register();
    const browser = new FormBrowser();
    const refused = await consent(browser, authorizeUrl(clientId, pkce().challenge), member, { 'access.github': 'write', 'access.slack': 'none' });
    expect(refused.status).toBe(400);
    expect(refused.location).toBeNull();
    expect(refused.html).toContain('As a member you may grant read access only.');
    const read = await browser.post(`${url}/oauth/authorize`, {
      nonce: refused.hidden('nonce'),
      request: refused.hidden('request'),
      step: 'approve',
      organization: owner.organizationId,
      'access.github': 'read',
      'access.slack': 'none',
      duration: '3600',
    });
    expect(codeOf(read)).toBeTruthy();
  });
});

describe('hostile input', () => {
  it('a NUL or control character in state, a redirect URI, a chosen organization, a grant id or a handoff organization is a 4xx, never a 500', async () => {
    const clientId = await register();
    const state = await new FormBrowser().get(authorizeUrl(clientId, pkce().challenge, { state: 'a\u0000b' }));
    expect(state.status).toBe(302);
    expect(new URL(state.location ?? '').searchParams.get('error')).toBe('invalid_request');
    const registered = await fetch(`${url}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'X', redirect_uris: ['https://host.example/\u0000cb'] }) });
    expect(registered.status).toBe(400);
    const browser = new FormBrowser();
    browser.cookies.set('session', owner.cookies.session ?? '');
    const page = await browser.get(authorizeUrl(clientId, pkce().challenge));
    const chosen = await browser.post(`${url}/oauth/authorize`, { nonce: page.hidden('nonce'), request: page.hidden('request'), step: 'approve', organization: '\u0000', 'access.github': 'read', duration: '3600' });
    expect(chosen.status).toBe(400);
    expect(chosen.location).toBeNull();
    const grant = await t.fastify.inject({ method: 'DELETE', url: '/v1/oauth/grants/%00', headers: bearer(owner.token) });
    expect(grant.statusCode).toBe(404);
  });
});

describe('refusals at the token endpoint', () => {
  it('a code used twice: invalid_grant, and what its first use issued is revoked', async () => {
    const { clientId, code, verifier, pair } = await granted();
    expect(await mcpStatus(pair.access_token)).toBe(200);
    const again = await token({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: clientId, redirect_uri: REDIRECT });
    expect(again).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect(await mcpStatus(pair.access_token)).toBe(401);
    expect(await token({ grant_type: 'refresh_token', refresh_token: pair.refresh_token, client_id: clientId })).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
  });

  it('a code presented twice at the same moment: one pair is issued, and the grant it made is revoked all the same', async () => {
    const clientId = await register();
    const { verifier, challenge } = pkce();
    const code = codeOf(await consent(new FormBrowser(), authorizeUrl(clientId, challenge), owner, { 'access.github': 'read', 'access.slack': 'none' }));
    const params = { grant_type: 'authorization_code', code, code_verifier: verifier, client_id: clientId, redirect_uri: REDIRECT, resource: mcp };
    const answers = await Promise.all([token(params), token(params)]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 400]);
    const issued = answers.find((answer) => answer.status === 200)?.body as { access_token: string; refresh_token: string };
    expect(answers.find((answer) => answer.status === 400)?.body.error).toBe('invalid_grant');
    expect(await mcpStatus(issued.access_token)).toBe(401);
    expect(await token({ grant_type: 'refresh_token', refresh_token: issued.refresh_token, client_id: clientId })).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
  });

  it('a wrong verifier, redirect URI, client or resource is refused and leaves the code usable by its client', async () => {
    const clientId = await register();
    const otherClient = await register();
    const { verifier, challenge } = pkce();
    const code = codeOf(await consent(new FormBrowser(), authorizeUrl(clientId, challenge), owner, { 'access.github': 'read', 'access.slack': 'none' }));
    const base = { grant_type: 'authorization_code', code, code_verifier: verifier, client_id: clientId, redirect_uri: REDIRECT };
    expect(await token({ ...base, code_verifier: pkce().verifier })).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect(await token({ ...base, redirect_uri: 'http://127.0.0.1:33333/elsewhere' })).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect(await token({ ...base, client_id: otherClient })).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect(await token({ ...base, resource: 'https://elsewhere.example/mcp' })).toMatchObject({ status: 400, body: { error: 'invalid_target' } });
    const { client_id: _omitted, ...noClient } = base;
    expect(await token(noClient)).toMatchObject({ status: 400, body: { error: 'invalid_client' } });
    const ok = await token({ ...base, resource: mcp });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body).toMatchObject({ token_type: 'Bearer', access_token: expect.stringMatching(/^tsc_/), refresh_token: expect.stringMatching(/^tsr_/), scope: 'integrations:github:read' });
  });

  it('a refresh token rotates; presenting a used one revokes every token of the grant', async () => {
    const { clientId, pair } = await granted();
    const next = await token({ grant_type: 'refresh_token', refresh_token: pair.refresh_token, client_id: clientId, resource: mcp });
    expect(next.status).toBe(200);
    expect(next.body.refresh_token).not.toBe(pair.refresh_token);
    expect(await mcpStatus(String(next.body.access_token))).toBe(200);
    expect(await token({ grant_type: 'refresh_token', refresh_token: pair.refresh_token, client_id: clientId })).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect(await mcpStatus(String(next.body.access_token))).toBe(401);
    expect(await token({ grant_type: 'refresh_token', refresh_token: String(next.body.refresh_token), client_id: clientId })).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
  });
});

describe('a grant lives while its person may hold it', () => {
  it("a removed person's grant ends: the access token gets 401 and the refresh invalid_grant; their logout did not end it", async () => {
    const member = await colleague('member');
    const { clientId, pair } = await granted(member);
    // Logging out ends the session, not the grant.
    const logout = await t.fastify.inject({ method: 'POST', url: '/v1/logout', headers: bearer(member.token) });
    expect(logout.statusCode).toBe(200);
    expect(await mcpStatus(pair.access_token)).toBe(200);
    await t.database.db.execute(sql`DELETE FROM memberships WHERE organization_id = ${owner.organizationId} AND user_id = ${member.userId}`);
    expect(await mcpStatus(pair.access_token)).toBe(401);
    expect(await token({ grant_type: 'refresh_token', refresh_token: pair.refresh_token, client_id: clientId })).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
  });

  it('a write grant ends when its person is no longer an owner or admin', async () => {
    const admin = await colleague('admin');
    const { pair } = await granted(admin, { 'access.github': 'write', 'access.slack': 'none' });
    expect(await mcpStatus(pair.access_token)).toBe(200);
    await t.database.db.execute(sql`UPDATE memberships SET role = 'member' WHERE organization_id = ${owner.organizationId} AND user_id = ${admin.userId}`);
    expect(await mcpStatus(pair.access_token)).toBe(401);
  });
});

describe('grants, listed and revoked', () => {
  it('a member sees only their own; an owner sees and revokes any; revoking ends every token of it; another member cannot revoke it', async () => {
    const member = await colleague('member');
    const mine = await granted(member);
    const ownerGrant = await granted(owner);
    const memberList = (await t.fastify.inject({ url: '/v1/oauth/grants', headers: bearer(member.token) })).json().grants as { id: string }[];
    expect(memberList.map((grant) => grant.id)).toHaveLength(1);
    const ownerList = (await t.fastify.inject({ url: '/v1/oauth/grants', headers: bearer(owner.token) })).json().grants as { id: string }[];
    expect(ownerList.length).toBeGreaterThanOrEqual(2);
    const ownerGrantId = ownerList.find((grant) => !memberList.some((own) => own.id === grant.id))?.id ?? '';
    const memberTries = await t.fastify.inject({ method: 'DELETE', url: `/v1/oauth/grants/${ownerGrantId}`, headers: bearer(member.token) });
    expect(memberTries.statusCode).toBe(404);
    expect(await mcpStatus(ownerGrant.pair.access_token)).toBe(200);
    const revoked = await t.fastify.inject({ method: 'DELETE', url: `/v1/oauth/grants/${memberList[0]?.id}`, headers: bearer(owner.token) });
    expect(revoked.statusCode).toBe(200);
    expect(await mcpStatus(mine.pair.access_token)).toBe(401);
    expect(await token({ grant_type: 'refresh_token', refresh_token: mine.pair.refresh_token, client_id: mine.clientId })).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    const audit = await queryRows<{ action: string }>(t.database.db, sql`SELECT action FROM audit_logs WHERE target_id = ${memberList[0]?.id ?? ''} AND action = 'oauth_grant.revoked'`);
    expect(audit).toHaveLength(1);
  });

  it('RFC 7009 with either token of a grant ends the grant', async () => {
    const byRefresh = await granted();
    const res = await fetch(`${url}/v1/oauth/revoke`, { method: 'POST', body: new URLSearchParams({ token: byRefresh.pair.refresh_token }) });
    expect(res.status).toBe(200);
    expect(await mcpStatus(byRefresh.pair.access_token)).toBe(401);
    const byAccess = await granted();
    await fetch(`${url}/v1/oauth/revoke`, { method: 'POST', body: new URLSearchParams({ token: byAccess.pair.access_token }) });
    expect(await token({ grant_type: 'refresh_token', refresh_token: byAccess.pair.refresh_token, client_id: byAccess.clientId })).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
  });
});

describe('registration', () => {
  it('takes a public client, ignores metadata it does not use, and refuses bad redirect URIs and confidential clients in RFC 7591 shape', async () => {
    const post = (body: unknown) => fetch(`${url}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const ok = await post({ client_name: 'Desktop', redirect_uris: ['http://localhost/cb', 'com.example.desktop:/cb', 'https://host.example/cb'], response_types: ['code'], scope: 'x', logo_uri: 'https://x' });
    expect(ok.status).toBe(201);
    expect(await ok.json()).toMatchObject({ client_id: expect.stringMatching(/^[0-9A-Z]{26}$/), token_endpoint_auth_method: 'none', client_name: 'Desktop' });
    for (const [body, error] of [
      [{ client_name: 'X', redirect_uris: ['http://host.example/cb'] }, 'invalid_redirect_uri'],
      [{ client_name: 'X', redirect_uris: ['https://host.example/cb#frag'] }, 'invalid_redirect_uri'],
      [{ client_name: 'X', redirect_uris: ['javascript:alert(1)'] }, 'invalid_redirect_uri'],
      [{ client_name: 'X', redirect_uris: [] }, 'invalid_redirect_uri'],
      [{ redirect_uris: ['https://host.example/cb'] }, 'invalid_client_metadata'],
      [{ client_name: 'X', redirect_uris: ['https://host.example/cb'], token_endpoint_auth_method: 'client_secret_basic' }, 'invalid_client_metadata'],
    ] as const) {
      const res = await post(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(await res.json()).toMatchObject({ error });
    }
  });

  it('answers CORS for any origin without credentials on the sign-in endpoints, and never on the consent page', async () => {
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/oauth-protected-resource/mcp']) {
      const res = await fetch(`${url}${path}`, { headers: { origin: 'https://host.example' } });
      expect(res.headers.get('access-control-allow-origin'), path).toBe('*');
      expect(res.headers.get('access-control-allow-credentials'), path).toBeNull();
    }
    const preflight = await fetch(`${url}/v1/oauth/token`, { method: 'OPTIONS', headers: { origin: 'https://host.example', 'access-control-request-method': 'POST' } });
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    const registered = await fetch(`${url}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json', origin: 'https://host.example' }, body: JSON.stringify({ client_name: 'Web', redirect_uris: ['https://host.example/cb'] }) });
    expect(registered.headers.get('access-control-allow-origin')).toBe('*');
    const unauthorized = await fetch(mcp, { method: 'POST', headers: { origin: 'https://host.example', 'content-type': 'application/json' }, body: '{}' });
    expect(unauthorized.headers.get('access-control-allow-origin')).toBe('*');
    const page = await fetch(`${url}/oauth/authorize`, { headers: { origin: 'https://host.example' } });
    expect(page.headers.get('access-control-allow-origin')).toBeNull();
  });
});
