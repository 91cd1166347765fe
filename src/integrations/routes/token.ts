import { Type } from 'typebox';
import type { TypedFastify } from '../../http/typed.ts';
import { requestActor } from '../../http/unit-of-work.ts';
import { PROVIDER_ID } from '../../lib/ids.ts';
import { AppError } from '../../ground/errors.ts';
import type { Services } from '../../services.ts';
import type { LoadedIntegration } from '../tokens/loaded.ts';
import { appRef } from '../apps/catalog.ts';
import {
  AppRefSchema,
  AuthModeSchema,
  answered,
  EndUserQuery,
  EndUserSchema,
  EnteredCredentials,
  Metadata,
  ProviderParams,
  providerIdFrom,
  requireTokenReader,
  TOKEN_READER_ROLES,
  TokenSchema,
  usableBody,
} from './shared.ts';

/** `GET /v1/integrations/{provider}/token` (docs/contract.md §5): the hot path of the service. */
export function tokenRoute(app: TypedFastify, services: Services): void {
  const { lifecycle } = services;
  app.get(
    '/v1/integrations/:provider/token',
    {
      config: { auth: 'authenticated', noStore: true, deferCredentialCheck: true, errors: ['INTEGRATION_NOT_FOUND', 'TOKEN_VALIDATION_FAILED', 'PROVIDER_ERROR', 'PROVIDER_MISCONFIGURED', 'PROVIDER_RATE_LIMITED'] },
      schema: {
        summary: "The access token for the provider — the organization's own, or an end user's with `endUser` (refreshed first when about to expire)",
        tags: ['integrations'],
        params: ProviderParams,
        querystring: EndUserQuery,
        response: {
          200: Type.Object({
            success: Type.Literal(true),
            provider: Type.String(),
            authMode: Type.Optional({ ...AuthModeSchema, description: 'How the integration is credentialed; absent for oauth2' }),
            // Absent for api_key and basic, whose entered `credentials` are handed out instead.
            token: Type.Optional(TokenSchema),
            credentials: Type.Optional(EnteredCredentials),
            metadata: Metadata,
            endUser: Type.Union([EndUserSchema, Type.Null()]),
            app: AppRefSchema,
          }),
        },
      },
    },
    async (request) => {
      const deferred = request.ctx.deferredCredential;
      const endUserId = request.query.endUser ?? null;
      let loaded: LoadedIntegration;
      if (deferred) {
        // One statement checks the credential, reads the token and writes the audit row (without the token).
        const use = await lifecycle.reads.loadForUseAs(deferred, request.params.provider, endUserId, TOKEN_READER_ROLES, { action: 'integration.token_read', requestId: request.id });
        request.ctx.principal = use.principal;
        requireTokenReader(use.principal);
        if (!PROVIDER_ID.test(request.params.provider) || !use.loaded) throw new AppError('INTEGRATION_NOT_FOUND');
        loaded = use.loaded;
      } else {
        const principal = requireTokenReader(request.ctx.principal);
        const provider = providerIdFrom(request.params.provider);
        // One statement reads the token and writes the audit row (without the token).
        loaded = await lifecycle.reads.loadForUse(principal.organizationId, provider, endUserId, { actor: requestActor(request), action: 'integration.token_read' });
      }
      const usable = await answered(lifecycle.usable(loaded, requestActor(request)));
      return { success: true as const, provider: loaded.provider.id, ...usableBody(usable), metadata: usable.row.metadata, endUser: usable.row.endUser ?? null, app: appRef(usable.row.appId) };
    },
  );
}
