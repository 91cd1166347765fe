import { Type } from 'typebox';
import type { TypedFastify } from '../../http/typed.ts';
import type { Services } from '../../services.ts';
import { AuthModeSchema } from './shared.ts';

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
            providers: Type.Array(
              Type.Object({
                id: Type.String(),
                displayName: Type.String(),
                defaultScopes: Type.Array(Type.String()),
                authMode: AuthModeSchema,
                credentials: Type.Optional(
                  Type.Array(Type.Object({ name: Type.String(), label: Type.String(), secret: Type.Boolean() }), { description: 'The fields a person enters (api_key, basic, client_credentials)' }),
                ),
              }),
            ),
          }),
        },
      },
    },
    async () => ({
      success: true as const,
      providers: services.providers.list().map((provider) => ({
        id: provider.id,
        displayName: provider.displayName,
        defaultScopes: provider.scopes,
        authMode: provider.traits.mode,
        ...(provider.traits.connects === 'entered' ? { credentials: provider.traits.fields.map(({ name, label, secret }) => ({ name, label, secret })) } : {}),
      })),
    }),
  );
}
