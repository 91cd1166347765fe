import { createConfig, lintFromString } from '@redocly/openapi-core';
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../src/ground/errors.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, browser, registerAndLogin } from './helpers/identity.ts';
import { providerEnv, REDIRECT_URI } from './helpers/providers.ts';

// biome-ignore lint/suspicious/noExplicitAny: a parsed OpenAPI document, read field by field
type Json = Record<string, any>;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

let t: TestApp;
let gh: FakeProvider;
let owner: Account;
let document: Json;
let served: string;

/** Every operation of the served document, routes and webhooks, with where it is. */
function operations(doc: Json = document, withWebhooks = true): { where: string; method: string; path: string; operation: Json }[] {
  const items = [...Object.entries(doc.paths as Json), ...(withWebhooks ? Object.entries((doc.webhooks ?? {}) as Json).map(([name, item]) => [`webhook ${name}`, item] as [string, Json]) : [])];
  return items.flatMap(([path, item]) => METHODS.filter((method) => item[method]).map((method) => ({ where: `${method.toUpperCase()} ${path}`, method, path, operation: item[method] as Json })));
}

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  t = await createTestApp({
    env: { ...providerEnv(gh), RATE_LIMIT_MAX: '0' },
    // Routes as a later feature might add them: a summary, but no tag, no operationId, a wildcard, header credentials only.
    routes: (app) => {
      const config = { auth: 'authenticated' as const, errors: [] };
      app.get('/v1/widgets/:id', { config, schema: { summary: 'A widget', params: Type.Object({ id: Type.String() }), response: { 200: Type.Object({ id: Type.String() }) } } }, async () => ({ id: 'w' }));
      app.post('/v1/widgets', { config, schema: { summary: 'Make a widget', body: Type.Object({ name: Type.String() }), response: { 201: Type.Object({ id: Type.String() }) } } }, async () => ({ id: 'w' }));
      app.get('/v1/widgets/:id/files/*', { config: { ...config, credentials: 'header' as const }, schema: { summary: "A widget's file", response: { 200: Type.Object({ id: Type.String() }) } } }, async () => ({ id: 'w' }));
    },
  });
  owner = await registerAndLogin(t.fastify, 'contract-owner');
  const res = await t.fastify.inject({ url: '/api-docs' });
  served = res.body;
  document = res.json();
});
afterAll(async () => {
  await t?.close();
  await gh?.close();
});

describe('the served OpenAPI document, linted', () => {
  it('has no error under Redocly’s recommended rules, and no warning but known truths', async () => {
    const config = await createConfig({ extends: ['recommended'] });
    const problems = await lintFromString({ source: served, absoluteRef: 'http://tessera.test/api-docs', config });
    const seen = problems.map((problem) => `${problem.severity} ${problem.ruleId} ${problem.location[0]?.pointer ?? ''}: ${problem.message}`);
    expect(seen.filter((line) => line.startsWith('error'))).toEqual([]);
    // True as they are: a health route, this document or an OAuth metadata document (§9) never answers 4xx, GET /query never 2xx (only 405).
    const allowed = /^warn (operation-4xx-response #\/paths\/~1(livez|readyz|api-docs|\.well-known~1oauth-protected-resource~1mcp|\.well-known~1oauth-authorization-server)\/|operation-2xx-response #\/paths\/~1query\/get\/)/;
    expect(seen.filter((line) => !allowed.test(line))).toEqual([]);
  });
});

describe('every operation, whenever it was added', () => {
  it('has a unique operationId of the form <tag>_<verb…> and a tag', () => {
    const ids = new Set<string>();
    for (const { where, operation } of operations()) {
      expect(operation.tags?.length, where).toBeGreaterThan(0);
      // Webhooks keep the ids they were published with (`webhook_<type>`).
      if (!where.includes(' webhook ')) {
        expect(operation.operationId, where).toMatch(/^[a-z][A-Za-z]*_[a-z][A-Za-z0-9]*$/);
        expect(operation.operationId.split('_')[0], where).toBe(operation.tags[0].replace(/-(.)/g, (_: string, c: string) => c.toUpperCase()));
      }
      expect(ids.has(operation.operationId), `${where}: ${operation.operationId} twice`).toBe(false);
      ids.add(operation.operationId);
    }
    const byId = Object.fromEntries(operations().map(({ where, operation }) => [operation.operationId, where]));
    expect(byId).toMatchObject({
      integrations_getToken: 'GET /v1/integrations/{provider}/token',
      integrations_list: 'GET /v1/integrations',
      integrations_getProxy: 'GET /v1/integrations/{provider}/proxy/{path}',
      integrations_postProxy: 'POST /v1/integrations/{provider}/proxy/{path}',
      identity_login: 'POST /v1/login',
      connect_createSession: 'POST /v1/connect/sessions',
      organizations_create: 'POST /v1/organizations',
      // The routes added here with nothing but a path get the same treatment.
      widgets_get: 'GET /v1/widgets/{id}',
      widgets_create: 'POST /v1/widgets',
      widgets_getFile: 'GET /v1/widgets/{id}/files/{path}',
    });
  });

  it('states its security: none on public and unauthenticated routes, bearer only where cookies are refused', () => {
    for (const { where, operation } of operations(document, false)) expect(Array.isArray(operation.security), where).toBe(true);
    const security = (where: string) => operations().find((entry) => entry.where === where)?.operation.security;
    for (const open of ['GET /livez', 'GET /api-docs', 'POST /v1/login', 'POST /v1/register', 'GET /v1/csrf', 'POST /v1/integrations/oauth/callback', 'GET /query']) expect(security(open), open).toEqual([]);
    for (const headerOnly of ['GET /v1/integrations/{provider}/token', 'GET /v1/integrations/{provider}/proxy/{path}', 'POST /v1/integrations/{provider}/proxy/{path}', 'GET /v1/widgets/{id}/files/{path}']) {
      expect(security(headerOnly), headerOnly).toEqual([{ bearerAuth: [] }]);
    }
    // Connect sessions take the console's cookie session too (docs/contract.md §5a).
    for (const either of ['GET /v1/integrations', 'POST /v1/logout', 'POST /query', 'GET /v1/widgets/{id}', 'GET /v1/connect/sessions/{id}', 'POST /v1/connect/sessions']) expect(security(either), either).toEqual([{ bearerAuth: [] }, { sessionCookie: [] }]);
  });

  it('documents X-Request-ID on every response, Retry-After on every 429 and 503', () => {
    expect(Object.keys(document.components.headers)).toEqual(expect.arrayContaining(['X-Request-ID', 'Retry-After']));
    for (const { where, operation } of operations(document, false)) {
      for (const [status, response] of Object.entries(operation.responses as Json)) {
        expect(response.headers?.['X-Request-ID'], `${where} ${status}`).toEqual({ $ref: '#/components/headers/X-Request-ID' });
        if (status === '429' || status === '503') expect(response.headers?.['Retry-After'], `${where} ${status}`).toEqual({ $ref: '#/components/headers/Retry-After' });
      }
    }
  });

  it('answers errors in the one named shape, whose code is an enum of the error table', () => {
    const error = document.components.schemas.Error;
    expect(error.properties.code.enum).toEqual(Object.keys(ERROR_CODES));
    for (const { where, operation } of operations(document, false)) {
      for (const [status, response] of Object.entries(operation.responses as Json)) {
        if (!/^[45]\d\d$/.test(status)) continue;
        // The error shape, or beside a route's own answer for that status (a health check's 503, a provider's 404).
        const schema = response.content['application/json'].schema;
        const refs = schema.anyOf ? schema.anyOf.map((entry: Json) => entry.$ref) : [schema.$ref];
        expect(refs, `${where} ${status}`).toContain('#/components/schemas/Error');
      }
    }
    expect(document.paths['/readyz'].get.responses['503'].content['application/json'].schema.anyOf).toHaveLength(2);
  });
});

describe('shared shapes', () => {
  it('are named components referenced where they are used', () => {
    const names = ['Error', 'User', 'Session', 'Organization', 'OrganizationWithRole', 'Provider', 'Integration', 'IntegrationStatus', 'Token', 'ConnectSession', 'NewConnectSession', 'EndUser'];
    expect(Object.keys(document.components.schemas)).toEqual(expect.arrayContaining(names));
    for (const name of names) expect(served, name).toContain(`"$ref":"#/components/schemas/${name}"`);
    const paths = document.paths;
    expect(paths['/v1/integrations'].get.responses['200'].content['application/json'].schema.properties.integrations.items).toEqual({ $ref: '#/components/schemas/Integration' });
    expect(paths['/v1/integrations/{provider}/token'].get.responses['200'].content['application/json'].schema.properties.token).toEqual({ $ref: '#/components/schemas/Token' });
    expect(paths['/v1/integrations/{provider}/status'].get.responses['200'].content['application/json'].schema.properties.status).toEqual({ $ref: '#/components/schemas/IntegrationStatus' });
    expect(paths['/v1/login'].post.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Session' });
  });
});

describe('the proxy', () => {
  const proxy = () => document.paths['/v1/integrations/{provider}/proxy/{path}'];

  it('names its multi-segment parameter for generators, never {*}', () => {
    expect(served).not.toContain('{*}');
    for (const method of ['get', 'head', 'post', 'put', 'patch', 'delete']) {
      const parameter = proxy()[method].parameters.find((p: Json) => p.in === 'path' && p.name === 'path');
      expect(parameter, method).toMatchObject({ required: true, 'x-ms-skip-url-encoding': true, description: expect.stringContaining('user/repos') });
      expect(parameter.description).toMatch(/segments/);
    }
  });

  it("documents the provider's own answers as the provider's, and Tessera's errors in the error shape", () => {
    const responses = proxy().get.responses;
    for (const passthrough of ['200', '3XX', 'default']) expect(JSON.stringify(responses[passthrough]), passthrough).not.toContain('#/components/schemas/Error');
    // A provider's 401 is a revocation (409 TOKEN_VALIDATION_FAILED), its 429 and 5xx become ours: those statuses are only Tessera's.
    for (const ours of ['401', '429', '500', '502', '503']) expect(responses[ours].content['application/json'].schema, ours).toEqual({ $ref: '#/components/schemas/Error' });
    for (const either of ['400', '403', '404', '409']) {
      expect(responses[either].content['application/json'].schema.anyOf, either).toEqual([{ $ref: '#/components/schemas/Error' }, expect.not.objectContaining({ $ref: expect.anything() })]);
      expect(responses[either].description).toMatch(/provider's own/);
    }
    expect(responses['404'].description).toContain('INTEGRATION_NOT_FOUND');
    expect(responses['429'].description).toContain('PROVIDER_RATE_LIMITED');
  });
});

describe('documented behaviour is the real behaviour', () => {
  it('refuses a cookie session (401) on every route whose security names the bearer scheme alone', async () => {
    const headerOnly = operations(document, false).filter(({ operation }) => JSON.stringify(operation.security) === JSON.stringify([{ bearerAuth: [] }]));
    expect(headerOnly.length).toBeGreaterThanOrEqual(8);
    for (const { where, method, path } of headerOnly) {
      const url = path.replace('{provider}', 'github').replace('{path}', 'user').replace('{id}', '01ARZ3NDEKTSV4RRFFQ69G5FAV');
      const payload = path === '/v1/connect/sessions' ? { redirectUri: REDIRECT_URI } : {};
      const res = await t.fastify.inject({ method: method.toUpperCase() as 'GET', url, headers: { ...browser(owner), 'content-type': 'application/json' }, ...(method === 'get' || method === 'head' ? {} : { payload }) });
      expect(res.statusCode, `${where}: ${res.body}`).toBe(401);
    }
    // The same cookie session is accepted where the document says so.
    expect((await t.fastify.inject({ url: '/v1/integrations', headers: browser(owner) })).statusCode).toBe(200);
  });

  it('sets the cookies each operation documents in Set-Cookie', async () => {
    const documented = (method: string, path: string) => document.paths[path][method].responses['200'].headers['Set-Cookie']?.description ?? '';
    const names = (res: { cookies: { name: string }[] }) => res.cookies.map((cookie) => cookie.name).sort();
    const login = await t.fastify.inject({ method: 'POST', url: '/v1/login', payload: { email: owner.email, password: owner.password } });
    expect(names(login)).toEqual(['csrf_token', 'session']);
    expect(documented('post', '/v1/login')).toMatch(/`session`.*`csrf_token`/);
    const csrf = await t.fastify.inject({ url: '/v1/csrf' });
    expect(names(csrf)).toEqual(['csrf_token']);
    expect(documented('get', '/v1/csrf')).toMatch(/`csrf_token`/);
    const start = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/start', headers: bearer(owner.token), payload: { provider: 'github', redirectUri: REDIRECT_URI } });
    expect(start.statusCode, start.body).toBe(200);
    expect(names(start)).toEqual(['oauth_tx']);
    expect(documented('post', '/v1/integrations/oauth/start')).toMatch(/`oauth_tx`/);
    const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(login.json().accessToken), payload: { organizationId: owner.organizationId } });
    expect(names(switched)).toEqual(['csrf_token', 'session']);
    expect(documented('post', '/v1/account/switch')).toMatch(/`session`.*`csrf_token`/);
    const logout = await t.fastify.inject({ method: 'POST', url: '/v1/logout', headers: bearer(login.json().accessToken) });
    expect(names(logout)).toEqual(['csrf_token', 'session']);
    // Nothing else documents cookies.
    const withCookies = operations(document, false).filter(({ operation }) => Object.values(operation.responses as Json).some((response) => response.headers?.['Set-Cookie']));
    expect(withCookies.map(({ where }) => where).sort()).toEqual(['GET /v1/csrf', 'POST /v1/account/switch', 'POST /v1/integrations/oauth/start', 'POST /v1/login', 'POST /v1/logout']);
  });

  it("documents the organization name's limit as the one enforced (100)", async () => {
    const body = document.paths['/v1/organizations'].post.requestBody.content['application/json'].schema;
    expect(body.properties.name.maxLength).toBe(100);
    const create = (name: string) => t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(owner.token), payload: { name } });
    expect((await create('n'.repeat(100))).statusCode).toBe(201);
    const over = await create('n'.repeat(101));
    expect(over.statusCode).toBe(400);
    expect(over.json().code).toBe('INVALID_INPUT');
  });
});
