// The consent handoff (docs/contract.md §9a): with OAUTH_CONSENT_HANDOFF_URL set, an MCP client's
// authorization request goes to the product, which signs its own person in and approves or denies
// it with its API or service token; such a grant lives while that token does, and that token lists
// and revokes it. Registration is closed here, so the client is a metadata document (http on a
// loopback host, as development allows).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { pkce } from './helpers/mcp-oauth.ts';
import { connect, providerEnv } from './helpers/providers.ts';

const HANDOFF = 'https://product.example/mcp-consent';
const REDIRECT = 'http://127.0.0.1:33333/callback';
const PUBLIC = 'http://127.0.0.1:8080';

let t: TestApp;
let gh: FakeProvider;
let owner: Account;
let apiToken: string;
let serviceToken: string;
let documents: Server;
let clientId: string;

beforeAll(async () => {
  gh = await startFakeGitHub();
  gh.addUser({ login: 'octo', email: 'octo@example.com' });
  documents = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=60' });
    response.end(JSON.stringify({ client_id: clientId, client_name: 'Product Host', redirect_uris: [REDIRECT] }));
  });
  await new Promise<void>((resolve) => documents.listen(0, '127.0.0.1', resolve));
  clientId = `http://127.0.0.1:${(documents.address() as AddressInfo).port}/client.json`;
  t = await createTestApp({ env: { ...providerEnv(gh), RATE_LIMIT_MAX: '0', OAUTH_CONSENT_HANDOFF_URL: HANDOFF, MCP_CLIENT_REGISTRATION: 'closed', OAUTH_REDIRECT_ORIGINS: PUBLIC } });
  owner = await registerAndLogin(t.fastify, 'owner');
  expect((await connect(t.fastify, owner.token, gh, 'octo')).statusCode).toBe(200);
  apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "product") { token } }')).createAPIToken.token;
  await t.database.db.execute(sql`UPDATE users SET system_admin = true WHERE id = ${owner.userId}`);
  serviceToken = (await graphqlData(t.fastify, owner.token, 'mutation { createServiceToken(name: "product backend") { token } }')).createServiceToken.token;
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
  await new Promise<void>((resolve) => (documents ? documents.close(() => resolve()) : resolve()));
});

/** Starts an authorization request; the handoff's request id and the PKCE verifier. */
async function handedOff(state = 'state-h', scope = 'integrations:github:read'): Promise<{ request: string; verifier: string }> {
  const { verifier, challenge } = pkce();
  const query = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state, scope, resource: `${PUBLIC}/mcp` });
  const res = await t.fastify.inject({ url: `/oauth/authorize?${query}` });
  expect(res.statusCode, res.body).toBe(302);
  const location = new URL(res.headers.location as string);
  expect(`${location.origin}${location.pathname}`).toBe(HANDOFF);
  return { request: location.searchParams.get('request') ?? '', verifier };
}

const approve = (token: string, request: string, body: Record<string, unknown>) => t.fastify.inject({ method: 'POST', url: `/v1/oauth/authorizations/${request}/approve`, headers: bearer(token), payload: body });
const deny = (token: string, request: string) => t.fastify.inject({ method: 'POST', url: `/v1/oauth/authorizations/${request}/deny`, headers: bearer(token) });

async function exchange(code: string, verifier: string) {
  const res = await t.fastify.inject({
    method: 'POST',
    url: '/v1/oauth/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: clientId, redirect_uri: REDIRECT }).toString(),
  });
  return { status: res.statusCode, body: res.json() };
}

async function mcpStatus(accessToken: string): Promise<number> {
  const res = await t.fastify.inject({
    method: 'POST',
    url: '/mcp',
    headers: { ...bearer(accessToken), accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
  });
  return res.statusCode;
}

describe('the consent handoff', () => {
  it('sends the request to the product; its API token reads it, approves it once, and the code gives a grant that token lists and revokes', async () => {
    const { request, verifier } = await handedOff();
    expect(request).toMatch(/^[A-Za-z0-9_-]{43,}$/);
    const read = await t.fastify.inject({ url: `/v1/oauth/authorizations/${request}`, headers: bearer(apiToken) });
    expect(read.statusCode, read.body).toBe(200);
    expect(read.json()).toEqual({
      success: true,
      authorization: { id: request, client: { id: clientId, name: 'Product Host', host: new URL(clientId).host }, redirectUri: REDIRECT, scope: 'integrations:github:read', expiresAt: expect.any(String), status: 'pending' },
    });

    const approved = await approve(apiToken, request, { scope: 'integrations:github:read', expiresIn: 7200 });
    expect(approved.statusCode, approved.body).toBe(200);
    const back = new URL(approved.json().redirectTo);
    expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
    expect(back.searchParams.get('state')).toBe('state-h');
    expect(back.searchParams.get('iss')).toBe(PUBLIC);
    // Decided once: approving or denying again is a conflict.
    expect((await approve(apiToken, request, { scope: 'integrations:github:read' })).statusCode).toBe(409);
    expect((await deny(apiToken, request)).statusCode).toBe(409);

    const pair = await exchange(back.searchParams.get('code') ?? '', verifier);
    expect(pair.status, JSON.stringify(pair.body)).toBe(200);
    expect(pair.body.scope).toBe('integrations:github:read');
    expect(await mcpStatus(pair.body.access_token)).toBe(200);
    const grants = await t.fastify.inject({ url: '/v1/oauth/grants', headers: bearer(apiToken) });
    expect(grants.json().grants).toEqual([expect.objectContaining({ client: { id: clientId, name: 'Product Host' }, access: 'read', endUser: null })]);
    const revoked = await t.fastify.inject({ method: 'DELETE', url: `/v1/oauth/grants/${grants.json().grants[0].id}`, headers: bearer(apiToken) });
    expect(revoked.statusCode).toBe(200);
    expect(await mcpStatus(pair.body.access_token)).toBe(401);
  });

  it('a grant approved by an API token lives while that token does', async () => {
    const minted = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "short-lived") { id token } }')).createAPIToken;
    const { request, verifier } = await handedOff();
    const approved = await approve(minted.token, request, { scope: 'integrations:github:read' });
    const pair = await exchange(new URL(approved.json().redirectTo).searchParams.get('code') ?? '', verifier);
    expect(await mcpStatus(pair.body.access_token)).toBe(200);
    await t.database.db.execute(sql`UPDATE api_tokens SET revoked_at = now() WHERE id = ${minted.id}`);
    expect(await mcpStatus(pair.body.access_token)).toBe(401);
    const refreshed = await t.fastify.inject({
      method: 'POST',
      url: '/v1/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: pair.body.refresh_token, client_id: clientId }).toString(),
    });
    expect(refreshed.json()).toMatchObject({ error: 'invalid_grant' });
  });

  it('deny: the redirect carries access_denied, state and iss; a replay is a conflict; an unknown or expired request is 404', async () => {
    const { request } = await handedOff('state-d');
    const denied = await deny(apiToken, request);
    expect(denied.statusCode).toBe(200);
    expect(Object.fromEntries(new URL(denied.json().redirectTo).searchParams)).toEqual({ error: 'access_denied', error_description: expect.any(String), state: 'state-d', iss: PUBLIC });
    expect((await deny(apiToken, request)).statusCode).toBe(409);
    expect((await approve(apiToken, request, { scope: 'integrations:github:read' })).statusCode).toBe(409);
    // Decided once: a second approval is a conflict whatever it asks, even a scope that would be refused.
    expect((await approve(apiToken, request, { scope: 'integrations:nosuchprovider:write' })).statusCode).toBe(409);
    const unknown = await t.fastify.inject({ url: `/v1/oauth/authorizations/${'A'.repeat(43)}`, headers: bearer(apiToken) });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().code).toBe('NOT_FOUND');
    const stale = await handedOff();
    await t.database.db.execute(sql`UPDATE oauth_authorizations SET expires_at = now() - interval '1 second' WHERE status = 'pending'`);
    expect((await t.fastify.inject({ url: `/v1/oauth/authorizations/${stale.request}`, headers: bearer(apiToken) })).statusCode).toBe(404);
    expect((await approve(apiToken, stale.request, { scope: 'integrations:github:read' })).statusCode).toBe(404);
  });

  it('a service token names the organization; an API token approves for its own only; the scope stays within the request and the token; a person cannot answer', async () => {
    const { request, verifier } = await handedOff();
    const noOrganization = await approve(serviceToken, request, { scope: 'integrations:github:read' });
    expect(noOrganization.statusCode).toBe(400);
    expect(noOrganization.json()).toMatchObject({ code: 'INVALID_INPUT', details: [{ path: 'organizationId' }] });
    const elsewhere = await approve(apiToken, request, { scope: 'integrations:github:read', organizationId: '01JAAAAAAAAAAAAAAAAAAAAAAA' });
    expect(elsewhere.statusCode).toBe(400);
    const wider = await approve(apiToken, request, { scope: 'integrations:github:write' });
    expect(wider.statusCode).toBe(400);
    expect(wider.json().code).toBe('INVALID_INPUT');
    const notConnected = await approve(apiToken, request, { scope: 'integrations:github:read', endUser: { id: 'x' }, expiresIn: 60 });
    expect(notConnected.statusCode).toBe(400);
    const person = await approve(owner.token, request, { scope: 'integrations:github:read' });
    expect(person.statusCode).toBe(403);
    const approved = await approve(serviceToken, request, { scope: 'integrations:github:read', organizationId: owner.organizationId });
    expect(approved.statusCode, approved.body).toBe(200);
    const pair = await exchange(new URL(approved.json().redirectTo).searchParams.get('code') ?? '', verifier);
    expect(pair.status).toBe(200);
    expect(await mcpStatus(pair.body.access_token)).toBe(200);
    const listed = await t.fastify.inject({ url: '/v1/oauth/grants', headers: { ...bearer(serviceToken), 'x-organization-id': owner.organizationId } });
    expect(listed.statusCode, listed.body).toBe(200);
    expect(listed.json().grants.length).toBeGreaterThanOrEqual(1);
  });
});

describe('the consent page under the handoff', () => {
  it('decides nothing: a post naming a handed-off request gets the 400 page and the request stays pending', async () => {
    const { request } = await handedOff();
    const posted = await t.fastify.inject({
      method: 'POST',
      url: '/oauth/authorize',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `session=${owner.cookies.session}` },
      payload: new URLSearchParams({ request, step: 'deny', nonce: 'x'.repeat(43) }).toString(),
    });
    expect(posted.statusCode).toBe(400);
    expect(posted.headers.location).toBeUndefined();
    expect(posted.body).not.toContain('name="nonce"');
    const read = await t.fastify.inject({ url: `/v1/oauth/authorizations/${request}`, headers: bearer(apiToken) });
    expect(read.json().authorization.status).toBe('pending');
  });
});

describe('registration closed', () => {
  it('answers 403 access_denied, and the metadata has no registration endpoint', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/oauth/register', payload: { client_name: 'X', redirect_uris: [REDIRECT] } });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ error: 'access_denied', error_description: 'registration is closed' });
    const metadata = (await t.fastify.inject({ url: '/.well-known/oauth-authorization-server' })).json();
    expect(metadata.registration_endpoint).toBeUndefined();
    expect(metadata.authorization_endpoint).toBe(`${PUBLIC}/oauth/authorize`);
  });
});
