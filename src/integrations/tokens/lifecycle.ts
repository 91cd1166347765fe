import { and, eq } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { AuditActor } from '../../ground/work.ts';
import { integrations } from '../../db/schema.ts';
import type { Outbox } from '../../events/outbox.ts';
import { AppError } from '../../ground/errors.ts';
import { systemUnitOfWork } from '../../ground/work.ts';
import type { IntegrationRow } from '../integrations.ts';
import { blockedUntil, budgetKey, type KnownBudgets, type ProviderBudgets, readBudget } from '../budgets.ts';
import { type ProviderContext, ProviderError, type ProviderFailureKind, type TokenSet } from '../providers/types.ts';
import type { UnitOfWork } from '../../ground/work.ts';
import { applyLockedTransitions, applyTransition, type HeldValidation, keepConnectedMany, keepStatus, type Transition } from '../status.ts';
import { tokenRequest } from '../token-endpoint.ts';
import { FastReads, type ReadPool } from './fast-read.ts';
import { type LoadDeps, type LoadedIntegration, loadById, withSecrets } from './loaded.ts';
import { mintAndStore, mintOnly, presented, renewable } from './mint.ts';
import { configFaultMessage, expiresWithin, type FailurePoint, JudgedFailure, judged, rateLimitOf, type RefreshWindow, refreshDue } from './policy.ts';
import { SingleFlight } from './refresh.ts';
import { prepareRotatedStore } from './store-rotated.ts';

/** A database error's code (SQLSTATE or a system error's), for a log line that must carry nothing else of it. */
function causeCode(error: unknown): string | undefined {
  for (let cause = error; cause instanceof Error; cause = cause.cause) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return error instanceof Error ? error.name : undefined;
}

/** Counters the token lifecycle reports to (filled by the metrics feature). */
export interface LifecycleMetrics {
  refreshOutcome(provider: string, outcome: string): void;
  validationOutcome(provider: string, outcome: string): void;
  /**
   * A revocation detected (a status change to `invalid`), once committed: `seconds` since the
   * provider says it happened, else `boundSeconds` since the integration last proved good.
   */
  revocationDetected(provider: string, source: string, elapsed: { seconds: number } | { boundSeconds: number }): void;
}

/** What the token lifecycle works with — and nothing else: it never sees a request or the services bag. */
export interface LifecycleDeps extends LoadDeps {
  /** How the hot path's reads share the database (fast-read.ts). */
  pool: ReadPool;
  /** Status changes queue their events here. */
  outbox: Outbox;
  metrics?: LifecycleMetrics;
  /** Provider budgets (docs/contract.md §5f): what a validation's answers say is stored for every instance. */
  budgets?: ProviderBudgets;
  logger: Pick<Logger, 'debug' | 'info' | 'warn' | 'error'>;
  timeouts: {
    /** A provider call is abandoned after this long (a refresh lease outlasts it). */
    providerMs: number;
    /** A validated token is validated again this long after. */
    validationIntervalMs: number;
  };
}

/** The integration a verdict concerns: `id` null when there is none yet (a first connection). */
export type SettleTarget = Pick<IntegrationRow, 'organizationId' | 'provider'> & { id: string | null };

/** How a live validation ended: valid, or the provider's failure (its kind, and the failure with its verdict). */
export type ValidationOutcome = { kind: 'valid' } | { kind: ProviderFailureKind; failure: JudgedFailure };

/**
 * How `execute` carries out a verdict for one caller. The recheck runs only for a caller that can
 * try again (`again`); what it persists, only when `settle` is not false; the stored token is
 * served only to a caller that offers to (`serveStale`).
 */
export interface Execution<T> {
  /** The integration as the failed attempt used it. */
  loaded: LoadedIntegration;
  actor: AuditActor;
  /** The credential the provider refused: the token presented, or the refresh token a refresh sent (the recheck looks for a newer one). */
  refused?: { token: string } | { refreshToken: string };
  /** The attempt once more, with the newer credential the recheck found; its own failure is the caller's to execute (without a recheck). */
  again?: (newer: LoadedIntegration) => Promise<T>;
  /** false: nothing is persisted and the recheck only re-reads (never refreshes) — the caller acts in a transaction of its own. */
  settle?: boolean;
  /** The failure was a scheduled validation's: when the next one is due, had it succeeded (a verdict that counts records it; a rate limit waits for `Retry-After`). */
  nextValidationAt?: Date;
  /** The caller may hand out the token `loaded` holds, if the verdict lets it and it has not expired (decisions 35, 38). */
  serveStale?: boolean;
}

/**
 * What carrying out a verdict came to: the attempt `retried` with a newer credential (its
 * value); the stored token `served`; or the verdict `stands` — with the row after what it
 * persisted (null: nothing), and whether the request goes on (`passthrough`) rather than failing.
 */
export type Executed<T> =
  | { kind: 'retried'; value: T }
  | { kind: 'served'; loaded: LoadedIntegration }
  | { kind: 'stands'; row: IntegrationRow | null; goesOn: boolean };

/** How a live check ended: validated, refreshed, or a judged failure (applied already, unless the check was asked not to settle). */
/**
 * A live check's outcome: the validation's, a refresh that answered for it, or none sent because the
 * account's provider budget is known exhausted until `until` (epoch ms; docs/contract.md §5f).
 */
export type CheckOutcome = ValidationOutcome | { kind: 'refreshed' } | { kind: 'budgetExhausted'; until: number };

/**
 * How a live check treats the validation's own verdict. `settle` false: the provider's answer
 * to the account call or the mint is judged and reported, never persisted — no transition, no
 * reschedule, no validation recorded, a minted token kept nowhere — so the caller acts on it in
 * a transaction of its own (a provider event seen before, docs/contract.md §5b); a rejection is
 * rechecked only against the stored token (another refresh may have rotated it), never by a
 * refresh. An OAuth token already due for a refresh is still refreshed first, by its own rules.
 */
export interface LiveCheckOptions {
  settle?: boolean;
  /**
   * A validation that finds the token good (status `connected` after it) is not written but pushed
   * here, for `keepValidated` to write with others in one statement (a validation pass's batch); the
   * row the check answers with is then the one it started from. Failures are persisted as ever.
   */
  hold?: HeldValidation[];
  /** The account budgets read ahead with a batch (`ProviderBudgets.readMany`), kept up to date with what this check learns; else the check reads its own. */
  budgets?: KnownBudgets;
}

/**
 * Keeps tokens alive: refresh (single-flight, refresh.ts), validation with the 401 retry
 * rules, the live check, and the status transitions they lead to — every failure judged by
 * policy.ts, whose verdict this class carries out. Never holds a transaction across a provider
 * call. The hot read path is `reads` (fast-read.ts).
 */
export class TokenLifecycle {
  readonly reads: FastReads;
  private readonly deps: LifecycleDeps;
  private readonly singleFlight: SingleFlight;

  constructor(deps: LifecycleDeps) {
    this.deps = deps;
    this.reads = new FastReads(deps);
    this.singleFlight = new SingleFlight({
      db: deps.db,
      leaseMs: deps.timeouts.providerMs * 2 + 5000,
      withSecrets: (row) => withSecrets(deps, row),
    });
  }

  /** Identifies this process in refresh leases. */
  get instanceId(): string {
    return this.singleFlight.instanceId;
  }

  /**
   * A token to hand out: refreshed first when it expires within 5 minutes and a refresh
   * token exists. If that refresh fails in a way the verdict lets pass (the provider down or
   * rate-limiting, our client credentials refused), a token still valid is served (decision
   * 38). An `invalid` (or expired, unrefreshable) integration is a 409.
   */
  async usable(loaded: LoadedIntegration, actor: AuditActor): Promise<LoadedIntegration> {
    if (loaded.row.status === 'invalid') throw new AppError('TOKEN_VALIDATION_FAILED');
    const expired = () => expiresWithin(loaded.row.tokenExpiresAt, 0);
    // A minted mode with no token cached yet mints one now.
    const unminted = loaded.provider.traits.renews === 'mint' && presented(loaded) === undefined;
    if (!refreshDue(loaded.row) && !unminted) {
      if (!expired()) return loaded;
      throw new AppError('TOKEN_VALIDATION_FAILED', { message: 'The token has expired; reconnect the integration' });
    }
    try {
      return await this.refresh(loaded.row, actor);
    } catch (error) {
      if (!(error instanceof JudgedFailure)) throw error;
      // The refresh has carried out what its verdict persists: all that is left is whether the stored token is served.
      const done = await this.execute(error, { loaded, actor, settle: false, serveStale: true });
      if (done.kind === 'served') return done.loaded;
      throw error;
    }
  }

  /**
   * Refreshes the integration `seen` (as the caller read it), once for all concurrent callers
   * in this process and across processes; its secrets are read under the lease. A failure is
   * thrown as a JudgedFailure, its verdict applied.
   */
  refresh(seen: IntegrationRow, actor: AuditActor): Promise<LoadedIntegration> {
    return this.singleFlight.run(seen, (latest) => this.refreshHoldingLease(latest, actor));
  }

  /**
   * Refreshes under the lease. `challenge`: the claims a claims challenge asked for (docs/contract.md
   * §5b), sent with this refresh and its failure judged at point `challenge`.
   */
  private async refreshHoldingLease(loaded: LoadedIntegration, actor: AuditActor, challenge?: Record<string, unknown>): Promise<LoadedIntegration> {
    // A minted mode renews by minting: the same lease, the same store-before-serve.
    if (loaded.provider.traits.renews === 'mint') return this.mintHoldingLease(loaded, actor, 'refresh');
    const refreshToken = loaded.secrets.refresh_token;
    if (!refreshToken) {
      // Nothing to refresh with: re-validate the current token and hand it back — or the failure, unless it lets the request go on.
      const { loaded: after, outcome } = await this.validate(loaded, actor, { recover: false });
      if (outcome.kind !== 'valid' && outcome.failure.verdict.answer !== 'passthrough') throw outcome.failure;
      return after;
    }
    // Made ready before the call (a connection held, keys derived), so the answer is stored the moment it arrives (decision 255).
    const rotated = await prepareRotatedStore(this.deps, loaded, actor);
    let stored: LoadedIntegration | null;
    try {
      let tokens: TokenSet;
      try {
        tokens = await tokenRequest(loaded.provider, { grant_type: 'refresh_token', refresh_token: refreshToken }, challenge);
      } catch (error) {
        rotated.release();
        this.deps.metrics?.refreshOutcome(loaded.provider.id, error instanceof ProviderError ? error.kind : 'error');
        const failed = judged(error, challenge ? 'challenge' : 'refresh', loaded.provider.app);
        // invalid_grant is not yet proof: if the stored refresh token changed, another refresh won and its result is served (decision 36).
        const done = await this.execute(failed, { loaded, actor, refused: { refreshToken }, again: async (latest) => latest });
        if (done.kind === 'retried') return done.value;
        throw failed;
      }
      // The provider has already retired the old refresh token: store the new one before anything else.
      const answeredAt = performance.now();
      try {
        stored = await rotated.store(tokens);
      } catch (error) {
        this.deps.metrics?.refreshOutcome(loaded.provider.id, 'error');
        // docs/contract.md §2: the rotation is gone with the answer; its next use is judged as any other (a rejected refresh token: invalid).
        const { organizationId, id, provider } = loaded.row;
        this.deps.logger.error({ integrationId: id, organizationId, provider, cause: causeCode(error) }, 'rotated token lost: the provider rotated it and it could not be stored');
        throw error;
      }
      this.deps.metrics?.refreshOutcome(loaded.provider.id, 'ok');
      // After the commit, with the version it wrote: bench/faults/sigkill-refresh.ts compares these lines with what survived a kill.
      if (stored) this.deps.logger.debug({ integrationId: loaded.row.id, tokenVersion: stored.row.tokenVersion, storeMs: Math.round((performance.now() - answeredAt) * 10) / 10 }, 'rotated token stored');
    } finally {
      rotated.release();
    }
    if (!stored) {
      this.deps.logger.error({ integrationId: loaded.row.id, provider: loaded.row.provider }, 'refreshed token lost a compare-and-set; keeping the stored one');
      return loadById(this.deps, loaded.row.organizationId, loaded.row.id);
    }
    // Only a verdict that forbids serving keeps the new token back (a rejection): a provider that cannot be
    // reached or rate-limits its validation leaves the status to say so (decision 35).
    const { loaded: validated, outcome } = await this.validate(stored, actor, { recover: false });
    if (outcome.kind !== 'valid' && !outcome.failure.verdict.serveStored) throw outcome.failure;
    return validated;
  }

  /**
   * Validates the current token live and persists what follows (policy.ts, point `validate`).
   * A rejection first goes through its recheck — re-read; else refresh; retry once — unless
   * `recover` is false. A rate limit leaves the status alone and reschedules.
   */
  async validate(loaded: LoadedIntegration, actor: AuditActor, options: { recover?: boolean } & LiveCheckOptions = {}): Promise<{ loaded: LoadedIntegration; outcome: ValidationOutcome }> {
    const settle = options.settle !== false;
    if (loaded.provider.traits.renews === 'mint') return this.validateByMint(loaded, actor, settle);
    const token = presented(loaded);
    if (!token) throw new AppError('INTERNAL', { message: 'integration has no access token' });
    const nextValidationAt = new Date(Date.now() + this.deps.timeouts.validationIntervalMs);
    try {
      await loaded.provider.definition.validate(this.learning(loaded, options.budgets), token);
    } catch (error) {
      if (!(error instanceof ProviderError)) throw error;
      this.deps.metrics?.validationOutcome(loaded.provider.id, error.kind);
      const failed = new JudgedFailure(error, 'validate', loaded.provider.app);
      const again = options.recover !== false ? (newer: LoadedIntegration) => this.validate(newer, actor, { recover: false, settle }) : undefined;
      const done = await this.execute(failed, { loaded, actor, refused: { token }, settle, nextValidationAt, ...(again ? { again } : {}) });
      if (done.kind === 'retried') return done.value;
      const row = done.kind === 'stands' && done.row ? done.row : loaded.row;
      return { loaded: { ...loaded, row }, outcome: { kind: error.kind, failure: failed } };
    }
    this.deps.metrics?.validationOutcome(loaded.provider.id, 'valid');
    if (!settle) return { loaded, outcome: { kind: 'valid' } };
    if (options.hold) {
      options.hold.push({ organizationId: loaded.row.organizationId, id: loaded.row.id, validatedAt: new Date(), nextValidationAt, from: loaded.row.status });
      return { loaded, outcome: { kind: 'valid' } };
    }
    const row = await this.apply(loaded, { status: 'connected', lastError: null, tokenValid: true, validated: true, nextValidationAt }, actor);
    return { loaded: { ...loaded, row }, outcome: { kind: 'valid' } };
  }

  /** A live check's outcome when the account's budget is known exhausted (nothing sent, nothing persisted), else null. */
  private async exhausted(loaded: LoadedIntegration, known?: KnownBudgets): Promise<{ loaded: LoadedIntegration; outcome: CheckOutcome } | null> {
    const budgets = this.deps.budgets;
    if (!budgets || loaded.provider.traits.renews === 'mint') return null;
    const key = budgetKey(loaded.row, loaded.provider);
    const until = blockedUntil(known?.has(key) ? known.get(key) : await budgets.read(key));
    return until === null ? null : { loaded, outcome: { kind: 'budgetExhausted', until } };
  }

  /**
   * The integration's provider context, whose calls teach the account's budget (docs/contract.md
   * §5f): an answer that says the budget is exhausted, or a rate limit, is stored for every instance
   * before it is read (budgets.ts `learn`; nothing is written while the budget has calls left).
   */
  private learning(loaded: LoadedIntegration, known?: KnownBudgets): ProviderContext {
    const context = loaded.provider.contextFor(loaded.row.metadata);
    const budgets = this.deps.budgets;
    if (!budgets) return context;
    const { definition } = loaded.provider;
    const request: ProviderContext['request'] = async (url, init) => {
      const answer = await context.request(url, init);
      const failure = definition.classify(answer);
      const key = budgetKey(loaded.row, loaded.provider);
      const learned = await budgets.learn(key, null, readBudget(definition, answer, rateLimitOf(failure)));
      // The next check of this account in the same batch sees what this answer taught, as a fresh read would.
      if (learned && known) known.set(key, learned);
      return answer;
    };
    return Object.assign(Object.create(context) as ProviderContext, { request });
  }

  /**
   * Carries out a verdict — the one place that does (policy.ts judges, every caller calls this):
   * 1. its recheck, for a caller that can try again: `reread` the stored credential — a newer one
   *    than the one refused means another refresh won meanwhile (decision 36) — or `retry`: that,
   *    else a refresh, joining one in flight (decision 37); with a newer credential the attempt
   *    runs once more (`again`) and its result is the caller's;
   * 2. what it persists, unless `settle` is false: for a scheduled validation whose verdict
   *    reschedules, only the next validation after the provider's `Retry-After`; else its
   *    transition (a validation counted when the verdict counts), and a configuration fault's
   *    log line;
   * 3. whether the stored token is served (`serveStale`), else whether the request goes on.
   * A refresh that fails during the recheck in any other way than a refusal is thrown, judged.
   */
  async execute<T>(failed: JudgedFailure, at: Execution<T>): Promise<Executed<T>> {
    const { verdict } = failed;
    const settle = at.settle !== false;
    if (at.again && at.refused && verdict.recheck !== 'none') {
      // A check that must not settle never refreshes: it only looks for a rotation that already happened.
      const refreshes = settle && 'token' in at.refused ? at.refused.token : undefined;
      const newer =
        refreshes !== undefined && verdict.recheck === 'retry'
          ? await this.recover(at.loaded, refreshes, at.actor)
          : refreshes !== undefined && verdict.recheck === 'challenge'
            ? await this.answerChallenge(at.loaded, refreshes, failed.failure.claims ?? {}, at.actor)
            : await this.reread(at.loaded, at.refused);
      if (newer) return { kind: 'retried', value: await at.again(newer) };
    }
    let row: IntegrationRow | null = null;
    if (settle && verdict.reschedule && at.nextValidationAt) {
      // Not a verdict on the token: come back after the provider's Retry-After.
      const { organizationId, id } = at.loaded.row;
      await this.deps.db
        .update(integrations)
        .set({ nextValidationAt: new Date(Date.now() + (failed.failure.retryAfter ?? 60) * 1000) })
        .where(and(eq(integrations.organizationId, organizationId), eq(integrations.id, id)));
    } else if (settle) {
      row = await this.settle(at.loaded.row, failed, at.actor, at.nextValidationAt ? { validated: verdict.counts, nextValidationAt: at.nextValidationAt } : {});
    }
    if (at.serveStale && verdict.serveStored && !expiresWithin(at.loaded.row.tokenExpiresAt, 0)) return { kind: 'served', loaded: at.loaded };
    return { kind: 'stands', row, goesOn: verdict.answer === 'passthrough' };
  }

  /**
   * The stored integration, when its credential is no longer the one the provider refused (a
   * rotation won meanwhile); else null. A refresh token gone from the row counts as replaced.
   */
  private async reread(loaded: LoadedIntegration, refused: NonNullable<Execution<unknown>['refused']>): Promise<LoadedIntegration | null> {
    const latest = await loadById(this.deps, loaded.row.organizationId, loaded.row.id);
    if ('refreshToken' in refused) return latest.secrets.refresh_token !== refused.refreshToken ? latest : null;
    const current = presented(latest);
    return current && current !== refused.token ? latest : null;
  }

  /**
   * A live check, the status route's and the background passes' alike: refresh when the token
   * is due for one within `due` (default the read-ahead window) — and validate as well when that
   * refresh was shared with an earlier one — else validate. A provider
   * failure is judged, applied and reported as the outcome, with the integration as it is
   * after; it is never thrown.
   */
  async check(loaded: LoadedIntegration, actor: AuditActor, due: RefreshWindow = {}, options: LiveCheckOptions = {}): Promise<{ loaded: LoadedIntegration; outcome: CheckOutcome }> {
    const settle = options.settle !== false;
    try {
      // A minted mode's validation is itself a mint: one that must not settle needs no refresh first.
      if (renewable(loaded) && refreshDue(loaded.row, due) && (settle || loaded.provider.traits.renews !== 'mint')) {
        const refreshed = await this.refresh(loaded.row, actor);
        // A refresh shared with one that ended before this check looked (decision 49) asked the provider nothing:
        // no validation has happened since, and the live answer is still owed (decision 186).
        if (refreshed.row.lastValidatedAt?.getTime() !== loaded.row.lastValidatedAt?.getTime()) return { loaded: refreshed, outcome: { kind: 'refreshed' } };
        return (await this.exhausted(refreshed, options.budgets)) ?? (await this.validate(refreshed, actor, options));
      }
      // The account call is an API call: not sent while the account's budget is known exhausted (a refresh above is a token-endpoint call, never held back).
      return (await this.exhausted(loaded, options.budgets)) ?? (await this.validate(loaded, actor, options));
    } catch (error) {
      if (!(error instanceof JudgedFailure)) throw error;
      return { loaded: await loadById(this.deps, loaded.row.organizationId, loaded.row.id), outcome: { kind: error.kind, failure: error } };
    }
  }

  /**
   * After the provider rejected `usedToken`: a 401 is not yet proof of revocation (a rotation
   * kills the old token at once). Returns a newer token to retry with — the stored one if it
   * changed meanwhile, else a refresh (joining one in flight) — or null when the refresh was
   * refused too (decision 37). Any other failure of that refresh is thrown, judged.
   */
  private async recover(loaded: LoadedIntegration, usedToken: string, actor: AuditActor): Promise<LoadedIntegration | null> {
    const latest = await loadById(this.deps, loaded.row.organizationId, loaded.row.id);
    const current = presented(latest);
    if (current && current !== usedToken) return latest;
    if (!renewable(latest)) return null;
    try {
      return await this.refresh(latest.row, actor);
    } catch (error) {
      if (error instanceof JudgedFailure && error.verdict.dead) return null;
      throw error;
    }
  }

  /**
   * After the provider answered `usedToken` with a claims challenge (docs/contract.md §5b): a newer
   * stored token if one replaced it meanwhile, else one refresh carrying the challenge's claims —
   * a refresh of its own, never one that ended seconds ago (decision 49 would hand back the very
   * token refused) — or null when there is nothing to refresh with or the refresh was refused
   * (its verdict applied: `invalid`). Any other failure of that refresh is thrown, judged at point
   * `challenge` (unreachable: `warning`). The caller tries once more; a second challenge stands.
   */
  private async answerChallenge(loaded: LoadedIntegration, usedToken: string, claims: Record<string, unknown>, actor: AuditActor): Promise<LoadedIntegration | null> {
    const latest = await loadById(this.deps, loaded.row.organizationId, loaded.row.id);
    const current = presented(latest);
    if (current && current !== usedToken) return latest;
    if (!renewable(latest)) return null;
    try {
      const run = (row: IntegrationRow) => this.singleFlight.run(row, (leased) => this.refreshHoldingLease(leased, actor, claims), { coalesce: false });
      let refreshed = await run(latest.row);
      // Joined with a refresh in flight that handed back the very token refused (one coalesced with an earlier one): ours, once.
      if (presented(refreshed) === usedToken) refreshed = await run(refreshed.row);
      return presented(refreshed) !== usedToken ? refreshed : null;
    } catch (error) {
      if (error instanceof JudgedFailure && error.verdict.dead) return null;
      throw error;
    }
  }

  /**
   * A minted mode's validation is a mint (docs/contract.md §5c: verified by minting): run under
   * the refresh single-flight, so it also renews the cached token; its failure is judged at
   * `validate` and reported as the outcome.
   */
  private async validateByMint(loaded: LoadedIntegration, actor: AuditActor, settle = true): Promise<{ loaded: LoadedIntegration; outcome: ValidationOutcome }> {
    // A check that must not settle answers for a provider event: a mint now — never one of seconds ago, never
    // joined with a renewal in flight — whose token is kept nowhere (no audit row), its failure judged, not applied.
    if (!settle) {
      try {
        await mintOnly(loaded);
        return { loaded, outcome: { kind: 'valid' } };
      } catch (error) {
        const failed = judged(error, 'validate', loaded.provider.app);
        return { loaded, outcome: { kind: failed.kind, failure: failed } };
      }
    }
    try {
      const after = await this.singleFlight.run(loaded.row, (latest) => this.mintHoldingLease(latest, actor, 'validate'));
      return { loaded: after, outcome: { kind: 'valid' } };
    } catch (error) {
      if (!(error instanceof JudgedFailure)) throw error;
      return { loaded: await loadById(this.deps, loaded.row.organizationId, loaded.row.id), outcome: { kind: error.kind, failure: error } };
    }
  }

  /**
   * Mints under the lease (mint.ts) and stores the token before it is served; a success
   * counts as a validation. A failure is judged at `point` — a refusal of the stored grant
   * makes the integration `invalid` — and thrown.
   */
  private async mintHoldingLease(loaded: LoadedIntegration, actor: AuditActor, point: Extract<FailurePoint, 'refresh' | 'validate'>): Promise<LoadedIntegration> {
    const nextValidationAt = new Date(Date.now() + this.deps.timeouts.validationIntervalMs);
    let stored: LoadedIntegration | null;
    try {
      stored = await mintAndStore(this.deps, loaded, actor);
      this.deps.metrics?.refreshOutcome(loaded.provider.id, 'ok');
    } catch (error) {
      this.deps.metrics?.refreshOutcome(loaded.provider.id, error instanceof ProviderError ? error.kind : 'error');
      const failed = judged(error, point, loaded.provider.app);
      // A minted validation's schedule moves only when the provider judged the grant (a rate limit here is not rescheduled).
      await this.execute(failed, { loaded, actor, ...(point === 'validate' && failed.verdict.counts ? { nextValidationAt } : {}) });
      throw failed;
    }
    if (!stored) return loadById(this.deps, loaded.row.organizationId, loaded.row.id);
    const row = await this.apply(stored, { status: 'connected', lastError: null, tokenValid: true, validated: true, nextValidationAt }, actor);
    return { ...stored, row };
  }

  /**
   * What a verdict persists for the integration it concerns (`execute`'s second step; called
   * alone where no token is in play — `id` null: none yet, as for a first connection): its
   * transition (with `extra`, e.g. the validation's schedule) and, for a configuration fault, a
   * log line naming the settings to check. Returns the row after, or null when nothing was applied.
   */
  async settle(target: SettleTarget, failed: JudgedFailure, actor: AuditActor, extra: Partial<Transition> = {}): Promise<IntegrationRow | null> {
    if (failed.verdict.configFault) {
      this.deps.logger.warn({ provider: target.provider, app: failed.app?.id, integrationId: target.id, point: failed.point, providerCode: failed.failure.providerCode }, configFaultMessage(target.provider, failed.failure.providerCode, failed.app));
    }
    const { transition } = failed.verdict;
    if (!transition || target.id === null) return null;
    return this.transition(target.organizationId, target.id, { ...transition, ...extra }, actor);
  }

  /**
   * Writes the validations `check` held back (`LiveCheckOptions.hold`): those whose rows are
   * `connected` in one statement (status.ts `keepConnectedMany`), each other one as its own
   * `transition` would have been written (a status change with its audit row and event) — unless
   * its status has changed since the check read it: that change came later, on newer evidence,
   * and stands. When the one statement fails, every validation is written alone, so one row's
   * failing write loses no other's. Returns the validations that could not be written, each with its error.
   */
  async keepValidated(held: readonly HeldValidation[], actor: AuditActor): Promise<{ held: HeldValidation; error: unknown }[]> {
    let kept = new Set<string>();
    try {
      kept = await keepConnectedMany(this.deps.db, held);
    } catch {
      // Written one by one below: the failure is the failing row's alone.
    }
    const failed: { held: HeldValidation; error: unknown }[] = [];
    for (const one of held) {
      if (kept.has(`${one.organizationId}:${one.id}`)) continue;
      try {
        await this.transition(one.organizationId, one.id, { status: 'connected', lastError: null, tokenValid: true, validated: true, nextValidationAt: one.nextValidationAt, onlyFrom: one.from }, actor);
      } catch (error) {
        failed.push({ held: one, error });
      }
    }
    return failed;
  }

  /** Persists a transition of the failure policy (see `transition`); returns the row after it (the one given when there is nothing to apply, or the row is gone). */
  async apply(loaded: LoadedIntegration, transition: Transition | null, actor: AuditActor): Promise<IntegrationRow> {
    if (!transition) return loaded.row;
    return (await this.transition(loaded.row.organizationId, loaded.row.id, transition, actor)) ?? loaded.row;
  }

  /**
   * Persists a transition on its own, whatever the request answers: the common case (the status
   * stays) in one statement, a change in a unit of work of its own, with its audit row and
   * event. Returns the row after, or null if it is gone.
   */
  async transition(organizationId: string, integrationId: string, next: Transition, actor: AuditActor): Promise<IntegrationRow | null> {
    const kept = await keepStatus(this.deps.db, organizationId, integrationId, next);
    if (kept) return kept;
    return systemUnitOfWork(this.deps.db, this.deps.outbox, actor, (work) => this.transitionIn(work, organizationId, integrationId, next));
  }

  /**
   * Persists a transition in `work`'s transaction (status.ts `applyTransition`: audit row and
   * event when the status changes); once committed, the log line and, for a revocation, its
   * detection metrics — `occurredAt` being when the provider says it happened, if it says.
   */
  transitionIn(work: UnitOfWork, organizationId: string, integrationId: string, next: Transition, occurredAt?: Date): Promise<IntegrationRow | null> {
    return applyTransition(work, organizationId, integrationId, next, (before) => this.changed(work, before, next, occurredAt));
  }

  /**
   * `transitionIn` for many rows at once, each already locked `FOR UPDATE` and read in `work`'s
   * transaction (provider events acted on together, decision 331): one statement per step for all
   * of them (status.ts `applyLockedTransitions`), each change with its own actor and time.
   */
  transitionAllIn(work: UnitOfWork, changes: readonly { before: IntegrationRow; next: Transition; actor: AuditActor; occurredAt?: Date | undefined }[]): Promise<void> {
    return applyLockedTransitions(
      work,
      changes.map(({ before, next, actor, occurredAt }) => ({ before, next, actor, onChanged: (row) => this.changed(work, row, next, occurredAt) })),
    );
  }

  /** Once committed: the log line and, for a revocation, its detection metrics. */
  private changed(work: UnitOfWork, before: IntegrationRow, next: Transition, occurredAt: Date | undefined): void {
    work.afterCommit(() => {
      // A line an operator can follow (decision 147): ids and our words, no secret.
      this.deps.logger.info(
        { provider: before.provider, integrationId: before.id, organizationId: before.organizationId, from: before.status, to: next.status, reason: next.lastError, ...(next.source ? { source: next.source } : {}) },
        `integration status changed to ${next.status}`,
      );
      if (next.status === 'invalid' && next.source && next.source !== 'connect') this.detected(before, next.source, occurredAt);
    });
  }

  /** Counts a committed revocation: how long it went unnoticed, exactly when the provider says when it happened, else as a bound. */
  private detected(before: IntegrationRow, source: string, occurredAt: Date | undefined): void {
    const now = Date.now();
    if (occurredAt) {
      this.deps.metrics?.revocationDetected(before.provider, source, { seconds: Math.max(0, (now - occurredAt.getTime()) / 1000) });
      return;
    }
    // Tessera keeps no time of each use: the last validation or refresh is the last proof the token was good.
    const proven = Math.max(before.lastValidatedAt?.getTime() ?? 0, before.lastRefreshedAt?.getTime() ?? 0) || before.updatedAt.getTime();
    this.deps.metrics?.revocationDetected(before.provider, source, { boundSeconds: Math.max(0, (now - proven) / 1000) });
  }
}
