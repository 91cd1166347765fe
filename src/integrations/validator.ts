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

/**
 * One validation pass: claim due rows in batches and give each the live check (the status
 * route's: `TokenLifecycle.check`) outside any transaction, with bounded concurrency per
 * provider, within a time budget. A provider whose verdict says to back off (a rate limit) is
 * left alone for the rest of the pass; one failure never stops the others. Tokens that would expire before the next
 * pass, or whose refresh token nears its own expiry, are refreshed instead of validated.
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

  while (Date.now() < deadline) {
    const providers = services.providers.list().map((provider) => provider.id).filter((id) => !backedOff.has(id));
    const claimed = await claimDue(services.db, batchSize, services.config.oauth.validationInterval, providers);
    if (claimed.length === 0) break;
    result.claimed += claimed.length;
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
    // Valid results are written together once the batch is done (decision 333); failures are persisted as they happen.
    const held: HeldValidation[] = [];

    await Promise.all(
      [...byProvider.entries()].map(async ([provider, rows]) => {
        let next = 0;
        const worker = async () => {
          while (next < rows.length && !backedOff.has(provider) && Date.now() < deadline) {
            const row = rows[next++] as Claimed;
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
    if (claimed.length < batchSize) break;
  }
  return result;
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
