import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type Database, type Db, openPostgres, queryRows, sql } from '../src/db/client.ts';
import { createDispatcher, type Dispatcher, type DispatcherOptions } from '../src/events/dispatcher.ts';
import { createOutbox, type NewEvent, type Outbox, webhookId } from '../src/events/outbox.ts';
import { createLogger } from '../src/http/logging.ts';
import { createTestApp, LogCapture, type TestApp } from './helpers/app.ts';
import { backend, TEST_DATABASE_URL } from './helpers/database.ts';
import { freePort } from './helpers/process.ts';

/** The outbox and dispatcher are tested as a transport: any type with any data (the real events are typed by src/events/types.ts). */
const rawEvent = (event: { organizationId: string; type: string; data: Record<string, unknown>; secretData?: Record<string, string> }) => event as unknown as NewEvent;

const ORG = 'org_events_test';
const EVENT_ID = /^evt_[0-9A-HJKMNP-TV-Z]{26}$/;

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** Whether the emitting request's after-commit callbacks had run when the event arrived. */
  committed: boolean;
  /** Whether the event row was visible through the root handle when it arrived. */
  rowVisible?: boolean;
}

interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  delayMs?: number;
  /** Never answer (the dispatcher's timeout must fire). */
  hang?: boolean;
}

interface Receiver {
  url: string;
  received: Received[];
  close(): Promise<void>;
}

/** A webhook receiver on loopback; `respond` decides each answer from the n-th request (0-based). */
async function startReceiver(
  respond: (request: Received, n: number) => Reply = () => ({ status: 204 }),
  inspect?: (request: Received) => Promise<void>,
): Promise<Receiver> {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let eventId = '';
      try {
        eventId = (JSON.parse(body) as { id: string }).id;
      } catch {
        // not an event: recorded as is
      }
      const request: Received = { path: req.url ?? '', headers: req.headers, body, committed: committed.has(eventId) };
      await inspect?.(request);
      const n = received.push(request) - 1;
      const reply = respond(request, n);
      if (reply.hang) return;
      if (reply.delayMs) await sleep(reply.delayMs);
      res.writeHead(reply.status, reply.headers).end(reply.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks/tessera`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** Standard Webhooks verification, written independently of the dispatcher. */
function signatureValid(request: Received, secret: string): boolean {
  const id = request.headers['webhook-id'];
  const timestamp = request.headers['webhook-timestamp'];
  const header = request.headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof header !== 'string') return false;
  const key = Buffer.from(secret.split('_')[1] as string, 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${request.body}`).digest();
  return header.split(' ').some((part) => {
    const [version, value] = part.split(',');
    const given = Buffer.from(value ?? '', 'base64');
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

let t: TestApp;
/** Event ids whose emitting request has committed (set by an after-commit callback registered before emit's). */
const committed = new Set<string>();
/** The outbox the test route emits through; each test installs its own. */
let outbox: Outbox = createOutbox({ webhooks: [], wake: () => {} });

interface Harness {
  receiver: Receiver;
  secret: string;
  dispatcher: Dispatcher;
  outbox: Outbox;
  logs: LogCapture;
}

/** A receiver, a started dispatcher and an outbox for it, torn down when the test ends. */
async function harness(
  respond?: (request: Received, n: number) => Reply,
  options: Partial<DispatcherOptions> & { inspect?: (request: Received) => Promise<void>; start?: boolean } = {},
): Promise<Harness> {
  const receiver = await startReceiver(respond, options.inspect);
  const secret = newSecret();
  const logs = new LogCapture();
  const webhooks = options.webhooks ?? [{ url: receiver.url, secret }];
  const dispatcher = createDispatcher({
    db: t.database.db,
    pollIntervalMs: 20,
    backoff: { baseMs: 10, maxMs: 40 },
    logger: createLogger({ level: 'debug', stream: logs }),
    ...options,
    webhooks,
  });
  outbox = createOutbox({ webhooks, wake: () => dispatcher.wake() });
  if (options.start !== false) dispatcher.start();
  onTestFinished(async () => {
    await dispatcher.stop();
    await receiver.close();
  });
  return { receiver, secret, dispatcher, outbox, logs };
}

async function emitRequest(query: { fail?: boolean; holdMs?: number; marker?: string } = {}) {
  const params = new URLSearchParams();
  if (query.fail) params.set('fail', '1');
  if (query.holdMs) params.set('holdMs', String(query.holdMs));
  if (query.marker) params.set('marker', query.marker);
  return t.fastify.inject({ method: 'POST', url: `/test/emit?${params}` });
}

async function deliveryRows(eventId: string) {
  return queryRows<{ webhook_id: string; attempts: number; delivered: boolean; locked: boolean; last_error: string | null }>(
    t.database.db,
    sql`SELECT webhook_id, attempts, delivered_at IS NOT NULL AS delivered, locked_until IS NOT NULL AS locked, last_error
        FROM event_deliveries WHERE event_id = ${eventId} ORDER BY webhook_id`,
  );
}

beforeAll(async () => {
  t = await createTestApp({
    routes: (app) => {
      app.post('/test/emit', { config: { auth: 'unauthenticated', errors: [] }, schema: { hide: true } }, async (request) => {
        const query = request.query as { fail?: string; holdMs?: string; marker?: string };
        const tx = await request.ctx.tx();
        let id = '';
        request.ctx.afterCommit(() => committed.add(id));
        const event = rawEvent({ organizationId: ORG, type: 'integration.connected', data: { integrationId: 'int_1', marker: query.marker ?? '' } });
        id = await outbox.emit(tx, (fn) => request.ctx.afterCommit(fn), event);
        // Holding the transaction open gives a premature dispatcher every chance to misbehave.
        if (query.holdMs) await sleep(Number(query.holdMs));
        if (query.fail) throw new Error('handler failed after emitting');
        return { id };
      });
    },
  });
});

afterAll(async () => {
  await t?.close();
});

describe(`event outbox and webhook dispatcher (${backend})`, () => {
  it('writes the event and one delivery per distinct webhook in the given transaction, and wakes only after commit', async () => {
    let woken = 0;
    const webhooks = [
      { url: 'http://127.0.0.1:9/a', secret: newSecret() },
      { url: 'http://127.0.0.1:9/b', secret: newSecret() },
      { url: 'http://127.0.0.1:9/a', secret: newSecret() },
    ];
    const box = createOutbox({ webhooks, wake: () => woken++ });
    const callbacks: (() => unknown)[] = [];
    const id = await t.database.db.transaction(async (tx) =>
      box.emit(tx as unknown as Db, (fn) => callbacks.push(fn), rawEvent({ organizationId: ORG, type: 'organization.created', data: { organizationId: ORG } })),
    );
    expect(id).toMatch(EVENT_ID);
    expect(woken).toBe(0);
    expect(callbacks).toHaveLength(1);
    callbacks[0]?.();
    expect(woken).toBe(1);

    const events = await queryRows<{ type: string; data: unknown }>(t.database.db, sql`SELECT type, data FROM events WHERE id = ${id}`);
    expect(events).toEqual([{ type: 'organization.created', data: { organizationId: ORG, externalId: null } }]);
    const deliveries = await deliveryRows(id);
    expect(deliveries.map((row) => row.webhook_id)).toEqual([webhookId('http://127.0.0.1:9/a'), webhookId('http://127.0.0.1:9/b')].sort());
    expect(deliveries.every((row) => row.attempts === 0 && !row.delivered && !row.locked)).toBe(true);
    expect(webhookId('http://127.0.0.1:9/a')).toMatch(/^[0-9a-f]{16}$/);
  });

  it('delivers an event emitted by a committed request exactly once, signed, and only after the commit', async () => {
    const { receiver, secret, dispatcher } = await harness(undefined, {
      inspect: async (request) => {
        const id = request.headers['webhook-id'] as string;
        const rows = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM events WHERE id = ${id}`);
        request.rowVisible = rows[0]?.n === 1;
      },
    });
    const before = Date.now();
    const response = await emitRequest({ holdMs: 150, marker: 'committed' });
    expect(response.statusCode).toBe(200);
    const { id } = response.json<{ id: string }>();
    expect(id).toMatch(EVENT_ID);

    await expect.poll(() => receiver.received.length, { timeout: 10_000 }).toBe(1);
    const [delivery] = receiver.received as [Received];
    expect(delivery.committed).toBe(true);
    expect(delivery.rowVisible).toBe(true);
    expect(delivery.path).toBe('/hooks/tessera');
    expect(delivery.headers['content-type']).toBe('application/json');
    expect(delivery.headers['webhook-id']).toBe(id);
    const timestamp = Number(delivery.headers['webhook-timestamp']);
    expect(Number.isInteger(timestamp)).toBe(true);
    expect(Math.abs(timestamp - before / 1000)).toBeLessThan(60);
    expect(signatureValid(delivery, secret)).toBe(true);
    expect(signatureValid(delivery, newSecret())).toBe(false);
    expect(signatureValid({ ...delivery, body: delivery.body.replace('int_1', 'int_2') }, secret)).toBe(false);

    const body = JSON.parse(delivery.body) as Record<string, unknown>;
    // Every event's data names its organization first.
    expect(body).toEqual({ id, type: 'integration.connected', occurredAt: expect.any(String), data: { organizationId: ORG, externalId: null, integrationId: 'int_1', marker: 'committed' } });
    const occurredAt = body.occurredAt as string;
    expect(occurredAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(Math.abs(Date.parse(occurredAt) - before)).toBeLessThan(60_000);

    await expect.poll(async () => (await deliveryRows(id))[0]?.delivered).toBe(true);
    // Later rounds find nothing more to do: exactly once.
    await sleep(100);
    expect(await dispatcher.runOnce()).toBe(0);
    expect(receiver.received).toHaveLength(1);
    expect(await deliveryRows(id)).toEqual([{ webhook_id: webhookId(receiver.url), attempts: 1, delivered: true, locked: false, last_error: null }]);
  });

  it("seals an event's secret fields in its row and opens them only into the delivered body, for that row only", async () => {
    const { receiver, secret, dispatcher } = await harness(undefined, { keyring: t.config.keyring });
    const box = createOutbox({ webhooks: [{ url: receiver.url, secret }], wake: () => dispatcher.wake(), keyring: t.config.keyring });
    const token = randomBytes(32).toString('base64url');
    const id = await box.emit(
      t.database.db,
      (fn) => void fn(),
      rawEvent({ organizationId: ORG, type: 'organization.member_invited', data: { invitationId: 'inv_1' }, secretData: { acceptToken: token } }),
    );
    await expect.poll(() => receiver.received.length, { timeout: 10_000 }).toBe(1);
    const delivered = receiver.received[0] as Received;
    expect(JSON.parse(delivered.body).data).toEqual({ externalId: null, organizationId: ORG, invitationId: 'inv_1', acceptToken: token });
    expect(signatureValid(delivered, secret)).toBe(true);
    const [row] = await queryRows<{ text: string }>(t.database.db, sql`SELECT row_to_json(e)::text AS text FROM events e WHERE id = ${id}`);
    expect(row?.text).toContain('inv_1');
    expect(row?.text).not.toContain(token);

    // Copied onto another event's row, the sealed fields do not open: that event is not delivered, and says why.
    const other = await box.emit(t.database.db, (fn) => void fn(), rawEvent({ organizationId: ORG, type: 'organization.member_invited', data: { invitationId: 'inv_2' } }));
    await expect.poll(() => receiver.received.length, { timeout: 10_000 }).toBe(2);
    const moved = await t.database.db.transaction(async (tx) => {
      const emitted = await box.emit(tx as unknown as Db, () => {}, rawEvent({ organizationId: ORG, type: 'organization.member_invited', data: { invitationId: 'inv_3' } }));
      await tx.execute(sql`UPDATE events SET sealed = (SELECT sealed FROM events WHERE id = ${id}) WHERE id = ${emitted}`);
      return emitted;
    });
    dispatcher.wake();
    await expect.poll(async () => (await deliveryRows(moved))[0]?.last_error, { timeout: 10_000 }).toBe('sealed event fields did not open');
    expect(receiver.received.map((r) => JSON.parse(r.body).id)).toEqual([id, other]);
    expect((await deliveryRows(moved))[0]?.delivered).toBe(false);
  });

  it('delivers nothing for a request that emits and then fails (rollback)', async () => {
    const { receiver, dispatcher } = await harness();
    const response = await emitRequest({ fail: true, holdMs: 50, marker: 'rolled-back' });
    expect(response.statusCode).toBe(500);
    await sleep(200);
    expect(await dispatcher.runOnce()).toBe(0);
    expect(receiver.received).toHaveLength(0);
    const rows = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM events WHERE data->>'marker' = 'rolled-back'`);
    expect(rows[0]?.n).toBe(0);
  });

  it('retries a failing receiver with the same webhook-id and a fresh timestamp and signature per attempt', async () => {
    let skew = 0;
    const { receiver, secret, logs } = await harness(
      (_request, n) => (n < 2 ? { status: 500, body: 'receiver-body-must-not-be-logged' } : { status: 200 }),
      // Each attempt signs one second later than the previous, so recomputation is observable.
      { clock: () => Date.now() + (skew += 1000) },
    );
    const response = await emitRequest({ marker: 'retried' });
    const { id } = response.json<{ id: string }>();

    await expect.poll(() => receiver.received.length, { timeout: 10_000 }).toBe(3);
    await expect.poll(async () => (await deliveryRows(id))[0]?.delivered).toBe(true);
    const attempts = receiver.received;
    expect(attempts.map((request) => request.headers['webhook-id'])).toEqual([id, id, id]);
    expect(new Set(attempts.map((request) => request.body)).size).toBe(1);
    expect(new Set(attempts.map((request) => request.headers['webhook-timestamp'])).size).toBe(3);
    expect(new Set(attempts.map((request) => request.headers['webhook-signature'])).size).toBe(3);
    for (const request of attempts) expect(signatureValid(request, secret)).toBe(true);

    const [row] = await deliveryRows(id);
    expect(row).toMatchObject({ attempts: 3, delivered: true, locked: false, last_error: 'HTTP 500' });
    await sleep(100);
    expect(receiver.received).toHaveLength(3);

    const failures = logs.entries.filter((entry) => entry.msg === 'webhook delivery failed');
    expect(failures).toHaveLength(2);
    expect(failures[0]).toMatchObject({ eventId: id, webhookId: webhookId(receiver.url), attempt: 1, error: 'HTTP 500' });
    expect(logs.text).not.toContain('receiver-body-must-not-be-logged');
    expect(logs.text).not.toContain(secret.slice('whsec_'.length, 20));
    expect(logs.text).not.toContain(receiver.url);
  });

  it('delivers the backlog as soon as a receiver that was down answers again, not at the backed-off times', async () => {
    let down = true;
    // Back-off of up to a minute: without the pull-forward the backlog would wait for it.
    const { receiver } = await harness(() => (down ? { status: 503 } : { status: 204 }), { backoff: { baseMs: 60_000, maxMs: 60_000 } });
    const backlog: string[] = [];
    for (let i = 0; i < 5; i++) backlog.push((await emitRequest({ marker: `backlog-${i}` })).json<{ id: string }>().id);
    await expect.poll(async () => (await Promise.all(backlog.map(deliveryRows))).every(([row]) => (row?.attempts ?? 0) >= 1 && !row?.locked), { timeout: 10_000 }).toBe(true);

    down = false;
    // A new event is due at once; its delivery shows the receiver is back.
    const fresh = (await emitRequest({ marker: 'after-recovery' })).json<{ id: string }>().id;
    await expect.poll(async () => (await Promise.all([fresh, ...backlog].map(deliveryRows))).every(([row]) => row?.delivered), { timeout: 5_000 }).toBe(true);
    expect(new Set(receiver.received.map((request) => request.headers['webhook-id']))).toEqual(new Set([fresh, ...backlog]));
  });

  it('counts only 2xx as delivered: a redirect or a 4xx is retried, never followed', async () => {
    const { receiver } = await harness((_request, n) => {
      if (n === 0) return { status: 302, headers: { location: '/elsewhere' } };
      if (n === 1) return { status: 410 };
      return { status: 202 };
    });
    const { id } = (await emitRequest({ marker: 'redirected' })).json<{ id: string }>();

    await expect.poll(() => receiver.received.length, { timeout: 10_000 }).toBe(3);
    await expect.poll(async () => (await deliveryRows(id))[0]?.delivered).toBe(true);
    expect(receiver.received.map((request) => request.path)).toEqual(['/hooks/tessera', '/hooks/tessera', '/hooks/tessera']);
    expect(receiver.received.map((request) => request.headers['webhook-id'])).toEqual([id, id, id]);
    expect((await deliveryRows(id))[0]).toMatchObject({ attempts: 3, last_error: 'HTTP 410' });
  });

  it('keeps delivering to a healthy webhook while another is down or hangs', async () => {
    const deadUrl = `http://127.0.0.1:${await freePort()}/down`;
    const hanging = await startReceiver(() => ({ status: 200, hang: true }));
    onTestFinished(() => hanging.close());
    const healthy = await startReceiver();
    onTestFinished(() => healthy.close());
    const webhooks = [
      { url: deadUrl, secret: newSecret() },
      { url: hanging.url, secret: newSecret() },
      { url: healthy.url, secret: newSecret() },
    ];
    await harness(undefined, { webhooks, timeoutMs: 200, backoff: { baseMs: 60_000, maxMs: 60_000 } });
    const { id } = (await emitRequest({ marker: 'partial' })).json<{ id: string }>();

    await expect.poll(() => healthy.received.length, { timeout: 10_000 }).toBe(1);
    await expect
      .poll(async () => Object.fromEntries((await deliveryRows(id)).map((row) => [row.webhook_id, row.delivered ? 'delivered' : row.last_error])), {
        timeout: 10_000,
      })
      .toEqual({
        [webhookId(deadUrl)]: 'network error (ECONNREFUSED)',
        [webhookId(hanging.url)]: 'timeout',
        [webhookId(healthy.url)]: 'delivered',
      });
  });

  it('stops: no rounds after stop(), while runOnce() still works', async () => {
    const { receiver, dispatcher } = await harness();
    await dispatcher.stop();
    const { id } = (await emitRequest({ marker: 'after-stop' })).json<{ id: string }>();
    await sleep(150);
    expect(receiver.received).toHaveLength(0);
    expect(await dispatcher.runOnce()).toBe(1);
    expect(receiver.received.map((request) => request.headers['webhook-id'])).toEqual([id]);
  });

  it('delivers each of many events exactly once with two dispatchers running concurrently on one database', async () => {
    const receiver = await startReceiver(() => ({ status: 200, delayMs: Math.floor(Math.random() * 15) }));
    onTestFinished(() => receiver.close());
    const webhooks = [{ url: receiver.url, secret: newSecret() }];

    // On PostgreSQL each dispatcher gets a pool of its own, as two instances would.
    const extra: Database[] = [];
    let dbs: [Db, Db] = [t.database.db, t.database.db];
    if (TEST_DATABASE_URL) {
      const [row] = await queryRows<{ name: string }>(t.database.db, sql`SELECT current_database() AS name`);
      const url = new URL(TEST_DATABASE_URL);
      url.pathname = `/${row?.name}`;
      for (let i = 0; i < 2; i++) extra.push(await openPostgres({ url: url.href, poolMax: 4, statementTimeout: 30, connectTimeout: 5 }));
      dbs = [extra[0]?.db as Db, extra[1]?.db as Db];
    }
    const attempted = [0, 0];
    const logger = createLogger({ level: 'warn', stream: new LogCapture() });
    const dispatchers = dbs.map((db, index) =>
      createDispatcher({
        db,
        webhooks,
        pollIntervalMs: 15,
        batchSize: 4,
        backoff: { baseMs: 10, maxMs: 40 },
        logger,
        fetch: (input, init) => {
          attempted[index] = (attempted[index] ?? 0) + 1;
          return fetch(input, init);
        },
      }),
    );
    onTestFinished(async () => {
      for (const dispatcher of dispatchers) await dispatcher.stop();
      for (const database of extra) await database.close();
    });
    for (const dispatcher of dispatchers) dispatcher.start();

    const wakeAll = () => {
      for (const dispatcher of dispatchers) dispatcher.wake();
    };
    const box = createOutbox({ webhooks, wake: wakeAll });
    const ids: string[] = [];
    for (let batch = 0; batch < 10; batch++) {
      const wakes: (() => unknown)[] = [];
      await t.database.db.transaction(async (tx) => {
        for (let i = 0; i < 5; i++) {
          ids.push(await box.emit(tx as unknown as Db, (fn) => wakes.push(fn), rawEvent({ organizationId: ORG, type: 'integration.status_changed', data: { n: batch * 5 + i } })));
        }
      });
      for (const fn of wakes) fn();
    }

    await expect.poll(() => new Set(receiver.received.map((request) => request.headers['webhook-id'])).size, { timeout: 20_000 }).toBe(50);
    await expect
      .poll(async () => {
        const rows = await queryRows<{ n: number }>(
          t.database.db,
          sql`SELECT count(*)::int AS n FROM event_deliveries WHERE webhook_id = ${webhookId(receiver.url)} AND delivered_at IS NOT NULL`,
        );
        return rows[0]?.n;
      })
      .toBe(50);
    await sleep(100);
    expect(await dispatchers[0]?.runOnce()).toBe(0);
    expect(await dispatchers[1]?.runOnce()).toBe(0);

    const received = receiver.received.map((request) => request.headers['webhook-id'] as string);
    expect(received.sort()).toEqual([...ids].sort());
    expect(attempted[0]! + attempted[1]!).toBe(50);
    // Both really worked: the exactly-once result is not one dispatcher doing everything.
    expect(attempted[0]).toBeGreaterThan(0);
    expect(attempted[1]).toBeGreaterThan(0);
  });
});
