import { and, eq, isNull, lt, or, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.ts';
import { integrations } from '../../db/schema.ts';
import { AppError } from '../../ground/errors.ts';
import { newId } from '../../lib/ids.ts';
import { inSpan } from '../../telemetry/tracing.ts';
import { findIntegrationById, type IntegrationRow } from '../integrations.ts';
import { ProviderError } from '../providers/types.ts';
import type { LoadedIntegration } from './loaded.ts';
import { JudgedFailure } from './policy.ts';

/** A refresh asked for this soon after another one gets that one's result instead of a provider call (decision 49). */
export const REFRESH_COALESCE_MS = 10 * 1000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface RefreshDeps {
  db: Db;
  /** Milliseconds a lease lasts: longer than a provider call can take, so a live holder never loses it mid-call. */
  leaseMs: number;
  /** Reads the integration's secrets for a row (under the lease, the row just leased). */
  withSecrets(row: IntegrationRow): Promise<LoadedIntegration>;
}

/**
 * Makes a refresh single-flight twice (decision 34): in this process, concurrent callers of
 * one integration share one promise; across processes, a lease on the integration row
 * (`lease_owner`, `lease_until`) lets one instance call the provider while the others poll
 * until `token_version` moves and then read what it stored.
 */
export class SingleFlight {
  /** Identifies this process in leases. */
  readonly instanceId = newId();
  private readonly deps: RefreshDeps;
  private readonly inflight = new Map<string, Promise<LoadedIntegration>>();

  constructor(deps: RefreshDeps) {
    this.deps = deps;
  }

  /**
   * Runs `refresh` once for everyone asking about `seen` now: under the lease, on the
   * integration as re-read there — unless the version already moved (another refresh won:
   * its result is returned) or, unless `coalesce` is false, a refresh finished within the
   * coalescing window (a claims challenge needs a token issued after it: decision 305).
   */
  run(seen: IntegrationRow, refresh: (latest: LoadedIntegration) => Promise<LoadedIntegration>, options: { coalesce?: boolean } = {}): Promise<LoadedIntegration> {
    const key = `${seen.organizationId}:${seen.id}`;
    const running = this.inflight.get(key);
    const span = { 'tessera.provider': seen.provider, 'tessera.integration.id': seen.id };
    if (running) return inSpan('refresh', { ...span, 'tessera.refresh': 'joined' }, () => running);
    const promise = inSpan('refresh', { ...span, 'tessera.refresh': 'led' }, () => this.acrossInstances(seen, refresh, options.coalesce !== false)).finally(() => this.inflight.delete(key));
    this.inflight.set(key, promise);
    return promise;
  }

  private async acrossInstances(seen: IntegrationRow, refresh: (latest: LoadedIntegration) => Promise<LoadedIntegration>, coalesce: boolean): Promise<LoadedIntegration> {
    const { organizationId, id } = seen;
    const deadline = Date.now() + this.deps.leaseMs + 2000;
    for (;;) {
      const leased = await this.acquire(organizationId, id);
      if (leased) {
        try {
          const latest = await this.deps.withSecrets(leased);
          if (latest.row.tokenVersion !== seen.tokenVersion) return latest;
          // Requests that were concurrent at the client may reach us a little apart: one call serves them all.
          const sinceRefresh = Date.now() - (latest.row.lastRefreshedAt?.getTime() ?? 0);
          if (coalesce && sinceRefresh < REFRESH_COALESCE_MS && latest.row.status === 'connected') return latest;
          return await refresh(latest);
        } finally {
          await this.release(organizationId, id);
        }
      }
      await sleep(50);
      const row = await findIntegrationById(this.deps.db, organizationId, id);
      if (!row) throw new AppError('INTEGRATION_NOT_FOUND');
      if (row.tokenVersion !== seen.tokenVersion) return this.deps.withSecrets(row);
      // What the other instance's refresh met (it applied the verdict): a rejected refresh token, or no answer in time.
      if (row.status === 'invalid' && seen.status !== 'invalid') throw new JudgedFailure(new ProviderError('revoked', 'another instance found the refresh token rejected'), 'refresh');
      if (Date.now() > deadline) {
        const message = 'A refresh by another instance did not finish in time';
        throw new JudgedFailure(new ProviderError('transient', message, { answer: message }), 'refresh');
      }
    }
  }

  private async acquire(organizationId: string, id: string): Promise<IntegrationRow | null> {
    const [row] = await this.deps.db
      .update(integrations)
      .set({ leaseOwner: this.instanceId, leaseUntil: sql`now() + ${`${this.deps.leaseMs} milliseconds`}::interval` })
      .where(
        and(
          eq(integrations.organizationId, organizationId),
          eq(integrations.id, id),
          or(isNull(integrations.leaseUntil), lt(integrations.leaseUntil, sql`now()`), eq(integrations.leaseOwner, this.instanceId)),
        ),
      )
      .returning();
    return row ?? null;
  }

  private async release(organizationId: string, id: string): Promise<void> {
    // Only our own lease: never release one another instance took after ours expired.
    await this.deps.db
      .update(integrations)
      .set({ leaseOwner: null, leaseUntil: null })
      .where(and(eq(integrations.organizationId, organizationId), eq(integrations.id, id), eq(integrations.leaseOwner, this.instanceId)));
  }
}
