/**
 * Provider budgets (docs/contract.md §5f): what a provider's answers say about an account's rate
 * limit, kept in the database per (app, provider account) — per integration for the §5c modes — so
 * that every instance paces one account together. The step of an API call: the budget is read with
 * the integration (fast-read.ts `loadForCall`, the same statement), checked before each send, learned
 * from each answer and stored before that answer is returned — only when what it means for the next
 * call changes (decision 319), so the hot path writes nothing while an account has budget left.
 */
import type { Logger } from 'pino';
import { type Db, HotStatement, sql } from '../db/client.ts';
import { appRef } from './apps/catalog.ts';
import { retryAfterSeconds } from './providers/engine.ts';
import type { ConfiguredProvider } from './providers/registry.ts';
import type { ProviderAnswer } from './providers/transport.ts';
import type { ProviderDefinition, ProviderError } from './providers/types.ts';
import type { IntegrationRow } from './integrations.ts';

/** An account's budget as Tessera knows it; times in epoch milliseconds. */
export interface Budget {
  remaining: number | null;
  resetAt: number | null;
  /** No API call is sent before it: remaining 0 until the reset, or inside a `Retry-After`. Null: not exhausted. */
  blockedUntil: number | null;
}

/** Whose budget: the app's grant of one provider account, or one §5c integration's. */
export interface BudgetKey {
  scope: string;
  accountId: string;
  /** Set for an organization's app and a §5c integration (offboarding takes them); null for a deployment app's (decision 318). */
  organizationId: string | null;
  provider: string;
}

/** What the budget step reports (the metrics of docs/contract.md §5f). */
export interface BudgetMetrics {
  proxyWait(provider: string, seconds: number): void;
  proxyRetry(provider: string, reason: string): void;
  budgetExhausted(provider: string): void;
}

/** Milliseconds a budget write may take before it is skipped (the provider's answer is returned anyway). */
export const BUDGET_WRITE_MS = 1000;

/**
 * The budget key of an integration. The same rule is written in SQL where the budget is read with
 * the integration (`BUDGET_JOIN`): the OAuth code flow's grants share their app's limit for the
 * account; entered credentials and installations (§5c) have a limit of their own.
 */
export function budgetKey(row: IntegrationRow, provider: ConfiguredProvider): BudgetKey {
  if (!ownsBudget(provider)) {
    return { scope: row.appId, accountId: row.providerAccountId, organizationId: appRef(row.appId).owner === 'organization' ? row.organizationId : null, provider: row.provider };
  }
  return { scope: `integration:${row.id}`, accountId: row.providerAccountId, organizationId: row.organizationId, provider: row.provider };
}

/** Whether an integration of `provider` keeps a budget of its own rather than its app's (the §5c modes). */
export function ownsBudget(provider: ConfiguredProvider): boolean {
  return provider.traits.connects !== 'redirect';
}

/** The budget join of the hot read: `b` for the integration `i`, given `perIntegration` (`ownsBudget`). */
export const BUDGET_JOIN = sql`LEFT JOIN provider_budgets b ON b.scope = (CASE WHEN ${sql.placeholder('perIntegration')}::boolean THEN 'integration:' || i.id ELSE i.app_id END) AND b.account_id = i.provider_account_id`;

/** A budget row as `row_to_json` returned it; null for none. */
export function budgetFromJson(json: Record<string, unknown> | null): Budget | null {
  if (!json) return null;
  const time = (value: unknown) => (typeof value === 'string' ? Date.parse(value) : null);
  return { remaining: typeof json.remaining === 'number' ? json.remaining : null, resetAt: time(json.reset_at), blockedUntil: time(json.blocked_until) };
}

/** When the next call may be sent, if not now: the budget's block while it is in the future. */
export function blockedUntil(budget: Budget | null, now = Date.now()): number | null {
  return budget?.blockedUntil != null && budget.blockedUntil > now ? budget.blockedUntil : null;
}

/**
 * What an answer says about the account's budget: the definition's budget headers (remaining, and a
 * reset — an epoch when larger than the current epoch time, else seconds from now), and for a rate
 * limit the wait its failure carries (`Retry-After`, a reset, a body's value). Null when it says nothing.
 */
export function readBudget(definition: ProviderDefinition, answer: Pick<ProviderAnswer, 'headers'>, rateLimited: ProviderError | null, now = Date.now()): Budget | null {
  let remaining: number | null = null;
  let resetAt: number | null = null;
  for (const pair of definition.budgetHeaders) {
    const left = answer.headers.get(pair.remaining)?.trim();
    if (left === undefined || !/^\d+$/.test(left)) continue;
    // Another resource's budget (GitHub's `search`) says nothing about the account's: not learned, not even its rate limit.
    const resource = pair.resource && answer.headers.get(pair.resource.header)?.trim().toLowerCase();
    if (pair.resource && resource && !pair.resource.equals.includes(resource)) return null;
    remaining = Math.min(Number(left), MAX_REMAINING);
    resetAt = resetTime(answer.headers.get(pair.reset), now);
    break;
  }
  if (rateLimited) {
    const seconds = rateLimited.retryAfter ?? retryAfterSeconds(answer, undefined, now);
    return { remaining: remaining ?? 0, resetAt, blockedUntil: now + Math.min(Math.max(seconds, 0), MAX_BLOCK_SECONDS) * 1000 };
  }
  if (remaining === null) return null;
  return { remaining, resetAt, blockedUntil: remaining === 0 && resetAt !== null && resetAt > now ? resetAt : null };
}

/** The longest a provider's answer may block an account: a day (Zoom's daily limit), whatever a header claims. */
const MAX_BLOCK_SECONDS = 24 * 60 * 60;
/** The column is an `integer`. */
const MAX_REMAINING = 2 ** 31 - 1;

/**
 * A reset header's time: epoch milliseconds (> 1e12) or epoch seconds (> 1e9) — one already past
 * is in the past, never read as a delay — else seconds from now; at most a day ahead.
 */
function resetTime(value: string | null, now: number): number | null {
  const text = value?.trim();
  if (!text || !/^\d{1,20}(\.\d+)?$/.test(text)) return null;
  const n = Number(text);
  const at = n > 1e12 ? n : n > 1e9 ? n * 1000 : now + n * 1000;
  return Math.min(at, now + MAX_BLOCK_SECONDS * 1000);
}

/** Whether storing `learned` changes what the next call does, given what was read (`known`): its block, to the second. */
export function changes(known: Budget | null, learned: Budget, now = Date.now()): boolean {
  const before = blockedUntil(known, now);
  const after = blockedUntil(learned, now);
  if (before === null || after === null) return before !== after;
  return Math.ceil(before / 1000) !== Math.ceil(after / 1000);
}

const UPSERT = new HotStatement(sql`INSERT INTO provider_budgets (scope, account_id, organization_id, provider, remaining, reset_at, blocked_until, updated_at)
  VALUES (${sql.placeholder('scope')}, ${sql.placeholder('accountId')}, ${sql.placeholder('organizationId')}, ${sql.placeholder('provider')}, ${sql.placeholder('remaining')}::int,
    ${sql.placeholder('resetAt')}::timestamptz, ${sql.placeholder('blockedUntil')}::timestamptz, now())
  ON CONFLICT (scope, account_id) DO UPDATE SET organization_id = excluded.organization_id, remaining = excluded.remaining, reset_at = excluded.reset_at,
    blocked_until = excluded.blocked_until, updated_at = now()
  -- Instances race: an answer older than another instance's block must not lift it or shorten it; a block only lengthens until it has passed.
  WHERE provider_budgets.blocked_until IS NULL OR provider_budgets.blocked_until <= now() OR excluded.blocked_until > provider_budgets.blocked_until`);

const READ = new HotStatement<{ b: Record<string, unknown> }>(
  sql`SELECT row_to_json(b) AS b FROM provider_budgets b WHERE b.scope = ${sql.placeholder('scope')} AND b.account_id = ${sql.placeholder('accountId')}`,
);

const READ_MANY = new HotStatement<{ scope: string; account_id: string; b: Record<string, unknown> }>(
  sql`SELECT b.scope, b.account_id, row_to_json(b) AS b FROM provider_budgets b
      JOIN unnest(${sql.placeholder('scopes')}::text[], ${sql.placeholder('accountIds')}::text[]) AS k(scope, account_id) ON b.scope = k.scope AND b.account_id = k.account_id`,
);

const knownKey = (key: Pick<BudgetKey, 'scope' | 'accountId'>) => `${key.scope}\n${key.accountId}`;

/**
 * Budgets read ahead for many live checks at once (a validation pass's batch: one statement, not
 * one per check), kept up to date with what those checks' own answers teach (decision 333).
 */
export class KnownBudgets {
  private readonly byKey = new Map<string, Budget | null>();

  /** Whether `key` was read ahead (a key with no stored budget was too: its budget is null). */
  has(key: BudgetKey): boolean {
    return this.byKey.has(knownKey(key));
  }

  get(key: BudgetKey): Budget | null {
    return this.byKey.get(knownKey(key)) ?? null;
  }

  set(key: Pick<BudgetKey, 'scope' | 'accountId'>, budget: Budget | null): void {
    this.byKey.set(knownKey(key), budget);
  }
}

/** The budgets' store: read, and written only when a change matters, within `BUDGET_WRITE_MS`. */
export class ProviderBudgets {
  readonly metrics: BudgetMetrics | undefined;
  private readonly db: Db;
  private readonly logger: Pick<Logger, 'warn'>;

  constructor(deps: { db: Db; logger: Pick<Logger, 'warn'>; metrics?: BudgetMetrics }) {
    this.db = deps.db;
    this.logger = deps.logger;
    this.metrics = deps.metrics;
  }

  /** The stored budget of `key` (outside the hot read: the validation pass, the status route). */
  async read(key: BudgetKey): Promise<Budget | null> {
    const [row] = await READ.rows(this.db, { scope: key.scope, accountId: key.accountId });
    return budgetFromJson(row?.b ?? null);
  }

  /** The stored budgets of `keys`, in one statement (a validation pass's batch); a key with none is known as null. */
  async readMany(keys: BudgetKey[]): Promise<KnownBudgets> {
    const known = new KnownBudgets();
    const unique = new Map(keys.map((key) => [knownKey(key), key]));
    if (unique.size === 0) return known;
    for (const key of unique.values()) known.set(key, null);
    const list = [...unique.values()];
    const rows = await READ_MANY.rows(this.db, { scopes: list.map((key) => key.scope), accountIds: list.map((key) => key.accountId) });
    for (const row of rows) known.set({ scope: row.scope, accountId: row.account_id }, budgetFromJson(row.b));
    return known;
  }

  /**
   * Stores what an answer taught when it changes the next call (`changes`), before that answer is
   * returned; a write that takes longer than `BUDGET_WRITE_MS` or fails is skipped and logged.
   * Returns what is known now.
   */
  async learn(key: BudgetKey, known: Budget | null, learned: Budget | null): Promise<Budget | null> {
    if (!learned) return known;
    if (!changes(known, learned)) return known;
    // A time no Date can hold (readBudget bounds them; this is the last guard) is not stored: never a 500 for the caller.
    const iso = (ms: number | null) => (ms === null || !Number.isFinite(ms) || Math.abs(ms) > 8.64e15 ? null : new Date(ms).toISOString());
    const write = UPSERT.rows(this.db, {
      scope: key.scope,
      accountId: key.accountId,
      organizationId: key.organizationId,
      provider: key.provider,
      remaining: learned.remaining,
      resetAt: iso(learned.resetAt),
      blockedUntil: iso(learned.blockedUntil),
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), BUDGET_WRITE_MS);
    });
    try {
      const outcome = await Promise.race([write.then(() => 'stored' as const), late]);
      if (outcome === 'late') {
        write.catch(() => {});
        this.logger.warn({ provider: key.provider }, 'a provider budget could not be stored within 1 s; skipped');
      }
    } catch (error) {
      this.logger.warn({ provider: key.provider, err: { type: error instanceof Error ? error.name : typeof error } }, 'a provider budget could not be stored; skipped');
    } finally {
      clearTimeout(timer);
    }
    return learned;
  }
}

/** Methods tried again after a network error, a timeout or a 502/503/504 (docs/contract.md §5f); others only with `Idempotency-Key`. */
export const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);
/** Provider statuses tried again. */
export const RETRIED_STATUSES = new Set([502, 503, 504]);
/** Sends of one call, at most. */
export const MAX_ATTEMPTS = 3;
/** The first back-off, doubled for each retry, with jitter. */
export const BACKOFF_BASE_MS = 200;

/** The back-off before retry `n` (1 = the first retry): exponential, jittered between half and all of it. */
export function backoffMs(n: number, random = Math.random): number {
  const full = BACKOFF_BASE_MS * 2 ** (n - 1);
  return Math.round(full / 2 + (random() * full) / 2);
}

/** Resolves after `ms`: a waiting call holds no database connection or transaction, only this timer. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
