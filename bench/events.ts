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
  const started = performance.now();
  const worker = async () => {
    while (next < targets.length) {
      const id = targets[next++] as number;
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
      latencies.push(performance.now() - sent);
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const [row] = await queryRows<{ n: number }>(
    f.database.db,
    sql`SELECT count(*)::int AS n FROM integrations WHERE provider = 'github' AND status = 'invalid' AND provider_account_id IN ${targets.map(String)}`,
  );
  return {
    scenario: `POST /v1/providers/github/events (github_app_authorization revoked; ${targets.length} integrations, one delivery each, every one matched)`,
    deliveries: latencies.length,
    perSecond: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    changed: row?.n ?? 0,
    failed,
    problem,
  };
}
