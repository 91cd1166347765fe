import { Type } from 'typebox';
import { AppError } from '../../ground/errors.ts';
import type { TypedFastify } from '../../http/typed.ts';
import { requestActor } from '../../http/unit-of-work.ts';
import type { Services } from '../../services.ts';
import { findIntegrationByProvider } from '../integrations.ts';
import { statusObject } from '../status.ts';
import { withSecrets } from '../tokens/loaded.ts';
import { EndUserQuery, member, ProviderParams, providerIdFrom } from './shared.ts';

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
      const principal = member(request);
      const provider = providerIdFrom(request.params.provider);
      const row = await findIntegrationByProvider(services.db, principal.organizationId, provider, request.query.endUser ?? null);
      const configured = row ? services.providers.get(row.provider) : undefined;
      if (!row || !configured) throw new AppError('INTEGRATION_NOT_FOUND');
      const age = Date.now() - (row.lastValidatedAt?.getTime() ?? 0);
      // Secrets are read and the provider asked only when the last validation is too old.
      if (row.status !== 'invalid' && age > services.config.oauth.statusMaxAge * 1000) {
        // The status route reports: it does not fail because the provider did.
        const { loaded } = await services.lifecycle.check(await withSecrets(services, row), requestActor(request));
        return { success: true as const, status: statusObject(loaded.row, loaded.provider.displayName) };
      }
      return { success: true as const, status: statusObject(row, configured.displayName) };
    },
  );
}
