/**
 * Webhook endpoints over REST (docs/contract.md §7): the deployment's, managed by a system
 * administrator or a service token without `X-Organization-ID` (events/access.ts). A secret is
 * answered only by create and rotate-secret; the settings' endpoints are listed, read-only.
 */
import { Type } from 'typebox';
import { AppError } from '../ground/errors.ts';
import type { TypedFastify } from '../http/typed.ts';
import { unitOfWork } from '../http/unit-of-work.ts';
import type { Services } from '../services.ts';
import { requireWebhookOperator } from './access.ts';
import { DeliveryLog, deliveryId } from './delivery-log.ts';
import { createEndpoint, deleteEndpoint, findEndpoint, listEndpoints, queueTestEvent, rotateEndpointSecret, type UrlRules, updateEndpoint } from './endpoints.ts';
import { DeliverySchema } from './routes.ts';
import { EVENT_TYPES } from './types.ts';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Union([schema, Type.Null()]);

const EventTypes = Type.Array(Type.String({ maxLength: 64 }), {
  maxItems: 32,
  description: `Event types it receives (${EVENT_TYPES.join(', ')}); absent: every type. webhook.test is refused: the test route sends it`,
});
const Url = Type.String({ minLength: 1, maxLength: 2048, description: 'https (http only to a loopback host in development); in production its host must pass the outbound guard' });
const Description = Type.String({ maxLength: 500 });

const Endpoint = Type.Object({
  id: Type.String({ description: 'whe_<ULID>, or settings-<n> for the settings (EVENTS_WEBHOOK_URL)' }),
  url: Type.String({ description: "The URL (a settings endpoint's without userinfo or query)" }),
  description: Nullable(Type.String()),
  eventTypes: Type.Array(Type.String()),
  enabled: Type.Boolean(),
  source: Type.Union([Type.Literal('settings'), Type.Literal('api')]),
  createdAt: Nullable(Type.String({ format: 'date-time', description: 'Null for a settings endpoint' })),
});

const Secret = Type.String({ description: 'whsec_ and the base64 of 32 random bytes: shown only in this answer' });
const IdParams = Type.Object({ id: Type.String({ maxLength: 64 }) });

/** The routes of `/v1/webhook-endpoints`. */
export function webhookEndpointRoutes(app: TypedFastify, services: Services): void {
  const webhooks = services.config.events.webhooks;
  const rules: UrlRules = { isProduction: services.config.isProduction, guard: services.outbound };
  const keyring = services.config.keyring;
  const log = new DeliveryLog(services.db, webhooks);

  app.get(
    '/v1/webhook-endpoints',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: "The deployment's webhook endpoints: the settings' (read-only) and those made through the API (system administrators, service tokens)",
        tags: ['webhooks'],
        response: { 200: Type.Object({ success: Type.Literal(true), endpoints: Type.Array(Endpoint) }) },
      },
    },
    async (request) => {
      requireWebhookOperator(request.ctx.principal, request.method, request.routeOptions.url);
      return { success: true as const, endpoints: await listEndpoints(await request.ctx.tx(), webhooks) };
    },
  );

  app.post(
    '/v1/webhook-endpoints',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'Add a webhook endpoint: every event written from now on whose type it lists goes to it; its secret is shown only here (system administrators, service tokens)',
        tags: ['webhooks'],
        body: Type.Object({ url: Url, description: Type.Optional(Description), eventTypes: Type.Optional(EventTypes), enabled: Type.Optional(Type.Boolean()) }, { additionalProperties: false }),
        response: { 201: Type.Object({ success: Type.Literal(true), endpoint: Type.Object({ ...Endpoint.properties, secret: Secret }) }) },
      },
    },
    async (request, reply) => {
      requireWebhookOperator(request.ctx.principal, request.method, request.routeOptions.url);
      const endpoint = await createEndpoint(await unitOfWork(request, services), keyring, rules, request.body);
      reply.code(201);
      return { success: true as const, endpoint };
    },
  );

  app.get(
    '/v1/webhook-endpoints/:id',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'One webhook endpoint, never its secret (system administrators, service tokens)',
        tags: ['webhooks'],
        params: IdParams,
        response: { 200: Type.Object({ success: Type.Literal(true), endpoint: Endpoint }) },
      },
    },
    async (request) => {
      requireWebhookOperator(request.ctx.principal, request.method, request.routeOptions.url);
      return { success: true as const, endpoint: await findEndpoint(await request.ctx.tx(), webhooks, request.params.id) };
    },
  );

  app.patch(
    '/v1/webhook-endpoints/:id',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'Change a webhook endpoint: a new url applies from the next attempt; disabling ends its pending deliveries as failed (endpoint_removed). Not a settings endpoint (403)',
        tags: ['webhooks'],
        params: IdParams,
        body: Type.Object(
          { url: Type.Optional(Url), description: Type.Optional(Nullable(Description)), eventTypes: Type.Optional(EventTypes), enabled: Type.Optional(Type.Boolean()) },
          { additionalProperties: false },
        ),
        response: { 200: Type.Object({ success: Type.Literal(true), endpoint: Endpoint }) },
      },
    },
    async (request) => {
      requireWebhookOperator(request.ctx.principal, request.method, request.routeOptions.url);
      const endpoint = await updateEndpoint(await unitOfWork(request, services), webhooks, rules, request.params.id, request.body);
      return { success: true as const, endpoint };
    },
  );

  app.delete(
    '/v1/webhook-endpoints/:id',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'Delete a webhook endpoint: its pending deliveries end as failed (endpoint_removed). Not a settings endpoint (403)',
        tags: ['webhooks'],
        params: IdParams,
        response: { 200: Type.Object({ success: Type.Literal(true) }) },
      },
    },
    async (request) => {
      requireWebhookOperator(request.ctx.principal, request.method, request.routeOptions.url);
      await deleteEndpoint(await unitOfWork(request, services), webhooks, request.params.id);
      return { success: true as const };
    },
  );

  app.post(
    '/v1/webhook-endpoints/:id/rotate-secret',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary:
          'A new secret, shown only here; until the overlap ends every delivery carries both signatures (v1,<new> v1,<old>). A rotation during an overlap ends the older one. Not a settings endpoint (403)',
        tags: ['webhooks'],
        params: IdParams,
        body: Type.Optional(
          Type.Object(
            { overlapSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 604800, default: 86400, description: 'How long the old secret keeps signing: 1–604800 seconds (default 86400)' })) },
            { additionalProperties: false },
          ),
        ),
        response: { 200: Type.Object({ success: Type.Literal(true), secret: Secret, overlapEndsAt: Type.String({ format: 'date-time' }) }) },
      },
    },
    async (request) => {
      requireWebhookOperator(request.ctx.principal, request.method, request.routeOptions.url);
      const overlapSeconds = request.body?.overlapSeconds ?? 86400;
      const rotated = await rotateEndpointSecret(await unitOfWork(request, services), keyring, webhooks, request.params.id, overlapSeconds);
      return { success: true as const, ...rotated };
    },
  );

  app.post(
    '/v1/webhook-endpoints/:id/test',
    {
      config: { auth: 'authenticated', errors: ['CONFLICT'] },
      schema: {
        summary: 'Send a webhook.test event (data: {endpointId}) to this endpoint alone, now; answers its delivery. A disabled endpoint → 409',
        tags: ['webhooks'],
        params: IdParams,
        response: { 200: Type.Object({ success: Type.Literal(true), delivery: DeliverySchema }) },
      },
    },
    async (request) => {
      requireWebhookOperator(request.ctx.principal, request.method, request.routeOptions.url);
      // Its own statement, committed: the attempt is made now, outside any transaction (like a retry).
      const key = await queueTestEvent(services.db, webhooks, request.params.id);
      const outcome = await services.dispatcher.retry(key);
      if (!outcome.attempted && outcome.reason === 'not_configured') throw new AppError('CONFLICT', { message: 'The endpoint was disabled or removed meanwhile' });
      const { key: _key, ...delivery } = await log.find(deliveryId(key.eventId, key.webhookId));
      return { success: true as const, delivery };
    },
  );
}
