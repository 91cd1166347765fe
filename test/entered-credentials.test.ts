// Credentials a person enters (docs/contract.md §5c): API keys (Stripe) and HTTP Basic (Twilio),
// verified with the provider before anything is stored, handed out by the token read, carried
// by the proxy as the definition says, and judged again by validation.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeStripe, startFakeStripe } from './fakes/providers/stripe.ts';
import { type FakeTwilio, startFakeTwilio } from './fakes/providers/twilio.ts';
import { basicOf } from './fakes/entered.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { everyStoredValue } from './helpers/stored-values.ts';

let stripe: FakeStripe;
let twilio: FakeTwilio;
let t: TestApp;
let owner: Account;
/** Every JSON answer but the token reads: none may hold an entered secret. */
const answers: string[] = [];

async function call(method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown, token = owner.token) {
  const res = await t.fastify.inject({ method, url, headers: bearer(token), ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}) });
  if (!url.endsWith('/token') && !url.includes('/token?')) answers.push(res.body);
  return res;
}

beforeAll(async () => {
  stripe = await startFakeStripe();
  twilio = await startFakeTwilio();
  t = await createTestApp({
    background: false,
    env: {
      RATE_LIMIT_MAX: '0',
      INTEGRATION_OAUTH_STRIPE_ENABLED: 'true',
      INTEGRATION_OAUTH_STRIPE_API_URL: stripe.url,
      INTEGRATION_OAUTH_TWILIO_ENABLED: 'true',
      INTEGRATION_OAUTH_TWILIO_API_URL: twilio.url,
    },
  });
  owner = await registerAndLogin(t.fastify, 'keys-owner');
});

afterAll(async () => {
  await t?.close();
  await stripe?.close();
  await twilio?.close();
});

describe('providers whose credentials a person enters', () => {
  it('are listed with their mode and the fields to fill in, nothing secret', async () => {
    const res = await call('GET', '/v1/providers');
    expect(res.statusCode).toBe(200);
    const byId = Object.fromEntries(res.json().providers.map((p: { id: string }) => [p.id, p]));
    expect(byId.stripe).toEqual({ id: 'stripe', displayName: 'Stripe', defaultScopes: [], authMode: 'api_key', apps: [], credentials: [{ name: 'apiKey', label: 'Secret key (sk_… or rk_…)', secret: true }] });
    expect(byId.twilio.authMode).toBe('basic');
    expect(byId.twilio.credentials).toEqual([
      { name: 'accountSid', label: 'Account SID', secret: false },
      { name: 'authToken', label: 'Auth token', secret: true },
    ]);
  });

  it('refuse the sign-in flow: there is no page to send a browser to', async () => {
    const res = await call('POST', '/v1/integrations/oauth/start', { provider: 'stripe', redirectUri: 'http://127.0.0.1:8080/app' });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('INVALID_INPUT');
  });
});

describe('an API key (Stripe)', () => {
  it('rejected by the provider → 400 INVALID_CREDENTIALS, nothing stored, the key never echoed', async () => {
    stripe.addAccount('Acme Payments');
    const wrong = 'sk_test_thisKeyDoesNotExistAnywhere42';
    const res = await call('POST', '/v1/integrations/stripe/credentials', { credentials: { apiKey: wrong } });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('INVALID_CREDENTIALS');
    expect(res.body).not.toContain(wrong);
    expect(res.body).not.toContain(wrong.slice(-4));
    expect((await call('GET', '/v1/integrations')).json().integrations).toEqual([]);
    expect(t.logs.text).not.toContain(wrong);
  });

  it('with unknown or missing fields → 400 INVALID_INPUT naming them, never a value', async () => {
    const secretish = 'sk_test_valueThatMustNeverBeEchoed';
    const res = await call('POST', '/v1/integrations/stripe/credentials', { credentials: { apikey: secretish } });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('INVALID_INPUT');
    expect(res.json().details.map((d: { path: string }) => d.path).sort()).toEqual(['credentials.apiKey', 'credentials.apikey']);
    expect(res.body).not.toContain(secretish);
    expect(stripe.requests.filter((r) => r.headers.authorization?.includes(secretish))).toEqual([]);
  });

  it('accepted → 201 connected; the token read hands it out; the proxy carries it as a bearer; posting again keeps the id', async () => {
    const account = stripe.addAccount('Globex Billing');
    const res = await call('POST', '/v1/integrations/stripe/credentials', { credentials: { apiKey: account.key } });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toEqual({ success: true, integration: { id: expect.any(String), name: 'Stripe Integration (Globex Billing)', provider: 'stripe' } });
    const id = res.json().integration.id;
    const verification = stripe.requests.at(-1);
    expect([verification?.method, verification?.path, verification?.headers.authorization]).toEqual(['GET', '/v1/account', `Bearer ${account.key}`]);

    const token = await call('GET', '/v1/integrations/stripe/token');
    expect(token.statusCode, token.body).toBe(200);
    expect(token.headers['cache-control']).toBe('no-store');
    expect(token.json()).toEqual({ success: true, provider: 'stripe', authMode: 'api_key', credentials: { apiKey: account.key }, metadata: {}, endUser: null, app: { id: 'stripe', owner: 'deployment' } });

    const listed = await call('GET', '/v1/integrations');
    expect(listed.json().integrations).toMatchObject([{ id, provider: 'stripe', status: 'connected', description: 'API key integration with stripe for Globex Billing' }]);

    const proxied = await call('GET', '/v1/integrations/stripe/proxy/v1/customers?limit=3');
    expect(proxied.statusCode, proxied.body).toBe(200);
    expect(proxied.json()).toMatchObject({ object: 'list', data: [] });
    const forwarded = stripe.requests.at(-1);
    expect([forwarded?.path, forwarded?.query.get('limit'), forwarded?.headers.authorization]).toEqual(['/v1/customers', '3', `Bearer ${account.key}`]);

    stripe.rollKey(account);
    const again = await call('POST', '/v1/integrations/stripe/credentials', { credentials: { apiKey: account.key } });
    expect(again.statusCode, again.body).toBe(201);
    expect(again.json().integration.id).toBe(id);
    expect((await call('GET', '/v1/integrations/stripe/token')).json().credentials).toEqual({ apiKey: account.key });
  });

  it('revoked at the provider → validation makes the integration invalid, and the token read refuses', async () => {
    const account = stripe.addAccount('Initech');
    const res = await call('POST', '/v1/integrations/stripe/credentials?endUser=initech', { credentials: { apiKey: account.key } });
    expect(res.statusCode, res.body).toBe(201);
    // A validation on demand (no refresh token: refresh re-validates) passes while the key lives.
    const ok = await call('POST', '/v1/integrations/stripe/refresh?endUser=initech');
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toEqual({ success: true, message: 'Stripe token refreshed' });
    stripe.rollKey(account);
    const before = stripe.requests.length;
    const refused = await call('POST', '/v1/integrations/stripe/refresh?endUser=initech');
    expect(refused.statusCode).toBe(409);
    expect(refused.json().code).toBe('TOKEN_VALIDATION_FAILED');
    expect(stripe.requests.slice(before).map((r) => r.path)).toContain('/v1/account');
    const status = await call('GET', '/v1/integrations/stripe/status?endUser=initech');
    expect(status.statusCode).toBe(200);
    expect(status.json().status).toMatchObject({ status: 'invalid', connected: false, actions: ['reconnect'] });
    const read = await call('GET', '/v1/integrations/stripe/token?endUser=initech');
    expect(read.statusCode).toBe(409);
    expect(read.json().code).toBe('TOKEN_VALIDATION_FAILED');
    // The organization's own Stripe integration is another one, untouched.
    expect((await call('GET', '/v1/integrations/stripe/status')).json().status.status).toBe('connected');
  });

  it('with the provider down → 502 PROVIDER_ERROR, nothing stored', async () => {
    const account = stripe.addAccount('Umbrella');
    stripe.mode.api = 'down';
    try {
      const res = await call('POST', '/v1/integrations/stripe/credentials?endUser=umbrella', { credentials: { apiKey: account.key } });
      expect(res.statusCode).toBe(502);
      expect(res.json().code).toBe('PROVIDER_ERROR');
    } finally {
      stripe.mode.api = 'ok';
    }
    expect((await call('GET', '/v1/integrations?endUser=umbrella')).json().integrations).toEqual([]);
  });

  it("may be connected by a product's backend with its service token, in the organization it names", async () => {
    await t.database.db.execute(sql`UPDATE users SET system_admin = true WHERE id = ${owner.userId}`);
    const service = (await graphqlData(t.fastify, owner.token, 'mutation { createServiceToken(name: "keys backend") { token } }')).createServiceToken.token as string;
    const account = stripe.addAccount('Hooli');
    const res = await t.fastify.inject({
      method: 'POST',
      url: '/v1/integrations/stripe/credentials?endUser=hooli',
      headers: { ...bearer(service), 'x-organization-id': owner.organizationId },
      payload: { credentials: { apiKey: account.key } },
    });
    answers.push(res.body);
    expect(res.statusCode, res.body).toBe(201);
    expect((await call('GET', '/v1/integrations?endUser=hooli')).json().integrations).toMatchObject([{ id: res.json().integration.id, status: 'connected' }]);
  });

  it('needs header credentials of an owner or admin (or an API token)', async () => {
    const member = await registerAndLogin(t.fastify, 'keys-outsider');
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/stripe/credentials', payload: { credentials: { apiKey: 'sk_test_x' } } });
    expect(res.statusCode).toBe(401);
    // Another organization's owner connects their own, never ours.
    const theirs = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/stripe/credentials', headers: bearer(member.token), payload: { credentials: { apiKey: 'sk_test_nope' } } });
    expect(theirs.statusCode).toBe(400);
  });
});

describe('HTTP Basic credentials (Twilio)', () => {
  it('wrong token → 400 INVALID_CREDENTIALS; right ones → connected, the SID in metadata, Basic on every call; rotated → invalid at the next call', async () => {
    const account = twilio.addAccount('Acme SMS');
    const wrong = await call('POST', '/v1/integrations/twilio/credentials', { credentials: { accountSid: account.sid, authToken: '0'.repeat(32) } });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json().code).toBe('INVALID_CREDENTIALS');
    expect((await call('GET', '/v1/integrations?provider=twilio')).json().integrations).toEqual([]);

    const badSid = await call('POST', '/v1/integrations/twilio/credentials', { credentials: { accountSid: '../../x', authToken: account.authToken } });
    expect(badSid.statusCode).toBe(400);
    expect(badSid.json().code).toBe('INVALID_INPUT');
    expect(badSid.body).not.toContain(account.authToken);

    const res = await call('POST', '/v1/integrations/twilio/credentials', { credentials: { accountSid: account.sid, authToken: account.authToken } });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().integration.name).toBe('Twilio Integration (Acme SMS)');
    const verification = twilio.requests.at(-1);
    expect(verification?.path).toBe(`/2010-04-01/Accounts/${account.sid}.json`);
    expect(basicOf(verification as NonNullable<typeof verification>)).toEqual({ user: account.sid, password: account.authToken });

    const token = await call('GET', '/v1/integrations/twilio/token');
    expect(token.json()).toMatchObject({ authMode: 'basic', credentials: { accountSid: account.sid, authToken: account.authToken }, metadata: { accountSid: account.sid } });
    expect(token.json().token).toBeUndefined();

    const proxied = await call('GET', `/v1/integrations/twilio/proxy/2010-04-01/Accounts/${account.sid}/Messages.json`);
    expect(proxied.statusCode, proxied.body).toBe(200);
    expect(basicOf(twilio.requests.at(-1) as NonNullable<(typeof twilio.requests)[number]>)).toEqual({ user: account.sid, password: account.authToken });

    twilio.rotateToken(account);
    const rejected = await call('GET', `/v1/integrations/twilio/proxy/2010-04-01/Accounts/${account.sid}/Messages.json`);
    expect(rejected.statusCode).toBe(409);
    expect(rejected.json().code).toBe('TOKEN_VALIDATION_FAILED');
    expect((await call('GET', '/v1/integrations?provider=twilio')).json().integrations[0].status).toBe('invalid');

    // Entering the new token reconnects the same integration.
    const again = await call('POST', '/v1/integrations/twilio/credentials', { credentials: { accountSid: account.sid, authToken: account.authToken } });
    expect(again.statusCode).toBe(201);
    expect(again.json().integration.id).toBe(res.json().integration.id);
    expect((await call('GET', '/v1/integrations?provider=twilio')).json().integrations[0].status).toBe('connected');
  });
});

describe('the secrets scan', () => {
  it('finds no entered credential in any JSON answer but the token reads, the logs, or any stored column', async () => {
    const secrets = [...stripe.keysEverIssued, ...twilio.tokensEverIssued];
    expect(secrets.length).toBeGreaterThan(3);
    // GraphQL's view of the integrations, and the OpenAPI document, are answers too.
    const graphql = await t.fastify.inject({ method: 'POST', url: '/query', headers: bearer(owner.token), payload: { query: '{ integrations { id name description provider status metadata } }' } });
    expect(graphql.statusCode).toBe(200);
    expect(graphql.json().data.integrations.length).toBeGreaterThan(2);
    answers.push(graphql.body, (await t.fastify.inject({ url: '/api-docs' })).body);
    const stored = await everyStoredValue(t.database);
    for (const secret of secrets) {
      for (const answer of answers) expect(answer).not.toContain(secret);
      expect(t.logs.text).not.toContain(secret);
      expect(stored).not.toContain(secret);
    }
  });
});
