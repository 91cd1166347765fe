import { Type } from 'typebox';
import { AppError } from '../../ground/errors.ts';
import type { TypedFastify } from '../../http/typed.ts';
import { requestActor } from '../../http/unit-of-work.ts';
import { requireRole } from '../../identity/authorize.ts';
import { capabilityAccess } from '../../identity/capabilities.ts';
import type { Services } from '../../services.ts';
import { type ProxyAnswer, proxyCall, proxySegments, proxyWrites, RESPONSE_HEADERS, takeEndUser, tallyOf } from '../proxy.ts';
import { toAnswer } from '../tokens/policy.ts';
import { EndUserQuery, member, providerIdFrom } from './shared.ts';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** What every proxied answer says about how it was paced (docs/contract.md §5f). */
const PACING_HEADERS = {
  'Tessera-Attempts': { type: 'integer', description: 'How many times the call was sent to the provider (0: refused before sending, the budget known exhausted)' },
  'Tessera-Waited': { type: 'integer', description: "Milliseconds spent waiting for the provider's rate limit to reset (not back-off); absent when it did not wait" },
  'Tessera-Next-Page': {
    type: 'string',
    description: 'The next page of a list, as the part after `/v1/integrations/{provider}/proxy/` (e.g. `user/repos?page=2`), as the provider pages; absent on the last page',
  },
};

/** `ANY /v1/integrations/{provider}/proxy/<path>`: an API call on the user's behalf (docs/contract.md §5). */
export function proxyRoute(app: TypedFastify, services: Services): void {
  app.route({
    method: [...METHODS],
    url: '/v1/integrations/:provider/proxy/*',
    config: { auth: 'authenticated', query: 'forwarded', errors: ['INTEGRATION_NOT_FOUND', 'TOKEN_VALIDATION_FAILED', 'PROVIDER_ERROR', 'PROVIDER_MISCONFIGURED', 'PROVIDER_RATE_LIMITED'] },
    schema: {
      summary: "Call the provider's API with the stored token; the provider's status and body come back",
      tags: ['integrations'],
      params: Type.Object({ provider: Type.String({ maxLength: 64 }), '*': Type.String() }),
      // Documents `endUser`; every other parameter passes to the provider as sent.
      querystring: EndUserQuery,
      headers: Type.Object({
        'tessera-max-wait': Type.Optional(
          Type.String({
            description:
              "Seconds (0–60, default 0) Tessera may wait for the provider's rate limit to reset, and retry an idempotent call (or one carrying `Idempotency-Key`) after a network error, a timeout or a 502/503/504, before answering (docs/contract.md §5f)",
            examples: ['30'],
          }),
        ),
      }),
      response: {
        200: { description: "The provider's answer, passed through", headers: PACING_HEADERS },
        '3xx': { description: "The provider's redirect, passed through (not followed; its Location is withheld)", headers: PACING_HEADERS },
        default: { description: 'Any other status the provider answered with, passed through with its body', headers: PACING_HEADERS },
      },
    },
    // Every proxied answer carries `Tessera-Attempts`, errors included (docs/contract.md §5f): one refused before any send says 0.
    onSend: async (_request, reply, payload) => {
      if (!reply.hasHeader('tessera-attempts')) reply.header('tessera-attempts', '0');
      return payload;
    },
    handler: async (request, reply) => {
      const principal = member(request);
      if (principal.viaCookie) throw new AppError('UNAUTHENTICATED', { message: 'Proxy calls need credentials in the Authorization header' });
      const providerId = providerIdFrom(request.params.provider);

      const rawUrl = request.raw.url ?? '';
      const queryAt = rawUrl.indexOf('?');
      // From the raw URL, by segment: '', 'v1', 'integrations', <provider, maybe encoded>, 'proxy', …path.
      const segments = proxySegments((queryAt === -1 ? rawUrl : rawUrl.slice(0, queryAt)).split('/').slice(5).join('/'));
      // `endUser` picks the integration and stays here (docs/contract.md §5d); the rest goes to the provider as sent.
      const { endUserId: asked, forwarded: query } = takeEndUser(queryAt === -1 ? '' : rawUrl.slice(queryAt));
      const writes = proxyWrites(services.providers, providerId, request.method, segments, request.body);
      // An agent capability has its own narrow check (docs/contract.md §9); everyone else, the roles of §3.
      const endUserId = principal.capability ? capabilityAccess(principal.capability, providerId, writes, asked) : asked;
      if (writes && !principal.capability) requireRole(principal, principal.organizationId, 'admin');

      const body = request.method === 'GET' || request.method === 'HEAD' || request.body === undefined ? undefined : JSON.stringify(request.body);
      const maxWaitSeconds = maxWait(request.headers['tessera-max-wait']);
      const answer = await tallied(
        proxyCall(services, {
          organizationId: principal.organizationId,
          provider: providerId,
          endUserId,
          method: request.method,
          segments,
          query,
          headers: request.headers,
          ...(body !== undefined ? { body } : {}),
          actor: requestActor(request),
          maxWaitSeconds,
        }),
      );
      reply.code(answer.status as 200);
      for (const name of RESPONSE_HEADERS) {
        const value = answer.headers.get(name);
        if (value !== null) reply.header(name, value);
      }
      if (!answer.headers.has('content-type')) reply.removeHeader('content-type');
      reply.header('tessera-attempts', String(answer.attempts));
      if (answer.waitedMs > 0) reply.header('tessera-waited', String(Math.round(answer.waitedMs)));
      if (answer.nextPage !== null) reply.header('tessera-next-page', answer.nextPage);
      reply.header('x-content-type-options', 'nosniff');
      reply.header('content-security-policy', 'sandbox');
      return answer.body;
    },
  });
}

/** `Tessera-Max-Wait` (docs/contract.md §5f): whole seconds 0–60, default 0; anything else is a 400. */
export function maxWait(header: string | string[] | undefined): number {
  if (header === undefined) return 0;
  const value = Array.isArray(header) ? null : header.trim();
  if (value === null || !/^\d{1,2}$/.test(value) || Number(value) > 60) {
    throw new AppError('INVALID_INPUT', { details: [{ path: 'headers.tessera-max-wait', message: 'must be whole seconds from 0 to 60' }] });
  }
  return Number(value);
}

/** The proxy's answer, or its failure as an answer — either way carrying `Tessera-Attempts` (and `Tessera-Waited` after a wait). */
async function tallied(work: Promise<ProxyAnswer>): Promise<ProxyAnswer> {
  try {
    return await work;
  } catch (error) {
    const answer = toAnswer(error);
    if (!(answer instanceof AppError)) throw answer;
    const { attempts, waitedMs } = tallyOf(error);
    const headers = { ...answer.headers, 'tessera-attempts': String(attempts), ...(waitedMs > 0 ? { 'tessera-waited': String(Math.round(waitedMs)) } : {}) };
    throw new AppError(answer.code, { message: answer.message, cause: answer.cause, headers, ...(answer.details ? { details: answer.details } : {}) });
  }
}
