import { Type } from 'typebox';
import { AppError } from '../../ground/errors.ts';
import type { TypedFastify } from '../../http/typed.ts';
import { requestActor, unitOfWorkAs } from '../../http/unit-of-work.ts';
import type { Services } from '../../services.ts';
import { connectWithCredentials } from '../credentials/connect.ts';
import { answered, EndUserQuery, ProviderParams, requireTokenReader } from './shared.ts';

/**
 * `POST /v1/integrations/{provider}/credentials` (docs/contract.md §5c): connects a provider
 * whose credentials a person enters — verified with the provider first, then stored
 * encrypted; posting again replaces them and keeps the id. Header credentials only (an API or
 * service token, an owner's or admin's bearer), like a token read: the body is a secret.
 */
export function credentialsRoute(app: TypedFastify, services: Services): void {
  app.post(
    '/v1/integrations/:provider/credentials',
    {
      config: {
        auth: 'authenticated',
        noStore: true,
        errors: ['INVALID_INPUT', 'PROVIDER_NOT_CONFIGURED', 'INVALID_CREDENTIALS', 'PROVIDER_ERROR', 'PROVIDER_MISCONFIGURED', 'PROVIDER_RATE_LIMITED'],
      },
      schema: {
        summary: 'Connect a provider with credentials a person entered (an API key, basic credentials, client credentials), verified with the provider first',
        tags: ['integrations'],
        params: ProviderParams,
        querystring: EndUserQuery,
        body: Type.Object(
          {
            credentials: Type.Record(Type.String({ maxLength: 64 }), Type.String({ maxLength: 4096 }), {
              maxProperties: 20,
              description: "The provider's fields by name (GET /v1/providers lists them as `credentials`)",
            }),
          },
          { additionalProperties: false },
        ),
        response: {
          201: Type.Object({ success: Type.Literal(true), integration: Type.Object({ id: Type.String(), name: Type.String(), provider: Type.String() }) }),
        },
      },
    },
    async (request, reply) => {
      const principal = requireTokenReader(request.ctx.principal);
      const provider = services.providers.get(request.params.provider);
      if (!provider) throw new AppError('PROVIDER_NOT_CONFIGURED');
      const endUserId = request.query.endUser;
      const result = await answered(
        connectWithCredentials(
          services,
          {
            organizationId: principal.organizationId,
            provider,
            credentials: request.body.credentials,
            ...(endUserId !== undefined ? { endUser: { id: endUserId } } : {}),
            actor: requestActor(request),
            log: request.log,
          },
          unitOfWorkAs(request, services),
        ),
      );
      reply.code(201);
      return { success: true as const, integration: result.integration };
    },
  );
}
