import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifySchema, RouteOptions } from 'fastify';
import { newId as ulid } from '../lib/ids.ts';
import type { Db } from '../db/client.ts';
import { RequestContext } from './context.ts';
import { AppError, ERROR_CODES, type ErrorCode, type ErrorDetail, errorBody } from './errors.ts';
import { pathOnly } from './logging.ts';
import { ErrorResponse } from './schemas.ts';

/**
 * Route authentication classes (CONTRACT.md §4): authenticated = base + 6–9,
 * public = base + 9, unauthenticated = base only.
 */
export type RouteClass = 'authenticated' | 'public' | 'unauthenticated';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Every route declares its class; registration fails without one. */
    auth?: RouteClass;
    /** Responses (errors included) carry `Cache-Control: no-store` and `Referrer-Policy: no-referrer`. */
    noStore?: boolean;
  }
  interface FastifyRequest {
    ctx: RequestContext;
  }
}

type Step = (request: FastifyRequest, reply: FastifyReply) => Promise<void> | void;

/**
 * The authentication-related steps, filled by the identity feature. The defaults
 * make an authenticated route refuse every request with 401.
 */
export interface PipelineSlots {
  impersonation: Step;
  authentication: Step;
  systemAdmin: Step;
  csrf: Step;
  rateLimit: Step;
  /** Called for every 401 answer (the error handler's), to count failed authentications. */
  authenticationFailed?: (request: FastifyRequest) => void;
}

export const defaultSlots: PipelineSlots = {
  impersonation: () => {},
  authentication: () => {
    throw new AppError('UNAUTHENTICATED');
  },
  systemAdmin: () => {},
  csrf: () => {},
  rateLimit: () => {},
};

const PRINTABLE_ID = /^[\x20-\x7e]{1,128}$/;

/** `X-Request-ID` when it is 1–128 printable ASCII characters, else a new ULID. */
export function requestIdFrom(header: string | string[] | undefined): string {
  return typeof header === 'string' && PRINTABLE_ID.test(header) ? header : ulid();
}

const ERROR_STATUSES = [400, 401, 403, 404, 409, 413, 415, 429, 500, 502, 503] as const;

/**
 * Installs the request pipeline on a Fastify instance, before any route is added:
 * the base steps, the per-class steps, the transaction wrapper around handlers,
 * the single error handler and the 404 handler.
 */
export function installPipeline(app: FastifyInstance, database: Db, slots: PipelineSlots, corsOrigins: readonly string[] = []): void {
  const cors = new Set(corsOrigins);
  let closing = false;
  // Requests that arrive while shutting down get the contract's error shape, with a request id.
  app.addHook('preClose', () => {
    closing = true;
  });
  app.decorateRequest('ctx', null as unknown as RequestContext);

  app.addHook('onRoute', (route) => {
    const routeClass = route.config?.auth;
    if (!routeClass) throw new Error(`route ${route.method} ${route.url} declares no auth class (config.auth)`);
    decorateSchema(route, routeClass);
    wrapHandler(route);
  });

  app.addHook('onRequest', async (request, reply) => {
    const trace: string[] = ['request-id'];
    reply.header('x-request-id', request.id);
    trace.push('logging');
    request.log.info({ method: request.method, url: pathOnly(request.url), route: request.routeOptions.url }, 'request start');
    trace.push('recovery');
    reply.type('application/json; charset=utf-8');
    if (request.routeOptions.config.noStore) {
      reply.header('cache-control', 'no-store');
      reply.header('referrer-policy', 'no-referrer');
    }
    // CORS: exact configured origins only, never reflected.
    if (cors.size > 0) {
      reply.header('vary', 'Origin');
      const origin = request.headers.origin;
      if (origin !== undefined && cors.has(origin)) {
        reply.header('access-control-allow-origin', origin);
        reply.header('access-control-allow-credentials', 'true');
      }
    }
    trace.push('mime');
    request.ctx = new RequestContext(request.id, request.log, database);
    request.ctx.trace.push(...trace, 'transaction');
    if (closing) {
      reply.header('connection', 'close');
      throw new AppError('SERVICE_UNAVAILABLE', { message: 'The service is shutting down', headers: { 'retry-after': '1' } });
    }

    const routeClass: RouteClass = request.routeOptions.config.auth ?? 'unauthenticated';
    if (routeClass === 'unauthenticated') return;
    if (routeClass === 'authenticated') {
      request.ctx.trace.push('impersonation');
      await slots.impersonation(request, reply);
      request.ctx.trace.push('authentication');
      await slots.authentication(request, reply);
      request.ctx.trace.push('system-admin');
      await slots.systemAdmin(request, reply);
    }
    request.ctx.trace.push('csrf');
    await slots.csrf(request, reply);
    request.ctx.trace.push('rate-limit');
    await slots.rateLimit(request, reply);
  });

  app.addHook('onResponse', async (request, reply) => {
    // Safety net: a request that ended without reaching the handler's commit rolls back.
    if (request.ctx?.inTransaction) await request.ctx.rollback();
    request.log.info(
      {
        method: request.method,
        url: pathOnly(request.url),
        route: request.routeOptions.url,
        status: reply.statusCode,
        durationMs: Math.round(reply.elapsedTime * 100) / 100,
      },
      'request finish',
    );
  });

  const throttle = new ErrorLogThrottle();
  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    await request.ctx?.rollback();
    if (clientAborted(error, request)) {
      // Not a failure of ours: the client went away before its body arrived.
      request.log.info({ code: 'CLIENT_ABORTED' }, 'the client closed the connection before its request arrived');
      return reply.code(400).send(errorBody(new AppError('INVALID_INPUT', { message: 'The request was aborted' }), request.id));
    }
    const appError = toAppError(error);
    if (appError.code === 'UNAUTHENTICATED') slots.authenticationFailed?.(request);
    if (appError.code === 'INTERNAL') {
      // A stack the first time in a window; the same failure again (a database outage fails every request alike) only counts.
      const suppressed = throttle.admit(error);
      if (suppressed !== null) request.log.error({ err: error, ...(suppressed > 0 ? { suppressedSimilar: suppressed } : {}) }, 'unhandled error');
    } else if (appError.status >= 500) {
      // Provider failures and shutdown are expected conditions, not bugs: one line, no stack.
      request.log.warn({ code: appError.code, cause: causeName(appError.cause) }, appError.message);
    }
    if (appError.headers) reply.headers(appError.headers);
    return reply.code(appError.status).type('application/json; charset=utf-8').send(errorBody(appError, request.id));
  });

  app.options('*', { config: { auth: 'unauthenticated' }, schema: { hide: true } }, async (request, reply) => {
    reply.code(204);
    if (request.headers.origin !== undefined && cors.has(request.headers.origin)) {
      reply.header('access-control-allow-methods', 'GET, HEAD, POST, PUT, PATCH, DELETE');
      reply.header('access-control-allow-headers', 'Authorization, Content-Type, X-Csrf-Token, X-Organization-ID, X-Request-ID');
      reply.header('access-control-max-age', '600');
    }
    return '';
  });

  app.setNotFoundHandler(async (request) => {
    throw new AppError('NOT_FOUND', { message: `No route for ${request.method} ${pathOnly(request.url)}` });
  });
}

/**
 * Runs the handler, then commits the request transaction and only then lets
 * Fastify send the payload: a failed commit becomes a 500, never a 200.
 */
function wrapHandler(route: RouteOptions): void {
  const handler = route.handler;
  route.handler = async function wrapped(this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
    request.ctx.trace.push('handler');
    const payload = await handler.call(this, request, reply);
    if (reply.sent) throw new Error(`handler of ${route.url} sent the reply itself; return the payload instead`);
    await request.ctx.commit();
    return payload;
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

function decorateSchema(route: RouteOptions, routeClass: RouteClass): void {
  const schema = (route.schema ??= {}) as FastifySchema & Record<string, unknown>;
  const responses = (schema.response ??= {}) as Record<string, unknown>;
  for (const status of ERROR_STATUSES) {
    if (!(status in responses)) {
      responses[status] = { ...ErrorResponse, description: describeStatus(status) };
    }
  }
  if (routeClass === 'authenticated' && !schema.security) {
    schema.security = [{ bearerAuth: [] }, { sessionCookie: [] }];
  } else if (!schema.security) {
    schema.security = [];
  }
}

function describeStatus(status: number): string {
  const codes = Object.entries(ERROR_CODES)
    .filter(([, entry]) => entry.status === status)
    .map(([code]) => code);
  return codes.join(', ');
}

const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_BODY_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_ERR_CTP_INVALID_JSON_BODY: 'INVALID_INPUT',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'INVALID_INPUT',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'INVALID_INPUT',
  FST_ERR_VALIDATION: 'INVALID_INPUT',
  FST_ERR_BAD_URL: 'NOT_FOUND',
};

/** Maps anything thrown to the contract's error table; unknown errors become INTERNAL. */
export function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
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
  return new AppError('INTERNAL', { cause: error });
}

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
    }
    return { path, message };
  });
}
