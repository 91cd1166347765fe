import { AppError } from '../http/errors.ts';
import { ProviderError } from './providers/types.ts';

/**
 * The contract's answer to a failed provider call. `stage` says what was attempted:
 * a refused code exchange is 400 OAUTH_EXCHANGE_FAILED, a rejected token is 409
 * TOKEN_VALIDATION_FAILED; rate limits are 429 with Retry-After; the rest 502.
 */
export function providerFailure(error: unknown, stage: 'exchange' | 'validate'): AppError {
  if (!(error instanceof ProviderError)) return new AppError('PROVIDER_ERROR', { cause: error });
  switch (error.kind) {
    case 'rateLimited':
      return new AppError('PROVIDER_RATE_LIMITED', { headers: { 'retry-after': String(error.retryAfter ?? 60) }, cause: error });
    case 'transient':
      return new AppError('PROVIDER_ERROR', { cause: error });
    case 'revoked':
    case 'forbidden':
      return stage === 'exchange' && error.kind === 'revoked'
        ? new AppError('OAUTH_EXCHANGE_FAILED', { cause: error })
        : new AppError('TOKEN_VALIDATION_FAILED', { cause: error });
  }
}
