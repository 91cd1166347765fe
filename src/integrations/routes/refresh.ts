import { Type } from 'typebox';
import type { TypedFastify } from '../../http/typed.ts';
import { requestActor } from '../../http/unit-of-work.ts';
import { requireRole } from '../../identity/authorize.ts';
import type { Services } from '../../services.ts';
import { findIntegrationByProvider } from '../integrations.ts';
import { configuredRow } from '../tokens/loaded.ts';
import { answered, EndUserQuery, member, ProviderParams, providerIdFrom, TokenSchema, tokenBody } from './shared.ts';

/** `POST /v1/integrations/{provider}/refresh` (docs/contract.md §5): one provider call however many ask at once. */
export function refreshRoute(app: TypedFastify, services: Services): void {
  app.post(
    '/v1/integrations/:provider/refresh',
    {
      config: { auth: 'authenticated', noStore: true, errors: ['INTEGRATION_NOT_FOUND', 'TOKEN_VALIDATION_FAILED', 'PROVIDER_ERROR', 'PROVIDER_MISCONFIGURED', 'PROVIDER_RATE_LIMITED'] },
      schema: {
        summary: 'Refresh the token now (one provider call however many ask at once)',
        tags: ['integrations'],
        params: ProviderParams,
        querystring: EndUserQuery,
        response: {
          200: Type.Object({
            success: Type.Literal(true),
            message: Type.String(),
            token: Type.Optional({ ...TokenSchema, description: 'Absent for cookie sessions: a browser never receives raw tokens' }),
          }),
        },
      },
    },
    async (request) => {
      const caller = member(request);
      const provider = providerIdFrom(request.params.provider);
      const principal = requireRole(caller, caller.organizationId, 'admin');
      const row = configuredRow(services, await findIntegrationByProvider(services.db, principal.organizationId, provider, request.query.endUser ?? null));
      const refreshed = await answered(services.lifecycle.refresh(row, requestActor(request)));
      const message = `${refreshed.provider.displayName} token refreshed`;
      // Raw tokens go to header credentials only, never while impersonating (decision 39).
      // Entered credentials are not a token: they were checked again, and the token read hands them out.
      if (principal.viaCookie || principal.impersonatorId || refreshed.provider.definition.presents !== 'access_token') return { success: true as const, message };
      return { success: true as const, message, token: tokenBody(refreshed) };
    },
  );
}
