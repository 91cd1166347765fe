/**
 * The webhook delivery log over REST (docs/contract.md §11), for system administrators and service
 * tokens (events/access.ts): what was
 * delivered, what failed and why, and a retry that delivers one again now (same `webhook-id`,
 * a new signature; a delivered one is replayed, and its attempt says so).
 */
import { Type } from 'typebox';
import { recordAudit } from '../audit/audit.ts';
import { AppError } from '../ground/errors.ts';
import type { TypedFastify } from '../http/typed.ts';
import type { Services } from '../services.ts';
import { requireWebhookOperator } from './access.ts';
import { DeliveryLog } from './delivery-log.ts';
import { WEBHOOK_TEST } from './endpoints.ts';
import { EVENT_TYPES } from './types.ts';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Union([schema, Type.Null()]);

export const DeliverySchema = Type.Object({
  id: Type.String(),
  eventId: Type.String(),
  eventType: Type.String(),
  organizationId: Nullable(Type.String({ description: 'The organization the event is about; null for a webhook.test event' })),
  endpoint: Type.String({ description: "The webhook's URL without userinfo or query" }),
  endpointId: Nullable(Type.String({ description: 'The webhook endpoint (settings-<n> or whe_…); null for a settings webhook no longer configured' })),
  status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
  error: Nullable(Type.String({ description: 'Why a failed delivery failed (its last error, or endpoint_removed); null unless failed' })),
  attempts: Type.Array(
    Type.Object({
      at: Type.String({ format: 'date-time' }),
      responseStatus: Nullable(Type.Integer()),
      error: Nullable(Type.String({ description: 'Why no status arrived (timeout, network error); never the receiver\'s body' })),
      durationMs: Type.Integer(),
      replay: Type.Boolean({ description: 'A retry by hand of a delivery already delivered' }),
    }),
    { description: 'The latest attempts, oldest first (at most 20)' },
  ),
  attemptCount: Type.Integer({ description: 'Attempts made in all' }),
  nextAttemptAt: Nullable(Type.String({ format: 'date-time' })),
});

const DeliveryIdParams = Type.Object({ id: Type.String({ maxLength: 64 }) });

/** `GET /v1/webhooks/deliveries` and `POST /v1/webhooks/deliveries/{id}/retry`. */
export function webhookDeliveryRoutes(app: TypedFastify, services: Services): void {
  const log = new DeliveryLog(services.db, services.config.events.webhooks);

  app.get(
    '/v1/webhooks/deliveries',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'Webhook deliveries, newest first, with their attempts (system administrators, service tokens)',
        tags: ['webhooks'],
        querystring: Type.Object(
          {
            status: Type.Optional(Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')])),
            eventType: Type.Optional(Type.Union([...EVENT_TYPES, WEBHOOK_TEST].map((type) => Type.Literal(type)))),
            first: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Page size, 1–100 (default 20)' })),
            after: Type.Optional(Type.String({ maxLength: 64, description: 'The endCursor of the page before' })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            success: Type.Literal(true),
            deliveries: Type.Array(DeliverySchema),
            pageInfo: Type.Object({ endCursor: Nullable(Type.String()), hasNextPage: Type.Boolean() }),
          }),
        },
      },
    },
    async (request) => {
      requireWebhookOperator(request.ctx.principal, request.method, request.routeOptions.url);
      const { status, eventType, first = 20, after } = request.query;
      const page = await log.list({ first, ...(status ? { status } : {}), ...(eventType ? { eventType } : {}), ...(after === undefined ? {} : { after }) });
      return { success: true as const, ...page };
    },
  );

  app.post(
    '/v1/webhooks/deliveries/:id/retry',
    {
      config: { auth: 'authenticated', errors: ['CONFLICT'] },
      schema: {
        summary: 'Deliver one again now: same webhook-id, a new signature; a delivered one is replayed (system administrators, service tokens)',
        tags: ['webhooks'],
        params: DeliveryIdParams,
        response: { 200: Type.Object({ success: Type.Literal(true), delivery: DeliverySchema }) },
      },
    },
    async (request) => {
      const admin = requireWebhookOperator(request.ctx.principal, request.method, request.routeOptions.url);
      const { key, status } = await log.find(request.params.id);
      // No transaction is open across the call to the receiver: the attempt is logged in its own statement.
      const outcome = await services.dispatcher.retry(key);
      if (!outcome.attempted) {
        if (outcome.reason === 'gone') throw new AppError('NOT_FOUND', { message: 'No such delivery' });
        throw new AppError('CONFLICT', {
          message: outcome.reason === 'busy' ? 'The delivery is being attempted right now; try again in a minute' : 'Its webhook is no longer configured',
        });
      }
      await recordAudit(services.db, { principal: admin, requestId: request.id }, {
        organizationId: key.organizationId,
        action: 'webhook_delivery.retried',
        targetType: 'event',
        targetId: key.eventId,
        detail: { delivery: request.params.id, replay: status === 'delivered', delivered: outcome.delivered },
      });
      const { key: _key, ...delivery } = await log.find(request.params.id);
      return { success: true as const, delivery };
    },
  );
}
