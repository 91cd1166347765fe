import { buildClientSchema, getIntrospectionQuery, type IntrospectionQuery } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlRequest } from './helpers/graphql.ts';
import { type Account, registerAndLogin } from './helpers/identity.ts';

/** What GraphiQL, graphql-codegen and graphql-inspector send: the standard query, with the options they turn on. */
const STANDARD = getIntrospectionQuery({ descriptions: true, specifiedByUrl: true, directiveIsRepeatable: true, schemaDescription: true, inputValueDeprecation: true });

let dev: TestApp;
let shallow: TestApp;
let closed: TestApp;
let devOwner: Account;
let shallowOwner: Account;
let closedOwner: Account;

beforeAll(async () => {
  dev = await createTestApp({ env: { RATE_LIMIT_MAX: '0' } });
  shallow = await createTestApp({ env: { RATE_LIMIT_MAX: '0', GRAPHQL_MAX_DEPTH: '3' } });
  closed = await createTestApp({ env: { RATE_LIMIT_MAX: '0', GRAPHQL_INTROSPECTION: 'false' } });
  devOwner = await registerAndLogin(dev.fastify, 'tools-dev');
  shallowOwner = await registerAndLogin(shallow.fastify, 'tools-shallow');
  closedOwner = await registerAndLogin(closed.fastify, 'tools-closed');
});
afterAll(async () => {
  await dev?.close();
  await shallow?.close();
  await closed?.close();
});

describe('the standard introspection query', () => {
  it('answers 200 with the whole schema where introspection is on (default depth limit 10)', async () => {
    const res = await graphqlRequest(dev.fastify, devOwner.token, STANDARD);
    expect(res.status, res.raw).toBe(200);
    expect(res.body.errors).toBeUndefined();
    // A client builds the schema from it, as codegen does.
    const schema = buildClientSchema(res.body.data as IntrospectionQuery);
    expect(Object.keys(schema.getQueryType()?.getFields() ?? {})).toEqual(expect.arrayContaining(['me', 'organization', 'integrations', 'auditLogs']));
    expect(Object.keys(schema.getMutationType()?.getFields() ?? {})).toEqual(expect.arrayContaining(['createOrganization', 'deleteIntegration']));
    expect(schema.getType('Integration')).toBeDefined();
  });

  it('is exempt from the depth limit, which still refuses data queries deeper than it', async () => {
    const introspection = await graphqlRequest(shallow.fastify, shallowOwner.token, STANDARD);
    expect(introspection.status, introspection.raw).toBe(200);
    expect(introspection.body.data.__schema.queryType.name).toBe('Query');
    const deep = await graphqlRequest(shallow.fastify, shallowOwner.token, '{ auditLogs { edges { node { id } } } }');
    expect(deep.status).toBe(400);
    expect(deep.body.errors[0]).toMatchObject({ message: expect.stringMatching(/exceeds the query depth limit of 3/), extensions: { code: 'INVALID_INPUT' } });
    // Fragments and an introspection field beside it hide nothing.
    const hidden = await graphqlRequest(shallow.fastify, shallowOwner.token, 'fragment N on AuditLogEntry { id } { __typename __schema { queryType { name } } auditLogs { edges { node { ...N } } } }');
    expect(hidden.status).toBe(400);
    expect((await graphqlRequest(shallow.fastify, shallowOwner.token, '{ __schema { queryType { name } } auditLogs { nodes { id } } }')).status).toBe(200);
  });

  it("keeps introspection's own cycles bounded (graphql-js's introspection depth rule)", async () => {
    const cycle = '{ __schema { types { fields { type { fields { type { fields { type { fields { name } } } } } } } } } }';
    const res = await graphqlRequest(dev.fastify, devOwner.token, cycle);
    expect(res.status).toBe(400);
    expect(res.body.errors[0].extensions.code).toBe('INVALID_INPUT');
  });

  it('is refused where introspection is off', async () => {
    const res = await graphqlRequest(closed.fastify, closedOwner.token, STANDARD);
    expect(res.status).toBe(400);
    expect(res.body.data ?? null).toBeNull();
    expect(res.body.errors[0]).toMatchObject({ message: expect.stringMatching(/introspection is disabled/i), extensions: { code: 'INVALID_INPUT' } });
  });
});

describe('GraphQL input errors', () => {
  it("name the argument a service refused, in extensions.details and in the message", async () => {
    const res = await graphqlRequest(dev.fastify, devOwner.token, 'mutation { createOrganization(name: "   ") { id } }');
    const error = res.body.errors[0];
    expect(error.extensions).toEqual({ code: 'INVALID_INPUT', details: [{ path: 'name', message: expect.stringMatching(/1–100/) }] });
    expect(error.message).toMatch(/name/);
    const invite = (await graphqlRequest(dev.fastify, devOwner.token, 'mutation { addMember(email: "not an address", role: "member") { id } }')).body.errors[0];
    expect(invite.extensions.details).toEqual([{ path: 'email', message: expect.any(String) }]);
    const page = (await graphqlRequest(dev.fastify, devOwner.token, '{ auditLogs(first: 1000) { nodes { id } } }')).body.errors[0];
    expect(page.extensions.details).toEqual([{ path: 'first', message: expect.any(String) }]);
  });

  it('name the argument or variable graphql-js refused, where introspection is on', async () => {
    const literal = await graphqlRequest(dev.fastify, devOwner.token, '{ auditLogs(first: "ten") { nodes { id } } }');
    expect(literal.status).toBe(400);
    expect(literal.body.errors[0].extensions).toEqual({ code: 'INVALID_INPUT', details: [{ path: 'auditLogs.first', message: expect.any(String) }] });
    const missing = await graphqlRequest(dev.fastify, devOwner.token, 'mutation { addMember(email: "a@example.com") { id } }');
    expect(missing.body.errors[0].extensions.details).toEqual([{ path: 'addMember.role', message: expect.any(String) }]);
    const variable = await graphqlRequest(dev.fastify, devOwner.token, 'query($n: Int) { auditLogs(first: $n) { nodes { id } } }', { n: 'ten' });
    expect(variable.body.errors[0].extensions).toMatchObject({ code: 'INVALID_INPUT', details: [{ path: 'variables.n', message: expect.any(String) }] });
  });

  it('name nothing of the schema where introspection is off, but still the argument a service refused', async () => {
    const literal = await graphqlRequest(closed.fastify, closedOwner.token, '{ auditLogs(first: "ten") { nodes { id } } }');
    expect(literal.body.errors[0]).toEqual({ message: 'The document does not match the schema', locations: expect.any(Array), extensions: { code: 'INVALID_INPUT' } });
    const refused = await graphqlRequest(closed.fastify, closedOwner.token, 'mutation { createOrganization(name: "   ") { id } }');
    expect(refused.body.errors[0].extensions.details).toEqual([{ path: 'name', message: expect.any(String) }]);
  });
});
