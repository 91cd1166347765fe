import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { newId } from '../lib/ids.ts';
import { AppError, type ErrorCode, errorBody } from '../ground/errors.ts';

/** Node's parser and timeout errors, as the contract's codes (docs/contract.md §2, "Errors of the HTTP layer"). */
function appErrorFor(code: string | undefined): AppError {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return new AppError('REQUEST_TIMEOUT');
  if (code === 'HPE_HEADER_OVERFLOW') return new AppError('HEADERS_TOO_LARGE');
  return new AppError('INVALID_INPUT', { message: 'Malformed HTTP request', details: [{ path: 'request', message: 'is not valid HTTP/1.1' }] });
}

const REASONS: Partial<Record<ErrorCode, string>> = { REQUEST_TIMEOUT: 'Request Timeout', HEADERS_TOO_LARGE: 'Request Header Fields Too Large' };

/**
 * Fastify's `clientErrorHandler`: what Node's HTTP parser refuses (a NUL in a header, an
 * oversized header) and requests whose headers or body did not arrive within
 * REQUEST_TIMEOUT never reach a route. They get the contract's error shape with a fresh
 * request id where the connection still allows an answer (no part of a response written
 * yet), and the connection is closed.
 */
export function clientErrorHandler(logger: FastifyBaseLogger) {
  return (error: NodeJS.ErrnoException, socket: Socket): void => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const appError = appErrorFor(error.code);
    const requestId = newId();
    logger.info({ requestId, code: appError.code, parser: error.code }, 'refused at the HTTP layer');
    // An answer is written only where no response to this request has started.
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (socket.writable && !inFlight?.headersSent) {
      const body = JSON.stringify(errorBody(appError, requestId));
      socket.write(
        `HTTP/1.1 ${appError.status} ${REASONS[appError.code] ?? 'Bad Request'}\r\n` +
          `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
          `X-Request-ID: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy();
  };
}
