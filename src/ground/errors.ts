/**
 * The contract's error codes (docs/contract.md §2), declared once with their HTTP status
 * and default message. Routes throw `new AppError('CODE')`; one handler renders them.
 */
export const ERROR_CODES = {
  INVALID_INPUT: { status: 400, message: 'Invalid input' },
  INVALID_OAUTH_STATE: { status: 400, message: 'Invalid OAuth State Parameter' },
  PROVIDER_NOT_CONFIGURED: { status: 400, message: 'Provider Not Configured' },
  INVALID_REDIRECT_URI: { status: 400, message: 'Invalid redirect URI' },
  OAUTH_EXCHANGE_FAILED: { status: 400, message: 'The provider refused the authorization code' },
  ACCESS_DENIED: { status: 400, message: 'Access was denied at the provider' },
  INVALID_CREDENTIALS: { status: 400, message: 'The provider rejected these credentials; check them and try again' },
  UNAUTHENTICATED: { status: 401, message: 'Authentication required' },
  FORBIDDEN: { status: 403, message: 'Forbidden' },
  CSRF_INVALID: { status: 403, message: 'CSRF check failed' },
  NOT_FOUND: { status: 404, message: 'Not found' },
  INTEGRATION_NOT_FOUND: { status: 404, message: 'Integration Not Found' },
  METHOD_NOT_ALLOWED: { status: 405, message: 'Method not allowed' },
  REQUEST_TIMEOUT: { status: 408, message: 'The request did not arrive in time' },
  CONFLICT: { status: 409, message: 'Conflict' },
  TOKEN_VALIDATION_FAILED: { status: 409, message: 'Token Validation Failed' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'Request body is larger than 1 MiB' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'Request body must be application/json' },
  HEADERS_TOO_LARGE: { status: 431, message: 'Request headers are too large' },
  RATE_LIMITED: { status: 429, message: 'Too many requests' },
  PROVIDER_RATE_LIMITED: { status: 429, message: 'The provider rate-limited this request' },
  INTERNAL: { status: 500, message: 'Internal server error' },
  PROVIDER_ERROR: { status: 502, message: 'The provider could not be reached or answered badly' },
  PROVIDER_MISCONFIGURED: { status: 502, message: "The provider rejected this deployment's client credentials; an administrator must check its configuration" },
  SERVICE_UNAVAILABLE: { status: 503, message: 'Service unavailable' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface ErrorDetail {
  path: string;
  message: string;
}

export interface AppErrorOptions {
  /** Overrides the table's message; must never carry secrets or provider bodies. */
  message?: string;
  details?: ErrorDetail[];
  /** Extra response headers, e.g. `Retry-After`. */
  headers?: Record<string, string>;
  cause?: unknown;
}

/** The one error type routes and services throw; anything else renders as 500 INTERNAL. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details?: ErrorDetail[];
  readonly headers?: Record<string, string>;

  constructor(code: ErrorCode, options: AppErrorOptions = {}) {
    super(options.message ?? ERROR_CODES[code].message, { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = ERROR_CODES[code].status;
    if (options.details) this.details = options.details;
    if (options.headers) this.headers = options.headers;
  }
}

/** The body every error response carries (docs/contract.md §2). */
export interface ErrorBody {
  success: false;
  error: string;
  code: ErrorCode;
  requestId: string;
  details?: ErrorDetail[];
}

export function errorBody(error: AppError, requestId: string): ErrorBody {
  const body: ErrorBody = { success: false, error: error.message, code: error.code, requestId };
  if (error.details) body.details = error.details;
  return body;
}
