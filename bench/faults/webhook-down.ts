/**
 * Fault 5 — the webhook receiver is down for a while. EVENTS_WEBHOOK_URL points at a
 * loopback port where nothing listens (connection refused); 10 users register and each
 * creates 2 more organizations (30 `organization.created` events); the receiver starts
 * ~5 s after the first event.
 *
 * Expected: every event delivered once the receiver is up — none lost, no duplicates
 * (counted by `webhook-id`), `webhook-id` = the event id, a valid Standard Webhooks
 * signature (`v1,` base64 HMAC-SHA256 of `id.timestamp.body` under the whsec_ key) and a
 * fresh timestamp on each delivery. Figures: attempts logged while down, time from the
 * receiver's start to the last delivery. The retry back-off (1 s doubling to 10 min, full
 * jitter) has no setting: EVENTS_POLL_INTERVAL only sets how often due rows are looked for.
 *
 * Usage: node bench/faults/webhook-down.ts [--backend=pg|pglite]
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { backendArg, baseEnv, call, freePort, Report, registerAndLogin, sleep, spawnService, storage, waitReady } from './lib.ts';

const USERS = 10;
const EXTRA_ORGS_PER_USER = 2;
const DOWN_MS = 5000;
const DEADLINE_MS = 180_000;

interface Delivery {
  webhookId: string;
  timestamp: string;
  signature: string;
  body: string;
  receivedAt: number;
}

const backend = backendArg();
const report = new Report(`webhook receiver down for ${DOWN_MS / 1000} s (${backend})`);
const store = await storage(backend);
const key = randomBytes(32);
const secret = `whsec_${key.toString('base64')}`;
const port = await freePort();
const deliveries: Delivery[] = [];
let receiver: Server | undefined;
let service: Awaited<ReturnType<typeof spawnService>> | undefined;

try {
  service = await spawnService(baseEnv({ ...store.env, EVENTS_WEBHOOK_URL: `http://127.0.0.1:${port}/hook`, EVENTS_WEBHOOK_SECRET: secret, EVENTS_POLL_INTERVAL: '1' }));
  await waitReady(service);
  const base = service.url;

  // Events while the receiver is down.
  const expected = new Set<string>();
  let firstEventAt = 0;
  for (let i = 0; i < USERS; i++) {
    const { token, organizationId } = await registerAndLogin(base, `webhook${i}@example.com`);
    firstEventAt ||= Date.now();
    expected.add(organizationId);
    for (let j = 0; j < EXTRA_ORGS_PER_USER; j++) {
      const created = await call(base, 'POST', '/v1/organizations', { token, body: { name: `Webhook org ${i}.${j}` } });
      if (created.status !== 201) throw new Error(`POST /v1/organizations: ${created.status} ${created.text}`);
      expected.add(created.json.organization.id as string);
    }
  }
  const createdIn = Date.now() - firstEventAt;
  await sleep(Math.max(0, firstEventAt + DOWN_MS - Date.now()));
  const failedWhileDown = (service.output().match(/webhook delivery failed/g) ?? []).length;

  // The receiver comes up on the configured port.
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      deliveries.push({
        webhookId: String(req.headers['webhook-id'] ?? ''),
        timestamp: String(req.headers['webhook-timestamp'] ?? ''),
        signature: String(req.headers['webhook-signature'] ?? ''),
        body: Buffer.concat(chunks).toString('utf8'),
        receivedAt: Date.now(),
      });
      res.writeHead(204).end();
    });
  });
  receiver = server;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const upAt = Date.now();
  const organizationsSeen = () => new Set(deliveries.map((d) => (JSON.parse(d.body) as { data?: { organization?: { id?: string } } }).data?.organization?.id));
  while (Date.now() - upAt < DEADLINE_MS && [...expected].some((id) => !organizationsSeen().has(id))) await sleep(100);
  const allAt = Date.now();
  await sleep(3000); // late duplicates would arrive now

  const seen = organizationsSeen();
  const missing = [...expected].filter((id) => !seen.has(id));
  report.note(`${expected.size} events created in ${(createdIn / 1000).toFixed(1)} s; ${failedWhileDown} failed attempts logged while the receiver was down`);
  report.check(
    `every event delivered once the receiver is up (within ${DEADLINE_MS / 1000} s)`,
    missing.length === 0,
    `${expected.size - missing.length}/${expected.size} delivered; last one ${((allAt - upAt) / 1000).toFixed(1)} s after the receiver started (${((allAt - firstEventAt) / 1000).toFixed(1)} s after the first event)`,
  );
  const byId = new Map<string, number>();
  for (const d of deliveries) byId.set(d.webhookId, (byId.get(d.webhookId) ?? 0) + 1);
  const duplicates = [...byId.values()].filter((n) => n > 1).length;
  report.check('no duplicates (counted by webhook-id)', duplicates === 0 && deliveries.length === expected.size, `${deliveries.length} deliveries, ${byId.size} distinct webhook-ids, ${duplicates} duplicated`);
  const badSignature = deliveries.filter((d) => {
    const expectedSig = createHmac('sha256', key).update(`${d.webhookId}.${d.timestamp}.${d.body}`).digest();
    const given = d.signature
      .split(' ')
      .filter((s) => s.startsWith('v1,'))
      .map((s) => Buffer.from(s.slice(3), 'base64'));
    return !given.some((g) => g.length === expectedSig.length && timingSafeEqual(g, expectedSig));
  });
  report.check('every signature valid (v1, HMAC-SHA256 of id.timestamp.body)', deliveries.length > 0 && badSignature.length === 0, `${deliveries.length - badSignature.length}/${deliveries.length} valid`);
  const shapes = deliveries.filter((d) => {
    const body = JSON.parse(d.body) as Record<string, unknown>;
    const fresh = Math.abs(Number(d.timestamp) * 1000 - d.receivedAt) <= 5 * 60 * 1000;
    return body.id === d.webhookId && body.type === 'organization.created' && typeof body.occurredAt === 'string' && typeof body.data === 'object' && fresh;
  });
  report.check('webhook-id = event id, body {id,type,occurredAt,data}, timestamp fresh (±5 min) on the retried delivery', shapes.length === deliveries.length && deliveries.length > 0, `${shapes.length}/${deliveries.length}`);
  const lags = deliveries.map((d) => d.receivedAt - upAt);
  report.note(`delivery after the receiver started: first +${Math.min(...lags)} ms, last +${Math.max(...lags)} ms (back-off: EVENTS_RETRY_BASE doubling to EVENTS_RETRY_MAX, full jitter; the backlog is pulled forward on the first success)`);
  report.checkLogClean('the webhook secret never appears in the service log', service.output(), [secret, key.toString('base64')]);
  report.finish();
} catch (error) {
  report.finish(error);
} finally {
  await service?.stop();
  await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
  store.cleanup();
}
