// The hosted connect page's form for entered credentials (docs/contract.md §5a, §5c), followed as a
// browser without JavaScript would: load the page, press the provider's button, fill in the
// form, post it — a rejection shows the form again and the session stays usable; an acceptance
// completes the session and lands on the product's redirect URI.
import { sql } from 'drizzle-orm';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { type FakeStripe, startFakeStripe } from './fakes/providers/stripe.ts';
import { type FakeTwilio, startFakeTwilio } from './fakes/providers/twilio.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { formOf, openPage, press } from './helpers/connect-page.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';

const RETURN = 'http://127.0.0.1:8080/app/connected';
let stripe: FakeStripe;
let twilio: FakeTwilio;
let t: TestApp;
let owner: Account;

beforeAll(async () => {
  stripe = await startFakeStripe();
  twilio = await startFakeTwilio();
  t = await createTestApp({
    background: false,
    env: {
      RATE_LIMIT_MAX: '0',
      PUBLIC_URL: 'http://127.0.0.1:8080',
      INTEGRATION_OAUTH_STRIPE_ENABLED: 'true',
      INTEGRATION_OAUTH_STRIPE_API_URL: stripe.url,
      INTEGRATION_OAUTH_TWILIO_ENABLED: 'true',
      INTEGRATION_OAUTH_TWILIO_API_URL: twilio.url,
    },
  });
  owner = await registerAndLogin(t.fastify, 'page-owner');
});

afterAll(async () => {
  await t?.close();
  await stripe?.close();
  await twilio?.close();
});

/** A credential form as a browser holds it: where it posts, its nonce, and the cookie binding the nonce to this browser. */
interface CredentialForm {
  action: string;
  nonce: string;
  cookie: string;
}

function readForm(res: LightMyRequestResponse, cookie?: string): CredentialForm {
  const form = formOf(res.body);
  expect(form, res.body).not.toBeNull();
  const binding = res.cookies.find((c) => c.name === 'form_binding');
  return { action: form?.action as string, nonce: form?.nonce as string, cookie: binding ? `form_binding=${binding.value}` : (cookie as string) };
}

/** Posts the form as the browser that loaded it: same origin, its cookie, urlencoded fields. */
function submit(form: CredentialForm, fields: Record<string, string>, headers: Record<string, string> = {}) {
  return t.fastify.inject({
    method: 'POST',
    url: form.action,
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin', origin: 'null', cookie: form.cookie, ...headers },
    payload: new URLSearchParams({ nonce: form.nonce, ...fields }).toString(),
  });
}

async function mint(allowedProviders: string[], endUser: string) {
  const res = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(owner.token), payload: { redirectUri: RETURN, allowedProviders, endUser: { id: endUser } } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().session as { id: string; url: string };
}

describe("the hosted page's credential form, without JavaScript", () => {
  it('shows labelled fields (secrets as password inputs); a rejection says so and keeps the session usable; the right key completes the session', async () => {
    const session = await mint(['stripe', 'twilio'], 'customer-1');
    const page = await openPage(t.fastify, session.url);
    expect(page.res.body).toContain('Connect Stripe');
    expect(page.res.headers['content-security-policy']).toContain("form-action 'self'");

    const chosen = await press(t.fastify, page, 'stripe');
    expect(chosen.statusCode, chosen.body).toBe(200);
    expect(chosen.headers['content-type']).toMatch(/^text\/html/);
    expect(chosen.body).toMatch(/<label for="field-apiKey">Secret key \(sk_… or rk_…\)<\/label>\s*<input id="field-apiKey" name="credential\.apiKey" type="password"/);
    let form = readForm(chosen);
    expect(form.action).toMatch(/\/credentials\/stripe$/);

    const wrong = 'sk_test_wrongKeyTypedByAPerson0001';
    const rejected = await submit(form, { 'credential.apiKey': wrong });
    expect(rejected.statusCode).toBe(400);
    expect(rejected.headers['content-type']).toMatch(/^text\/html/);
    expect(rejected.body).toContain('Stripe did not accept these credentials');
    expect(rejected.body).not.toContain(wrong);
    const view = await t.fastify.inject({ url: `/v1/connect/sessions/${session.id}`, headers: bearer(owner.token) });
    expect(view.json().session).toMatchObject({ status: 'pending', error: 'INVALID_CREDENTIALS' });
    expect((await t.fastify.inject({ url: '/v1/integrations?endUser=customer-1', headers: bearer(owner.token) })).json().integrations).toEqual([]);

    // The used nonce is spent: posting it again starts nothing.
    const replay = await submit(form, { 'credential.apiKey': 'sk_test_anything' });
    expect(replay.statusCode).toBe(403);
    expect(replay.body).toContain('Connect Stripe');

    form = readForm(rejected, form.cookie);
    const account = stripe.addAccount('Customer One Ltd');
    const crossSite = await submit(form, { 'credential.apiKey': account.key }, { 'sec-fetch-site': 'cross-site' });
    expect(crossSite.statusCode).toBe(403);
    expect((await t.fastify.inject({ url: '/v1/integrations?endUser=customer-1', headers: bearer(owner.token) })).json().integrations).toEqual([]);

    form = readForm(crossSite, form.cookie);
    const accepted = await submit(form, { 'credential.apiKey': account.key });
    expect(accepted.statusCode, accepted.body).toBe(303);
    const landed = new URL(accepted.headers.location as string);
    expect(landed.origin + landed.pathname).toBe(RETURN);
    const integrations = (await t.fastify.inject({ url: '/v1/integrations?endUser=customer-1', headers: bearer(owner.token) })).json().integrations;
    expect(integrations).toHaveLength(1);
    expect(Object.fromEntries(landed.searchParams)).toEqual({ status: 'connected', provider: 'stripe', integration: integrations[0].id, session: session.id });
    expect(integrations[0]).toMatchObject({ provider: 'stripe', status: 'connected', connectedVia: { sessionId: session.id }, endUser: { id: 'customer-1' } });
    const done = await t.fastify.inject({ url: `/v1/connect/sessions/${session.id}`, headers: bearer(owner.token) });
    expect(done.json().session).toMatchObject({ status: 'completed', integrationId: integrations[0].id });
    const token = await t.fastify.inject({ url: '/v1/integrations/stripe/token?endUser=customer-1', headers: bearer(owner.token) });
    expect(token.json().credentials).toEqual({ apiKey: account.key });

    // The link is used up: its page says so.
    expect((await t.fastify.inject({ url: new URL(session.url).pathname })).statusCode).toBe(410);
  });

  it('shows a text input for a non-secret field and a password input for the secret one (basic credentials)', async () => {
    const session = await mint(['twilio'], 'customer-2');
    const page = await openPage(t.fastify, session.url);
    const chosen = await press(t.fastify, page, 'twilio');
    expect(chosen.statusCode).toBe(200);
    expect(chosen.body).toMatch(/name="credential\.accountSid" type="text"/);
    expect(chosen.body).toMatch(/name="credential\.authToken" type="password"/);
    const account = twilio.addAccount('Customer Two SMS');
    const form = readForm(chosen);
    const wrong = await submit(form, { 'credential.accountSid': account.sid, 'credential.authToken': 'f'.repeat(32) });
    expect(wrong.statusCode).toBe(400);
    // The non-secret value entered is kept; the secret one never comes back.
    expect(wrong.body).toContain(`value="${account.sid}"`);
    expect(wrong.body).not.toContain('f'.repeat(32));
    const accepted = await submit(readForm(wrong, form.cookie), { 'credential.accountSid': account.sid, 'credential.authToken': account.authToken });
    expect(accepted.statusCode, accepted.body).toBe(303);
    expect(new URL(accepted.headers.location as string).searchParams.get('status')).toBe('connected');
  });

  it("refuses a provider the session does not allow, and a GET of the form's URL starts nothing", async () => {
    const session = await mint(['twilio'], 'customer-3');
    const secret = new URL(session.url).pathname.split('/').at(-1) as string;
    const page = await openPage(t.fastify, session.url);
    const refused = await press(t.fastify, page, 'stripe');
    expect(refused.statusCode).toBe(400);
    const got = await t.fastify.inject({ url: `/v1/integrations/oauth/connect/${secret}/credentials/twilio` });
    expect(got.statusCode).toBe(200);
    expect(got.body).toContain('Connect Twilio');
    expect(twilio.requests.filter((r) => r.path.includes('customer-3'))).toEqual([]);
  });

  it('ends as the callback does when the minting token expires while the provider checks the credentials: nothing stored, the session’s page, the product told FORBIDDEN', async () => {
    const minting = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "minting for the form") { id token } }')).createAPIToken;
    const minted = await t.fastify.inject({
      method: 'POST',
      url: '/v1/connect/sessions',
      headers: bearer(minting.token),
      payload: { redirectUri: RETURN, allowedProviders: ['stripe'], endUser: { id: 'customer-4' } },
    });
    expect(minted.statusCode, minted.body).toBe(201);
    const session = minted.json().session as { id: string; url: string };
    const form = readForm(await press(t.fastify, await openPage(t.fastify, session.url), 'stripe'));
    const account = stripe.addAccount('Customer Four Ltd');
    const seen = stripe.requests.length;
    stripe.latencyMs = 300;
    let posted: LightMyRequestResponse;
    try {
      const posting = submit(form, { 'credential.apiKey': account.key });
      // The credentials are being verified: the token that minted the session expires meanwhile.
      await expect.poll(() => stripe.requests.length > seen, { timeout: 5000, interval: 10 }).toBe(true);
      await t.database.db.execute(sql`UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = ${minting.id}`);
      posted = await posting;
    } finally {
      stripe.latencyMs = 0;
    }
    expect(posted.statusCode).toBe(410);
    expect(posted.body).toContain('This link was cancelled');
    expect(posted.headers.location).toBeUndefined();
    expect((await t.fastify.inject({ url: '/v1/integrations?endUser=customer-4', headers: bearer(owner.token) })).json().integrations).toEqual([]);
    const view = await t.fastify.inject({ url: `/v1/connect/sessions/${session.id}`, headers: bearer(owner.token) });
    expect(view.json().session).toMatchObject({ status: 'revoked', error: 'FORBIDDEN' });
    const failed = await queryRows<{ data: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT data FROM events WHERE organization_id = ${owner.organizationId} AND type = 'integration.connect_failed' AND data->>'sessionId' = ${session.id}`,
    );
    expect(failed.map((row) => row.data)).toEqual([
      { organizationId: owner.organizationId, externalId: null, provider: 'stripe', endUser: { id: 'customer-4' }, sessionId: session.id, code: 'FORBIDDEN' },
    ]);
  });
});
