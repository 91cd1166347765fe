import { Type } from 'typebox';
import type { TypedFastify } from '../../http/typed.ts';
import type { Services } from '../../services.ts';
import { OAUTH_TX_COOKIE, txCookieOptions, startConnect } from '../connect/start.ts';
import { AppIdSchema, ProviderId } from './shared.ts';


/** `POST /v1/integrations/oauth/start` (docs/contract.md §5): the provider's authorize URL, and the `oauth_tx` cookie binding the flow to this browser. */
export function startRoute(app: TypedFastify, services: Services): void {
  app.post(
    '/v1/integrations/oauth/start',
    {
      config: { auth: 'authenticated', errors: ['PROVIDER_NOT_CONFIGURED', 'INVALID_REDIRECT_URI', 'INVALID_INPUT'] },
      schema: {
        summary: 'Start connecting a provider: returns the provider authorization URL',
        tags: ['integrations'],
        body: Type.Object(
          {
            provider: ProviderId,
            app: Type.Optional(AppIdSchema),
            scopes: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 100 })),
            redirectUri: Type.String({ minLength: 1, maxLength: 2048 }),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Object({ success: Type.Literal(true), authUrl: Type.String(), state: Type.String() }) },
      },
    },
    async (request, reply) => {
      const result = await startConnect(services, services.db, request.ctx.principal, request.body, request.cookies[OAUTH_TX_COOKIE]);
      reply.setCookie(OAUTH_TX_COOKIE, result.txValue, txCookieOptions(services));
      return { success: true as const, authUrl: result.authUrl, state: result.state };
    },
  );
}
