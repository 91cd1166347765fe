import { Type } from 'typebox';
import type { TypedFastify } from '../../http/typed.ts';
import { unitOfWork } from '../../http/unit-of-work.ts';
import type { Services } from '../../services.ts';
import { deleteIntegration } from '../delete.ts';
import { listIntegrationSummaries } from '../integrations.ts';
import { IdParams, IntegrationSchema, integrationView, member } from './shared.ts';

/** `GET /v1/integrations` and `DELETE /v1/integrations/{id}` (CONTRACT.md §5). */
export function integrationListRoutes(app: TypedFastify, services: Services): void {
  app.get(
    '/v1/integrations',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: "The organization's integrations",
        tags: ['integrations'],
        response: { 200: Type.Object({ success: Type.Literal(true), integrations: Type.Array(IntegrationSchema) }) },
      },
    },
    async (request) => {
      const principal = member(request);
      const rows = await listIntegrationSummaries(services.db, principal.organizationId);
      return { success: true as const, integrations: rows.map((row) => integrationView(row)) };
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
