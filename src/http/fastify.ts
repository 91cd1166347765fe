import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyReply, LogController } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config/load.ts';
import { clientErrorHandler } from './client-errors.ts';
import { AppError, errorBody } from '../ground/errors.ts';
import { unacceptableJson, utf8Body } from './json-limits.ts';
import { requestScope } from './logging.ts';
import { requestIdFrom } from './pipeline.ts';
import type { TypedFastify } from './typed.ts';
import { installQueryShapes } from './query-shapes.ts';
import { installValidation } from './validation.ts';
import { lazySerializers, recordCompiles, SchemaCompiles } from './lazy-compilers.ts';
import { routeTracer } from '../telemetry/tracing.ts';

/** Bodies over 1 MiB get 413 (docs/contract.md §2). */
const BODY_LIMIT = 1024 * 1024;

/**
 * The Fastify instance with the HTTP layer's rules: request ids, timeouts, errors raised
 * before routing in the contract's shape, the validators, and JSON as the only body type.
 */
export function createFastify(config: Config, logger: Logger): TypedFastify {
  const compiles = new SchemaCompiles();
  const fastify = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new LogController({ requestIdLogLabel: 'requestId', disableRequestLogging: true }),
    requestIdHeader: false,
    genReqId: (request) => requestIdFrom(request.headers['x-request-id']),
    bodyLimit: BODY_LIMIT,
    trustProxy: config.server.trustProxy.length > 0 ? config.server.trustProxy : false,
    return503OnClosing: false,
    // A request's headers and body must arrive within REQUEST_TIMEOUT (slow clients hold a
    // connection each); Node checks pending requests every `connectionsCheckingInterval`.
    requestTimeout: config.server.requestTimeout * 1000,
    http: {
      headersTimeout: config.server.requestTimeout * 1000,
      connectionsCheckingInterval: Math.min(1000, config.server.requestTimeout * 500),
    },
    clientErrorHandler: clientErrorHandler(logger as FastifyBaseLogger),
    // Errors Fastify raises before routing (a malformed percent-encoding, an over-long
    // parameter) bypass the error handler: answer them in the contract's shape too.
    frameworkErrors: (error, request, reply) => {
      const tooLong = error.code === 'FST_ERR_MAX_PARAM_LENGTH';
      const appError = new AppError(tooLong ? 'NOT_FOUND' : 'INVALID_INPUT', {
        message: tooLong ? 'No such resource' : 'The URL is not valid',
        ...(tooLong ? {} : { details: [{ path: 'url', message: 'malformed percent-encoding' }] }),
      });
      (reply as FastifyReply).header('x-request-id', request.id).code(appError.status).type('application/json; charset=utf-8').send(errorBody(appError, request.id));
    },
    routerOptions: { maxParamLength: 200 },
    // Response serializers compiled at each route's first reply, not at start-up (decision 342).
    schemaController: { compilersFactory: { buildSerializer: lazySerializers(compiles) } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  recordCompiles(fastify, compiles);
  installValidation(fastify, compiles);
  installQueryShapes(fastify);
  installRequestScope(fastify);
  // JSON only: text/plain bodies are the classic CSRF vector.
  fastify.removeContentTypeParser(['text/plain', 'application/json']);
  const parseJson = fastify.getDefaultJsonParser('error', 'error');
  // A body-less POST (logout) from a browser still says application/json: an empty body is no body.
  // Read as bytes: a string would already have had its invalid UTF-8 replaced (utf8Body refuses it).
  fastify.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, bytes, done) => {
    let body: string;
    try {
      body = utf8Body(bytes as Buffer);
    } catch (error) {
      return done(error as AppError, undefined);
    }
    if (body.trim() === '') return done(null, undefined);
    parseJson(request, body, (error, value) => {
      if (error) return done(error, undefined);
      const problem = unacceptableJson(value);
      if (problem) return done(new AppError('INVALID_INPUT', { message: `Request body ${problem}`, details: [{ path: 'body', message: problem }] }), undefined);
      done(null, value);
    });
  });
  return fastify;
}

/**
 * Every line logged while a request is handled carries its id, whichever logger writes it
 * (logging.ts's mixin reads `requestScope`); with traces on, the server span learns its route.
 * Installed before the pipeline, so its steps run inside the scope.
 */
function installRequestScope(fastify: TypedFastify): void {
  const traceRoute = routeTracer();
  fastify.addHook('onRequest', (request, _reply, done) => {
    traceRoute?.(request.routeOptions.url);
    requestScope.run(request.id, done);
  });
  // Reading a body continues in the socket's async context, not the request's: enter it again for the handler.
  fastify.addHook('preValidation', (request, _reply, done) => requestScope.run(request.id, done));
}
