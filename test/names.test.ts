// A name a person types that others read (decision 232): organization names (REST and GraphQL,
// create and rename), user names, token names (personal, API, service) and a connect session's
// end user display name refuse bidirectional formatting characters (U+202A–U+202E, U+2066–U+2069,
// U+200E/U+200F, U+061C) and control characters with 400 INVALID_INPUT naming the field, by every
// door; names in any script, right-to-left ones included, are welcome.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData, graphqlRequest } from './helpers/graphql.ts';
import { type Account, bearer, login, registerAndLogin } from './helpers/identity.ts';
import { providerEnv } from './helpers/providers.ts';

const ADMIN_EMAIL = 'root@example.com';
const ADMIN_PASSWORD = 'bootstrap admin password';
const PRODUCT = 'http://127.0.0.1:4455';

/** Every bidirectional formatting character, and a few controls, each inside an otherwise good name. */
const REFUSED = ['\u202A', '\u202B', '\u202C', '\u202D', '\u202E', '\u2066', '\u2067', '\u2068', '\u2069', '\u200E', '\u200F', '\u061C', '\n', '\u0007', '\u007F'];
const badNames = REFUSED.map((c) => `Acme${c}gpj.exe`);
/** Names people really have. */
const GOOD = ['Ünïcødé GmbH', '株式会社テスト', 'شركة المثال', 'חברה בע״מ', 'O’Brien & Sons', 'Emoji 🚀 Labs'];

let t: TestApp;
let gh: FakeProvider;
let admin: Account;
let owner: Account;
let apiToken: string;

beforeAll(async () => {
  gh = await startFakeGitHub();
  t = await createTestApp({ env: { ...providerEnv(gh), BOOTSTRAP_ADMIN_EMAIL: ADMIN_EMAIL, BOOTSTRAP_ADMIN_PASSWORD: ADMIN_PASSWORD, RATE_LIMIT_MAX: '0', LIMIT_ORGANIZATIONS_PER_USER: '20', OAUTH_REDIRECT_ORIGINS: `http://127.0.0.1:8080,${PRODUCT}` } });
  await ensureBootstrapAdmin(t.app.services);
  admin = await login(t.fastify, ADMIN_EMAIL, ADMIN_PASSWORD);
  owner = await registerAndLogin(t.fastify, 'owner');
  apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

function expectNamed(res: { statusCode: number; body: string; json(): { code: string; details?: { path: string; message: string }[] } }, path: string, label: string): void {
  expect(res.statusCode, `${label}: ${res.body}`).toBe(400);
  expect(res.json().code, label).toBe('INVALID_INPUT');
  expect(res.json().details?.[0], label).toEqual({ path, message: expect.stringMatching(/control or bidirectional/) });
}

async function expectGraphqlNamed(token: string, query: string, variables: Record<string, unknown>, label: string): Promise<void> {
  const { status, body, raw } = await graphqlRequest(t.fastify, token, query, variables);
  expect(status, raw).toBe(200);
  expect(body.errors?.[0]?.extensions, `${label}: ${raw}`).toEqual({ code: 'INVALID_INPUT', details: [{ path: 'name', message: expect.stringMatching(/control or bidirectional/) }] });
}

describe('organization names', () => {
  it('are refused with a bidirectional or control character: REST create and rename, GraphQL create', async () => {
    const id = (await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(owner.token), payload: { name: 'Plain' } })).json().organization.id;
    for (const name of badNames) {
      const label = JSON.stringify(name);
      expectNamed(await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(owner.token), payload: { name } }), 'body.name', `POST ${label}`);
      expectNamed(await t.fastify.inject({ method: 'PATCH', url: `/v1/organizations/${id}`, headers: bearer(owner.token), payload: { name } }), 'body.name', `PATCH ${label}`);
      await expectGraphqlNamed(owner.token, 'mutation ($name: String!) { createOrganization(name: $name) { id } }', { name }, `createOrganization ${label}`);
    }
    const read = await t.fastify.inject({ url: `/v1/organizations/${id}`, headers: bearer(owner.token) });
    expect(read.json().organization.name).toBe('Plain');
  });

  it('in any script are kept as typed', async () => {
    for (const name of GOOD) {
      const res = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(admin.token), payload: { name } });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().organization.name).toBe(name);
    }
  });
});

describe('the other names people read', () => {
  it('user names at registration', async () => {
    for (const [i, name] of badNames.entries()) {
      const res = await t.fastify.inject({ method: 'POST', url: '/v1/register', payload: { email: `bidi-${i}@example.com`, password: 'correct horse battery staple', name } });
      expectNamed(res, 'body.name', JSON.stringify(name));
    }
    const fine = await t.fastify.inject({ method: 'POST', url: '/v1/register', payload: { email: 'rtl@example.com', password: 'correct horse battery staple', name: 'شركة المثال' } });
    expect(fine.statusCode, fine.body).toBe(201);
  });

  it('token names: personal access tokens, API tokens, service tokens', async () => {
    for (const name of badNames) {
      const label = JSON.stringify(name);
      await expectGraphqlNamed(owner.token, 'mutation ($name: String!) { createPersonalAccessToken(name: $name) { id } }', { name }, `PAT ${label}`);
      await expectGraphqlNamed(owner.token, 'mutation ($name: String!) { createAPIToken(name: $name) { id } }', { name }, `API token ${label}`);
      await expectGraphqlNamed(admin.token, 'mutation ($name: String!) { createServiceToken(name: $name) { id } }', { name }, `service token ${label}`);
    }
    const kept = (await graphqlData(t.fastify, owner.token, 'mutation ($name: String!) { createAPIToken(name: $name) { name } }', { name: '株式会社テスト' })).createAPIToken;
    expect(kept.name).toBe('株式会社テスト');
  });

  it("a connect session's end user display name", async () => {
    for (const displayName of badNames) {
      const res = await t.fastify.inject({
        method: 'POST',
        url: '/v1/connect/sessions',
        headers: bearer(apiToken),
        payload: { redirectUri: `${PRODUCT}/done`, endUser: { id: 'cust-1', displayName } },
      });
      expectNamed(res, 'body.endUser.displayName', JSON.stringify(displayName));
    }
    const fine = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(apiToken), payload: { redirectUri: `${PRODUCT}/done`, endUser: { id: 'cust-1', displayName: 'חברה בע״מ' } } });
    expect(fine.statusCode, fine.body).toBe(201);
    expect(fine.json().session.endUser.displayName).toBe('חברה בע״מ');
  });
});
