import { Type } from 'typebox';
import type { TypedFastify } from '../../http/typed.ts';
import type { Services } from '../../services.ts';

/** `GET /v1/providers` (docs/contract.md §5): the configured providers, nothing secret. */
export function providersRoute(app: TypedFastify, services: Services): void {
  app.get(
    '/v1/providers',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'Configured providers (nothing secret)',
        tags: ['integrations'],
        response: {
          200: Type.Object({
            success: Type.Literal(true),
            providers: Type.Array(Type.Object({ id: Type.String(), displayName: Type.String(), defaultScopes: Type.Array(Type.String()) })),
          }),
        },
      },
    },
    async () => ({
      success: true as const,
      providers: services.providers.list().map((provider) => ({ id: provider.id, displayName: provider.displayName, defaultScopes: provider.scopes })),
    }),
  );
}
