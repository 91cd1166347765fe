// @ts-check
/** @import { components } from './generated/openapi.js' */

/** @typedef {components['schemas']['Error']['code']} ErrorCode A code of Tessera's error table (docs/contract.md §2). */
/**
 * @typedef {ErrorCode | 'NETWORK_ERROR' | 'UNEXPECTED_RESPONSE' | 'GRAPHQL_ERROR'} TesseraErrorCode
 * Tessera's codes, and three of the client's own: `NETWORK_ERROR` (Tessera could not be reached),
 * `UNEXPECTED_RESPONSE` (an answer that is not Tessera's, e.g. a proxy's HTML page) and
 * `GRAPHQL_ERROR` (a GraphQL error without a code).
 */
/** @typedef {{ path: string, message: string }} ErrorDetail Which input failed, and why. */

/** A failed call: Tessera's error (docs/contract.md §2), or Tessera not reached or not answering as itself. */
export class TesseraError extends Error {
  /**
   * @param {{ status: number, code: TesseraErrorCode, message: string, requestId?: string | undefined, details?: ErrorDetail[] | undefined, retryAfter?: number | undefined, cause?: unknown }} init
   */
  constructor(init) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'TesseraError';
    /** The HTTP status; 0 when Tessera was not reached. */
    this.status = init.status;
    /** What failed: one of docs/contract.md §2's codes, or one of the client's own. */
    this.code = init.code;
    /** The request's id (X-Request-ID): quote it when reporting a problem. */
    this.requestId = init.requestId;
    /** For input errors, which field failed and why; otherwise empty. */
    this.details = init.details ?? [];
    /** Seconds to wait before retrying, from `Retry-After` (429, 503). */
    this.retryAfter = init.retryAfter;
  }
}

/**
 * Whether a parsed body is Tessera's error shape (docs/contract.md §2).
 * @param {unknown} body
 * @returns {body is components['schemas']['Error']}
 */
export function isErrorBody(body) {
  if (typeof body !== 'object' || body === null) return false;
  const { success, code, error, requestId } = /** @type {Record<string, unknown>} */ (body);
  return success === false && typeof code === 'string' && typeof error === 'string' && typeof requestId === 'string';
}

/** @param {Response} response */
function retryAfterOf(response) {
  const value = response.headers.get('retry-after');
  if (value === null || !/^\d+$/.test(value.trim())) return undefined;
  return Number(value);
}

/**
 * The error a failed answer means.
 * @param {Response} response
 * @param {unknown} body the answer's body, parsed as JSON where it was JSON
 * @returns {TesseraError}
 */
export function errorFromResponse(response, body) {
  const requestId = response.headers.get('x-request-id') ?? undefined;
  if (isErrorBody(body)) {
    return new TesseraError({ status: response.status, code: body.code, message: body.error, requestId: body.requestId, details: body.details, retryAfter: retryAfterOf(response) });
  }
  return new TesseraError({
    status: response.status,
    code: 'UNEXPECTED_RESPONSE',
    message: `Tessera answered HTTP ${response.status} without its error shape (is the base URL Tessera's?)`,
    requestId,
    retryAfter: retryAfterOf(response),
  });
}

/**
 * The error for a request that never got an answer (DNS, refused connection, TLS, abort).
 * @param {string} baseUrl
 * @param {unknown} cause
 */
export function networkError(baseUrl, cause) {
  const reason = /** @type {{ cause?: { code?: unknown, message?: unknown }, message?: unknown }} */ (cause ?? {});
  const why = reason.cause?.code ?? reason.cause?.message ?? reason.message ?? 'no answer';
  return new TesseraError({ status: 0, code: 'NETWORK_ERROR', message: `Could not reach Tessera at ${baseUrl}: ${String(why)}`, cause });
}
