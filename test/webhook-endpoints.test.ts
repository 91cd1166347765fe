// Webhook endpoints are data (docs/contract.md §7), HTTP in, signed deliveries out to real receivers
// on loopback, each verified with the `standardwebhooks` package as a product would: endpoints made,
// listed (the settings' one beside them, read-only), filtered by event type, disabled, deleted,
// re-pointed and rotated (both secrets sign during the overlap, only the new one after it); the test
// event; who may manage them; their audit rows; the production URL rules and the outbound guard.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo, LookupFunction } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.ts';
import { queryRows, sql } from '../src/db/client.ts';
import { recordAttempt } from '../src/events/delivery-log.ts';
import { endpointTargets } from '../src/events/endpoints.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import { missingKeyIds } from '../src/secrets/keyring-check.ts';
import { rotateSecrets } from '../src/secrets/rotate.ts';
import { createTestApp, TEST_ENCRYPTION_KEY, type TestApp } from './helpers/app.ts';
import { backend } from './helpers/database.ts';
import { graphqlData, graphqlRequest } from './helpers/graphql.ts';
import { type Account, bearer, login, registerAndLogin } from './helpers/identity.ts';

const ADMIN = { email: 'hooks-root@example.com', password: 'bootstrap admin password' };
const SETTINGS_SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;

interface Hit {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A receiver on loopback whose answer the test sets; it keeps every request it got. */
interface Receiver {
  status: number;
  hits: Hit[];
  url: string;
  close(): Promise<void>;
}

async function startReceiver(path = '/hooks'): Promise<Receiver> {
  const receiver: Receiver = { status: 200, hits: [], url: '', close: async () => {} };
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      receiver.hits.push({ headers: req.headers, body });
      res.writeHead(receiver.status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return receiver;
}

/** Whether a Standard Webhooks verifier holding only `secret` accepts the hit. */
function verifies(secret: string, hit: Hit): boolean {
  try {
    new Webhook(secret).verify(hit.body, {
      'webhook-id': String(hit.headers['webhook-id']),
      'webhook-timestamp': String(hit.headers['webhook-timestamp']),
      'webhook-signature': String(hit.headers['webhook-signature']),
    });
    return true;
  } catch {
    return false;
  }
}

const eventOf = (hit: Hit) => JSON.parse(hit.body) as { id: string; type: string; data: Record<string, unknown> };

let t: TestApp;
let admin: Account;
let owner: Account;
let service: string;
let settings: Receiver;
const receivers: Receiver[] = [];

async function receiver(): Promise<Receiver> {
  const made = await startReceiver();
  receivers.push(made);
  return made;
}

const api = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown, headers: Record<string, string> = bearer(admin.token)) =>
  t.fastify.inject({ method, url, headers, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });

async function create(payload: Record<string, unknown>): Promise<{ id: string; secret: string; [key: string]: unknown }> {
  const res = await api('POST', '/v1/webhook-endpoints', payload);
  expect(res.statusCode, res.body).toBe(201);
  return res.json().endpoint;
}

/** A new user's `organization.created` event: its id. */
async function newEvent(): Promise<string> {
  const account = await registerAndLogin(t.fastify, 'hooked');
  const [row] = await queryRows<{ id: string }>(t.database.db, sql`SELECT id FROM events WHERE organization_id = ${account.organizationId} AND type = 'organization.created'`);
  return row?.id as string;
}

interface Delivery {
  id: string;
  eventId: string;
  eventType: string;
  organizationId: string | null;
  endpoint: string;
  endpointId: string | null;
  status: string;
  error: string | null;
  attempts: { error: string | null; responseStatus: number | null }[];
}

async function deliveriesOf(eventId: string): Promise<Delivery[]> {
  const res = await api('GET', '/v1/webhooks/deliveries?first=100');
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().deliveries as Delivery[]).filter((delivery) => delivery.eventId === eventId);
}

const hitsOf = (target: Receiver, eventId: string) => target.hits.filter((hit) => hit.headers['webhook-id'] === eventId);

/** The delivery of `eventId` to the endpoint `endpointId`. */
async function deliveryTo(endpointId: string, eventId: string): Promise<Delivery | undefined> {
  return (await deliveriesOf(eventId)).find((d) => d.endpointId === endpointId);
}

/** An endpoint whose receiver answers `status`, and an event whose delivery to it has been tried at least once. */
async function failingDelivery(status: number): Promise<{ target: Receiver; endpoint: { id: string }; eventId: string }> {
  const target = await receiver();
  target.status = status;
  const endpoint = await create({ url: target.url, eventTypes: ['organization.created'] });
  const eventId = await newEvent();
  await expect.poll(() => hitsOf(target, eventId).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
  return { target, endpoint, eventId };
}

beforeAll(async () => {
  settings = await startReceiver('/settings');
  t = await createTestApp({
    env: {
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      EVENTS_WEBHOOK_URL: `${settings.url}?token=receiver-credential`,
      EVENTS_WEBHOOK_SECRET: SETTINGS_SECRET,
      EVENTS_POLL_INTERVAL: '1',
      EVENTS_RETRY_BASE: '1',
      EVENTS_RETRY_MAX: '1',
      RATE_LIMIT_MAX: '0',
    },
  });
  await ensureBootstrapAdmin(t.app.services);
  admin = await login(t.fastify, ADMIN.email, ADMIN.password);
  owner = await registerAndLogin(t.fastify, 'owner');
  service = (await graphqlData(t.fastify, admin.token, 'mutation { createServiceToken(name: "product") { token } }')).createServiceToken.token;
}, 120_000);

afterAll(async () => {
  await t?.close();
  await settings?.close();
  for (const made of receivers) await made.close();
});

describe(`webhook endpoints (${backend})`, () => {
  it('a system administrator or a service token (no X-Organization-ID) manages them; an owner or a member gets 403, no credential 401', async () => {
    const member = await registerAndLogin(t.fastify, 'member');
    for (const who of [owner, member]) {
      expect((await api('GET', '/v1/webhook-endpoints', undefined, bearer(who.token))).statusCode).toBe(403);
      const refused = await api('POST', '/v1/webhook-endpoints', { url: settings.url }, bearer(who.token));
      expect(refused.statusCode).toBe(403);
      expect(refused.json().code).toBe('FORBIDDEN');
      expect((await api('GET', '/v1/webhooks/deliveries', undefined, bearer(who.token))).statusCode).toBe(403);
    }
    expect((await t.fastify.inject({ url: '/v1/webhook-endpoints' })).statusCode).toBe(401);
    expect((await api('GET', '/v1/webhook-endpoints')).statusCode).toBe(200);
    // The product's service token, with no X-Organization-ID: endpoints and the delivery log are the deployment's.
    const listed = await api('GET', '/v1/webhook-endpoints', undefined, bearer(service));
    expect(listed.statusCode, listed.body).toBe(200);
    const made = await api('POST', '/v1/webhook-endpoints', { url: (await receiver()).url, description: 'by the product' }, bearer(service));
    expect(made.statusCode, made.body).toBe(201);
    expect(made.json().endpoint).toMatchObject({ source: 'api', description: 'by the product', enabled: true });
    expect((await api('DELETE', `/v1/webhook-endpoints/${made.json().endpoint.id}`, undefined, bearer(service))).statusCode).toBe(200);
    expect((await api('GET', '/v1/webhooks/deliveries', undefined, bearer(service))).statusCode).toBe(200);
  });

  it('creates an endpoint (its secret shown once), lists it beside the settings one, and delivers every later event to it, verifiable with its secret', async () => {
    const target = await receiver();
    const endpoint = await create({ url: target.url, description: 'orders service' });
    expect(endpoint).toMatchObject({ url: target.url, description: 'orders service', enabled: true, source: 'api', eventTypes: expect.arrayContaining(['organization.created', 'integration.deleted']) });
    expect(endpoint.id).toMatch(/^whe_[0-9A-Z]{26}$/);
    expect(endpoint.secret).toMatch(/^whsec_/);
    const bytes = Buffer.from(endpoint.secret.slice('whsec_'.length), 'base64').length;
    expect(bytes).toBeGreaterThanOrEqual(24);
    expect(bytes).toBeLessThanOrEqual(64);
    expect(Date.parse(endpoint.createdAt as string)).not.toBeNaN();

    const list = await api('GET', '/v1/webhook-endpoints');
    expect(list.statusCode).toBe(200);
    const endpoints = list.json().endpoints as { id: string; source: string; url: string }[];
    expect(endpoints[0]).toEqual({ id: 'settings-0', url: settings.url, description: null, eventTypes: expect.any(Array), enabled: true, source: 'settings', createdAt: null });
    expect(endpoints.find((listed) => listed.id === endpoint.id)).toMatchObject({ source: 'api', url: target.url });
    expect(list.body).not.toContain('whsec_');
    expect(list.body).not.toContain('receiver-credential');
    const one = await api('GET', `/v1/webhook-endpoints/${endpoint.id}`);
    expect(one.json().endpoint).not.toHaveProperty('secret');
    expect((await api('GET', '/v1/webhook-endpoints/settings-0')).json().endpoint.source).toBe('settings');
    expect((await api('GET', '/v1/webhook-endpoints/whe_01J00000000000000000000000')).statusCode).toBe(404);

    const eventId = await newEvent();
    await expect.poll(() => hitsOf(target, eventId).length, { timeout: 10_000 }).toBe(1);
    const [hit] = hitsOf(target, eventId) as [Hit];
    expect(verifies(endpoint.secret, hit)).toBe(true);
    expect(verifies(SETTINGS_SECRET, hit)).toBe(false);
    expect(eventOf(hit)).toMatchObject({ id: eventId, type: 'organization.created' });
    // The settings' webhook still gets it too, and the log names each endpoint.
    await expect.poll(() => hitsOf(settings, eventId).length, { timeout: 10_000 }).toBe(1);
    await expect.poll(async () => (await deliveriesOf(eventId)).filter((d) => d.status === 'delivered').map((d) => d.endpointId).sort(), { timeout: 10_000 }).toEqual(
      expect.arrayContaining([endpoint.id, 'settings-0']),
    );
    const delivery = (await deliveriesOf(eventId)).find((d) => d.endpointId === endpoint.id) as Delivery;
    expect(delivery).toMatchObject({ endpoint: target.url, organizationId: expect.any(String) });
  });

  it('an endpoint gets only the event types it lists; webhook.test and unknown types are refused in eventTypes', async () => {
    const target = await receiver();
    const endpoint = await create({ url: target.url, eventTypes: ['organization.deleted'] });
    expect(endpoint.eventTypes).toEqual(['organization.deleted']);
    const eventId = await newEvent();
    await expect.poll(() => hitsOf(settings, eventId).length, { timeout: 10_000 }).toBe(1);
    expect((await deliveriesOf(eventId)).map((d) => d.endpointId)).not.toContain(endpoint.id);
    expect(hitsOf(target, eventId)).toEqual([]);
    for (const eventTypes of [['webhook.test'], ['organization.created', 'nope']]) {
      const res = await api('POST', '/v1/webhook-endpoints', { url: target.url, eventTypes });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().code).toBe('INVALID_INPUT');
      expect(res.json().details[0].path).toMatch(/^eventTypes/);
    }
    const patched = await api('PATCH', `/v1/webhook-endpoints/${endpoint.id}`, { eventTypes: ['webhook.test'] });
    expect(patched.statusCode).toBe(400);
  });

  it('the settings endpoint is read-only: PATCH, DELETE and rotate-secret answer 403 FORBIDDEN', async () => {
    for (const [method, url] of [
      ['PATCH', '/v1/webhook-endpoints/settings-0'],
      ['DELETE', '/v1/webhook-endpoints/settings-0'],
      ['POST', '/v1/webhook-endpoints/settings-0/rotate-secret'],
    ] as const) {
      const res = await api(method, url, method === 'DELETE' ? undefined : method === 'PATCH' ? { enabled: false } : {});
      expect(res.statusCode, `${method} ${url}: ${res.body}`).toBe(403);
      expect(res.json().code).toBe('FORBIDDEN');
    }
  });

  it('a URL that is not http(s) to loopback or https is 400 INVALID_INPUT with details path url', async () => {
    for (const url of ['ftp://127.0.0.1/x', 'http://hooks.example.com/in', 'not a url']) {
      const res = await api('POST', '/v1/webhook-endpoints', { url });
      expect(res.statusCode, url).toBe(400);
      expect(res.json()).toMatchObject({ code: 'INVALID_INPUT', details: [{ path: 'url' }] });
    }
  });

  it('rotating: during the overlap a receiver holding only the old secret and one holding only the new both accept every delivery; after it only the new', async () => {
    const target = await receiver();
    const endpoint = await create({ url: target.url, eventTypes: ['organization.created'] });
    const rotated = await api('POST', `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`, { overlapSeconds: 3 });
    expect(rotated.statusCode, rotated.body).toBe(200);
    const fresh = rotated.json().secret as string;
    expect(fresh).toMatch(/^whsec_/);
    expect(fresh).not.toBe(endpoint.secret);

    const during = [await newEvent(), await newEvent()];
    for (const eventId of during) {
      await expect.poll(() => hitsOf(target, eventId).length, { timeout: 10_000 }).toBe(1);
      const hit = hitsOf(target, eventId)[0] as Hit;
      expect(String(hit.headers['webhook-signature']).split(' ')).toHaveLength(2);
      expect(verifies(endpoint.secret, hit), 'old secret during the overlap').toBe(true);
      expect(verifies(fresh, hit), 'new secret during the overlap').toBe(true);
    }
    // A rotation during an overlap ends the older one: still at most two signatures, the oldest secret no longer among them.
    const again = (await api('POST', `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`, { overlapSeconds: 2 })).json().secret as string;
    const third = await newEvent();
    await expect.poll(() => hitsOf(target, third).length, { timeout: 10_000 }).toBe(1);
    const hit = hitsOf(target, third)[0] as Hit;
    expect(String(hit.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verifies(again, hit)).toBe(true);
    expect(verifies(fresh, hit)).toBe(true);
    expect(verifies(endpoint.secret, hit)).toBe(false);

    await sleep(2_500);
    const after = await newEvent();
    await expect.poll(() => hitsOf(target, after).length, { timeout: 10_000 }).toBe(1);
    const late = hitsOf(target, after)[0] as Hit;
    expect(String(late.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(verifies(again, late)).toBe(true);
    expect(verifies(fresh, late)).toBe(false);
    const refused = await api('POST', `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`, { overlapSeconds: 604801 });
    expect(refused.statusCode).toBe(400);
  });

  it('the test event goes to that endpoint alone, whatever its eventTypes, with organizationId null; a disabled endpoint → 409', async () => {
    const target = await receiver();
    const other = await receiver();
    const endpoint = await create({ url: target.url, eventTypes: ['organization.deleted'] });
    await create({ url: other.url });
    const settingsHits = settings.hits.length;
    const res = await api('POST', `/v1/webhook-endpoints/${endpoint.id}/test`);
    expect(res.statusCode, res.body).toBe(200);
    const delivery = res.json().delivery as Delivery;
    expect(delivery).toMatchObject({ eventType: 'webhook.test', organizationId: null, endpointId: endpoint.id, status: 'delivered' });
    const hits = hitsOf(target, delivery.eventId);
    expect(hits).toHaveLength(1);
    expect(eventOf(hits[0] as Hit)).toMatchObject({ type: 'webhook.test', data: { endpointId: endpoint.id } });
    expect(verifies(endpoint.secret, hits[0] as Hit)).toBe(true);
    await sleep(1_500);
    expect(hitsOf(other, delivery.eventId)).toEqual([]);
    expect(settings.hits.length).toBe(settingsHits);
    expect((await deliveriesOf(delivery.eventId)).map((d) => d.endpointId)).toEqual([endpoint.id]);

    expect((await api('PATCH', `/v1/webhook-endpoints/${endpoint.id}`, { enabled: false })).statusCode).toBe(200);
    const disabled = await api('POST', `/v1/webhook-endpoints/${endpoint.id}/test`);
    expect(disabled.statusCode).toBe(409);
    expect(disabled.json().code).toBe('CONFLICT');
    expect((await api('POST', '/v1/webhook-endpoints/whe_01J00000000000000000000000/test')).statusCode).toBe(404);
  });

  it('disabling an endpoint ends its pending deliveries as failed (endpoint_removed) and sends it nothing more', async () => {
    const { endpoint, eventId } = await failingDelivery(503);
    const patched = await api('PATCH', `/v1/webhook-endpoints/${endpoint.id}`, { enabled: false });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().endpoint.enabled).toBe(false);
    const delivery = await deliveryTo(endpoint.id, eventId);
    expect(delivery).toMatchObject({ status: 'failed', error: 'endpoint_removed' });
    const later = await newEvent();
    await expect.poll(() => hitsOf(settings, later).length, { timeout: 10_000 }).toBe(1);
    expect((await deliveriesOf(later)).map((d) => d.endpointId)).not.toContain(endpoint.id);
  });

  it('an attempt in flight when its endpoint is disabled is logged, and the delivery still says endpoint_removed', async () => {
    const { target, endpoint, eventId } = await failingDelivery(503);
    expect((await api('PATCH', `/v1/webhook-endpoints/${endpoint.id}`, { enabled: false })).statusCode).toBe(200);
    const [row] = await queryRows<{ organization_id: string; attempts: number }>(
      t.database.db,
      sql`SELECT organization_id, attempts FROM event_deliveries WHERE event_id = ${eventId} AND webhook_id = ${endpoint.id}`,
    );
    // The answer of an attempt the dispatcher had claimed before the PATCH arrives after it.
    const key = { organizationId: row?.organization_id as string, eventId, webhookId: endpoint.id };
    const late = { delivered: false, at: new Date(), responseStatus: 503, error: null, durationMs: 3 } as const;
    const failed = await recordAttempt(t.database.db, key, row?.attempts as number, late, {
      replay: false,
      retry: { delayMs: 1_000, occurredAt: new Date().toISOString(), maxAgeSeconds: 3600, error: 'HTTP 503' },
    });
    expect(failed).toBe(true);
    const delivery = await deliveryTo(endpoint.id, eventId);
    expect(delivery).toMatchObject({ status: 'failed', error: 'endpoint_removed' });
    expect(delivery?.attempts.at(-1)).toMatchObject({ responseStatus: 503 });

    // Enabled again and retried by hand, the failed delivery takes the retry's own error.
    expect((await api('PATCH', `/v1/webhook-endpoints/${endpoint.id}`, { enabled: true })).statusCode).toBe(200);
    target.status = 401;
    const retried = await api('POST', `/v1/webhooks/deliveries/${delivery?.id}/retry`);
    expect(retried.statusCode, retried.body).toBe(200);
    const after = await deliveryTo(endpoint.id, eventId);
    expect(after).toMatchObject({ status: 'failed', error: 'HTTP 401' });
  });

  it('a PATCHed url applies from the next attempt', async () => {
    const broken = await receiver();
    broken.status = 500;
    const fixed = await receiver();
    const endpoint = await create({ url: broken.url, eventTypes: ['organization.created'] });
    const eventId = await newEvent();
    await expect.poll(() => hitsOf(broken, eventId).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
    const patched = await api('PATCH', `/v1/webhook-endpoints/${endpoint.id}`, { url: fixed.url, description: 'moved' });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().endpoint).toMatchObject({ url: fixed.url, description: 'moved' });
    await expect.poll(() => hitsOf(fixed, eventId).length, { timeout: 10_000 }).toBe(1);
    expect(verifies(endpoint.secret, hitsOf(fixed, eventId)[0] as Hit)).toBe(true);
    await expect.poll(async () => (await deliveriesOf(eventId)).find((d) => d.endpointId === endpoint.id)?.status, { timeout: 10_000 }).toBe('delivered');
  });

  it('deleting an endpoint ends its pending deliveries as failed (endpoint_removed); it is gone', async () => {
    const { target, endpoint, eventId } = await failingDelivery(500);
    expect((await api('DELETE', `/v1/webhook-endpoints/${endpoint.id}`)).statusCode).toBe(200);
    const delivery = await deliveryTo(endpoint.id, eventId);
    expect(delivery).toMatchObject({ status: 'failed', error: 'endpoint_removed' });
    expect((await api('GET', `/v1/webhook-endpoints/${endpoint.id}`)).statusCode).toBe(404);
    expect((await api('PATCH', `/v1/webhook-endpoints/${endpoint.id}`, { enabled: true })).statusCode).toBe(404);
    const count = target.hits.length;
    await sleep(1_500);
    expect(target.hits.length).toBe(count);
  });

  it('creating, changing, rotating and deleting are audited without an organization; system administrators read them in GraphQL', async () => {
    const endpoint = await create({ url: (await receiver()).url });
    await api('PATCH', `/v1/webhook-endpoints/${endpoint.id}`, { description: 'audited' });
    await api('POST', `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`, {});
    await api('DELETE', `/v1/webhook-endpoints/${endpoint.id}`);
    const query = `{ auditLogs(targetType: "webhook_endpoint", first: 100) { nodes { action targetType targetId actorUserId credentialKind } } }`;
    const logs = (await graphqlData(t.fastify, admin.token, query)).auditLogs.nodes as { action: string; targetId: string; actorUserId: string }[];
    const mine = logs.filter((row) => row.targetId === endpoint.id);
    expect(mine.map((row) => row.action).sort()).toEqual(['webhook_endpoint.created', 'webhook_endpoint.deleted', 'webhook_endpoint.secret_rotated', 'webhook_endpoint.updated']);
    expect(mine.every((row) => row.actorUserId === admin.userId)).toBe(true);
    const rows = await queryRows<{ organization_id: string; detail: unknown }>(t.database.db, sql`SELECT organization_id, detail FROM audit_logs WHERE target_id = ${endpoint.id}`);
    expect(rows).toHaveLength(4);
    expect(rows.every((row) => row.organization_id === 'deployment')).toBe(true);
    expect(JSON.stringify(rows)).not.toContain('whsec_');
    // Not an organization's rows: an owner is refused.
    const refused = await graphqlRequest(t.fastify, owner.token, query);
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });

  it('secrets never reach a log line, a listing or a stored row in the clear', async () => {
    const endpoint = await create({ url: (await receiver()).url });
    const rotated = (await api('POST', `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`, { overlapSeconds: 60 })).json().secret as string;
    await api('POST', `/v1/webhook-endpoints/${endpoint.id}/test`);
    const logs = t.logs.text;
    for (const secret of [endpoint.secret, rotated, SETTINGS_SECRET]) {
      const raw = secret.slice('whsec_'.length);
      expect(logs).not.toContain(raw);
      expect((await api('GET', '/v1/webhook-endpoints')).body).not.toContain(raw);
      expect((await api('GET', '/v1/webhooks/deliveries?first=100')).body).not.toContain(raw);
    }
    const stored = await queryRows<Record<string, unknown>>(t.database.db, sql`SELECT * FROM webhook_endpoint_secrets WHERE endpoint_id = ${endpoint.id}`);
    expect(stored).toHaveLength(2);
    expect(JSON.stringify(stored)).not.toContain(endpoint.secret.slice('whsec_'.length));
    expect(JSON.stringify(stored)).not.toContain(rotated.slice('whsec_'.length));
  });
});

describe(`webhook endpoints through @tessera/client (${backend})`, () => {
  it("a product's backend manages endpoints with its service token: add, list, rotate, test, delete", async () => {
    // The package's own source: this checkout's client, whatever node_modules links.
    const { Tessera } = await import('../packages/client/src/index.js');
    const address = await t.fastify.listen({ host: '127.0.0.1', port: 0 });
    const tessera = new Tessera({ baseUrl: address, serviceToken: service });
    const target = await receiver();
    const { endpoint } = await tessera.webhookEndpoints.create({ url: target.url, eventTypes: ['integration.deleted'] });
    expect(endpoint.secret).toMatch(/^whsec_/);
    const { endpoints } = await tessera.webhookEndpoints.list();
    expect(endpoints.map((listed: { id: string }) => listed.id)).toEqual(expect.arrayContaining(['settings-0', endpoint.id]));
    const { secret } = await tessera.webhookEndpoints.rotateSecret(endpoint.id, { overlapSeconds: 30 });
    const { delivery } = await tessera.webhookEndpoints.test(endpoint.id);
    expect(delivery).toMatchObject({ eventType: 'webhook.test', status: 'delivered', endpointId: endpoint.id });
    const hit = hitsOf(target, delivery.eventId)[0] as Hit;
    expect(verifies(secret, hit) && verifies(endpoint.secret, hit)).toBe(true);
    await expect(tessera.webhookEndpoints.delete('settings-0')).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await tessera.webhookEndpoints.delete(endpoint.id);
    await expect(tessera.webhookEndpoints.get(endpoint.id)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe(`webhook endpoint secrets and key rotation (${backend})`, () => {
  it('npm run rotate-keys re-seals endpoint secrets under the active key; readiness names a key they still need', async () => {
    const endpoint = await create({ url: (await receiver()).url });
    const next = `k9:${Buffer.alloc(32, 4).toString('base64')}`;
    const onlyNext = loadConfig({ env: { ENCRYPTION_KEYS: next, JWT_SECRET: 'j'.repeat(32) }, persistGeneratedSecrets: false }).keyring;
    const both = loadConfig({ env: { ENCRYPTION_KEYS: `${next},${TEST_ENCRYPTION_KEY}`, JWT_SECRET: 'j'.repeat(32) }, persistGeneratedSecrets: false }).keyring;
    expect(await missingKeyIds(t.database.db, onlyNext)).toContain('test1');
    const result = await rotateSecrets(t.database.db, both, { batchSize: 2 });
    expect(result.done).toBeGreaterThanOrEqual(1);
    const [left] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM webhook_endpoint_secrets WHERE key_id <> 'k9'`);
    expect(left?.n).toBe(0);
    expect(await missingKeyIds(t.database.db, onlyNext)).toEqual([]);
    // The same secret, now opened by the new key alone.
    expect((await endpointTargets(t.database.db, onlyNext, [endpoint.id])).get(endpoint.id)?.secrets).toEqual([endpoint.secret]);
    expect((await rotateSecrets(t.database.db, both)).done).toBe(0);
  });
});

describe(`webhook endpoints in production (${backend})`, () => {
  let p: TestApp;
  let root: Account;
  let https: HttpsServer;
  let port = 0;
  const dir = mkdtempSync(join(tmpdir(), 'tessera-hooks-'));
  const got: Hit[] = [];
  const lookupCounts = new Map<string, number>();
  /** What the test's DNS answers per label under hooks.test (a list per lookup; the last repeats). */
  const dns: Record<string, string[]> = {
    ok: ['127.0.0.1'],
    private: ['10.0.0.7'],
    meta: ['169.254.169.254'],
    // An allowed address when the endpoint is made, a loopback one the allowlist does not open at delivery.
    rebind: ['127.0.0.1', '127.0.0.2'],
  };
  const lookup: LookupFunction = (hostname, options, callback) => {
    const count = lookupCounts.get(hostname) ?? 0;
    lookupCounts.set(hostname, count + 1);
    const answers = dns[hostname.split('.')[0] ?? ''] ?? [];
    const address = answers[Math.min(count, answers.length - 1)];
    if (!address) return callback(Object.assign(new Error('not found'), { code: 'ENOTFOUND' }), '', 4);
    if (options.all) (callback as unknown as (error: null, all: { address: string; family: number }[]) => void)(null, [{ address, family: 4 }]);
    else callback(null, address, 4);
  };

  beforeAll(async () => {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=hooks.test', '-addext', 'subjectAltName=DNS:*.hooks.test'], { stdio: 'ignore' });
    const cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
    https = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert }, (req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        got.push({ headers: req.headers, body });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => https.listen(0, '0.0.0.0', resolve));
    port = (https.address() as AddressInfo).port;
    p = await createTestApp({
      env: {
        APP_ENV: 'production',
        PUBLIC_URL: 'https://tessera.example',
        BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
        BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
        RATE_LIMIT_MAX: '0',
        OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
        EVENTS_POLL_INTERVAL: '1',
        EVENTS_RETRY_BASE: '1',
        EVENTS_RETRY_MAX: '1',
      },
      outbound: { lookup, ca: cert },
    });
    await ensureBootstrapAdmin(p.app.services);
    root = await login(p.fastify, ADMIN.email, ADMIN.password);
  }, 120_000);

  afterAll(async () => {
    await p?.close();
    await new Promise<void>((resolve) => (https ? https.close(() => resolve()) : resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  const make = (url: string) => p.fastify.inject({ method: 'POST', url: '/v1/webhook-endpoints', headers: bearer(root.token), payload: { url } });

  it('refuses http (loopback included) and hosts whose DNS answers the outbound guard refuses: 400, details path url', async () => {
    for (const url of [`http://127.0.0.1:${port}/in`, `http://ok.hooks.test:${port}/in`, `https://private.hooks.test:${port}/in`, `https://meta.hooks.test/in`, 'https://10.1.2.3/in', 'https://[::1]/in', 'https://nowhere.hooks.test/in']) {
      const res = await make(url);
      expect(res.statusCode, `${url}: ${res.body}`).toBe(400);
      expect(res.json()).toMatchObject({ code: 'INVALID_INPUT', details: [{ path: 'url' }] });
    }
    const listed = (await p.fastify.inject({ url: '/v1/webhook-endpoints', headers: bearer(root.token) })).json().endpoints;
    expect(listed).toEqual([]);
  });

  it('an https host in OUTBOUND_ALLOW_CIDRS is accepted and delivered to; one whose DNS answer moves to a refused address fails with outbound_refused', async () => {
    const ok = await make(`https://ok.hooks.test:${port}/in`);
    expect(ok.statusCode, ok.body).toBe(201);
    const okId = ok.json().endpoint.id as string;
    const test = await p.fastify.inject({ method: 'POST', url: `/v1/webhook-endpoints/${okId}/test`, headers: bearer(root.token) });
    expect(test.statusCode, test.body).toBe(200);
    expect(test.json().delivery.status).toBe('delivered');
    expect(got.some((hit) => eventOf(hit).data.endpointId === okId && verifies(ok.json().endpoint.secret, hit))).toBe(true);

    const moving = await make(`https://rebind.hooks.test:${port}/in`);
    expect(moving.statusCode, moving.body).toBe(201);
    const movingId = moving.json().endpoint.id as string;
    const refused = await p.fastify.inject({ method: 'POST', url: `/v1/webhook-endpoints/${movingId}/test`, headers: bearer(root.token) });
    expect(refused.statusCode, refused.body).toBe(200);
    expect(refused.json().delivery).toMatchObject({ status: 'pending', attempts: [{ responseStatus: null, error: 'outbound_refused' }] });
    expect(got.some((hit) => eventOf(hit).data.endpointId === movingId)).toBe(false);
  });
});
