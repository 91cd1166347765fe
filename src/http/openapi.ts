import { readFileSync } from 'node:fs';
import fastifySwagger from '@fastify/swagger';
import type { Config } from '../config/load.ts';
import { EVENT_DATA, EVENT_TYPES, eventEnvelope, WEBHOOK_TEST_DATA, WEBHOOK_TEST_TYPE } from '../events/types.ts';
import { finishDocument, nameWildcard } from './openapi-document.ts';
import type { TypedFastify } from './typed.ts';

/**
 * The API description's version: Tessera's own (package.json). @tessera/client is generated from
 * this document and carries the same version (scripts/client-generate.ts; test client-generate).
 */
export const API_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** Registers the OpenAPI generator (docs/contract.md §8): every route registered after it is documented from its schema. */
export async function registerOpenApi(fastify: TypedFastify, config: Config): Promise<void> {
  // Paths (as documented) whose last parameter spans segments; filled while routes are read, used when the document is finished.
  const multiSegment = new Set<string>();
  await fastify.register(fastifySwagger, {
    transform: ({ schema, url }) => {
      const named = nameWildcard(url, (schema ?? {}) as Record<string, unknown>);
      if (named.renamed) multiSegment.add(named.url.replace(/:([^/]+)/g, '{$1}'));
      return { schema: named.schema as never, url: named.url };
    },
    transformObject: (documents) => finishDocument((documents as { openapiObject: Record<string, unknown> }).openapiObject, multiSegment) as never,
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Tessera',
        version: API_VERSION,
        description: 'Organization-scoped OAuth integrations: connect, store encrypted, keep alive, hand out.',
        license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      },
      servers: [{ url: config.server.publicUrl }],
      webhooks: webhooks() as never,
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'A session JWT, a personal access token (tsp_…), an API token (tsa_…), a service token (tss_…), or an agent capability (tsc_…: the proxy of its providers and /mcp only)',
          },
          sessionCookie: {
            type: 'apiKey',
            in: 'cookie',
            name: 'session',
            description: "The console's session cookie (set by login); unsafe methods also need X-Csrf-Token equal to the csrf_token cookie",
          },
        },
      },
    },
  });

}

/**
 * The events Tessera posts to its webhook endpoints (docs/contract.md §7), one per type, signed per
 * Standard Webhooks; how to verify them is docs/webhooks.md.
 */
function webhooks(): Record<string, unknown> {
  const signature = {
    'webhook-id': 'The event id, the same on every retry: deduplicate on it',
    'webhook-timestamp': 'Seconds since the epoch of this attempt',
    'webhook-signature': 'v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>"> keyed by the secret after whsec_',
  };
  // TypeBox schemas are JSON Schema 2020-12, which OpenAPI 3.1 takes as they are; its own types do not know that.
  // `webhook.test` is a type of its own (docs/contract.md §7): sent by hand to one endpoint.
  const types = [...EVENT_TYPES, WEBHOOK_TEST_TYPE] as const;
  return Object.fromEntries(
    types.map((type) => [
      type,
      {
        post: {
          operationId: `webhook_${type.replace('.', '_')}`,
          summary: type,
          description: ((type === WEBHOOK_TEST_TYPE ? WEBHOOK_TEST_DATA : EVENT_DATA[type]) as { description?: string }).description,
          tags: ['webhooks'],
          // Tessera calls the product, which checks the Standard Webhooks signature headers, not an HTTP credential.
          security: [],
          parameters: Object.entries(signature).map(([name, description]) => ({ name, in: 'header', required: true, description, schema: { type: 'string' } })),
          requestBody: { required: true, content: { 'application/json': { schema: eventEnvelope(type) } } },
          responses: { '2XX': { description: 'Delivered; anything else is retried with backoff' } },
        },
      },
    ]),
  );
}

/** `GET /api-docs`: the OpenAPI 3.1 document, generated from the registered routes. */
export function apiDocsRoute(fastify: TypedFastify): void {
  fastify.get(
    '/api-docs',
    {
      config: { auth: 'unauthenticated', errors: [] },
      schema: { summary: 'This OpenAPI document', tags: ['meta'], operationId: 'meta_getOpenApi', response: { 200: { type: 'object', additionalProperties: true, description: 'OpenAPI 3.1' } } },
    },
    async () => fastify.swagger() as unknown as Record<string, unknown>,
  );
}
