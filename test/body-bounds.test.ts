// Bodies bounded before they are trusted (decisions 236, 237): invalid UTF-8 is refused, never
// replaced with U+FFFD, on JSON routes (REST and GraphQL) and form routes; GraphQL documents and
// JSON bodies nested too deep are a 400 before any recursive parser sees them, never a 500.
// HTTP in, status and body out.
import { getIntrospectionQuery } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { bearer, registerAndLogin } from './helpers/identity.ts';
import { providerEnv } from './helpers/providers.ts';

let t: TestApp;
let token: string;
let gh: FakeProvider;
let apiToken: string;

beforeAll(async () => {
  gh = await startFakeGitHub();
  t = await createTestApp({ background: false, env: { ...providerEnv(gh), OAUTH_REDIRECT_ORIGINS: 'http://127.0.0.1:4455', RATE_LIMIT_MAX: '0' } });
  token = (await registerAndLogin(t.fastify, 'bounds')).token;
  apiToken = (await graphqlData(t.fastify, token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

/** Bytes of `text` with `bad` (invalid UTF-8) put in place of the marker `@@`. */
const withBytes = (text: string, bad: number[]) => {
  const [before, after] = text.split('@@') as [string, string];
  return Buffer.concat([Buffer.from(before), Buffer.from(bad), Buffer.from(after)]);
};
/** Invalid UTF-8 of several kinds: a lone continuation byte, a truncated sequence, an overlong `/`, a surrogate, 0xFF. */
const BAD_BYTES = [[0x80], [0xc3], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xff], [0xe2, 0x82]];

function expectRestInputError(res: { statusCode: number; body: string }, what: string) {
  expect(res.statusCode, `${what}: ${res.body}`).toBe(400);
  const body = JSON.parse(res.body);
  expect(body, what).toMatchObject({ success: false, code: 'INVALID_INPUT' });
  expect(res.body).not.toContain('\ufffd');
}

describe('invalid UTF-8 in a body is refused, never replaced', () => {
  it('answers 400 INVALID_INPUT on REST JSON routes and on GraphQL, for every kind of invalid byte', async () => {
    for (const bad of BAD_BYTES) {
      const json = { 'content-type': 'application/json' };
      const cases: [string, string, Record<string, string>, Buffer][] = [
        ['POST', '/v1/organizations', { ...bearer(token), ...json }, withBytes('{"name":"Acme @@ Corp"}', bad)],
        ['POST', '/v1/login', json, withBytes('{"email":"a@example.com","password":"pass@@word long enough"}', bad)],
        ['POST', '/v1/register', json, withBytes('{"email":"u@@@example.com","password":"long enough password","name":"x"}', bad)],
        ['POST', '/query', { ...bearer(token), ...json }, withBytes('{"query":"mutation { createOrganization(name: \\"Acme @@\\") { id } }"}', bad)],
        ['POST', '/query', { ...bearer(token), ...json }, withBytes('[{"query":"{ me { id } }"},{"query":"{ me { id } }","variables":{"x":"@@"}}]', bad)],
      ];
      for (const [method, url, headers, payload] of cases) {
        const res = await t.fastify.inject({ method: method as 'POST', url, headers, payload });
        expectRestInputError(res, `${url} ${bad}`);
      }
    }
    // Nothing was created with a replacement character.
    const orgs = await t.fastify.inject({ method: 'POST', url: '/query', headers: { ...bearer(token), 'content-type': 'application/json' }, payload: { query: '{ organizations { name } }' } });
    expect(orgs.body).not.toContain('\ufffd');
    // Valid UTF-8 beyond ASCII still goes through.
    const ok = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: { ...bearer(token), 'content-type': 'application/json' }, payload: Buffer.from('{"name":"Café ☕ 𝄞"}') });
    expect(ok.statusCode, ok.body).toBe(201);
  });

  it('answers 400 INVALID_INPUT on the form-encoded OAuth routes, raw or percent-encoded', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    for (const url of ['/v1/oauth/token', '/v1/oauth/revoke']) {
      for (const bad of BAD_BYTES) {
        const raw = await t.fastify.inject({ method: 'POST', url, headers: form, payload: withBytes('token=tsc_x@@y&grant_type=x', bad) });
        expectRestInputError(raw, `${url} raw ${bad}`);
        const escaped = bad.map((byte) => `%${byte.toString(16).toUpperCase()}`).join('');
        const encoded = await t.fastify.inject({ method: 'POST', url, headers: form, payload: `token=tsc_x${escaped}y&grant_type=x` });
        expectRestInputError(encoded, `${url} encoded ${escaped}`);
      }
      // A percent-encoded character that is valid UTF-8 (and a lone `%`) still parses.
      const fine = await t.fastify.inject({ method: 'POST', url, headers: form, payload: 'token=tsc_caf%C3%A9%&token_type_hint=x' });
      expect(fine.statusCode, fine.body).not.toBe(500);
      expect(JSON.parse(fine.body).code).not.toBe('INVALID_INPUT');
    }
  });

  it("answers 400 INVALID_INPUT on the hosted page's form", async () => {
    const minted = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(apiToken), payload: { redirectUri: 'http://127.0.0.1:4455/done' } });
    expect(minted.statusCode, minted.body).toBe(201);
    const secret = (minted.json().session.url as string).split('/').at(-1) as string;
    const res = await t.fastify.inject({ method: 'POST', url: `/v1/integrations/oauth/connect/${secret}/start`, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: withBytes('provider=git@@hub&nonce=x', [0xff]) });
    expectRestInputError(res, 'hosted page form');
  });
});

/** A GraphQL request; returns status and parsed body. */
async function graphql(body: unknown) {
  const res = await t.fastify.inject({ method: 'POST', url: '/query', headers: { ...bearer(token), 'content-type': 'application/json' }, payload: JSON.stringify(body) });
  return { status: res.statusCode, body: JSON.parse(res.body) };
}

describe('nesting is bounded before anything recursive reads it', () => {
  const n = 10_000;
  const documents: [string, string][] = [
    ['a list literal 10,000 deep', `{ integration(id: ${'['.repeat(n)}"x"${']'.repeat(n)}) { id } }`],
    ['an object literal 10,000 deep', `{ integration(id: ${'{a:'.repeat(n)}1${'}'.repeat(n)}) { id } }`],
    ['selection sets 10,000 deep', `{ me ${'{ id x '.repeat(n)}${'}'.repeat(n)} }`],
    ['lists and objects alternating 10,000 deep', `{ integration(id: ${'[{a:'.repeat(n / 2)}1${'}]'.repeat(n / 2)}) { id } }`],
    ['a deep list after a comment and a block string full of closing brackets', `# ]]]] }}}} ))))\n{ integration(id: """ ]]] }}} \\""" ))) """, x: "]]]", y: ${'['.repeat(n)}${']'.repeat(n)}) { id } }`],
  ];

  for (const [name, query] of documents) {
    it(`refuses ${name} with 400 INVALID_INPUT in a GraphQL error`, async () => {
      const { status, body } = await graphql({ query });
      expect(status, JSON.stringify(body).slice(0, 300)).toBe(400);
      expect(body.errors?.[0]?.extensions?.code).toBe('INVALID_INPUT');
      expect(JSON.stringify(body)).not.toMatch(/RangeError|call stack/i);
    });
  }

  it('refuses a deep document inside a batch, and runs nothing of the batch', async () => {
    const deep = `{ integration(id: ${'['.repeat(n)}${']'.repeat(n)}) { id } }`;
    const { status, body } = await graphql([{ query: 'mutation { createOrganization(name: "batched before a deep one") { id } }' }, { query: deep }]);
    expect(status).toBe(400);
    expect(Array.isArray(body)).toBe(true);
    expect(body[1].errors[0].extensions.code).toBe('INVALID_INPUT');
    const orgs = await graphql({ query: '{ organizations { name } }' });
    expect(JSON.stringify(orgs.body)).not.toContain('batched before a deep one');
  });

  it('keeps brackets inside strings, block strings and comments out of the count', async () => {
    const text = '['.repeat(2000);
    const { status, body } = await graphql({ query: `# ${text}\n{ me { id } }`, variables: {} });
    expect(status, JSON.stringify(body)).toBe(200);
    const literal = await graphql({ query: `mutation { createOrganization(name: "${'('.repeat(200)}") { id } }` });
    expect(literal.status, JSON.stringify(literal.body)).not.toBe(500);
    expect(JSON.stringify(literal.body)).not.toContain('nested deeper');
    const block = await graphql({ query: `mutation { createOrganization(name: """${'{'.repeat(200)} \\""" """) { id } }` });
    expect(JSON.stringify(block.body)).not.toContain('nested deeper');
  });

  it('leaves the standard introspection query and values within the bound to the usual rules', async () => {
    const introspection = await graphql({ query: getIntrospectionQuery() });
    expect(introspection.status, JSON.stringify(introspection.body).slice(0, 300)).toBe(200);
    expect(introspection.body.data.__schema.types.length).toBeGreaterThan(10);
    // 60 deep: inside the bound (2 × 10 + 64), so the parser reads it and validation refuses the argument's type.
    const within = await graphql({ query: `{ integration(id: ${'['.repeat(60)}"x"${']'.repeat(60)}) { id } }` });
    expect(within.status).toBe(400);
    expect(JSON.stringify(within.body)).not.toContain('nested deeper');
    expect((await graphql({ query: '{ me { id } }' })).status).toBe(200);
  });

  it('refuses deeply nested variables and REST bodies with 400, never a 500', async () => {
    const deepJson = `${'['.repeat(n)}${']'.repeat(n)}`;
    const deepObject = `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;
    for (const payload of [
      `{"query":"query($x: String) { me { id } }","variables":{"x":${deepJson}}}`,
      `{"query":"query($x: String) { me { id } }","variables":{"x":${deepObject}}}`,
      `[{"query":"{ me { id } }"},{"query":"{ me { id } }","variables":${deepObject}}]`,
    ]) {
      const res = await t.fastify.inject({ method: 'POST', url: '/query', headers: { ...bearer(token), 'content-type': 'application/json' }, payload });
      expectRestInputError(res, payload.slice(0, 60));
    }
    for (const payload of [`{"name":${deepJson}}`, `{"name":${deepObject}}`, deepJson]) {
      const res = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: { ...bearer(token), 'content-type': 'application/json' }, payload });
      expectRestInputError(res, payload.slice(0, 60));
    }
  });
});
