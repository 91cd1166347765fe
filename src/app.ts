import fastifyCookie from '@fastify/cookie';
import fastifySwagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, LogController } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config/load.ts';
import type { Database } from './db/client.ts';
import { createDispatcher } from './events/dispatcher.ts';
import { createOutbox } from './events/outbox.ts';
import { healthRoutes, type Readiness } from './http/health.ts';
import { createLogger } from './http/logging.ts';
import { Metrics, metricsRoutes } from './http/metrics.ts';
import { installPipeline, type PipelineSlots, requestIdFrom } from './http/pipeline.ts';
import { createRateLimiter } from './http/rate-limit.ts';
import { installValidation } from './http/validation.ts';
import { identitySlots } from './identity/steps.ts';
import { SessionTokens } from './identity/credentials.ts';
import { PasswordHasher } from './identity/password.ts';
import { graphqlRoutes } from './graphql/route.ts';
import { webRoutes } from './web/routes.ts';
import { identityRoutes } from './identity/routes.ts';
import { connectRoutes } from './integrations/connect-routes.ts';
import { proxyRoutes } from './integrations/proxy.ts';
import { integrationRoutes } from './integrations/routes.ts';
import { startValidationScheduler } from './integrations/validator.ts';
import { buildProviderRegistry } from './integrations/providers/registry.ts';
import { StateCodec } from './integrations/state.ts';
import { TokenLifecycle } from './integrations/lifecycle.ts';
import { keyringReadiness } from './secrets/keyring-check.ts';
import type { Services } from './services.ts';
import { AppError, errorBody } from './http/errors.ts';
import { clientErrorHandler } from './http/client-errors.ts';
import { unacceptableJson } from './http/json-limits.ts';

export const BODY_LIMIT = 1024 * 1024;

export interface AppOptions {
  config: Config;
  database: Database;
  logger?: Logger;
  /** Replaces pipeline steps (tests observe them). */
  slots?: Partial<PipelineSlots>;
  /** Registers extra routes inside the pipeline (tests). */
  routes?: (app: FastifyInstance, services: Services) => void | Promise<void>;
}

export interface App {
  fastify: FastifyInstance;
  services: Services;
  readiness: Readiness;
  /** Starts background work (event delivery); call once the database is migrated. */
  startBackground(): void;
}

/** Builds the HTTP application: services, pipeline, routes and OpenAPI. Does not listen or migrate. */
export async function buildApp(options: AppOptions): Promise<App> {
  const { config, database } = options;
  const logger = options.logger ?? createLogger({ level: config.log.level });
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
      requestTimeout: config.server.requestTimeout * 1000,
      headersTimeout: Math.min(60_000, config.server.requestTimeout * 1000),
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
  }).withTypeProvider<TypeBoxTypeProvider>();

  installValidation(fastify);
  // JSON only: text/plain bodies are the classic CSRF vector.
  fastify.removeContentTypeParser(['text/plain', 'application/json']);
  const parseJson = fastify.getDefaultJsonParser('error', 'error');
  // A body-less POST (logout) from a browser still says application/json: an empty body is no body.
  fastify.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '' || (typeof body === 'string' && body.trim() === '')) return done(null, undefined);
    parseJson(request, body as string, (error, value) => {
      if (error) return done(error, undefined);
      const problem = unacceptableJson(value);
      if (problem) return done(new AppError('INVALID_INPUT', { message: `Request body ${problem}`, details: [{ path: 'body', message: problem }] }), undefined);
      done(null, value);
    });
  });
  await fastify.register(fastifyCookie);

  const metrics = new Metrics(database);
  const dispatcher = createDispatcher({
    db: database.db,
    webhooks: config.events.webhooks,
    pollIntervalMs: config.events.pollInterval * 1000,
    logger,
    onDelivered: (lagMs) => metrics.delivered(lagMs),
    backoff: { baseMs: config.events.retryBase * 1000, maxMs: config.events.retryMax * 1000 },
  });
  const passwords = new PasswordHasher({ cost: config.auth.passwordCost });
  void passwords.prepare();
  const services: Services = {
    config,
    database,
    db: database.db,
    passwords,
    sessionTokens: new SessionTokens(config.jwtKeys),
    rateLimiter: await createRateLimiter(fastify, { max: config.rateLimit.max, windowSeconds: config.rateLimit.window }),
    outbox: createOutbox({ webhooks: config.events.webhooks, wake: () => dispatcher.wake() }),
    dispatcher,
    providers: buildProviderRegistry(config, undefined, (provider, outcome, seconds) => metrics.providerCall(provider, outcome, seconds)),
    stateCodec: new StateCodec(config.keyring),
    lifecycle: undefined as unknown as TokenLifecycle,
    logger,
    metrics,
  };
  services.lifecycle = new TokenLifecycle(services);
  let validator: { stop(): Promise<void> } | null = null;
  fastify.addHook('onClose', async () => {
    await validator?.stop();
    await dispatcher.stop();
  });

  installPipeline(fastify, database.db, { ...identitySlots(services), ...options.slots }, config.server.corsOrigins);

  await fastify.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Tessera',
        version: '1',
        description: 'Organization-scoped OAuth integrations: connect, store encrypted, keep alive, hand out.',
      },
      servers: [{ url: config.server.publicUrl }],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'A session JWT, a personal access token (tsp_…) or an API token (tsa_…)',
          },
          sessionCookie: { type: 'apiKey', in: 'cookie', name: 'session' },
        },
      },
    },
  });

  const readiness: Readiness = { pending: null, checks: [keyringReadiness(database.db, config.keyring)] };
  healthRoutes(fastify, database, readiness);
  metricsRoutes(fastify, metrics, config.server.metricsEnabled);
  fastify.get(
    '/api-docs',
    {
      config: { auth: 'unauthenticated', errors: [] },
      schema: { summary: 'This OpenAPI document', tags: ['meta'], response: { 200: { type: 'object', additionalProperties: true, description: 'OpenAPI 3.1' } } },
    },
    async () =>
    fastify.swagger() as unknown as Record<string, unknown>,
  );
  identityRoutes(fastify, services);
  connectRoutes(fastify, services);
  integrationRoutes(fastify, services);
  proxyRoutes(fastify, services);
  await graphqlRoutes(fastify, services);
  webRoutes(fastify);
  await options.routes?.(fastify, services);
  await fastify.ready();
  return {
    fastify,
    services,
    readiness,
    startBackground: () => {
      dispatcher.start();
      // A pass at least every minute: rows come due one interval after their last check.
      validator ??= startValidationScheduler(services, Math.min(config.oauth.validationInterval, 60) * 1000);
    },
  };
}
