// Query parameters are plain values (docs/contract.md §5d; decision 231). Fastify's query-string
// parser makes `a=1&a=2` an array and keeps `a[]=1` / `a[k]=1` as parameters with bracketed
// names, which a route's schema never sees: `?endUser[]=x` read the organization's own token.
// Every route refuses those shapes with 400 INVALID_INPUT naming the parameter; `endUser` is one
// plain non-empty value wherever it is taken; the proxy still forwards the provider's own
// parameters as sent, repeated and bracketed ones included.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { type FakeGitHubUser, startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { startThroughPage } from './helpers/connect-page.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv } from './helpers/providers.ts';

const PRODUCT = 'http://127.0.0.1:4455';

let t: TestApp;
let gh: FakeProvider<FakeGitHubUser>;
let owner: Account;
let apiToken: string;

/** Every shape of `endUser` but one plain non-empty value. */
const BAD_END_USER = ['endUser[]=cust-a', 'endUser[0]=cust-a', 'endUser[id]=cust-a', 'endUser=cust-a&endUser=cust-a', 'endUser=cust-a&endUser=cust-b', 'endUser=', 'endUser'];

const call = (method: 'GET' | 'POST' | 'DELETE', url: string) => t.fastify.inject({ method, url, headers: bearer(apiToken) });

function expectRefused(res: { statusCode: number; body: string; json(): { code: string; details?: { path: string }[] } }, parameter: string, label: string): void {
  expect(res.statusCode, `${label}: ${res.body}`).toBe(400);
  expect(res.json().code, label).toBe('INVALID_INPUT');
  expect(res.json().details?.[0]?.path, label).toBe(`querystring.${parameter}`);
}

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  gh.addUser({ login: 'orgbot', email: 'orgbot@example.com' });
  gh.addUser({ login: 'alice', email: 'alice@example.com' });
  t = await createTestApp({ env: { ...providerEnv(gh), OAUTH_REDIRECT_ORIGINS: `http://127.0.0.1:8080,${PRODUCT}`, RATE_LIMIT_MAX: '0' } });
  owner = await registerAndLogin(t.fastify, 'customer');
  apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
  expect((await connect(t.fastify, owner.token, gh, 'orgbot')).statusCode).toBe(200);
  // An end user's own integration, through a connect session.
  const minted = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(apiToken), payload: { redirectUri: `${PRODUCT}/done`, allowedProviders: ['github'], endUser: { id: 'cust-a' } } });
  expect(minted.statusCode, minted.body).toBe(201);
  const { tx, authUrl } = await startThroughPage(t.fastify, minted.json().session.url, 'github');
  const back = new URL(gh.authorize(authUrl, 'alice').location);
  const landed = await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}` } });
  expect(new URL(landed.headers.location as string).searchParams.get('status')).toBe('connected');
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

describe('endUser is one plain value on every route that takes it', () => {
  it('reads the end user’s integration with a plain value, and never the organization’s own with any other shape', async () => {
    expect((await call('GET', '/v1/integrations/github/token?endUser=cust-a')).json().endUser).toMatchObject({ id: 'cust-a' });
    const routes: ['GET' | 'POST' | 'DELETE', string][] = [
      ['GET', '/v1/integrations/github/token'],
      ['GET', '/v1/integrations/github/status'],
      ['POST', '/v1/integrations/github/refresh'],
      ['GET', '/v1/integrations/github/proxy/user'],
      ['GET', '/v1/integrations'],
      ['DELETE', '/v1/integrations'],
    ];
    for (const [method, path] of routes) {
      for (const query of BAD_END_USER) {
        const res = await call(method, `${path}?${query}`);
        expectRefused(res, 'endUser', `${method} ${path}?${query}`);
        expect(res.body, `${method} ${path}?${query}`).not.toMatch(/gho_|accessToken/);
      }
    }
    // GraphQL's argument is a String: only an empty one is a shape to refuse.
    const graphql = await t.fastify.inject({ method: 'POST', url: '/query', headers: bearer(apiToken), payload: { query: '{ integrations(endUser: "") { id } }' } });
    expect(graphql.json().errors?.[0]?.extensions?.code, graphql.body).toBe('INVALID_INPUT');
    // Nothing was deleted by any of those, and the end user's integration still reads.
    expect((await call('GET', '/v1/integrations/github/token?endUser=cust-a')).statusCode).toBe(200);
    expect((await call('GET', '/v1/integrations')).json().integrations).toHaveLength(2);
  });
});

describe("every route's query parameters are plain values", () => {
  it('refuses a repeated or bracketed parameter on routes that do not take endUser, naming it', async () => {
    const cases: [string, string][] = [
      ['/v1/integrations?provider=github&provider=slack', 'provider'],
      ['/v1/integrations?provider[]=github', 'provider'],
      ['/v1/connect/sessions?status=pending&status=completed', 'status'],
      ['/v1/connect/sessions?first[]=2', 'first'],
      ['/v1/connect/sessions?after[x]=1', 'after'],
      ['/v1/integrations/github/status?unknown=1&unknown=2', 'unknown'],
      ['/v1/integrations/github/token?unknown[]=1', 'unknown'],
    ];
    for (const [url, parameter] of cases) expectRefused(await call('GET', url), parameter, url);
    // The same parameters, plain, are fine.
    expect((await call('GET', '/v1/integrations?provider=github')).statusCode).toBe(200);
    expect((await call('GET', '/v1/connect/sessions?status=pending&first=2')).statusCode).toBe(200);
  });

  it('the proxy forwards the provider’s own parameters as sent — repeated, bracketed, empty — and takes endUser out', async () => {
    const before = gh.requests.length;
    const res = await call('GET', '/v1/integrations/github/proxy/user?per_page=1&per_page=2&filter[state]=open&labels[]=a&empty=&endUser=cust-a');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().login).toBe('alice');
    const sent = gh.requests.slice(before).find((request) => request.path.endsWith('/user') && request.search !== '');
    expect(sent?.search).toBe('?per_page=1&per_page=2&filter[state]=open&labels[]=a&empty=');
  });
});
