import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { AppError } from '../../http/errors.ts';
import type { TypedFastify } from '../../http/typed.ts';
import { requestActor } from '../../http/unit-of-work.ts';
import { requireRole } from '../../identity/authorize.ts';
import type { Services } from '../../services.ts';
import { callProvider, invalidPath, type ProxyAnswer, RESPONSE_HEADERS, proxySegments, takeEndUser, toResponse } from '../proxy.ts';
import type { LoadedIntegration } from '../tokens/loaded.ts';
import { restIsWrite } from '../providers/types.ts';
import { failureAnswer, verdictFor } from '../tokens/policy.ts';
import { EndUserQuery, member, providerIdFrom } from './shared.ts';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** `ANY /v1/integrations/{provider}/proxy/<path>`: an API call on the user's behalf (CONTRACT.md §5). */
export function proxyRoute(app: TypedFastify, services: Services): void {
  app.route({
    method: [...METHODS],
    url: '/v1/integrations/:provider/proxy/*',
    config: { auth: 'authenticated', errors: ['INTEGRATION_NOT_FOUND', 'TOKEN_VALIDATION_FAILED', 'PROVIDER_ERROR', 'PROVIDER_RATE_LIMITED'] },
    schema: {
      summary: "Call the provider's API with the stored token; the provider's status and body come back",
      tags: ['integrations'],
      params: Type.Object({ provider: Type.String({ maxLength: 64 }), '*': Type.String() }),
      // Documents `endUser`; every other parameter passes to the provider as sent.
      querystring: EndUserQuery,
      response: {
        200: { description: "The provider's answer, passed through" },
        '3xx': { description: "The provider's redirect, passed through (not followed; its Location is withheld)" },
        default: { description: 'Any other status the provider answered with, passed through with its body' },
      },
    },
    handler: async (request, reply) => {
      const principal = member(request);
      if (principal.viaCookie) throw new AppError('UNAUTHENTICATED', { message: 'Proxy calls need credentials in the Authorization header' });
      const providerId = providerIdFrom(request.params.provider);

      const rawUrl = request.raw.url ?? '';
      const queryAt = rawUrl.indexOf('?');
      // From the raw URL, by segment: '', 'v1', 'integrations', <provider, maybe encoded>, 'proxy', …path.
      const segments = proxySegments((queryAt === -1 ? rawUrl : rawUrl.slice(0, queryAt)).split('/').slice(5).join('/'));
      // `endUser` picks the integration and stays here (CONTRACT.md §5d); the rest goes to the provider as sent.
      const { endUserId, forwarded: query } = takeEndUser(queryAt === -1 ? '' : rawUrl.slice(queryAt));
      // Which calls write is the provider's to say (Slack: by API method, whatever the HTTP method; decision 76).
      const definition = services.providers.get(providerId)?.definition;
      const writes = definition ? definition.isWrite(request.method, segments, request.body) : restIsWrite(request.method);
      if (writes) requireRole(principal, principal.organizationId, 'admin');

      const actor = requestActor(request);
      const loaded = await services.lifecycle.usable(await services.lifecycle.reads.loadForUse(principal.organizationId, providerId, endUserId), actor);
      const base = loaded.provider.contextFor(loaded.row.metadata).endpoints.apiUrl;
      const target = new URL(`${base}/${segments.map(encodeURIComponent).join('/')}${query}`);
      const baseUrl = new URL(base);
      // Defence in depth: whatever the path was, the call stays under the API base.
      if (target.origin !== baseUrl.origin || !`${target.pathname}/`.startsWith(`${baseUrl.pathname.replace(/\/$/, '')}/`)) throw invalidPath();

      const body = request.method === 'GET' || request.method === 'HEAD' || request.body === undefined ? undefined : JSON.stringify(request.body);
      const answer = await callUnderPolicy(services, loaded, target, request, body);
      reply.code(answer.status as 200);
      for (const name of RESPONSE_HEADERS) {
        const value = answer.headers.get(name);
        if (value !== null) reply.header(name, value);
      }
      if (!answer.headers.has('content-type')) reply.removeHeader('content-type');
      reply.header('x-content-type-options', 'nosniff');
      reply.header('content-security-policy', 'sandbox');
      return answer.body;
    },
  });
}

/**
 * One proxied call and what its answer means (policy.ts, stage `call`): a rejection is
 * re-read, then refreshed, then retried once before it is believed (decision 37); a rate
 * limit, an outage or a final rejection becomes our error; a 403 passes through after
 * marking the integration suspicious.
 */
async function callUnderPolicy(services: Services, first: LoadedIntegration, target: URL, request: FastifyRequest, body: string | undefined): Promise<ProxyAnswer> {
  const actor = requestActor(request);
  let loaded = first;
  let answer = await callProvider(services, loaded, target, request, body);
  let failure = loaded.provider.definition.classify(toResponse(answer));
  if (failure?.kind === 'revoked') {
    const recovered = await services.lifecycle.recover(loaded, loaded.secrets.access_token ?? '', actor);
    if (recovered) {
      loaded = recovered;
      answer = await callProvider(services, loaded, target, request, body);
      failure = loaded.provider.definition.classify(toResponse(answer));
    }
  }
  if (failure) {
    const verdict = verdictFor(failure, 'call');
    await services.lifecycle.apply(loaded, verdict.transition, actor);
    if (verdict.answer !== 'passthrough') throw failureAnswer(failure, 'call');
  }
  return answer;
}
