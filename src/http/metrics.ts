import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { type Database, queryRows, sql } from '../db/client.ts';
import type { TypedFastify } from './typed.ts';

/** The service's Prometheus metrics, one registry per app (tests build several). */
export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly duration: Histogram<'method' | 'route' | 'status'>;
  private readonly providerCalls: Counter<'provider' | 'outcome'>;
  private readonly providerDuration: Histogram<'provider'>;
  private readonly refreshes: Counter<'provider' | 'outcome'>;
  private readonly validations: Counter<'provider' | 'outcome'>;
  private readonly deliveryLag: Histogram;
  private readonly purged: Counter<'kind'>;
  private readonly providerEvents: Counter<'provider' | 'type' | 'outcome'>;
  private readonly revocations: Counter<'provider' | 'source'>;
  private readonly detection: Histogram<'provider' | 'source'>;
  private readonly detectionBound: Histogram<'provider' | 'source'>;
  private readonly proxyWaits: Counter<'provider'>;
  private readonly proxyWaitSeconds: Histogram;
  private readonly proxyRetries: Counter<'provider' | 'reason'>;
  private readonly budgetsExhausted: Counter<'provider'>;

  constructor(database: Database) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({ name: 'tessera_http_requests_total', help: 'HTTP requests by route and status', labelNames: ['method', 'route', 'status'], registers });
    this.duration = new Histogram({
      name: 'tessera_http_request_duration_seconds',
      help: 'HTTP request latency by route and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.providerCalls = new Counter({ name: 'tessera_provider_calls_total', help: 'Provider calls by provider and outcome', labelNames: ['provider', 'outcome'], registers });
    this.providerDuration = new Histogram({
      name: 'tessera_provider_call_duration_seconds',
      help: 'Provider call latency',
      labelNames: ['provider'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.refreshes = new Counter({ name: 'tessera_token_refreshes_total', help: 'Token refreshes by provider and outcome', labelNames: ['provider', 'outcome'], registers });
    this.validations = new Counter({ name: 'tessera_token_validations_total', help: 'Token validations by provider and outcome', labelNames: ['provider', 'outcome'], registers });
    this.deliveryLag = new Histogram({
      name: 'tessera_event_delivery_lag_seconds',
      help: 'Time from an event to its delivery to a webhook',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    });
    this.purged = new Counter({ name: 'tessera_retention_purged_total', help: 'Rows retention deleted, by kind', labelNames: ['kind'], registers });
    // Every kind is exported from the start, at 0, so a dashboard sees the series before the first purge.
    for (const kind of ['connect_sessions', 'deliveries', 'oauth_states']) this.purged.inc({ kind }, 0);
    // Revocations known in seconds, and how long the others went unnoticed at most (docs/contract.md §5b).
    this.providerEvents = new Counter({
      name: 'tessera_provider_events_total',
      help: 'Provider event deliveries by provider, event type and outcome',
      labelNames: ['provider', 'type', 'outcome'],
      registers,
    });
    this.revocations = new Counter({ name: 'tessera_revocations_detected_total', help: 'Revocations detected, by provider and how they were learnt', labelNames: ['provider', 'source'], registers });
    const detectionBuckets = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600];
    this.detection = new Histogram({
      name: 'tessera_revocation_detection_seconds',
      help: 'From when the provider says a revocation happened to the commit of the status change',
      labelNames: ['provider', 'source'],
      buckets: detectionBuckets,
      registers,
    });
    this.detectionBound = new Histogram({
      name: 'tessera_revocation_detection_bound_seconds',
      help: 'From the last proof a token was good (validation, refresh) to the commit of its revocation: an upper bound on how long it went unnoticed',
      labelNames: ['provider', 'source'],
      buckets: detectionBuckets,
      registers,
    });
    // Calling providers within their limits (docs/contract.md §5f).
    this.proxyWaits = new Counter({ name: 'tessera_proxy_waits_total', help: "API calls that waited for a rate limit's reset, by provider", labelNames: ['provider'], registers });
    this.proxyWaitSeconds = new Histogram({
      name: 'tessera_proxy_wait_seconds',
      help: "Time API calls waited for a rate limit's reset",
      buckets: [0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60],
      registers,
    });
    this.proxyRetries = new Counter({
      name: 'tessera_proxy_retries_total',
      help: 'API calls sent again after a network error, a timeout or a 502/503/504, by provider and reason',
      labelNames: ['provider', 'reason'],
      registers,
    });
    this.budgetsExhausted = new Counter({
      name: 'tessera_provider_budget_exhausted_total',
      help: "API calls answered 429 without reaching the provider, the account's budget known exhausted, by provider",
      labelNames: ['provider'],
      registers,
    });
    databaseGauges(database, registers);
  }

  proxyWait(provider: string, seconds: number): void {
    this.proxyWaits.inc({ provider });
    this.proxyWaitSeconds.observe(seconds);
  }

  proxyRetry(provider: string, reason: string): void {
    this.proxyRetries.inc({ provider, reason });
  }

  budgetExhausted(provider: string): void {
    this.budgetsExhausted.inc({ provider });
  }

  providerEvent(provider: string, type: string, outcome: string): void {
    this.providerEvents.inc({ provider, type, outcome });
  }

  revocationDetected(provider: string, source: string, elapsed: { seconds: number } | { boundSeconds: number }): void {
    this.revocations.inc({ provider, source });
    if ('seconds' in elapsed) this.detection.observe({ provider, source }, elapsed.seconds);
    else this.detectionBound.observe({ provider, source }, elapsed.boundSeconds);
  }

  request(method: string, route: string, status: number, seconds: number): void {
    const labels = { method, route, status: String(status) };
    this.requests.inc(labels);
    this.duration.observe(labels, seconds);
  }

  providerCall(provider: string, outcome: string, seconds: number): void {
    this.providerCalls.inc({ provider, outcome });
    this.providerDuration.observe({ provider }, seconds);
  }

  refreshOutcome(provider: string, outcome: string): void {
    this.refreshes.inc({ provider, outcome });
  }

  validationOutcome(provider: string, outcome: string): void {
    this.validations.inc({ provider, outcome });
  }

  delivered(lagMs: number): void {
    this.deliveryLag.observe(lagMs / 1000);
  }

  retentionPurged(kind: string, count: number): void {
    this.purged.inc({ kind }, count);
  }
}

/** Gauges read from the database when scraped: pool connections, integrations by status, the outbox's depth and age. */
function databaseGauges(database: Database, registers: Registry[]): void {
  new Gauge({
    name: 'tessera_db_pool_connections',
    help: 'Database pool connections by state',
    labelNames: ['state'],
    registers,
    collect() {
      const stats = database.poolStats();
      this.set({ state: 'total' }, stats.total);
      this.set({ state: 'idle' }, stats.idle);
      this.set({ state: 'waiting' }, stats.waiting);
    },
  });
  new Gauge({
    name: 'tessera_integrations',
    help: 'Integrations by status',
    labelNames: ['status'],
    registers,
    async collect() {
      const rows = await queryRows<{ status: string; n: number }>(database.db, sql`SELECT status, count(*)::int AS n FROM integrations GROUP BY status`);
      this.reset();
      for (const status of ['connected', 'warning', 'expired', 'invalid']) this.set({ status }, 0);
      for (const row of rows) this.set({ status: row.status }, row.n);
    },
  });
  new Gauge({
    name: 'tessera_outbox_depth',
    help: 'Event deliveries not yet delivered (and not given up)',
    registers,
    async collect() {
      const [row] = await queryRows<{ n: number }>(database.db, sql`SELECT count(*)::int AS n FROM event_deliveries WHERE delivered_at IS NULL AND failed_at IS NULL`);
      this.set(row?.n ?? 0);
    },
  });
  new Gauge({
    name: 'tessera_outbox_oldest_pending_seconds',
    help: 'Age of the oldest undelivered event delivery',
    registers,
    async collect() {
      const [row] = await queryRows<{ age: number | null }>(
        database.db,
        sql`SELECT extract(epoch FROM now() - min(created_at))::float8 AS age FROM event_deliveries WHERE delivered_at IS NULL AND failed_at IS NULL`,
      );
      this.set(row?.age ?? 0);
    },
  });
}

/**
 * `GET /metrics` (Prometheus text), unauthenticated class, served only when
 * METRICS_ENABLED is set: keep it off the public network (scrape it on the private side).
 * Requests are counted and timed only then.
 */
export function metricsRoutes(app: TypedFastify, metrics: Metrics, enabled: boolean): void {
  // Off, nothing can read the request series: no hook, so no request pays for them (docs/benchmarks.md, issue 29).
  if (!enabled) return;
  app.addHook('onResponse', async (request, reply) => {
    metrics.request(request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000);
  });
  app.get('/metrics', { config: { auth: 'unauthenticated', errors: [] }, schema: { summary: 'Prometheus metrics (when METRICS_ENABLED)', tags: ['meta'], operationId: 'meta_getMetrics', response: {} } }, async (_request, reply) => {
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
}
