/**
 * Load and soak: SOAK_SECONDS (default 300) of mixed traffic against the app in this
 * process, with background validation (every 5 s) and event delivery to a loopback
 * webhook running. Reports 5xx count (must be 0), RSS growth after warm-up (must stay
 * under 10 %), and event delivery lag p50/p99.
 * Usage: node --expose-gc bench/soak.ts   (BENCH_DATABASE_URL=postgres://… for PostgreSQL)
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import autocannon from 'autocannon';
import { sql } from 'drizzle-orm';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config/load.ts';
import { createLogger } from '../src/http/logging.ts';
import { startFakeGitHub } from '../test/fakes/github.ts';
import { fmt } from './lib.ts';
import { openBenchDatabase } from './validation.ts';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 300);
const USERS = 20;

function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

export async function soak(): Promise<Record<string, number | string>> {
  const fake = await startFakeGitHub({ tokenExpiresIn: 28800 });
  fake.latencyMs = 20;
  const lags: number[] = [];
  const seenEvents = new Set<string>();
  let duplicates = 0;
  const receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const event = JSON.parse(body) as { id: string; occurredAt: string };
      if (seenEvents.has(event.id)) duplicates++;
      seenEvents.add(event.id);
      lags.push(Date.now() - Date.parse(event.occurredAt));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const { database, cleanup } = await openBenchDatabase();
  try {
    await database.migrate();
    const port = 20000 + Math.floor(Math.random() * 2000);
    const config = loadConfig({
      env: {
        ENCRYPTION_KEYS: `soak:${Buffer.alloc(32, 5).toString('base64')}`,
        JWT_SECRET: 's'.repeat(40),
        PASSWORD_COST: '10',
        RATE_LIMIT_MAX: '0',
        PORT: String(port),
        OAUTH_TOKEN_VALIDATION_INTERVAL: '5',
        OAUTH_STATUS_MAX_AGE: '30',
        EVENTS_WEBHOOK_URL: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
        EVENTS_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 6).toString('base64')}`,
        EVENTS_POLL_INTERVAL: '1',
        INTEGRATION_OAUTH_GITHUB_CLIENT_ID: fake.clientId,
        INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET: fake.clientSecret,
        INTEGRATION_OAUTH_GITHUB_AUTH_URL: fake.authUrl,
        INTEGRATION_OAUTH_GITHUB_TOKEN_URL: fake.tokenUrl,
        INTEGRATION_OAUTH_GITHUB_API_URL: fake.apiUrl,
      },
      persistGeneratedSecrets: false,
    });
    const sink = new Writable({ write: (_chunk, _encoding, callback) => callback() });
    const app = await buildApp({ config, database, logger: createLogger({ level: 'info', stream: sink }) });
    app.startBackground();
    await app.fastify.listen({ host: '127.0.0.1', port });
    const base = `http://127.0.0.1:${port}`;
    const post = async (path: string, body: unknown, token?: string) =>
      (await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) })).json() as Promise<Record<string, any>>;

    const tokens: string[] = [];
    for (let i = 0; i < USERS; i++) {
      const login = `soak${i}`;
      fake.addUser({ login, email: `${login}@example.com` });
      await post('/v1/register', { email: `${login}@example.com`, password: 'soak test password' });
      const session = await post('/v1/login', { email: `${login}@example.com`, password: 'soak test password' });
      const start = await post('/v1/integrations/oauth/start', { provider: 'github', redirectUri: `${base}/` }, session.accessToken);
      const approved = fake.authorize(start.authUrl, login);
      await post('/v1/integrations/oauth/callback', { provider: 'github', code: approved.code, state: approved.state }, session.accessToken);
      tokens.push(session.accessToken);
    }

    const rss: number[] = [];
    const sampler = setInterval(() => rss.push(process.memoryUsage().rss / 1048576), 5000);
    let orgCounter = 0;
    const requests: autocannon.Request[] = tokens.flatMap((token): autocannon.Request[] => {
      const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      return [
        { method: 'GET' as const, path: '/v1/integrations/github/token', headers: auth },
        { method: 'GET' as const, path: '/v1/integrations/github/status', headers: auth },
        { method: 'GET' as const, path: '/v1/integrations', headers: auth },
        { method: 'GET' as const, path: '/v1/integrations/github/proxy/user', headers: auth },
        { method: 'POST' as const, path: '/query', headers: auth, body: JSON.stringify({ query: '{ integrations { id status statusDetail { message } } me { id } }' }) },
        {
          method: 'POST' as const,
          path: '/v1/organizations',
          headers: auth,
          setupRequest: (request: autocannon.Request) => ({ ...request, body: JSON.stringify({ name: `soak org ${orgCounter++}` }) }),
        },
      ];
    });
    const result = await autocannon({ url: base, connections: 8, duration: SECONDS, requests });
    clearInterval(sampler);
    // Let the outbox drain.
    const countEvents = async () => ((await database.db.execute(sql`SELECT count(*)::int AS n FROM events`)) as unknown as { rows: { n: number }[] }).rows[0]?.n ?? 0;
    const eventsCreated = await countEvents();
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && seenEvents.size < eventsCreated) await new Promise((resolve) => setTimeout(resolve, 200));
    await app.fastify.close();
    const warm = rss[Math.min(rss.length - 1, Math.floor(60 / 5))] ?? rss[0] ?? 0;
    const last = rss.at(-1) ?? 0;
    const statusCodes = result.statusCodeStats as Record<string, { count: number }>;
    const fiveXx = Object.entries(statusCodes).filter(([code]) => code.startsWith('5')).reduce((sum, [, stat]) => sum + stat.count, 0);
    return {
      backend: database.kind,
      seconds: SECONDS,
      requests: result.requests.total,
      rps: Math.round(result.requests.average),
      p99ms: result.latency.p99,
      fiveXx,
      statusCodes: JSON.stringify(Object.fromEntries(Object.entries(statusCodes).map(([code, stat]) => [code, stat.count]))),
      rssAfterWarmupMb: Math.round(warm),
      rssEndMb: Math.round(last),
      rssGrowthPct: Number(fmt(((last - warm) / warm) * 100)),
      eventsCreated,
      eventsDelivered: seenEvents.size,
      duplicates,
      lagP50ms: percentile(lags, 50),
      lagP99ms: percentile(lags, 99),
    };
  } finally {
    await cleanup();
    await fake.close();
    receiver.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await soak();
  console.log(JSON.stringify(result, null, 2));
  const ok = result.fiveXx === 0 && Number(result.rssGrowthPct) < 10 && result.duplicates === 0 && result.eventsDelivered === result.eventsCreated;
  console.log(ok ? 'soak: PASS' : 'soak: FAIL');
  process.exitCode = ok ? 0 : 1;
}
