// OpenTelemetry traces (docs/contract.md §10 "Traces", decisions 150–151): a spawned Tessera, so the
// instrumentations load before the app as in `npm start`, exports to an in-process OTLP/HTTP
// receiver (JSON). Requests in; spans, the webhook receiver's and the fake provider's headers out.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createPgDatabase, dropPgDatabase, TEST_DATABASE_URL } from './helpers/database.ts';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from './helpers/otlp.ts';
import { type ServiceProcess, spawnService, waitFor } from './helpers/process.ts';
import { providerEnv } from './helpers/providers.ts';

const SERVER = 2;
const CLIENT = 3;
const WEBHOOK_PATH_TOKEN = 'XyZwebhookPathToken0123456789';
const WEBHOOK_SECRET = `whsec_${Buffer.alloc(32, 5).toString('base64')}`;
const QUERY_SECRET = 'QueryStringSecret0123456789';

let receiver: OtlpReceiver;
let gh: FakeProvider;
let hooks: Server;
const hookHeaders: IncomingHttpHeaders[] = [];
let service: ServiceProcess;
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  hooks = createServer((request, response) => {
    hookHeaders.push(request.headers);
    request.resume();
    request.on('end', () => response.writeHead(204).end());
  });
  await new Promise<void>((resolve) => hooks.listen(0, '127.0.0.1', resolve));
  let storage: Record<string, string>;
  if (TEST_DATABASE_URL) {
    const url = await createPgDatabase();
    cleanups.push(() => dropPgDatabase(url));
    storage = { DATABASE_URL: url };
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-traces-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    storage = { DATA_DIR: dir };
  }
  service = await spawnService({
    ...storage,
    ...providerEnv(gh),
    ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 3).toString('base64')}`,
    JWT_SECRET: 't'.repeat(40),
    PASSWORD_COST: '10',
    RATE_LIMIT_MAX: '0',
    PUBLIC_URL: 'http://127.0.0.1:8080',
    EVENTS_WEBHOOK_URL: `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/hooks/${WEBHOOK_PATH_TOKEN}`,
    EVENTS_WEBHOOK_SECRET: WEBHOOK_SECRET,
    // A validation pass every second (the scheduler runs at most one interval apart).
    OAUTH_TOKEN_VALIDATION_INTERVAL: '1',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '100',
  });
  await waitFor(service);
}, 180_000);

afterAll(async () => {
  await service?.stop();
  for (const cleanup of cleanups.reverse()) await cleanup();
  await new Promise((resolve) => hooks?.close(resolve));
  await gh?.close();
  await receiver?.close();
});

async function call(method: string, path: string, options: { token?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(service.url + path, { method, headers, ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}) });
  const text = await res.text();
  // biome-ignore lint/suspicious/noExplicitAny: answers read loosely; the assertions check their shape
  return { status: res.status, json: text ? (JSON.parse(text) as Record<string, any>) : {}, headers: res.headers };
}

/** The spans of one trace, once `ready` says they have all arrived. */
async function traceOf(traceId: string, ready: (spans: ReceivedSpan[]) => boolean): Promise<ReceivedSpan[]> {
  const of = () => receiver.spans.filter((span) => span.traceId === traceId);
  await expect.poll(() => ready(of()), { timeout: 20_000, interval: 100 }).toBe(true);
  return of();
}

/** True when `span` descends from the span `ancestorId` within `spans`. */
function descends(span: ReceivedSpan, ancestorId: string, spans: ReceivedSpan[]): boolean {
  const byId = new Map(spans.map((one) => [one.spanId, one]));
  for (let parent = span.parentSpanId; parent; parent = byId.get(parent)?.parentSpanId ?? '') if (parent === ancestorId) return true;
  return false;
}

const isDatabase = (span: ReceivedSpan) => /^(pg\.query|pglite\.query):/.test(span.name);
const isGitHubCall = (span: ReceivedSpan) => span.kind === CLIENT && span.attributes['tessera.provider'] === 'github';
const hex = (bytes: number) => Array.from({ length: bytes }, () => Math.floor(Math.random() * 256).toString(16).padStart(2, '0')).join('');

describe('traces over OTLP/HTTP', () => {
  it('continue an incoming traceparent with one server span per request and its children, carry one to webhooks but not to providers, and hold no secret', async () => {
    // A person signs up and connects GitHub (each emits an event: webhook deliveries).
    gh.addUser({ login: 'traced', email: 'traced@example.com' });
    expect((await call('POST', '/v1/register', { body: { email: 'traced@example.com', password: 'traced person password' } })).status).toBe(201);
    const session = (await call('POST', '/v1/login', { body: { email: 'traced@example.com', password: 'traced person password' } })).json.accessToken as string;
    const start = await call('POST', '/v1/integrations/oauth/start', { token: session, body: { provider: 'github', redirectUri: 'http://127.0.0.1:8080/app' } });
    const txCookie = (start.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const approved = gh.authorize(start.json.authUrl as string, 'traced');
    const callback = await call('POST', '/v1/integrations/oauth/callback', { headers: { cookie: txCookie }, body: { provider: 'github', code: approved.code, state: approved.state } });
    expect(callback.status, JSON.stringify(callback.json)).toBe(200);

    // A proxied call, inside the caller's trace, with a cookie and a query string that must not become attributes.
    const traceId = hex(16);
    const parentId = hex(8);
    const proxied = await call('GET', `/v1/integrations/github/proxy/user?probe=${QUERY_SECRET}`, {
      token: session,
      headers: { traceparent: `00-${traceId}-${parentId}-01`, cookie: `session=${session}` },
    });
    expect(proxied.status).toBe(200);
    const proxyTrace = await traceOf(traceId, (spans) => spans.some((span) => span.kind === SERVER) && spans.some(isGitHubCall));
    const servers = proxyTrace.filter((span) => span.kind === SERVER);
    expect(servers).toHaveLength(1);
    const [server] = servers as [ReceivedSpan];
    expect(server.parentSpanId).toBe(parentId);
    expect(server.service).toBe('tessera');
    expect(server.attributes).toMatchObject({ 'http.request.method': 'GET', 'http.route': '/v1/integrations/:provider/proxy/*', 'http.response.status_code': 200 });
    expect(server.attributes['url.query']).toBeUndefined();
    const children = proxyTrace.filter((span) => span !== server);
    expect(children.length).toBeGreaterThan(0);
    for (const child of children) expect(descends(child, server.spanId, proxyTrace)).toBe(true);
    expect(children.some(isDatabase)).toBe(true);
    for (const statement of children.filter(isDatabase)) expect(statement.attributes['db.query.text']).toEqual(expect.any(String));
    expect(children.find(isGitHubCall)?.attributes).toMatchObject({ 'tessera.provider': 'github', 'server.address': '127.0.0.1', 'http.request.method': 'GET', 'http.response.status_code': 200 });

    // Two refreshes at once: one leads (and calls the token endpoint), the other joins it.
    gh.latencyMs = 300;
    const refreshTraces = [hex(16), hex(16)];
    const refreshed = await Promise.all(refreshTraces.map((id) => call('POST', '/v1/integrations/github/refresh', { token: session, headers: { traceparent: `00-${id}-${hex(8)}-01` } })));
    gh.latencyMs = 0;
    expect(refreshed.map((res) => res.status)).toEqual([200, 200]);
    const refreshSpans = await Promise.all(refreshTraces.map((id) => traceOf(id, (spans) => spans.some((span) => span.kind === SERVER) && spans.some((span) => span.name === 'refresh'))));
    const roles = refreshSpans.map((spans) => spans.find((span) => span.name === 'refresh')?.attributes['tessera.refresh']).sort();
    expect(roles).toEqual(['joined', 'led']);
    const led = refreshSpans.find((spans) => spans.some((span) => span.attributes['tessera.refresh'] === 'led')) as ReceivedSpan[];
    const ledRefresh = led.find((span) => span.name === 'refresh') as ReceivedSpan;
    expect(led.filter(isGitHubCall).some((span) => span.attributes['http.request.method'] === 'POST' && descends(span, ledRefresh.spanId, led))).toBe(true);

    // The webhook delivery: a span of its own whose traceparent the receiver got.
    await expect.poll(() => hookHeaders.length, { timeout: 20_000 }).toBeGreaterThan(0);
    const delivered = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(String(hookHeaders[0]?.traceparent));
    expect(delivered).not.toBeNull();
    const deliveryTrace = await traceOf(delivered?.[1] ?? '', (spans) => spans.some((span) => span.name === 'webhook delivery'));
    const delivery = deliveryTrace.find((span) => span.name === 'webhook delivery') as ReceivedSpan;
    expect(delivery.spanId).toBe(delivered?.[2]);
    expect(delivery.kind).toBe(CLIENT);
    expect(delivery.attributes).toMatchObject({ 'tessera.event.type': expect.any(String), 'server.address': '127.0.0.1', 'http.response.status_code': 204 });

    // Background validation passes are spans too.
    await expect.poll(() => receiver.spans.some((span) => span.name === 'validation pass'), { timeout: 20_000 }).toBe(true);

    // Providers never get a traceparent.
    expect(gh.requests.length).toBeGreaterThan(0);
    for (const request of gh.requests) expect(request.headers.traceparent).toBeUndefined();

    // No secret in anything exported: every token GitHub handed out or was shown, the code, the
    // session JWT, the cookie, the query string, the webhook's path token and secret, the client secret.
    const providerSecrets = gh.requests.flatMap((request) => `${request.headers.authorization ?? ''} ${request.body}`.match(/\bgh[our]_[A-Za-z0-9]+/g) ?? []);
    expect(providerSecrets.length).toBeGreaterThan(2);
    const secrets = [...new Set(providerSecrets)].concat(approved.code, session, QUERY_SECRET, WEBHOOK_PATH_TOKEN, WEBHOOK_SECRET.slice('whsec_'.length), gh.clientSecret);
    const exported = receiver.bodies.join('\n');
    for (const secret of secrets) expect(exported, `a secret reached the traces: ${secret.slice(0, 6)}…`).not.toContain(secret);
    expect(exported).not.toMatch(/probe=/);
  }, 180_000);
});
