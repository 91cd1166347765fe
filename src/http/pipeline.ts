import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Db } from '../db/client.ts';
import { newId as ulid } from '../lib/ids.ts';
import { RequestContext } from './context.ts';
import { errorHandler } from './error-handler.ts';
import { AppError } from '../ground/errors.ts';
import { pathOnly } from './logging.ts';
import { documentRouteErrors, headerCredentialsOnly } from './route-errors.ts';

/**
 * Route authentication classes (docs/contract.md §4): authenticated = base + 6–9,
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

/** A pipeline step: it runs in `onRequest`, before the body is read; throwing ends the request there. */
export type Step = (request: FastifyRequest, reply: FastifyReply) => Promise<void> | void;

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

/** The contract's step names, in the contract's order. */
export const STEP_NAMES = ['request-id', 'logging', 'recovery', 'mime', 'transaction', 'impersonation', 'authentication', 'system-admin', 'csrf', 'rate-limit'] as const;
export type StepName = (typeof STEP_NAMES)[number];

interface PipelineStep {
  name: StepName;
  run: Step;
  /** The route classes that run it. */
  classes: readonly RouteClass[];
}

const EVERY: readonly RouteClass[] = ['authenticated', 'public', 'unauthenticated'];
const AUTHENTICATED: readonly RouteClass[] = ['authenticated'];
const WITH_ADDITIONAL: readonly RouteClass[] = ['authenticated', 'public'];

const PRINTABLE_ID = /^[\x20-\x7e]{1,128}$/;

/** `X-Request-ID` when it is 1–128 printable ASCII characters, else a new ULID. */
export function requestIdFrom(header: string | string[] | undefined): string {
  return typeof header === 'string' && PRINTABLE_ID.test(header) ? header : ulid();
}

/**
 * The pipeline's steps in the contract's order (docs/contract.md §4), each with the route
 * classes that run it: the one list `installPipeline`'s runner walks. Unwinding runs in
 * reverse: the handler's wrapper commits the transaction, the error handler rolls it back
 * and answers, `onResponse` logs the finish.
 */
function pipelineSteps(database: Db, slots: PipelineSlots, corsOrigins: ReadonlySet<string>, openCors: OpenCors, closing: () => boolean): PipelineStep[] {
  return [
    { name: 'request-id', run: requestId, classes: EVERY },
    { name: 'logging', run: logging, classes: EVERY },
    { name: 'recovery', run: recovery(corsOrigins, openCors), classes: EVERY },
    { name: 'mime', run: mime, classes: EVERY },
    { name: 'transaction', run: transaction(database, closing), classes: EVERY },
    { name: 'impersonation', run: slots.impersonation, classes: AUTHENTICATED },
    { name: 'authentication', run: headerCredentials(slots.authentication), classes: AUTHENTICATED },
    { name: 'system-admin', run: slots.systemAdmin, classes: AUTHENTICATED },
    { name: 'csrf', run: slots.csrf, classes: WITH_ADDITIONAL },
    { name: 'rate-limit', run: slots.rateLimit, classes: WITH_ADDITIONAL },
  ];
}

/** Step 7 as the route's credentials demand: where only header credentials are taken (`config.credentials`), a cookie session is refused. */
function headerCredentials(authentication: Step): Step {
  const refuseCookie = (request: FastifyRequest) => {
    if (request.ctx.principal?.viaCookie) throw new AppError('UNAUTHENTICATED', { message: 'This route takes credentials in the Authorization header only' });
  };
  return (request, reply) => {
    const running = authentication(request, reply);
    // Other routes pay nothing for it: not even a tick.
    if (request.routeOptions.config.credentials !== 'header') return running;
    return running ? running.then(() => refuseCookie(request)) : refuseCookie(request);
  };
}

/** Step 1: the request's id (chosen by `requestIdFrom`) goes back on every answer. */
function requestId(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id);
}

/** Step 2: the request's first log line; every later line of it carries its id, and `onResponse` writes the last. */
function logging(request: FastifyRequest): void {
  request.log.info({ method: request.method, url: pathOnly(request.url), route: request.routeOptions.url }, 'request start');
}

/**
 * Step 3: from here a failure is answered by the error handler (the recovery itself,
 * installed once: Fastify has no around-middleware), so the headers every answer of the
 * route must carry, errors included, are set now: no-store, and CORS for exact
 * configured origins only (never reflected), so a browser can read the error too.
 */
function recovery(corsOrigins: ReadonlySet<string>, openCors: OpenCors): Step {
  return (request, reply) => {
    if (request.routeOptions.config.noStore) {
      reply.header('cache-control', 'no-store');
      reply.header('referrer-policy', 'no-referrer');
    }
    if (openCors(pathOnly(request.url))) {
      // Any origin, never with credentials: these routes read no cookie (docs/contract.md §9a).
      reply.header('access-control-allow-origin', '*');
      reply.header('access-control-expose-headers', 'WWW-Authenticate, X-Request-ID');
    } else if (corsOrigins.size > 0) {
      reply.header('vary', 'Origin');
      const origin = request.headers.origin;
      if (origin !== undefined && corsOrigins.has(origin)) {
        reply.header('access-control-allow-origin', origin);
        reply.header('access-control-allow-credentials', 'true');
      }
    }
  };
}

/** Step 4: answers are JSON unless the route says otherwise. Request bodies are read after the steps (415 there). */
function mime(_request: FastifyRequest, reply: FastifyReply): void {
  reply.type('application/json; charset=utf-8');
}

/**
 * Step 5: the request may open its transaction from here (lazily, on first `ctx.tx()`);
 * once shutdown has begun no new one starts and the request gets 503.
 */
function transaction(database: Db, closing: () => boolean): Step {
  return (request, reply) => {
    if (closing()) {
      reply.header('connection', 'close');
      throw new AppError('SERVICE_UNAVAILABLE', { message: 'The service is shutting down', headers: { 'retry-after': '1' } });
    }
    request.ctx.useDatabase(database);
  };
}

/** Runs the steps in order, recording each one's name as it starts it: a step that throws is the trace's last. */
async function runSteps(steps: readonly PipelineStep[], request: FastifyRequest, reply: FastifyReply): Promise<void> {
  for (const step of steps) {
    request.ctx.trace.push(step.name);
    const running = step.run(request, reply);
    // Most steps are synchronous: awaiting only promises spares the hot path a tick per step.
    if (running) await running;
  }
}

/**
 * Installs the request pipeline on a Fastify instance, before any route is added:
 * the steps (one runner, in `onRequest`), the transaction wrapper around handlers,
 * the single error handler and the 404 handler.
 */
/** Paths that answer CORS for any origin, without credentials (the MCP sign-in endpoints, docs/contract.md §9a); the feature that owns them says which. */
export type OpenCors = (path: string) => boolean;

export function installPipeline(app: FastifyInstance, database: Db, slots: PipelineSlots, corsOrigins: readonly string[] = [], openCors: OpenCors = () => false): void {
  const cors = new Set(corsOrigins);
  let closing = false;
  // Requests that arrive while shutting down get the contract's error shape, with a request id.
  app.addHook('preClose', () => {
    closing = true;
  });
  app.decorateRequest('ctx', null as unknown as RequestContext);

  const steps = pipelineSteps(database, slots, cors, openCors, () => closing);
  const stepsOf = Object.fromEntries(EVERY.map((routeClass) => [routeClass, steps.filter((step) => step.classes.includes(routeClass))])) as Record<RouteClass, PipelineStep[]>;

  app.addHook('onRoute', (route) => {
    const routeClass = route.config?.auth;
    if (!routeClass) throw new Error(`route ${route.method} ${route.url} declares no auth class (config.auth)`);
    // OpenAPI lists exactly what a route can answer: a route must say which codes are its own ([] for none).
    if (!route.config?.errors) throw new Error(`route ${route.method} ${route.url} declares no error codes (config.errors; [] when it adds none)`);
    if (headerCredentialsOnly(route)) route.config = { ...route.config, credentials: 'header' };
    documentRouteErrors(route, routeClass);
    wrapHandler(route);
  });

  app.addHook('onRequest', async (request, reply) => {
    request.ctx = new RequestContext(request.id, request.log);
    await runSteps(stepsOf[request.routeOptions.config.auth ?? 'unauthenticated'], request, reply);
    // No route for this method and path: answered before Fastify reads a body it would judge by the method's own
    // rules (a QUERY without Content-Type, a PROPFIND with XML), so an unknown method is a 404 like an unknown path.
    if (request.is404) throw notFound(request);
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

  app.setErrorHandler(errorHandler(slots.authenticationFailed));

  app.options('*', { config: { auth: 'unauthenticated', errors: [] }, schema: { hide: true } }, async (request, reply) => {
    reply.code(204);
    if (openCors(pathOnly(request.url))) {
      reply.header('access-control-allow-methods', 'GET, POST, OPTIONS');
      reply.header('access-control-allow-headers', 'Authorization, Content-Type, MCP-Protocol-Version, Mcp-Session-Id, X-Request-ID');
      reply.header('access-control-max-age', '600');
    } else if (request.headers.origin !== undefined && cors.has(request.headers.origin)) {
      reply.header('access-control-allow-methods', 'GET, HEAD, POST, PUT, PATCH, DELETE');
      reply.header('access-control-allow-headers', 'Authorization, Content-Type, X-Csrf-Token, X-Organization-ID, X-Request-ID');
      reply.header('access-control-max-age', '600');
    }
    return '';
  });

  app.setNotFoundHandler(async (request) => {
    throw notFound(request);
  });
}

function notFound(request: FastifyRequest): AppError {
  return new AppError('NOT_FOUND', { message: `No route for ${request.method} ${pathOnly(request.url)}` });
}

/**
 * Runs the handler, then commits the request transaction and only then lets
 * Fastify send the payload: a failed commit becomes a 500 (503 when the database is unreachable), never a 200.
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
