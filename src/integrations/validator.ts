import { type Db, HotStatement, sql } from '../db/client.ts';
import type { Services } from '../services.ts';
import { inSpan } from '../telemetry/tracing.ts';
import { budgetKey, KnownBudgets } from './budgets.ts';
import type { HeldValidation } from './status.ts';
import { type LoadedIntegration, loadById, loadMany } from './tokens/loaded.ts';

/** What a validation pass uses. */
export type ValidationDeps = Pick<Services, 'db' | 'providers' | 'apps' | 'config' | 'lifecycle' | 'budgets' | 'logger'>;

export interface ValidationPassOptions {
  /** Rows claimed per batch. */
  batchSize?: number;
  /** Provider calls at once, per provider. */
  concurrencyPerProvider?: number;
  /** Milliseconds the pass may run; what is left waits for the next pass. */
  budgetMs?: number;
  /** Refresh ahead when the refresh token itself expires within this many milliseconds. */
  refreshTokenMarginMs?: number;
}

/** What a pass found: integrations claimed, and how each check ended (`valid` counts refreshes too). */
export interface ValidationPassResult {
  claimed: number;
  valid: number;
  invalid: number;
  misconfigured: number;
  forbidden: number;
  rateLimited: number;
  transient: number;
  errors: number;
  /** Skipped: the account's provider budget known exhausted (docs/contract.md §5f); validated after its reset, not a failure. */
  budgetExhausted: number;
}

interface Claimed {
  organization_id: string;
  id: string;
  provider: string;
}

/**
 * Claims due integrations (`next_validation_at <= now()`) with FOR UPDATE SKIP LOCKED,
 * pushing their next validation one interval ahead in the same statement: each is
 * validated once per interval in total, however many instances run passes.
 */
export async function claimDue(db: Db, limit: number, intervalSeconds: number, providers: string[]): Promise<Claimed[]> {
  if (providers.length === 0) return [];
  return CLAIM.rows(db, { interval: `${intervalSeconds} seconds`, providers, limit });
}

const CLAIM = new HotStatement<Claimed>(
  sql`UPDATE integrations AS i SET next_validation_at = now() + ${sql.placeholder('interval')}::interval
      FROM (
        SELECT organization_id, id FROM integrations
        WHERE status <> 'invalid' AND next_validation_at <= now() AND provider = ANY(${sql.placeholder('providers')}::text[])
        ORDER BY next_validation_at
        LIMIT ${sql.placeholder('limit')}::int
        FOR UPDATE SKIP LOCKED
      ) AS due
      WHERE i.organization_id = due.organization_id AND i.id = due.id
      RETURNING i.organization_id, i.id, i.provider`,
);

/** A claimed batch, read: its rows by provider, the integrations with their secrets, and their account budgets. */
interface Batch {
  claimed: Claimed[];
  byProvider: Map<string, Claimed[]>;
  loaded: Map<string, LoadedIntegration>;
  budgets: KnownBudgets;
}

/** Claims the next batch of due rows of `providers` and reads it (three statements); null when none is due. */
async function nextBatch(services: ValidationDeps, batchSize: number, providers: string[]): Promise<Batch | null> {
  const claimed = await claimDue(services.db, batchSize, services.config.oauth.validationInterval, providers);
  if (claimed.length === 0) return null;
  const byProvider = new Map<string, Claimed[]>();
  for (const row of claimed) {
    const rows = byProvider.get(row.provider);
    if (rows) rows.push(row);
    else byProvider.set(row.provider, [row]);
  }
  let loaded: Map<string, LoadedIntegration>;
  try {
    const many = await loadMany(services, claimed.map((row) => ({ organizationId: row.organization_id, id: row.id })));
    loaded = new Map(many.map((one) => [`${one.row.organizationId}:${one.row.id}`, one]));
  } catch {
    // One undecryptable secret spoils the batch read: fall back to one read per integration.
    loaded = new Map();
  }
  // The batch's account budgets in one statement (decision 333); a check of an integration read alone reads its own.
  const budgets = await services.budgets.readMany([...loaded.values()].map((one) => budgetKey(one.row, one.provider))).catch(() => new KnownBudgets());
  return { claimed, byProvider, loaded, budgets };
}

/**
 * One validation pass: claim due rows in batches and give each the live check (the status
 * route's: `TokenLifecycle.check`) outside any transaction, with bounded concurrency per
 * provider, within a time budget. A provider whose verdict says to back off (a rate limit) is
 * left alone for the rest of the pass; one failure never stops the others. Tokens that would expire before the next
 * pass, or whose refresh token nears its own expiry, are refreshed instead of validated. A batch's
 * good results are written together when it is done, and the next batch is claimed and read
 * while its last calls are in flight (decision 333).
 */
export async function runValidationPass(services: ValidationDeps, options: ValidationPassOptions = {}): Promise<ValidationPassResult> {
  const batchSize = options.batchSize ?? 200;
  const concurrency = options.concurrencyPerProvider ?? 8;
  const deadline = Date.now() + (options.budgetMs ?? 60_000);
  const margin = options.refreshTokenMarginMs ?? 24 * 60 * 60 * 1000;
  const result: ValidationPassResult = { claimed: 0, valid: 0, invalid: 0, misconfigured: 0, forbidden: 0, rateLimited: 0, transient: 0, errors: 0, budgetExhausted: 0 };
  const due = { accessWithinMs: services.config.oauth.validationInterval * 1000, refreshTokenWithinMs: margin };
  const backedOff = new Set<string>();
  const actor = { principal: null, requestId: null };
  const claimNext = () => {
    const providers = services.providers.list().map((provider) => provider.id).filter((id) => !backedOff.has(id));
    return providers.length === 0 ? Promise.resolve(null) : nextBatch(services, batchSize, providers);
  };

  let coming: Promise<Batch | null> | null = Date.now() < deadline ? claimNext() : null;
  while (coming) {
    const batch = await coming;
    if (!batch) break;
    coming = null;
    const { claimed, byProvider, loaded, budgets } = batch;
    result.claimed += claimed.length;
    // Valid results are written together once the batch is done (decision 333); failures are persisted as they happen.
    const held: HeldValidation[] = [];
    // Once every row of a full batch has been handed out, the next batch is claimed and read during the last calls.
    let handedOut = 0;
    const started = new Set<Claimed>();
    const claimAhead = () => {
      if (coming !== null || claimed.length < batchSize || Date.now() >= deadline) return;
      const ahead = claimNext();
      // Awaited after this batch: a failure then ends the pass as a failed claim always has; until then it is not unhandled.
      ahead.catch(() => {});
      coming = ahead;
    };

    await Promise.all(
      [...byProvider.entries()].map(async ([provider, rows]) => {
        let next = 0;
        const worker = async () => {
          while (next < rows.length && !backedOff.has(provider) && Date.now() < deadline) {
            const row = rows[next++] as Claimed;
            started.add(row);
            if (++handedOut === claimed.length) claimAhead();
            try {
              const current = loaded.get(`${row.organization_id}:${row.id}`) ?? (await loadById(services, row.organization_id, row.id));
              const { outcome } = await services.lifecycle.check(current, actor, due, { hold: held, budgets });
              // An account whose budget is known exhausted was not called: validated again once its reset has passed, not counted as a failure.
              if (outcome.kind === 'budgetExhausted') {
                await validateAgainAt(services.db, row.organization_id, row.id, new Date(outcome.until));
                result.budgetExhausted++;
                continue;
              }
              result[outcome.kind === 'revoked' || outcome.kind === 'challenged' ? 'invalid' : outcome.kind === 'refreshed' ? 'valid' : outcome.kind]++;
              // The verdict says when the provider is limiting us: leave it alone for the rest of the pass.
              if ('failure' in outcome && outcome.failure.verdict.backOff) backedOff.add(provider);
            } catch (error) {
              result.errors++;
              services.logger.warn({ integrationId: row.id, provider, code: (error as { code?: string }).code }, 'background validation failed for one integration');
            }
          }
        };
        await Promise.all(Array.from({ length: Math.min(concurrency, rows.length) }, worker));
      }),
    );
    for (const { held: one, error } of await services.lifecycle.keepValidated(held, actor)) {
      // Counted as it would have been had its own write failed during its check.
      result.valid--;
      result.errors++;
      const provider = claimed.find((row) => row.organization_id === one.organizationId && row.id === one.id)?.provider;
      services.logger.warn({ integrationId: one.id, provider, code: (error as { code?: string }).code }, 'background validation failed for one integration');
    }
    // Rows never handed out (their provider backed off, the deadline passed) are due again now, for the next pass, not an interval later.
    const unstarted = claimed.filter((row) => !started.has(row));
    if (unstarted.length > 0) await releaseClaims(services.db, unstarted).catch(() => {});
    // A batch cut short claimed nothing ahead: the loop claims again, as before, while time is left.
    if (coming === null && claimed.length === batchSize && Date.now() < deadline) coming = claimNext();
  }
  return result;
}

const RELEASE = new HotStatement(
  sql`UPDATE integrations AS i SET next_validation_at = now()
      FROM unnest(${sql.placeholder('organizationIds')}::text[], ${sql.placeholder('ids')}::text[]) AS k(organization_id, id)
      WHERE i.organization_id = k.organization_id AND i.id = k.id`,
);

/** Makes claimed rows that were never checked due again now (the claim had moved them an interval ahead). */
async function releaseClaims(db: Db, rows: Claimed[]): Promise<void> {
  await RELEASE.rows(db, { organizationIds: rows.map((row) => row.organization_id), ids: rows.map((row) => row.id) });
}

/** Brings an integration's next validation forward to `at` (never later than the interval the claim set). */
async function validateAgainAt(db: Db, organizationId: string, id: string, at: Date): Promise<void> {
  await db.execute(sql`UPDATE integrations SET next_validation_at = LEAST(next_validation_at, ${at.toISOString()}::timestamptz) WHERE organization_id = ${organizationId} AND id = ${id}`);
}

/** Runs a pass every `everyMs` (never two at once in this process); stop() waits for the running one. */
export function startValidationScheduler(services: ValidationDeps, everyMs: number, options: ValidationPassOptions = {}): { stop(): Promise<void> } {
  let running: Promise<unknown> | null = null;
  let stopped = false;
  const tick = () => {
    if (running || stopped) return;
    running = inSpan('validation pass', {}, async (span) => {
      const result = await runValidationPass(services, options);
      span.setAttribute('tessera.validation.claimed', result.claimed);
      return result;
    })
      .catch((error: unknown) => services.logger.error({ err: error }, 'validation pass failed'))
      .finally(() => {
        running = null;
      });
  };
  const timer = setInterval(tick, everyMs);
  timer.unref();
  setTimeout(tick, Math.min(everyMs, 1000)).unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
