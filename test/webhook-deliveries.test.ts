// The webhook delivery log (docs/contract.md §11), HTTP in, HTTP and the receiver's requests out: a
// system administrator sees what was delivered, what failed and why, and delivers one again —
// the same webhook-id, a new signature; a delivered one replayed and marked so. A delivery still
// failing EVENTS_WEBHOOK_MAX_AGE after its event becomes failed and is no longer retried.
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows, sql } from '../src/db/client.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { backend } from './helpers/database.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, browser, login, registerAndLogin } from './helpers/identity.ts';

const ADMIN = { email: 'ops-root@example.com', password: 'bootstrap admin password' };
const MAX_AGE_SECONDS = 3;
const SECRET = `whsec_${randomBytes(32).toString('base64')}`;

interface Hit {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A receiver whose answer the test sets (`status`); it keeps every request it got. */
const receiver = {
  status: 500,
  hits: [] as Hit[],
  url: '',
  close: async () => {},
};

let t: TestApp;
let admin: Account;

interface Delivery {
  id: string;
  eventId: string;
  eventType: string;
  organizationId: string;
  endpoint: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: { at: string; responseStatus: number | null; error: string | null; durationMs: number; replay: boolean }[];
  attemptCount: number;
  nextAttemptAt: string | null;
}

async function list(query = '', auth: Record<string, string> = bearer(admin.token)) {
  return t.fastify.inject({ url: `/v1/webhooks/deliveries${query}`, headers: auth });
}

async function deliveriesOf(eventId: string): Promise<Delivery[]> {
  const res = await list('?first=100');
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().deliveries as Delivery[]).filter((delivery) => delivery.eventId === eventId);
}

/** The `organization.created` event of a new user's personal organization. */
async function newEvent(): Promise<{ account: Account; eventId: string }> {
  const account = await registerAndLogin(t.fastify, 'hooked');
  const [row] = await queryRows<{ id: string }>(t.database.db, sql`SELECT id FROM events WHERE organization_id = ${account.organizationId} AND type = 'organization.created'`);
  return { account, eventId: row?.id as string };
}

function signedBy(hit: Hit, secret: string): boolean {
  const expected = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
    .update(`${hit.headers['webhook-id']}.${hit.headers['webhook-timestamp']}.${hit.body}`)
    .digest('base64');
  return hit.headers['webhook-signature'] === `v1,${expected}`;
}

beforeAll(async () => {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      receiver.hits.push({ headers: req.headers, body });
      res.writeHead(receiver.status).end('{"echo":"never read"}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // A path token in the query: the log shows the endpoint without it.
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/tessera?token=receiver-credential`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  t = await createTestApp({
    env: {
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      EVENTS_WEBHOOK_URL: receiver.url,
      EVENTS_WEBHOOK_SECRET: SECRET,
      EVENTS_WEBHOOK_MAX_AGE: String(MAX_AGE_SECONDS),
      EVENTS_POLL_INTERVAL: '1',
      EVENTS_RETRY_BASE: '1',
      EVENTS_RETRY_MAX: '1',
      RATE_LIMIT_MAX: '0',
    },
  });
  await ensureBootstrapAdmin(t.app.services);
  admin = await login(t.fastify, ADMIN.email, ADMIN.password);
});

afterAll(async () => {
  await t?.close();
  await receiver.close();
});

describe(`the delivery log (${backend})`, () => {
  it('shows a failing delivery with each attempt, gives it up as failed after EVENTS_WEBHOOK_MAX_AGE, and delivers it again by hand once the receiver is fixed', async () => {
    receiver.status = 500;
    const { account, eventId } = await newEvent();
    await expect.poll(async () => (await deliveriesOf(eventId))[0]?.attempts.length ?? 0, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
    const [pending] = await deliveriesOf(eventId);
    expect(pending).toMatchObject({
      eventId,
      eventType: 'organization.created',
      organizationId: account.organizationId,
      endpoint: receiver.url.replace('?token=receiver-credential', ''),
    });
    expect(JSON.stringify(pending)).not.toContain('receiver-credential');
    expect(pending?.id).toMatch(/^dlv_[0-9A-Z]{26}_[0-9a-f]{16}$/);
    for (const attempt of pending?.attempts ?? []) expect(attempt).toEqual({ at: expect.any(String), responseStatus: 500, error: null, durationMs: expect.any(Number), replay: false });
    expect(pending?.attemptCount).toBe(pending?.attempts.length);

    // Still failing MAX_AGE seconds after the event: failed, and no more attempts.
    await expect.poll(async () => (await deliveriesOf(eventId))[0]?.status, { timeout: 15_000, interval: 250 }).toBe('failed');
    const [failed] = await deliveriesOf(eventId);
    expect(failed?.nextAttemptAt).toBeNull();
    const hitsOfEvent = () => receiver.hits.filter((hit) => hit.headers['webhook-id'] === eventId);
    const triedBefore = hitsOfEvent().length;
    expect(triedBefore).toBe(failed?.attemptCount);
    await sleep(2500);
    expect(hitsOfEvent()).toHaveLength(triedBefore);
    expect((await list('?status=failed&first=100')).json().deliveries.map((d: Delivery) => d.id)).toContain(failed?.id);
    expect((await list('?status=pending&first=100')).json().deliveries.map((d: Delivery) => d.id)).not.toContain(failed?.id);

    // The receiver is fixed; a retry delivers it now: the same webhook-id, signed anew.
    receiver.status = 204;
    const retried = await t.fastify.inject({ method: 'POST', url: `/v1/webhooks/deliveries/${failed?.id}/retry`, headers: bearer(admin.token) });
    expect(retried.statusCode, retried.body).toBe(200);
    const delivered = retried.json().delivery as Delivery;
    expect(delivered.status).toBe('delivered');
    expect(delivered.attempts.at(-1)).toMatchObject({ responseStatus: 204, error: null, replay: false });
    const first = hitsOfEvent()[0];
    const last = hitsOfEvent().at(-1);
    expect(last?.headers['webhook-id']).toBe(eventId);
    expect(last?.body).toBe(first?.body);
    expect(last?.headers['webhook-signature']).not.toBe(first?.headers['webhook-signature']);
    expect(signedBy(last as Hit, SECRET)).toBe(true);

    // A delivered one may be replayed: one more attempt, marked as a replay; it stays delivered.
    const replayed = await t.fastify.inject({ method: 'POST', url: `/v1/webhooks/deliveries/${failed?.id}/retry`, headers: { ...browser(admin), 'content-type': 'application/json' } });
    expect(replayed.statusCode, replayed.body).toBe(200);
    expect(replayed.json().delivery.status).toBe('delivered');
    expect(replayed.json().delivery.attempts.at(-1)).toMatchObject({ responseStatus: 204, replay: true });
    expect(hitsOfEvent()).toHaveLength(triedBefore + 2);

    // Each retry is in the organization's audit log.
    const audit = await queryRows<{ action: string; actor_user_id: string; detail: { replay: boolean } }>(
      t.database.db,
      sql`SELECT action, actor_user_id, detail FROM audit_logs WHERE organization_id = ${account.organizationId} AND action = 'webhook_delivery.retried' ORDER BY id`,
    );
    expect(audit.map((row) => [row.actor_user_id, row.detail.replay])).toEqual([
      [admin.userId, false],
      [admin.userId, true],
    ]);
  }, 60_000);

  it('records an attempt that got no answer with our words, not a status', async () => {
    receiver.status = 204;
    const { eventId } = await newEvent();
    await expect.poll(async () => (await deliveriesOf(eventId))[0]?.status, { timeout: 10_000 }).toBe('delivered');
    // Now the receiver is gone: the replay attempt records a network error and the delivery stays delivered.
    const [delivery] = await deliveriesOf(eventId);
    await receiver.close();
    try {
      const replayed = await t.fastify.inject({ method: 'POST', url: `/v1/webhooks/deliveries/${delivery?.id}/retry`, headers: bearer(admin.token) });
      expect(replayed.statusCode, replayed.body).toBe(200);
      expect(replayed.json().delivery.status).toBe('delivered');
      expect(replayed.json().delivery.attempts.at(-1)).toMatchObject({ responseStatus: null, error: expect.stringMatching(/^network error/), replay: true });
    } finally {
      // Back on the same port for the tests after this one.
      const port = Number(new URL(receiver.url).port);
      const server = createServer((req, res) => {
        let body = '';
        req.on('data', (chunk: Buffer) => (body += chunk.toString()));
        req.on('end', () => {
          receiver.hits.push({ headers: req.headers, body });
          res.writeHead(receiver.status).end();
        });
      });
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
      receiver.close = () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        });
    }
  });

  it('filters by status and event type and pages newest first; refuses a page size outside 1–100 and a made-up cursor', async () => {
    receiver.status = 204;
    const events: string[] = [];
    for (let i = 0; i < 3; i++) events.push((await newEvent()).eventId);
    await expect.poll(async () => (await Promise.all(events.map(async (id) => (await deliveriesOf(id))[0]?.status))).every((s) => s === 'delivered'), { timeout: 10_000 }).toBe(true);

    const seen: string[] = [];
    let after: string | null = null;
    for (;;) {
      const res = await list(`?status=delivered&eventType=organization.created&first=2${after ? `&after=${after}` : ''}`);
      expect(res.statusCode, res.body).toBe(200);
      const { deliveries, pageInfo } = res.json() as { deliveries: Delivery[]; pageInfo: { endCursor: string | null; hasNextPage: boolean } };
      expect(deliveries.length).toBeLessThanOrEqual(2);
      for (const delivery of deliveries) expect(delivery).toMatchObject({ status: 'delivered', eventType: 'organization.created' });
      seen.push(...deliveries.map((delivery) => delivery.eventId));
      if (!pageInfo.hasNextPage) break;
      after = pageInfo.endCursor;
    }
    // Newest first, every one once.
    expect(seen.slice(0, 3)).toEqual([...events].reverse());
    expect(new Set(seen).size).toBe(seen.length);
    expect((await list('?eventType=organization.deleted')).json().deliveries).toEqual([]);

    for (const bad of ['?first=0', '?first=101', '?status=lost', '?eventType=made.up', '?after=dlv_nope', '?after=01J0000000000000000000000Z']) {
      const res = await list(bad);
      expect(res.statusCode, bad).toBe(400);
      expect(res.json().code, bad).toBe('INVALID_INPUT');
    }
  });

  it('is for system administrators only: a member, an owner, an API token and an administrator impersonating someone are refused; an unknown delivery is 404', async () => {
    const owner = await registerAndLogin(t.fastify, 'owner');
    const apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "ci") { token } }')).createAPIToken.token as string;
    const [delivery] = (await list()).json().deliveries as Delivery[];
    const impersonating = { ...bearer(admin.token), 'x-impersonate-user': owner.userId };
    for (const auth of [bearer(owner.token), browser(owner), bearer(apiToken), impersonating]) {
      const listed = await list('', auth);
      expect(listed.statusCode, listed.body).toBe(403);
      expect(listed.body).not.toContain('dlv_');
      const retried = await t.fastify.inject({ method: 'POST', url: `/v1/webhooks/deliveries/${delivery?.id}/retry`, headers: auth });
      expect(retried.statusCode, retried.body).toBe(403);
    }
    expect((await list('', {})).statusCode).toBe(401);
    const unknown = await t.fastify.inject({ method: 'POST', url: '/v1/webhooks/deliveries/dlv_01J0000000000000000000000Z_0000000000000000/retry', headers: bearer(admin.token) });
    expect(unknown.statusCode).toBe(404);
  });
});
