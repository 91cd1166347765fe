/**
 * Provider events acted on: a stream of distinct, well-signed GitHub `github_app_authorization`
 * revocations (each its own delivery id, body and signature, built as GitHub sends them:
 * test/fakes/provider-events.ts) POSTed to /v1/providers/github/events by CONNECTIONS
 * concurrent senders, each naming one of the fixture's connected integrations, so every
 * delivery is matched and commits a status change. The answer follows the commit, so a
 * delivery's latency is its time to detect. A dedicated loop rather than autocannon: every
 * request differs, and the run is a fixed number of deliveries (one per seeded integration).
 */
import { sql } from 'drizzle-orm';
import { queryRows } from '../src/db/client.ts';
import { postgresCpuUs } from './lib.ts';
import { summary } from './replay.ts';
import { githubEvents } from '../test/fakes/provider-events.ts';
import type { Fixture } from './fixture.ts';

export interface EventsResult {
  scenario: string;
  deliveries: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** Integrations the run made invalid: each delivery's status change, committed. */
  changed: number;
  /** Answers other than 200, and connection errors. */
  failed: number;
  /** The first failure's words, for the report. */
  problem: string | null;
  /** Statements one delivery ran when it arrived alone (the census, before the stream), and what they were. */
  statements: number;
  census: string;
  /** CPU time per delivery of this process (app and senders) and of the local PostgreSQL server (null when not local), µs. */
  cpuUs: number;
  dbCpuUs: number | null;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;

/** Sends one revocation per seeded integration, `connections` at a time; every delivery matched, none repeated. */
export async function benchEvents(f: Fixture, connections: number): Promise<EventsResult> {
  const sender = githubEvents(f.githubEventsSecret);
  const url = `${f.base}/v1/providers/github/events`;
  const targets = f.eventTargets;
  const latencies: number[] = [];
  let next = 0;
  let failed = 0;
  let problem: string | null = null;
  const send = async (id: number): Promise<number> => {
    // Built per request: a new delivery id, this account's body and so its own signature.
    const delivery = sender.authorizationRevoked({ id, login: `bench-${id}` });
    const sent = performance.now();
    try {
      const res = await fetch(url, { method: 'POST', headers: delivery.headers, body: delivery.body });
      const text = await res.text();
      if (res.status !== 200) {
        failed++;
        problem ??= `answered ${res.status}: ${text.slice(0, 300)}`;
      }
    } catch (error) {
      failed++;
      problem ??= error instanceof Error ? error.message : String(error);
    }
    return performance.now() - sent;
  };
  // The census: the first target's delivery alone, its statements recorded (nothing else runs meanwhile); not timed.
  await f.recorder.quiesce();
  const recorded = await f.recorder.record(async () => {
    await send(targets[next++] as number);
  });
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const dbBefore = f.database.kind === 'pg' ? postgresCpuUs() : null;
  const worker = async () => {
    while (next < targets.length) latencies.push(await send(targets[next++] as number));
  };
  await Promise.all(Array.from({ length: connections }, worker));
  const seconds = (performance.now() - started) / 1000;
  const timed = latencies.length;
  const cpu = process.cpuUsage(cpuBefore);
  const dbAfter = dbBefore === null ? null : postgresCpuUs();
  latencies.sort((a, b) => a - b);
  const [row] = await queryRows<{ n: number }>(
    f.database.db,
    sql`SELECT count(*)::int AS n FROM integrations WHERE provider = 'github' AND status = 'invalid' AND provider_account_id IN ${targets.map(String)}`,
  );
  return {
    scenario: `POST /v1/providers/github/events (github_app_authorization revoked; ${targets.length} integrations, one delivery each, every one matched)`,
    deliveries: timed + 1,
    perSecond: timed / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    changed: row?.n ?? 0,
    failed,
    problem,
    statements: recorded.length,
    census: summary(recorded),
    cpuUs: (cpu.user + cpu.system) / timed,
    dbCpuUs: dbBefore === null || dbAfter === null ? null : (dbAfter - dbBefore) / timed,
  };
}
