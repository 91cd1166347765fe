/**
 * The rules a token lives by, each written once: when to refresh, and what a provider
 * failure means at each point it can happen — the one judge. Every failure of a provider
 * call (connect, refresh, validation, proxy, a provider's own event) gets its verdict here:
 * the status transition, whether the stored token may still be served, what to try before
 * believing it, whether to reschedule, whether it counts as a validation, and the §2 code.
 * A verdict is carried out in one place, `TokenLifecycle.execute` (its recheck, what it persists,
 * whether the stored token is served); the code becomes an answer at the route edge only
 * (`toAnswer`).
 */
import type { AppRef } from '../providers/registry.ts';
import { AppError, type ErrorCode } from '../../ground/errors.ts';
import type { IntegrationRow } from '../integrations.ts';
import { ProviderError, type ProviderFailureKind } from '../providers/types.ts';
import { REASONS, type Transition, type TransitionSource } from '../status.ts';

/** Token reads refresh first when the token expires within this window (docs/contract.md §5). */
export const REFRESH_AHEAD_MS = 5 * 60 * 1000;

/** Whether `at` (an expiry) falls within `ms` from now; a token with no known expiry never does. */
export function expiresWithin(at: Date | null, ms: number, now = Date.now()): boolean {
  return at !== null && at.getTime() - now < ms;
}

/** How far ahead a refresh is due: the access token's window (default the read-ahead one), and the refresh token's own. */
export interface RefreshWindow {
  now?: number;
  accessWithinMs?: number;
  refreshTokenWithinMs?: number;
}

/**
 * Whether a token should be refreshed now: it has a refresh token, and the access token
 * expires within `accessWithinMs` (default the read-ahead window), or the refresh token
 * itself expires within `refreshTokenWithinMs` (background passes keep it from lapsing).
 */
export function refreshDue(row: Pick<IntegrationRow, 'hasRefreshToken' | 'tokenExpiresAt' | 'refreshTokenExpiresAt'>, options: RefreshWindow = {}): boolean {
  if (!row.hasRefreshToken) return false;
  return (
    expiresWithin(row.tokenExpiresAt, options.accessWithinMs ?? REFRESH_AHEAD_MS, options.now) ||
    (options.refreshTokenWithinMs !== undefined && expiresWithin(row.refreshTokenExpiresAt, options.refreshTokenWithinMs, options.now))
  );
}

/**
 * Where a provider failure happened:
 * - `exchange`: the code exchange of a connect flow (the callback);
 * - `connect`: validating the token the provider has just issued (nothing is stored yet);
 * - `refresh`: the token endpoint refusing or failing a refresh;
 * - `validate`: checking a stored token (status, background passes, after a refresh);
 * - `call`: a proxied API call with a stored token;
 * - `event`: the provider telling us of a revocation (docs/contract.md §5b);
 * - `verify`: checking credentials a person has just entered (docs/contract.md §5c; nothing is stored yet);
 * - `challenge`: the one refresh that answers a claims challenge (docs/contract.md §5b, Microsoft):
 *   the stored token is already refused, so every failure of it is the integration's.
 */
export type FailurePoint = 'exchange' | 'connect' | 'refresh' | 'validate' | 'call' | 'event' | 'verify' | 'challenge';

export const FAILURE_POINTS: readonly FailurePoint[] = ['exchange', 'connect', 'refresh', 'validate', 'call', 'event', 'verify', 'challenge'];

/**
 * What a failure does: what it persists, what to try first, and what the caller gets. Carried
 * out by `TokenLifecycle.execute`; nobody reads `answer` back.
 */
export interface Verdict {
  /**
   * The status transition, persisted in a unit of work of its own (it must survive an error
   * answer); null leaves the status as it is. At `exchange` it concerns the integration being
   * reconnected, if there is one.
   */
  transition: Transition | null;
  /** The §2 code it answers with at the route edge, or `passthrough`: the request goes on (a proxied 403; a forbidden validation's token). */
  answer: ErrorCode | 'passthrough';
  /**
   * What to try before the verdict stands: `reread` the stored token (another refresh may have
   * rotated it: its result is served), or `retry` — re-read, else refresh (joining one in
   * flight), and try once more (decisions 36, 37) — or `challenge`: re-read, else one refresh
   * carrying the challenge's claims (never coalesced with an earlier one), and try once more
   * (decision 305). `none`: it stands at once.
   */
  recheck: 'none' | 'reread' | 'retry' | 'challenge';
  /** The provider refused the credentials presented (token, grant, code): a recovery that meets this gives up. */
  dead: boolean;
  /** A token read may still hand out the token it holds, if that has not expired (decisions 35, 38). */
  serveStored: boolean;
  /** The next validation waits for the provider's `Retry-After` instead of an interval; nothing else changes. */
  reschedule: boolean;
  /** It counts as a completed validation (`lastValidated` moves): the provider did judge the token. */
  counts: boolean;
  /** This deployment's configuration is at fault: the log line names the settings to check (`configFaultMessage`). */
  configFault: boolean;
  /** The provider is limiting us: a background pass leaves this provider alone until its next pass. */
  backOff: boolean;
}

const invalid = (lastError: string, source: TransitionSource): Transition => ({ status: 'invalid', lastError, tokenValid: false, source });
const suspicious = (source: TransitionSource): Transition => ({ status: 'warning', lastError: REASONS.forbidden, tokenValid: true, source });

/** A verdict: an error answer that changes nothing and stands at once, unless `rest` says otherwise. */
const verdict = (answer: Verdict['answer'], rest: Partial<Verdict> = {}): Verdict => ({
  transition: null,
  answer,
  recheck: 'none',
  dead: false,
  serveStored: false,
  reschedule: false,
  counts: false,
  configFault: false,
  backOff: false,
  ...rest,
});

/** Rejected client credentials, wherever they show: `warning` with `["configure"]`, 502, never a revocation (docs/contract.md §2). */
const configFault = (source: TransitionSource, rest: Partial<Verdict> = {}): Verdict =>
  verdict('PROVIDER_MISCONFIGURED', { transition: { status: 'warning', lastError: REASONS.misconfigured, source }, configFault: true, ...rest });

/**
 * A claims challenge on use (docs/contract.md §5b): a revocation signal — one refresh carrying the
 * claims (`recheck: 'challenge'`) and the attempt once more; met again, it stands: `invalid`.
 */
const challenged = (source: TransitionSource, rest: Partial<Verdict> = {}): Verdict =>
  verdict('TOKEN_VALIDATION_FAILED', { transition: invalid(REASONS.unauthorized, source), recheck: 'challenge', dead: true, ...rest });

/**
 * The failure policy, point × kind. A rate limit never changes a status; rejected client
 * credentials never make an integration `invalid`. Each transition names how the change was
 * learnt (`source`). Decisions 28, 35–38, 40, 99, 134 and 305.
 */
export const FAILURE_POLICY: Readonly<Record<FailurePoint, Readonly<Record<ProviderFailureKind, Verdict>>>> = {
  exchange: {
    revoked: verdict('OAUTH_EXCHANGE_FAILED', { dead: true }),
    misconfigured: configFault('connect'),
    forbidden: verdict('TOKEN_VALIDATION_FAILED', { dead: true }),
    rateLimited: verdict('PROVIDER_RATE_LIMITED'),
    transient: verdict('PROVIDER_ERROR'),
    challenged: verdict('OAUTH_EXCHANGE_FAILED', { dead: true }),
  },
  connect: {
    revoked: verdict('TOKEN_VALIDATION_FAILED', { dead: true }),
    misconfigured: configFault('connect'),
    forbidden: verdict('TOKEN_VALIDATION_FAILED', { dead: true }),
    rateLimited: verdict('PROVIDER_RATE_LIMITED'),
    transient: verdict('PROVIDER_ERROR'),
    // A token refused as it is issued, challenge or not: nothing is stored.
    challenged: verdict('TOKEN_VALIDATION_FAILED', { dead: true }),
  },
  refresh: {
    revoked: verdict('TOKEN_VALIDATION_FAILED', { transition: invalid(REASONS.refreshRejected, 'refresh'), recheck: 'reread', dead: true }),
    misconfigured: configFault('refresh', { serveStored: true }),
    forbidden: verdict('TOKEN_VALIDATION_FAILED', { dead: true }),
    rateLimited: verdict('PROVIDER_RATE_LIMITED', { serveStored: true, backOff: true }),
    transient: verdict('PROVIDER_ERROR', { serveStored: true }),
    // A token endpoint asks no claims of a refresh: read as any refusal of the grant.
    challenged: verdict('TOKEN_VALIDATION_FAILED', { transition: invalid(REASONS.refreshRejected, 'refresh'), recheck: 'reread', dead: true }),
  },
  validate: {
    revoked: verdict('TOKEN_VALIDATION_FAILED', { transition: invalid(REASONS.unauthorized, 'validation'), recheck: 'retry', dead: true, counts: true }),
    misconfigured: configFault('validation', { serveStored: true }),
    // A forbidden validation is a warning, not a failed token: the token is still handed out.
    forbidden: verdict('passthrough', { transition: suspicious('validation'), serveStored: true, counts: true }),
    rateLimited: verdict('PROVIDER_RATE_LIMITED', { serveStored: true, reschedule: true, backOff: true }),
    transient: verdict('PROVIDER_ERROR', { transition: { status: 'warning', lastError: REASONS.unreachable, source: 'validation' }, serveStored: true }),
    challenged: challenged('validation', { counts: true }),
  },
  call: {
    revoked: verdict('TOKEN_VALIDATION_FAILED', { transition: invalid(REASONS.unauthorized, 'proxy'), recheck: 'retry', dead: true }),
    misconfigured: configFault('proxy'),
    forbidden: verdict('passthrough', { transition: suspicious('proxy') }),
    rateLimited: verdict('PROVIDER_RATE_LIMITED'),
    transient: verdict('PROVIDER_ERROR'),
    challenged: challenged('proxy'),
  },
  // The provider's own word needs no recheck; the event route answers 200 once the change has committed.
  event: {
    revoked: verdict('passthrough', { transition: invalid(REASONS.revokedAtProvider, 'provider_event'), dead: true }),
    misconfigured: verdict('passthrough'),
    forbidden: verdict('passthrough'),
    rateLimited: verdict('passthrough'),
    transient: verdict('passthrough'),
    challenged: verdict('passthrough', { transition: invalid(REASONS.revokedAtProvider, 'provider_event'), dead: true }),
  },
  // Entered credentials rejected — a 401 or a 403 alike — are the person's to correct: 400, nothing stored (docs/contract.md §5c).
  verify: {
    revoked: verdict('INVALID_CREDENTIALS', { dead: true }),
    misconfigured: configFault('connect'),
    forbidden: verdict('INVALID_CREDENTIALS', { dead: true }),
    rateLimited: verdict('PROVIDER_RATE_LIMITED'),
    transient: verdict('PROVIDER_ERROR'),
    challenged: verdict('INVALID_CREDENTIALS', { dead: true }),
  },
  // The refresh after a claims challenge (docs/contract.md §5b): the stored token is refused already, so it is never served;
  // refused → `invalid`; unreachable or a 5xx → `warning`; a rate limit changes nothing (the next use challenges again).
  challenge: {
    revoked: verdict('TOKEN_VALIDATION_FAILED', { transition: invalid(REASONS.refreshRejected, 'refresh'), recheck: 'reread', dead: true }),
    misconfigured: configFault('refresh'),
    forbidden: verdict('TOKEN_VALIDATION_FAILED', { dead: true }),
    rateLimited: verdict('PROVIDER_RATE_LIMITED', { backOff: true }),
    transient: verdict('PROVIDER_ERROR', { transition: { status: 'warning', lastError: REASONS.unreachable, source: 'refresh' } }),
    challenged: verdict('TOKEN_VALIDATION_FAILED', { transition: invalid(REASONS.refreshRejected, 'refresh'), recheck: 'reread', dead: true }),
  },
};

/** The verdict for a failure of `kind` at `point`. */
export function judge(kind: ProviderFailureKind, point: FailurePoint): Verdict {
  return FAILURE_POLICY[point][kind];
}

/**
 * A provider failure with its verdict: what the integrations core throws, and reports, for a
 * failed provider call. It becomes an `AppError` at the route edge only (`toAnswer`).
 */
export class JudgedFailure extends Error {
  readonly failure: ProviderError;
  readonly point: FailurePoint;
  readonly verdict: Verdict;
  /** The app whose credentials the call carried (docs/contract.md §5e): a configuration fault is that app's, and says so. */
  readonly app: AppRef | null;

  constructor(failure: ProviderError, point: FailurePoint, app: AppRef | null = null) {
    super(failure.message, { cause: failure });
    this.name = 'JudgedFailure';
    this.failure = failure;
    this.point = point;
    this.verdict = judge(failure.kind, point);
    this.app = app;
  }

  get kind(): ProviderFailureKind {
    return this.failure.kind;
  }
}

/** Anything a provider call threw, judged at `point`: what is not a ProviderError (a bug in reading an answer) counts as `transient`. */
/**
 * The failure when it is the provider limiting the account (a rate limit), else null: what a
 * provider budget learns a wait from (docs/contract.md §5f, integrations/budgets.ts).
 */
export function rateLimitOf(failure: ProviderError | null | undefined): ProviderError | null {
  return failure?.kind === 'rateLimited' ? failure : null;
}

export function judged(error: unknown, point: FailurePoint, app: AppRef | null = null): JudgedFailure {
  if (error instanceof JudgedFailure) return error;
  const failure = error instanceof ProviderError ? error : new ProviderError('transient', 'provider call failed', { cause: error });
  return new JudgedFailure(failure, point, app);
}

/**
 * The route edge: a judged failure as the answer its verdict names (with `Retry-After` for a
 * rate limit, the failure kept as the cause); anything else as it is.
 */
export function toAnswer(error: unknown): unknown {
  if (!(error instanceof JudgedFailure)) return error;
  const { answer } = error.verdict;
  const code = answer === 'passthrough' ? 'PROVIDER_ERROR' : answer;
  // A configuration fault names the app whose credentials were refused (never a secret): an organization's own can fix it itself.
  const appWords = code === 'PROVIDER_MISCONFIGURED' && error.app ? { message: `The provider rejected the client credentials of app "${error.app.id}"; an administrator must check that app` } : {};
  const options = { cause: error.failure, ...(error.failure.answer ? { message: error.failure.answer } : {}), ...appWords };
  if (code === 'PROVIDER_RATE_LIMITED') return new AppError(code, { ...options, headers: { 'retry-after': String(error.failure.retryAfter ?? 60) } });
  return new AppError(code, options);
}

/**
 * The log line of a configuration fault: the settings to check, never their values. An app JWT
 * refused (`providerCode` `app_jwt_rejected`, a GitHub App) names the private key and the client id.
 */
export function configFaultMessage(provider: string, providerCode?: string, app: AppRef | null = null): string {
  if (app?.owner === 'organization') {
    return `the provider rejected the client credentials of organization app ${app.id}: its owners set a working secret with PATCH /v1/apps/${app.id}`;
  }
  if (app && app.id !== provider) return `the provider rejected the client credentials of deployment app ${app.id}: check its entry in integrationOauthApps (CONFIG_FILE)`;
  const env = `INTEGRATION_OAUTH_${provider.toUpperCase()}`;
  if (providerCode === 'app_jwt_rejected') {
    return `the provider rejected this deployment's app JWT: check ${env}_PRIVATE_KEY and ${env}_CLIENT_ID (integrationOauthProvider.${provider}.privateKey, .clientId)`;
  }
  return `the provider rejected this deployment's client credentials: check ${env}_CLIENT_ID and ${env}_CLIENT_SECRET (integrationOauthProvider.${provider}.clientId, .clientSecret)`;
}
