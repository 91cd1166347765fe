import { Type } from 'typebox';
import type { TypedFastify } from '../../http/typed.ts';
import { requestActor } from '../../http/unit-of-work.ts';
import type { Services } from '../../services.ts';
import { checkedStatus } from '../checked-status.ts';
import { EndUserQuery, ProviderParams } from './shared.ts';

const StatusSchema = Type.Object({
  provider: Type.String(),
  connected: Type.Boolean(),
  status: Type.Union([Type.Literal('connected'), Type.Literal('expired'), Type.Literal('invalid'), Type.Literal('warning')]),
  tokenValid: Type.Boolean(),
  tokenExpired: Type.Boolean(),
  lastValidated: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  message: Type.String(),
  actions: Type.Array(Type.Union([Type.Literal('reconnect'), Type.Literal('refresh'), Type.Literal('configure')])),
  lastError: Type.Optional(Type.String()),
  detectedAt: Type.Optional(Type.String({ format: 'date-time' })),
});

/** `GET /v1/integrations/{provider}/status` (docs/contract.md §5): validated live when the last check is older than OAUTH_STATUS_MAX_AGE. */
export function statusRoute(app: TypedFastify, services: Services): void {
  app.get(
    '/v1/integrations/:provider/status',
    {
      config: { auth: 'authenticated', errors: ['INTEGRATION_NOT_FOUND'] },
      schema: {
        summary: 'The integration status (validated live when the last check is older than OAUTH_STATUS_MAX_AGE)',
        tags: ['integrations'],
        params: ProviderParams,
        querystring: EndUserQuery,
        response: { 200: Type.Object({ success: Type.Literal(true), status: StatusSchema }) },
      },
    },
    async (request) => {
      const work = { db: services.db, actor: requestActor(request) };
      return { success: true as const, status: await checkedStatus(services, work, { provider: request.params.provider, endUserId: request.query.endUser ?? null }) };
    },
  );
}
