import fastifySwagger from '@fastify/swagger';
import type { Config } from '../config/load.ts';
import type { TypedFastify } from './typed.ts';

/** Registers the OpenAPI generator (CONTRACT.md §8): every route registered after it is documented from its schema. */
export async function registerOpenApi(fastify: TypedFastify, config: Config): Promise<void> {
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

}

/** `GET /api-docs`: the OpenAPI 3.1 document, generated from the registered routes. */
export function apiDocsRoute(fastify: TypedFastify): void {
  fastify.get(
    '/api-docs',
    {
      config: { auth: 'unauthenticated', errors: [] },
      schema: { summary: 'This OpenAPI document', tags: ['meta'], response: { 200: { type: 'object', additionalProperties: true, description: 'OpenAPI 3.1' } } },
    },
    async () => fastify.swagger() as unknown as Record<string, unknown>,
  );
}
