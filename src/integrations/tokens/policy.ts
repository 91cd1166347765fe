/**
 * The rules a token lives by, each written once: when to refresh, and what a provider
 * failure means at each stage — the status transition it causes and the answer it becomes.
 * The proxy, token reads, refresh, status and background validation all read them here.
 */
import { AppError, type ErrorCode } from '../../http/errors.ts';
import type { IntegrationRow } from '../integrations.ts';
import { ProviderError, type ProviderFailureKind } from '../providers/types.ts';
import type { Transition } from '../status.ts';

/** Token reads refresh first when the token expires within this window (CONTRACT.md §5). */
export const REFRESH_AHEAD_MS = 5 * 60 * 1000;

/** Whether `at` (an expiry) falls within `ms` from now; a token with no known expiry never does. */
export function expiresWithin(at: Date | null, ms: number, now = Date.now()): boolean {
  return at !== null && at.getTime() - now < ms;
}

/**
 * Whether a token should be refreshed now: it has a refresh token, and the access token
 * expires within `accessWithinMs` (default the read-ahead window), or the refresh token
 * itself expires within `refreshTokenWithinMs` (background passes keep it from lapsing).
 */
export function refreshDue(
  row: Pick<IntegrationRow, 'hasRefreshToken' | 'tokenExpiresAt' | 'refreshTokenExpiresAt'>,
  options: { now?: number; accessWithinMs?: number; refreshTokenWithinMs?: number } = {},
): boolean {
  if (!row.hasRefreshToken) return false;
  return (
    expiresWithin(row.tokenExpiresAt, options.accessWithinMs ?? REFRESH_AHEAD_MS, options.now) ||
    (options.refreshTokenWithinMs !== undefined && expiresWithin(row.refreshTokenExpiresAt, options.refreshTokenWithinMs, options.now))
  );
}

/**
 * Where a provider call failed:
 * - `exchange`: the code exchange of a connect flow;
 * - `connect`: validating the token the provider has just issued (nothing is stored yet);
 * - `refresh`: the token endpoint refusing or failing a refresh;
 * - `validate`: checking a stored token (status, background passes, after a refresh);
 * - `call`: a proxied API call with a stored token.
 */
export type FailureStage = 'exchange' | 'connect' | 'refresh' | 'validate' | 'call';

/** Our words for a status the provider caused (never the provider's text). */
export const REASONS = {
  unauthorized: 'token unauthorized',
  refreshRejected: 'refresh token rejected',
  forbidden: 'API access forbidden',
  unreachable: 'provider unreachable during validation',
} as const;

/**
 * What a failure does: the status transition it causes (persisted on its own, even when
 * the answer is an error), and the answer — an error code, or `passthrough` where the
 * request goes on (a proxied 403 goes back to the caller as the provider sent it; a token
 * that validated as forbidden is still handed out).
 */
export interface FailureVerdict {
  transition: Transition | null;
  answer: ErrorCode | 'passthrough';
}

const invalid = (lastError: string): Transition => ({ status: 'invalid', lastError, tokenValid: false });
const UNCHANGED = null;

/**
 * The failure policy, kind × stage. A rejection (`revoked`) reaches this table only after the
 * 401 rules had their chance (re-read the stored token, refresh, retry once) and after an
 * `invalid_grant` was re-read (another refresh may have won). A rate limit never changes a
 * status. Decisions 28, 36–38, 40.
 */
export const FAILURE_POLICY: Record<FailureStage, Record<ProviderFailureKind, FailureVerdict>> = {
  exchange: {
    revoked: { transition: UNCHANGED, answer: 'OAUTH_EXCHANGE_FAILED' },
    forbidden: { transition: UNCHANGED, answer: 'TOKEN_VALIDATION_FAILED' },
    rateLimited: { transition: UNCHANGED, answer: 'PROVIDER_RATE_LIMITED' },
    transient: { transition: UNCHANGED, answer: 'PROVIDER_ERROR' },
  },
  connect: {
    revoked: { transition: UNCHANGED, answer: 'TOKEN_VALIDATION_FAILED' },
    forbidden: { transition: UNCHANGED, answer: 'TOKEN_VALIDATION_FAILED' },
    rateLimited: { transition: UNCHANGED, answer: 'PROVIDER_RATE_LIMITED' },
    transient: { transition: UNCHANGED, answer: 'PROVIDER_ERROR' },
  },
  refresh: {
    revoked: { transition: invalid(REASONS.refreshRejected), answer: 'TOKEN_VALIDATION_FAILED' },
    forbidden: { transition: UNCHANGED, answer: 'TOKEN_VALIDATION_FAILED' },
    rateLimited: { transition: UNCHANGED, answer: 'PROVIDER_RATE_LIMITED' },
    transient: { transition: UNCHANGED, answer: 'PROVIDER_ERROR' },
  },
  validate: {
    revoked: { transition: invalid(REASONS.unauthorized), answer: 'TOKEN_VALIDATION_FAILED' },
    // A forbidden validation is a warning, not a failed token: the token is still handed out.
    forbidden: { transition: { status: 'warning', lastError: REASONS.forbidden, tokenValid: true }, answer: 'passthrough' },
    rateLimited: { transition: UNCHANGED, answer: 'PROVIDER_RATE_LIMITED' },
    transient: { transition: { status: 'warning', lastError: REASONS.unreachable }, answer: 'PROVIDER_ERROR' },
  },
  call: {
    revoked: { transition: invalid(REASONS.unauthorized), answer: 'TOKEN_VALIDATION_FAILED' },
    forbidden: { transition: { status: 'warning', lastError: REASONS.forbidden, tokenValid: true }, answer: 'passthrough' },
    rateLimited: { transition: UNCHANGED, answer: 'PROVIDER_RATE_LIMITED' },
    transient: { transition: UNCHANGED, answer: 'PROVIDER_ERROR' },
  },
};

/** The verdict for anything a provider call threw: a non-ProviderError counts as `transient`. */
export function verdictFor(error: unknown, stage: FailureStage): FailureVerdict & { kind: ProviderFailureKind } {
  const kind = error instanceof ProviderError ? error.kind : 'transient';
  return { ...FAILURE_POLICY[stage][kind], kind };
}

/** The error to answer with for a failure at `stage` (with `Retry-After` for rate limits), keeping the failure as its cause. */
export function failureAnswer(error: unknown, stage: FailureStage): AppError {
  const { answer } = verdictFor(error, stage);
  const code = answer === 'passthrough' ? 'PROVIDER_ERROR' : answer;
  if (code === 'PROVIDER_RATE_LIMITED') {
    const retryAfter = error instanceof ProviderError ? (error.retryAfter ?? 60) : 60;
    return new AppError(code, { headers: { 'retry-after': String(retryAfter) }, cause: error });
  }
  return new AppError(code, { cause: error });
}
