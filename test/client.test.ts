// @tessera/client's error mapping and webhook verification (docs/contract.md §10): against Tessera's
// real answers and deliveries where Tessera can produce them, and against a loopback stand-in
// for what it cannot (a reverse proxy's HTML page, a port nobody listens on).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Tessera, TesseraError, verifyWebhook, WebhookVerificationError } from '@tessera/client';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { login, registerAndLogin } from './helpers/identity.ts';
import { freePort } from './helpers/process.ts';
import { providerEnv } from './helpers/providers.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhooks.ts';

const SECRET = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;

let t: TestApp;
let gh: FakeProvider;
let hooks: WebhookReceiver;
let url: string;
let serviceToken: string;

/** A loopback server answering every request with `reply`. */
async function stub(reply: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer(reply);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

async function refusal(call: () => Promise<unknown>): Promise<TesseraError> {
  const error = await call().then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(TesseraError);
  return error as TesseraError;
}

beforeAll(async () => {
  gh = await startFakeGitHub();
  hooks = await startWebhookReceiver();
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  t = await createTestApp({
    env: {
      ...providerEnv(gh),
      PUBLIC_URL: url,
      RATE_LIMIT_MAX: '0',
      BOOTSTRAP_ADMIN_EMAIL: 'root@example.com',
      BOOTSTRAP_ADMIN_PASSWORD: 'bootstrap admin password',
      EVENTS_WEBHOOK_URL: hooks.url,
      EVENTS_WEBHOOK_SECRET: SECRET,
    },
  });
  await t.fastify.listen({ host: '127.0.0.1', port });
  await ensureBootstrapAdmin(t.app.services);
  const admin = await login(t.fastify, 'root@example.com', 'bootstrap admin password');
  serviceToken = (await graphqlData(t.fastify, admin.token, 'mutation { createServiceToken(name: "client tests") { token } }')).createServiceToken.token;
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
  await hooks?.close();
});

describe('TesseraError', () => {
  it("carries Tessera's status, code, message and request id", async () => {
    const tessera = new Tessera({ baseUrl: url, apiToken: `tsa_${'x'.repeat(43)}`, headers: { 'x-request-id': 'client-test-1' } });
    const error = await refusal(() => tessera.integrations.list());
    expect(error).toMatchObject({ name: 'TesseraError', status: 401, code: 'UNAUTHENTICATED', requestId: 'client-test-1', details: [] });
    expect(error.message).toBe(((await t.fastify.inject({ url: '/v1/integrations', headers: { authorization: `Bearer tsa_${'x'.repeat(43)}` } })).json() as { error: string }).error);
    expect(error).toBeInstanceOf(Error);
  });

  it('carries the details of an input error', async () => {
    const tessera = new Tessera({ baseUrl: url, serviceToken });
    const { organization } = await tessera.organizations.create({ name: 'Details' });
    // @ts-expect-error expiresIn is a number of seconds
    const error = await refusal(() => tessera.forOrganization(organization.id).connectSessions.create({ redirectUri: `${url}/done`, expiresIn: 'soon' }));
    expect(error).toMatchObject({ status: 400, code: 'INVALID_INPUT' });
    expect(error.details).toContainEqual({ path: expect.stringContaining('expiresIn'), message: expect.any(String) });
    // A service token without its organization is told so (docs/contract.md §5d).
    expect(await refusal(() => tessera.integrations.list())).toMatchObject({ status: 400, code: 'INVALID_INPUT' });
  });

  it("maps a GraphQL error's code, and Retry-After on a 429", async () => {
    const person = await registerAndLogin(t.fastify, 'client-graphql');
    const tessera = new Tessera({ baseUrl: url, token: person.token });
    const other = await registerAndLogin(t.fastify, 'client-graphql-other');
    expect(await refusal(() => tessera.apiTokens.create({ name: 'elsewhere', organizationId: other.organizationId }))).toMatchObject({ status: 200, code: 'FORBIDDEN', requestId: expect.any(String) });
    const created = await tessera.apiTokens.create({ name: 'mine' });
    expect(created).toMatchObject({ name: 'mine', token: expect.stringMatching(/^tsa_/), display: expect.stringMatching(/^tsa_…/) });

    const limited = await stub((_req, res) => {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '17', 'x-request-id': 'r-429' });
      res.end(JSON.stringify({ success: false, error: 'Too many requests', code: 'RATE_LIMITED', requestId: 'r-429' }));
    });
    try {
      expect(await refusal(() => new Tessera({ baseUrl: limited.url, apiToken: 'tsa_x' }).providers.list())).toMatchObject({ status: 429, code: 'RATE_LIMITED', retryAfter: 17, requestId: 'r-429' });
    } finally {
      await limited.close();
    }
  });

  it('says when the answer is not Tessera’s, or nothing answered', async () => {
    const proxyPage = await stub((req, res) => {
      if (req.url === '/v1/providers') res.writeHead(200, { 'content-type': 'text/html' }).end('<html>sign in to the VPN</html>');
      else res.writeHead(502, { 'content-type': 'text/html' }).end('<html>Bad gateway</html>');
    });
    try {
      const tessera = new Tessera({ baseUrl: proxyPage.url, apiToken: 'tsa_x' });
      expect(await refusal(() => tessera.integrations.list())).toMatchObject({ status: 502, code: 'UNEXPECTED_RESPONSE' });
      expect(await refusal(() => tessera.providers.list())).toMatchObject({ status: 200, code: 'UNEXPECTED_RESPONSE' });
    } finally {
      await proxyPage.close();
    }
    const nobody = `http://127.0.0.1:${await freePort()}`;
    const error = await refusal(() => new Tessera({ baseUrl: nobody, apiToken: 'tsa_x' }).providers.list());
    expect(error).toMatchObject({ status: 0, code: 'NETWORK_ERROR' });
    expect(error.message).toBe(`Could not reach Tessera at ${nobody}: ECONNREFUSED`);
  });

  it("lets the proxy return a provider's own error body, even one shaped like Tessera's", async () => {
    const provider = await stub((req, res) => {
      const ours = req.url?.includes('ours');
      res.writeHead(404, { 'content-type': 'application/json', 'x-request-id': 'req-1' });
      res.end(JSON.stringify({ success: false, error: 'Not here', code: ours ? 'INTEGRATION_NOT_FOUND' : 'NOT_FOUND', requestId: ours ? 'req-1' : 'the-provider-s-own' }));
    });
    try {
      const tessera = new Tessera({ baseUrl: provider.url, apiToken: 'tsa_x' });
      expect(await tessera.proxy('acme', { path: 'theirs/1' })).toMatchObject({ status: 404, body: { code: 'NOT_FOUND', requestId: 'the-provider-s-own' } });
      expect(await refusal(() => tessera.proxy('acme', { path: 'ours/1' }))).toMatchObject({ status: 404, code: 'INTEGRATION_NOT_FOUND', requestId: 'req-1' });
    } finally {
      await provider.close();
    }
  });

  it('refuses to be made without a base URL or a credential', () => {
    // @ts-expect-error a credential is required
    expect(() => new Tessera({ baseUrl: url })).toThrow(/apiToken/);
    // @ts-expect-error the base URL is required
    expect(() => new Tessera({ apiToken: 'tsa_x' })).toThrow(/baseUrl/);
    // An API token acts in its own organization only; a service token in any.
    expect(() => new Tessera({ baseUrl: url, apiToken: 'tsa_x' }).forOrganization('01J0000000000000000000000Z')).toThrow(/own organization/);
    expect(new Tessera({ baseUrl: url, serviceToken }).forOrganization('01J0000000000000000000000Z')).toBeInstanceOf(Tessera);
  });
});

describe('verifyWebhook', () => {
  let delivery: { body: string; headers: Record<string, string> };

  beforeAll(async () => {
    // A real delivery: registering someone creates an organization, whose event Tessera signs and sends.
    const person = await registerAndLogin(t.fastify, 'webhook-subject');
    for (let waited = 0; waited < 20_000 && !hooks.received.some((hook) => hook.event.data.organizationId === person.organizationId); waited += 50) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const received = hooks.received.find((hook) => hook.event.data.organizationId === person.organizationId);
    delivery = { body: received?.body as string, headers: received?.headers as Record<string, string> };
  });

  it("accepts Tessera's delivery and returns its event, typed by type", () => {
    const event = verifyWebhook(delivery.body, delivery.headers, SECRET);
    expect(event.type).toBe('organization.created');
    if (event.type === 'organization.created') expect(event.data.organization.id).toBe(event.data.organizationId);
    // The same from a Fetch Headers object and from the body's bytes.
    expect(verifyWebhook(new TextEncoder().encode(delivery.body), new Headers(delivery.headers), SECRET)).toEqual(event);
  });

  it('throws on a tampered body, signature, id or secret, and on missing headers', () => {
    const tampered = [
      [delivery.body.replace('"organization.created"', '"organization.deleted"'), delivery.headers, SECRET],
      [delivery.body, { ...delivery.headers, 'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')}` }, SECRET],
      [delivery.body, { ...delivery.headers, 'webhook-id': 'evt_other' }, SECRET],
      [delivery.body, delivery.headers, `whsec_${Buffer.alloc(32, 4).toString('base64')}`],
      [delivery.body, { 'content-type': 'application/json' }, SECRET],
    ] as const;
    for (const [body, headers, secret] of tampered) {
      expect(() => verifyWebhook(body, headers, secret)).toThrow(WebhookVerificationError);
    }
    // Bytes that are not UTF-8 are no delivery of Tessera's either.
    expect(() => verifyWebhook(new Uint8Array([0xff, 0xfe, 0x7b]), delivery.headers, SECRET)).toThrow(WebhookVerificationError);
  });

  it('throws on a stale delivery: one signed more than five minutes ago', () => {
    const signer = new Webhook(SECRET);
    const id = delivery.headers['webhook-id'] as string;
    const signedAt = (date: Date) => ({ 'webhook-id': id, 'webhook-timestamp': String(Math.floor(date.getTime() / 1000)), 'webhook-signature': signer.sign(id, date, delivery.body) });
    // Re-signed now it passes; the same, signed six minutes ago, does not.
    expect(verifyWebhook(delivery.body, signedAt(new Date()), SECRET).type).toBe('organization.created');
    expect(() => verifyWebhook(delivery.body, signedAt(new Date(Date.now() - 6 * 60_000)), SECRET)).toThrow(/too old/);
    expect(() => verifyWebhook(delivery.body, signedAt(new Date(Date.now() - 6 * 60_000)), SECRET)).toThrow(WebhookVerificationError);
  });
});
