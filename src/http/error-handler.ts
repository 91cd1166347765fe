import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { DATABASE_RETRY_AFTER_SECONDS, databaseUnavailable } from '../db/failure.ts';
import { AppError, type ErrorCode, type ErrorDetail, errorBody } from '../ground/errors.ts';
import { NAME_MESSAGE, NAME_PATTERN } from '../ground/names.ts';

/**
 * The single error handler (docs/contract.md §2): rolls back the request's transaction,
 * renders every failure as `{success:false, error, code, requestId}`, logs unknown errors
 * with their stack (throttled), and reports each 401 to `authenticationFailed`.
 */
export function errorHandler(authenticationFailed?: (request: FastifyRequest) => void) {
  const throttle = new ErrorLogThrottle();
  return async (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    await request.ctx?.rollback();
    if (clientAborted(error, request)) {
      // Not a failure of ours: the client went away before its body arrived.
      request.log.info({ code: 'CLIENT_ABORTED' }, 'the client closed the connection before its request arrived');
      return reply.code(400).send(errorBody(new AppError('INVALID_INPUT', { message: 'The request was aborted' }), request.id));
    }
    const appError = toAppError(error);
    if (appError.code === 'UNAUTHENTICATED') authenticationFailed?.(request);
    if (appError.code === 'INTERNAL') {
      // A stack the first time in a window; the same failure again (a database outage fails every request alike) only counts.
      const suppressed = throttle.admit(error);
      if (suppressed !== null) request.log.error({ err: error, ...(suppressed > 0 ? { suppressedSimilar: suppressed } : {}) }, 'unhandled error');
    } else if (appError.cause !== undefined && appError.code === 'SERVICE_UNAVAILABLE' && databaseUnavailable(appError.cause)) {
      // An outage fails every request alike: one line per kind of failure per window, no stack, never the query's parameters.
      const suppressed = throttle.admit(appError.cause);
      if (suppressed !== null) request.log.warn({ code: appError.code, reason: databaseReason(appError.cause), ...(suppressed > 0 ? { suppressedSimilar: suppressed } : {}) }, appError.message);
    } else if (appError.status >= 500) {
      // Provider failures and shutdown are expected conditions, not bugs: one line, no stack.
      request.log.warn({ code: appError.code, cause: causeName(appError.cause) }, appError.message);
    }
    if (appError.headers) reply.headers(appError.headers);
    return reply.code(appError.status).type('application/json; charset=utf-8').send(errorBody(appError, request.id));
  };
}

/**
 * Lets one log line with a stack through per kind of unhandled error (name and message)
 * per window; the rest are counted and reported on the next line let through. Each
 * request still has its own "request finish" line with the status.
 */
export class ErrorLogThrottle {
  private readonly seen = new Map<string, { until: number; suppressed: number }>();
  private readonly windowMs: number;

  constructor(windowMs = 10_000) {
    this.windowMs = windowMs;
  }

  /** Null to stay silent; otherwise the number of similar errors suppressed since the last line. */
  admit(error: unknown, now = Date.now()): number | null {
    // A failed query's message carries its statement and parameters; its cause says what failed.
    const root = error instanceof Error && error.cause instanceof Error && error.message.startsWith('Failed query') ? error.cause : error;
    const key = root instanceof Error ? `${root.name}:${(root.message.split('\n')[0] ?? '').slice(0, 200)}` : String(root).slice(0, 200);
    const entry = this.seen.get(key);
    if (entry && now < entry.until) {
      entry.suppressed++;
      return null;
    }
    if (this.seen.size >= 1000) this.seen.clear();
    this.seen.set(key, { until: now + this.windowMs, suppressed: 0 });
    return entry?.suppressed ?? 0;
  }
}

/** A body that stopped arriving because the client closed the connection (Node's `aborted`). */
function clientAborted(error: FastifyError, request: FastifyRequest): boolean {
  return error.code === 'ECONNRESET' && (request.raw.destroyed || request.raw.readableAborted);
}

function causeName(cause: unknown): string | undefined {
  return cause instanceof Error ? cause.name : undefined;
}

const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_BODY_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_ERR_CTP_INVALID_JSON_BODY: 'INVALID_INPUT',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'INVALID_INPUT',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'INVALID_INPUT',
  FST_ERR_VALIDATION: 'INVALID_INPUT',
  FST_ERR_BAD_URL: 'NOT_FOUND',
  // A QUERY request must say what its body is (RFC 10008).
  FST_ERR_ROUTE_MISSING_CONTENT_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
};

/** Maps anything thrown to the contract's error table; unknown errors become INTERNAL. */
function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  if (databaseUnavailable(error)) return databaseUnavailableError(error);
  const fastifyError = error as FastifyError & { validationContext?: string };
  if (Array.isArray(fastifyError?.validation)) {
    return new AppError('INVALID_INPUT', { details: validationDetails(fastifyError.validation, fastifyError.validationContext) });
  }
  const mapped = typeof fastifyError?.code === 'string' ? FASTIFY_CODES[fastifyError.code] : undefined;
  if (mapped === 'INVALID_INPUT') {
    const message = fastifyError.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ? 'Request body is empty' : 'Request body is not valid JSON';
    return new AppError('INVALID_INPUT', { message, details: [{ path: 'body', message }] });
  }
  if (mapped) return new AppError(mapped);
  if (fastifyError?.statusCode === 429) return new AppError('RATE_LIMITED');
  // Any other refusal of a request by Fastify itself is the client's error, never a 500 with a stack.
  const byStatus = typeof fastifyError?.code === 'string' && fastifyError.code.startsWith('FST_ERR_') ? STATUS_CODES[fastifyError.statusCode ?? 0] : undefined;
  if (byStatus) return new AppError(byStatus);
  return new AppError('INTERNAL', { cause: error });
}

/**
 * The answer while the database is unreachable, restarting, out of connection slots or closed by
 * shutdown (docs/contract.md §2): 503 with `Retry-After` (decision 250). The request's
 * transaction was rolled back (or never opened): nothing half-done.
 */
export function databaseUnavailableError(cause: unknown): AppError {
  return new AppError('SERVICE_UNAVAILABLE', {
    message: 'The database is unavailable; retry shortly',
    headers: { 'retry-after': String(DATABASE_RETRY_AFTER_SECONDS) },
    cause,
  });
}

/** The innermost message of a database failure, first line, without a query's text or parameters. */
function databaseReason(error: unknown): string {
  let root = error;
  while (root instanceof Error && root.cause instanceof Error) root = root.cause;
  const code = (root as { code?: unknown })?.code;
  const message = root instanceof Error && !root.message.startsWith('Failed query') ? (root.message.split('\n')[0] ?? '').slice(0, 200) : 'query failed';
  return typeof code === 'string' ? `${code}: ${message}` : message;
}

/** The contract's code for a client-error status Fastify raises with a code of its own. */
const STATUS_CODES: Partial<Record<number, ErrorCode>> = {
  400: 'INVALID_INPUT',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
};

interface AjvIssue {
  instancePath?: string;
  keyword?: string;
  message?: string;
  params?: Record<string, unknown>;
}

function validationDetails(issues: AjvIssue[], context = 'body'): ErrorDetail[] {
  return issues.map((issue) => {
    let path = `${context}${(issue.instancePath ?? '').replaceAll('/', '.')}`;
    let message = issue.message ?? 'is invalid';
    if (issue.keyword === 'required' && typeof issue.params?.missingProperty === 'string') {
      path = `${path}.${issue.params.missingProperty}`;
      message = 'is required';
    } else if (issue.keyword === 'additionalProperties' && typeof issue.params?.additionalProperty === 'string') {
      path = `${path}.${issue.params.additionalProperty}`;
      message = 'is not an accepted field';
    } else if (issue.keyword === 'pattern' && issue.params?.pattern === NAME_PATTERN) {
      message = NAME_MESSAGE;
    }
    return { path, message };
  });
}
