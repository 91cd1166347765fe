import { Type } from 'typebox';
import type { TypedFastify } from '../../http/typed.ts';
import { unitOfWork } from '../../http/unit-of-work.ts';
import type { Services } from '../../services.ts';
import { deleteIntegration } from '../delete.ts';
import { deleteEndUserIntegrations } from '../delete-end-user.ts';
import { listIntegrationSummaries } from '../integrations.ts';
import { EndUserId, IdParams, IntegrationSchema, integrationView, member } from './shared.ts';

/** `GET /v1/integrations`, `DELETE /v1/integrations/{id}` and `DELETE /v1/integrations?endUser=` (docs/contract.md §5, §5d). */
export function integrationListRoutes(app: TypedFastify, services: Services): void {
  app.get(
    '/v1/integrations',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: "The organization's integrations: its own and every end user's, or only those of one provider or one end user",
        tags: ['integrations'],
        querystring: Type.Object({
          provider: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Only this provider' })),
          endUser: Type.Optional({ ...EndUserId, description: "Only this end user's integrations" }),
        }),
        response: { 200: Type.Object({ success: Type.Literal(true), integrations: Type.Array(IntegrationSchema) }) },
      },
    },
    async (request) => {
      const principal = member(request);
      const { provider, endUser } = request.query;
      const rows = await listIntegrationSummaries(services.db, principal.organizationId, { ...(provider ? { provider } : {}), ...(endUser ? { endUserId: endUser } : {}) });
      return { success: true as const, integrations: rows.map((row) => integrationView(row)) };
    },
  );

  app.delete(
    '/v1/integrations',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: "Delete every integration of one end user (offboarding a person); each grant is then revoked at its provider",
        operationId: 'integrations_deleteForEndUser',
        tags: ['integrations'],
        // Required: there is no bulk delete of an organization's integrations.
        querystring: Type.Object({ endUser: EndUserId }),
        response: { 200: Type.Object({ success: Type.Literal(true), deleted: Type.Integer({ minimum: 0 }) }) },
      },
    },
    async (request) => {
      const deleted = await deleteEndUserIntegrations(services, await unitOfWork(request, services), request.query.endUser);
      return { success: true as const, deleted };
    },
  );

  app.delete(
    '/v1/integrations/:id',
    {
      config: { auth: 'authenticated', errors: ['INTEGRATION_NOT_FOUND'] },
      schema: {
        summary: 'Delete an integration: its secrets and entity; the grant is then revoked at the provider',
        tags: ['integrations'],
        params: IdParams,
        response: { 200: Type.Object({ success: Type.Literal(true), message: Type.String() }) },
      },
    },
    async (request) => {
      const deleted = await deleteIntegration(services, await unitOfWork(request, services), request.params.id);
      return { success: true as const, message: `${deleted.displayName} integration deleted` };
    },
  );
}
