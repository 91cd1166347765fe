import { Type } from 'typebox';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../../http/errors.ts';
import type { TypedFastify } from '../../http/typed.ts';
import type { Services } from '../../services.ts';
import { CallbackFailure, callbackRedirect, completeConnect, type FlowOutcome, recordFailedAttempt } from '../connect/callback.ts';
import type { StateRow } from '../state.ts';
import { CONNECT_PAGE_HEADERS, flowDonePage } from '../../web/connect-pages.ts';
import { ProviderId } from './shared.ts';

const CallbackResponse = Type.Object({
  success: Type.Literal(true),
  message: Type.String(),
  integration: Type.Object({ id: Type.String(), name: Type.String(), provider: Type.String() }),
});

/** `POST /v1/integrations/oauth/callback`: completes a flow with the code a client relays (CONTRACT.md §5). */
export function callbackPostRoute(app: TypedFastify, services: Services): void {
  app.post(
    '/v1/integrations/oauth/callback',
    {
      config: {
        auth: 'public',
        noStore: true,
        errors: ['INVALID_OAUTH_STATE', 'PROVIDER_NOT_CONFIGURED', 'OAUTH_EXCHANGE_FAILED', 'ACCESS_DENIED', 'FORBIDDEN', 'CONFLICT', 'TOKEN_VALIDATION_FAILED', 'PROVIDER_ERROR', 'PROVIDER_RATE_LIMITED'],
      },
      schema: {
        summary: 'Complete a connect flow with the code the provider returned',
        tags: ['integrations'],
        body: Type.Object(
          { provider: ProviderId, code: Type.String({ minLength: 1, maxLength: 2048 }), state: Type.String({ minLength: 1, maxLength: 1024 }) },
          { additionalProperties: false },
        ),
        response: { 200: CallbackResponse },
      },
    },
    async (request) => {
      const body = request.body;
      if (!services.providers.get(body.provider)) throw new AppError('PROVIDER_NOT_CONFIGURED');
      try {
        const result = await completeConnect(services, request, body);
        return { success: true as const, message: `Successfully connected ${result.displayName} integration`, integration: result.integration };
      } catch (error) {
        if (!(error instanceof CallbackFailure)) throw error;
        await flowFailed(request, services, error);
        throw error.appError;
      }
    },
  );
}

/** `GET /v1/integrations/oauth/callback`: the provider's browser redirect; completes the flow and redirects to the start's redirectUri. */
export function callbackGetRoute(app: TypedFastify, services: Services): void {
  app.get(
    '/v1/integrations/oauth/callback',
    {
      config: { auth: 'public', noStore: true, errors: ['INVALID_OAUTH_STATE'] },
      schema: {
        summary: "The provider's browser redirect: completes the flow and redirects to the start's redirectUri",
        tags: ['integrations'],
        querystring: Type.Object({
          code: Type.Optional(Type.String({ maxLength: 2048 })),
          state: Type.String({ minLength: 1, maxLength: 1024 }),
          error: Type.Optional(Type.String({ maxLength: 200 })),
          error_description: Type.Optional(Type.String({ maxLength: 2048 })),
        }),
        response: {
          200: { description: 'A flow started in a popup (connect.js): a page that hands the outcome to the opener and closes', content: { 'text/html': { schema: { type: 'string' } } } },
          302: Type.Null({ description: 'Redirect to the redirectUri with status, provider and integration or error (and session, for a connect session)' }),
        },
      },
    },
    async (request, reply) => {
      const query = request.query;
      let state: StateRow;
      let outcome: FlowOutcome;
      try {
        const result = await completeConnect(services, request, { state: query.state, ...(query.code ? { code: query.code } : {}), ...(query.error ? { error: query.error } : {}) });
        state = result.state;
        outcome = { integrationId: result.integration.id };
      } catch (error) {
        // An unusable state has nowhere safe to redirect to: that stays a 400.
        if (!(error instanceof CallbackFailure)) throw error;
        await flowFailed(request, services, error);
        state = error.state;
        outcome = { error: error.appError.code };
        request.log.info({ code: error.appError.code, provider: state.provider }, 'connect flow ended with an error');
      }
      if (state.popup) {
        reply.headers(CONNECT_PAGE_HEADERS).type('text/html; charset=utf-8');
        return flowDonePage(services, state, outcome);
      }
      reply.code(302).header('location', callbackRedirect(state, outcome));
      return null;
    },
  );
}

/**
 * A flow that failed once its state was claimed: the request's writes are undone, then the
 * failure is recorded (on its connect session, and as `integration.connect_failed`).
 */
async function flowFailed(request: FastifyRequest, services: Services, failure: CallbackFailure): Promise<void> {
  await request.ctx.rollback();
  await recordFailedAttempt(services, failure.state, failure.appError.code, request.id);
}
