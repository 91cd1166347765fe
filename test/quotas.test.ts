/**
 * Capacity is not for sale by credential (docs/contract.md §6): a user creates a bounded number of
 * organizations, an organization holds a bounded number of live API tokens, and every credential
 * acting in one organization shares that organization's rate limit — so more tokens never mean
 * more requests.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { graphqlData, graphqlRequest } from './helpers/graphql.ts';
import { bearer, registerAndLogin } from './helpers/identity.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';

const CREATE_ORG = 'mutation($name: String!) { createOrganization(name: $name) { id } }';
const CREATE_API_TOKEN = 'mutation($name: String!) { createAPIToken(name: $name) { token id } }';

describe('quotas', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { LIMIT_ORGANIZATIONS_PER_USER: '3', LIMIT_API_TOKENS: '2', RATE_LIMIT_MAX: '0' } });
  });
  afterAll(() => t.close());

  it('refuses a user organizations past LIMIT_ORGANIZATIONS_PER_USER, over GraphQL and REST, naming the limit', async () => {
    // Registration made the first (personal) one.
    const account = await registerAndLogin(t.fastify, 'orgs');
    await graphqlData(t.fastify, account.token, CREATE_ORG, { name: 'Second' });
    const rest = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(account.token), payload: { name: 'Third' } });
    expect(rest.statusCode, rest.body).toBe(201);

    const overGraphql = await graphqlRequest(t.fastify, account.token, CREATE_ORG, { name: 'Fourth' });
    expect(overGraphql.body.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    expect(overGraphql.body.errors?.[0]?.message).toMatch(/LIMIT_ORGANIZATIONS_PER_USER/);
    const overRest = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(account.token), payload: { name: 'Fourth' } });
    expect(overRest.statusCode).toBe(409);
    expect(overRest.json()).toMatchObject({ code: 'CONFLICT' });
    const orgs = await graphqlData(t.fastify, account.token, '{ organizations { id } }');
    expect(orgs.organizations).toHaveLength(3);

    // Another user has a quota of their own.
    const other = await registerAndLogin(t.fastify, 'orgs-other');
    await graphqlData(t.fastify, other.token, CREATE_ORG, { name: 'Theirs' });
  });

  it('refuses an organization API tokens past LIMIT_API_TOKENS live ones; a revoked one frees its place', async () => {
    const account = await registerAndLogin(t.fastify, 'tokens');
    const first = await graphqlData(t.fastify, account.token, CREATE_API_TOKEN, { name: 'one' });
    await graphqlData(t.fastify, account.token, CREATE_API_TOKEN, { name: 'two' });
    const over = await graphqlRequest(t.fastify, account.token, CREATE_API_TOKEN, { name: 'three' });
    expect(over.body.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    expect(over.body.errors?.[0]?.message).toMatch(/LIMIT_API_TOKENS/);
    expect(over.raw).not.toMatch(/tsa_/);

    await graphqlData(t.fastify, account.token, 'mutation($id: ID!) { revokeAPIToken(id: $id) { id } }', { id: first.createAPIToken.id });
    const again = await graphqlData(t.fastify, account.token, CREATE_API_TOKEN, { name: 'three' });
    expect(again.createAPIToken.token).toMatch(/^tsa_/);
  });

  it('counts concurrent creations against each other', async () => {
    const account = await registerAndLogin(t.fastify, 'race');
    const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => graphqlRequest(t.fastify, account.token, CREATE_API_TOKEN, { name: `r${i}` })));
    const created = answers.filter((answer) => answer.body.data?.createAPIToken?.token);
    expect(created).toHaveLength(2);
  });
});

describe('the organization-wide rate limit', () => {
  it('is shared by every credential of one organization: three API tokens together get no more than RATE_LIMIT_ORGANIZATION_MAX', async () => {
    const t = await createTestApp({ env: { RATE_LIMIT_MAX: '5', RATE_LIMIT_ORGANIZATION_MAX: '8', RATE_LIMIT_WINDOW: '60', LIMIT_API_TOKENS: '5' } });
    try {
      const account = await registerAndLogin(t.fastify, 'limits');
      const tokens: string[] = [];
      for (let i = 0; i < 3; i++) tokens.push((await graphqlData(t.fastify, account.token, CREATE_API_TOKEN, { name: `t${i}` })).createAPIToken.token);
      const statuses: number[] = [];
      for (let round = 0; round < 4; round++) {
        for (const token of tokens) {
          // Both a route that checks the credential itself (the token read) and one that does not.
          const url = round % 2 === 0 ? '/v1/integrations' : '/v1/integrations/github/token';
          statuses.push((await t.fastify.inject({ method: 'GET', url, headers: bearer(token) })).statusCode);
        }
      }
      // Each token alone stays under RATE_LIMIT_MAX (4 requests < 5), yet together they pass the organization's 8:
      // the owner's 3 GraphQL requests counted there too, so 5 more pass and the rest are refused.
      expect(statuses.slice(0, 5).every((status) => status !== 429), String(statuses)).toBe(true);
      expect(statuses.slice(5).every((status) => status === 429), String(statuses)).toBe(true);
      const last = await t.fastify.inject({ method: 'GET', url: '/v1/integrations', headers: bearer(tokens[0] as string) });
      expect(last.statusCode).toBe(429);
      expect(last.json().code).toBe('RATE_LIMITED');
      expect(Number(last.headers['retry-after'])).toBeGreaterThan(0);

      // Another organization is not affected.
      const other = await registerAndLogin(t.fastify, 'limits-other');
      expect((await t.fastify.inject({ method: 'GET', url: '/v1/integrations', headers: bearer(other.token) })).statusCode).toBe(200);
    } finally {
      await t.close();
    }
  });

  it('defaults to four times RATE_LIMIT_MAX, and ten times for service tokens', async () => {
    const t = await createTestApp({ env: { RATE_LIMIT_MAX: '7' } });
    try {
      expect(t.config.rateLimit.organizationMax).toBe(28);
      expect(t.config.rateLimit.serviceMax).toBe(70);
    } finally {
      await t.close();
    }
  });
});
