import { Type } from 'typebox';
import type { TypedFastify } from '../../http/typed.ts';
import type { Services } from '../../services.ts';
import { AuthModeSchema } from './shared.ts';

/** `GET /v1/providers` (docs/contract.md §5, §5e): the providers this caller may connect, with the apps it may use, nothing secret. */
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
                apps: Type.Array(Type.String(), { description: 'The ids of the apps this caller may connect it through (docs/contract.md §5e); [] for entered credentials' }),
                credentials: Type.Optional(
                  Type.Array(Type.Object({ name: Type.String(), label: Type.String(), secret: Type.Boolean() }), { description: 'The fields a person enters (api_key, basic, client_credentials)' }),
                ),
              }),
            ),
          }),
        },
      },
    },
    async (request) => ({
      success: true as const,
      // Those this caller's organization may use: a provider with an app it may use, or whose credentials are entered (docs/contract.md §5e).
      providers: (await services.apps.usableProviders(services.db, request.ctx.principal?.organizationId ?? '')).map(({ provider, apps }) => ({
        id: provider.id,
        displayName: provider.displayName,
        defaultScopes: provider.scopes,
        authMode: provider.traits.mode,
        apps,
        ...(provider.traits.connects === 'entered' ? { credentials: provider.traits.fields.map(({ name, label, secret }) => ({ name, label, secret })) } : {}),
      })),
    }),
  );
}
