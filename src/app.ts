import fastifySwagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config/load.ts';
import type { Database } from './db/client.ts';
import { healthRoutes, type Readiness } from './http/health.ts';
import { createLogger } from './http/logging.ts';
import { defaultSlots, installPipeline, type PipelineSlots, requestIdFrom } from './http/pipeline.ts';
import { installValidation } from './http/validation.ts';

export const BODY_LIMIT = 1024 * 1024;

export interface AppOptions {
  config: Config;
  database: Database;
  logger?: Logger;
  /** Replaces pipeline steps (the identity feature fills them; tests observe them). */
  slots?: Partial<PipelineSlots>;
  /** Registers extra routes inside the pipeline (tests). */
  routes?: (app: FastifyInstance) => void | Promise<void>;
}

export interface App {
  fastify: FastifyInstance;
  readiness: Readiness;
}

/** Builds the HTTP application: pipeline, routes and OpenAPI. Does not listen or migrate. */
export async function buildApp(options: AppOptions): Promise<App> {
  const { config, database } = options;
  const logger = options.logger ?? createLogger({ level: config.log.level });
  const fastify = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    requestIdHeader: false,
    logController: new LogController({ requestIdLogLabel: 'requestId', disableRequestLogging: true }),
    genReqId: (request) => requestIdFrom(request.headers['x-request-id']),
    bodyLimit: BODY_LIMIT,
    trustProxy: config.server.trustProxy.length > 0 ? config.server.trustProxy : false,
    return503OnClosing: true,
    routerOptions: { maxParamLength: 200 },
  }).withTypeProvider<TypeBoxTypeProvider>();

  installValidation(fastify);
  // JSON only: text/plain bodies are the classic CSRF vector.
  fastify.removeContentTypeParser(['text/plain']);
  installPipeline(fastify, database.db, { ...defaultSlots, ...options.slots });

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

  const readiness: Readiness = { migrating: false, checks: [] };
  healthRoutes(fastify, database, readiness);
  fastify.get(
    '/api-docs',
    { config: { auth: 'unauthenticated' }, schema: { summary: 'This OpenAPI document', tags: ['meta'] } },
    async () => fastify.swagger(),
  );
  await options.routes?.(fastify);
  await fastify.ready();
  return { fastify, readiness };
}
