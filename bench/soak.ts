/**
 * Load and soak: SOAK_SECONDS (default 300) of mixed traffic against Tessera running as
 * its own process (`bin/tessera.mjs`, as `npm start` runs it), after SOAK_WARMUP_SECONDS
 * (default 120) of the same traffic, with background validation (every 5 s) and event
 * delivery to a loopback webhook running. The fake provider, the webhook receiver and
 * autocannon live in this process, so the RSS measured — the service's, from /proc — is
 * Tessera's alone. Reports 5xx count over the whole run (must be 0), RSS growth over the
 * measured minutes (must stay under 10 %; V8 sizes its heap for the load during the warm-up,
 * a step that ends between minute 0.5 and 2.5 of traffic here), and event delivery lag
 * p50/p99.
 * Usage: node bench/soak.ts   (BENCH_DATABASE_URL=postgres://… for PostgreSQL)
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { ulid } from 'ulidx';
import { openPglite } from '../src/db/client.ts';
import { startFakeGitHub } from '../test/fakes/github.ts';
import { baseEnv, connectProvider, percentile, providerEnv, registerAndLogin, sleep, spawnService, waitReady } from './faults/lib.ts';
import { fmt } from './lib.ts';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 300);
const WARMUP_SECONDS = Number(process.env.SOAK_WARMUP_SECONDS ?? 120);
const USERS = 20;

/** Resident set size of a process, in MiB, from /proc. */
function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
  return line ? Number(line[1]) / 1024 : 0;
}

/** A fresh database for the service, and a way to count its events once it has stopped. */
async function serviceStorage(): Promise<{ env: Record<string, string>; kind: string; countEvents(): Promise<number>; cleanup(): Promise<void> }> {
  const url = process.env.BENCH_DATABASE_URL;
  if (url) {
    const name = `tessera_soak_${ulid().toLowerCase()}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const dbUrl = new URL(url);
    dbUrl.pathname = `/${name}`;
    const query = async (text: string) => {
      const client = new pg.Client({ connectionString: text.startsWith('DROP') ? url : dbUrl.href });
      await client.connect();
      try {
        return (await client.query(text)).rows as { n: number }[];
      } finally {
        await client.end();
      }
    };
    return {
      env: { DATABASE_URL: dbUrl.href },
      kind: 'pg',
      countEvents: async () => (await query('SELECT count(*)::int AS n FROM events'))[0]?.n ?? 0,
      cleanup: async () => {
        await query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      },
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'tessera-soak-'));
  return {
    env: { DATA_DIR: dir },
    kind: 'pglite',
    countEvents: async () => {
      const database = await openPglite({ dataDir: dir });
      try {
        return ((await database.db.execute('SELECT count(*)::int AS n FROM events')) as unknown as { rows: { n: number }[] }).rows[0]?.n ?? 0;
      } finally {
        await database.close();
      }
    },
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
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
  const storage = await serviceStorage();
  const service = await spawnService(
    baseEnv({
      ...storage.env,
      ...providerEnv(fake),
      LOG_LEVEL: 'info',
      OAUTH_TOKEN_VALIDATION_INTERVAL: '5',
      OAUTH_STATUS_MAX_AGE: '30',
      EVENTS_WEBHOOK_URL: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
      EVENTS_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 6).toString('base64')}`,
      EVENTS_POLL_INTERVAL: '1',
      METRICS_ENABLED: 'true',
    }),
  );
  try {
    await waitReady(service);
    const base = service.url;
    const tokens: string[] = [];
    for (let i = 0; i < USERS; i++) {
      const { token } = await registerAndLogin(base, `soak${i}@example.com`);
      await connectProvider(base, token, fake, `soak${i}`);
      tokens.push(token);
    }
    // The fake keeps a log of every request for the tests; a soak has no use for it.
    fake.requests.length = 0;
    const trimFakeLog = setInterval(() => (fake.requests.length = 0), 1000);

    const pid = service.child.pid as number;
    const rss: number[] = [];
    // The service's own view every 30 s (prom-client's process metrics): where the memory is.
    const memory: string[] = [];
    const sampler = setInterval(() => rss.push(rssMb(pid)), 5000);
    const heapSampler = setInterval(async () => {
      const text = await (await fetch(`${base}/metrics`)).text();
      const mib = (name: string) => fmt(Number(text.match(new RegExp(`^${name} (\\S+)$`, 'm'))?.[1] ?? 0) / 1048576, 0);
      memory.push(`rss ${mib('process_resident_memory_bytes')} heap used/total ${mib('nodejs_heap_size_used_bytes')}/${mib('nodejs_heap_size_total_bytes')} external ${mib('nodejs_external_memory_bytes')}`);
    }, 30_000);
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
    const result = await autocannon({ url: base, connections: 8, duration: WARMUP_SECONDS + SECONDS, requests });
    clearInterval(sampler);
    clearInterval(heapSampler);
    clearInterval(trimFakeLog);
    // Let the outbox drain: until no delivery arrived for 5 s (at most 60 s).
    let delivered = -1;
    for (let waited = 0; waited < 60 && delivered !== seenEvents.size; waited += 5) {
      delivered = seenEvents.size;
      await sleep(5000);
    }
    await service.stop();
    const eventsCreated = await storage.countEvents();
    // rss[i] is the RSS i × 5 s + 5 s into the traffic.
    const at = (seconds: number) => rss[Math.max(0, Math.min(rss.length - 1, Math.round(seconds / 5) - 1))] ?? 0;
    const warm = at(WARMUP_SECONDS);
    const last = rss.at(-1) ?? 0;
    const half = at(WARMUP_SECONDS + SECONDS / 2);
    const minute1 = at(60);
    const statusCodes = result.statusCodeStats as Record<string, { count: number }>;
    const fiveXx = Object.entries(statusCodes).filter(([code]) => code.startsWith('5')).reduce((sum, [, stat]) => sum + stat.count, 0);
    return {
      backend: storage.kind,
      seconds: SECONDS,
      warmupSeconds: WARMUP_SECONDS,
      requests: result.requests.total,
      rps: Math.round(result.requests.average),
      p99ms: result.latency.p99,
      fiveXx,
      connectionErrors: result.errors + result.timeouts,
      statusCodes: JSON.stringify(Object.fromEntries(Object.entries(statusCodes).map(([code, stat]) => [code, stat.count]))),
      rssAfterWarmupMb: Math.round(warm),
      rssPeakMb: Math.round(Math.max(...rss)),
      rssEndMb: Math.round(last),
      rssGrowthPct: Number(fmt(((last - warm) / warm) * 100)),
      // A leak keeps growing; V8 sizing its heap for the load is a step early on. The measured
      // minutes' second half tells them apart; from minute 1 of traffic is the earlier criterion.
      rssGrowthSecondHalfPct: Number(fmt(((last - half) / half) * 100)),
      rssGrowthFromMinute1Pct: Number(fmt(((last - minute1) / minute1) * 100)),
      eventsCreated,
      eventsDelivered: seenEvents.size,
      duplicates,
      lagP50ms: percentile(lags, 50),
      lagP99ms: percentile(lags, 99),
      memoryEvery30sMb: memory.join(' | '),
    };
  } finally {
    await service.stop('SIGKILL');
    await storage.cleanup();
    await fake.close();
    receiver.close();
  }
}

/** What a smoke run holds a soak to: no 5xx, every event delivered once. Never speed or memory. */
export function soakProblems(result: Record<string, number | string>): string[] {
  const problems: string[] = [];
  if (result.fiveXx !== 0) problems.push(`${result.fiveXx} answers were 5xx (${result.statusCodes})`);
  if (result.duplicates !== 0) problems.push(`${result.duplicates} events delivered twice`);
  if (result.eventsDelivered !== result.eventsCreated) problems.push(`${result.eventsDelivered} of ${result.eventsCreated} events delivered`);
  if (result.connectionErrors !== 0) problems.push(`${result.connectionErrors} requests failed or timed out`);
  if (!Number(result.requests)) problems.push('no request completed');
  return problems;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await soak();
  console.log(JSON.stringify(result, null, 2));
  const ok = soakProblems(result).length === 0 && Number(result.rssGrowthPct) < 10;
  console.log(ok ? 'soak: PASS' : 'soak: FAIL');
  process.exitCode = ok ? 0 : 1;
}
