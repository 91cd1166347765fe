import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { AppError } from '../../ground/errors.ts';
import type { TypedFastify } from '../../http/typed.ts';
import { unitOfWorkAs } from '../../http/unit-of-work.ts';
import { authenticateOptional } from '../../identity/authenticate.ts';
import type { Services } from '../../services.ts';
import { type CallbackInput, CallbackFailure, callbackRedirect, completeConnect, type FlowOutcome, recordFailedAttempt } from '../connect/callback.ts';
import { CONNECT_PAGE_HEADERS, flowDonePage } from '../connect/pages.ts';
import { OAUTH_TX_COOKIE } from '../connect/start.ts';
import type { StateRow } from '../state.ts';
import { toAnswer } from '../tokens/policy.ts';
import { ProviderId } from './shared.ts';

const CallbackResponse = Type.Object({
  success: Type.Literal(true),
  message: Type.String(),
  integration: Type.Object({ id: Type.String(), name: Type.String(), provider: Type.String() }),
});

/** `POST /v1/integrations/oauth/callback`: completes a flow with the code a client relays (docs/contract.md §5). */
export function callbackPostRoute(app: TypedFastify, services: Services): void {
  app.post(
    '/v1/integrations/oauth/callback',
    {
      config: {
        auth: 'public',
        noStore: true,
        errors: [
          'INVALID_OAUTH_STATE',
          'PROVIDER_NOT_CONFIGURED',
          'OAUTH_EXCHANGE_FAILED',
          'ACCESS_DENIED',
          'FORBIDDEN',
          'CONFLICT',
          'TOKEN_VALIDATION_FAILED',
          'PROVIDER_ERROR',
          'PROVIDER_MISCONFIGURED',
          'PROVIDER_RATE_LIMITED',
        ],
      },
      schema: {
        summary: 'Complete a connect flow with the code the provider returned',
        tags: ['integrations'],
        body: Type.Object(
          {
            provider: ProviderId,
            code: Type.String({ minLength: 1, maxLength: 2048 }),
            state: Type.String({ minLength: 1, maxLength: 1024 }),
            installationId: Type.Optional(
              Type.String({ minLength: 1, maxLength: 64, description: "An app installation's flow (`githubapp`): the `installation_id` GitHub returned with the code" }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: CallbackResponse },
      },
    },
    async (request) => {
      const body = request.body;
      if (!services.providers.get(body.provider)) throw new AppError('PROVIDER_NOT_CONFIGURED');
      try {
        const result = await completeConnect(services, callbackInput(request, services, body), unitOfWorkAs(request, services));
        return { success: true as const, message: `Successfully connected ${result.displayName} integration`, integration: result.integration };
      } catch (error) {
        if (!(error instanceof CallbackFailure)) throw error;
        throw await flowFailed(request, services, error);
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
          // A GitHub App's install (docs/contract.md §5c): which installation, and what happened to it.
          installation_id: Type.Optional(Type.String({ maxLength: 64 })),
          setup_action: Type.Optional(Type.String({ maxLength: 32 })),
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
      const input = {
        state: query.state,
        ...(query.code ? { code: query.code } : {}),
        ...(query.error ? { error: query.error } : {}),
        ...(query.installation_id ? { installationId: query.installation_id } : {}),
        ...(query.setup_action ? { setupAction: query.setup_action } : {}),
      };
      try {
        const result = await completeConnect(services, callbackInput(request, services, input), unitOfWorkAs(request, services));
        state = result.state;
        outcome = { integrationId: result.integration.id };
      } catch (error) {
        // An unusable state has nowhere safe to redirect to: that stays a 400.
        if (!(error instanceof CallbackFailure)) throw error;
        const answer = await flowFailed(request, services, error);
        state = error.state;
        outcome = { error: answer.code };
        request.log.info({ code: answer.code, provider: state.provider }, 'connect flow ended with an error');
      }
      if (state.popup) {
        reply.headers(CONNECT_PAGE_HEADERS).type('text/html; charset=utf-8');
        return flowDonePage(services.providers, state, outcome);
      }
      reply.code(302).header('location', callbackRedirect(state, outcome));
      return null;
    },
  );
}

/** What a callback request carries, as the connect flow takes it: the provider's answer, the browser's cookie, the caller's credentials (checked only if needed). */
function callbackInput(
  request: FastifyRequest,
  services: Services,
  sent: Pick<CallbackInput, 'state' | 'code' | 'error' | 'provider' | 'installationId' | 'setupAction'>,
): CallbackInput {
  const txCookie = request.cookies[OAUTH_TX_COOKIE];
  return {
    ...sent,
    ...(txCookie !== undefined ? { txCookie } : {}),
    caller: () => authenticateOptional(services, request),
    requestId: request.id,
    log: request.log,
  };
}

/**
 * A flow that failed once its state was claimed: the request's writes are undone, then the
 * failure is recorded (on its connect session, and as `integration.connect_failed`) with the
 * answer it becomes here, at the edge.
 */
async function flowFailed(request: FastifyRequest, services: Services, failure: CallbackFailure): Promise<AppError> {
  const answer = toAnswer(failure.failure) as AppError;
  await request.ctx.rollback();
  await recordFailedAttempt(services, failure.state, answer.code, request.id);
  return answer;
}
