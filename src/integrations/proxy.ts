import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AuditActor } from '../audit/audit.ts';
import { AppError } from '../http/errors.ts';
import { requireRole } from '../identity/authorize.ts';
import type { Services } from '../services.ts';
import type { Current } from './lifecycle.ts';
import { ProviderError, restIsWrite } from './providers/types.ts';
import { readCapped } from './providers/registry.ts';

/** Largest proxied answer, after decompression. */
export const PROXY_MAX_BYTES = 10 * 1024 * 1024;
const PROVIDER_ID = /^[a-z][a-z0-9]{1,31}$/;
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
/** Headers passed to the provider. Never our Authorization, cookies, CSRF, impersonation, organization or forwarding headers. */
const REQUEST_HEADERS = ['accept', 'accept-language', 'content-type', 'if-match', 'if-none-match', 'if-modified-since', 'x-github-api-version'];
/** Headers passed back. Never the provider's Set-Cookie or Location. */
const RESPONSE_HEADERS = [
  'content-type',
  'content-language',
  'etag',
  'last-modified',
  'link',
  'retry-after',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'x-ratelimit-used',
  'x-ratelimit-resource',
  'x-oauth-scopes',
  'x-accepted-oauth-scopes',
  'x-github-request-id',
];

/**
 * Turns the raw path after `/proxy/` into validated segments: each is percent-decoded
 * once and must not be empty, `.`/`..`, or hold a slash, backslash or control
 * character (encoded or not), so `//host`, `\\host` and `..` cannot leave the API base.
 */
export function proxyPath(raw: string): string {
  return proxySegments(raw).map(encodeURIComponent).join('/');
}

/** The decoded segments of a proxy path, each checked as `proxyPath` says. */
export function proxySegments(raw: string): string[] {
  if (raw === '') return [];
  return raw.split('/').map((segment) => {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      throw invalidPath();
    }
    if (decoded === '' || decoded === '.' || decoded === '..' || /[/\\\x00-\x1f\x7f]/.test(decoded)) throw invalidPath();
    return decoded;
  });
}

function invalidPath(): AppError {
  return new AppError('INVALID_INPUT', { details: [{ path: 'path', message: 'must be plain path segments (no empty, ".", ".." or encoded slashes)' }] });
}

interface ProxyAnswer {
  status: number;
  headers: Headers;
  body: Buffer;
}

/** `ANY /v1/integrations/{provider}/proxy/<path>`: an API call on the user's behalf (CONTRACT.md §5). */
export function proxyRoutes(app: FastifyInstance, services: Services): void {
  app.route({
    method: [...METHODS],
    url: '/v1/integrations/:provider/proxy/*',
    config: { auth: 'authenticated' },
    schema: {
      summary: "Call the provider's API with the stored token; the provider's status and body come back",
      tags: ['integrations'],
      params: Type.Object({ provider: Type.String({ maxLength: 64 }), '*': Type.String() }),
      response: {
        200: { description: "The provider's answer, passed through" },
        '3xx': { description: "The provider's redirect, passed through (not followed; its Location is withheld)" },
        default: { description: "Any other status the provider answered with, passed through with its body" },
      },
    },
    handler: async (request, reply) => {
      const principal = request.ctx.principal;
      if (!principal) throw new AppError('UNAUTHENTICATED');
      if (principal.viaCookie) throw new AppError('UNAUTHENTICATED', { message: 'Proxy calls need credentials in the Authorization header' });
      requireRole(principal, principal.organizationId, 'member');
      const { provider: providerId } = request.params as { provider: string };
      if (!PROVIDER_ID.test(providerId)) throw new AppError('INTEGRATION_NOT_FOUND');

      const rawUrl = request.raw.url ?? '';
      const queryAt = rawUrl.indexOf('?');
      // From the raw URL, by segment: '', 'v1', 'integrations', <provider, maybe encoded>, 'proxy', …path.
      const segments = proxySegments((queryAt === -1 ? rawUrl : rawUrl.slice(0, queryAt)).split('/').slice(5).join('/'));
      const path = segments.map(encodeURIComponent).join('/');
      const query = queryAt === -1 ? '' : rawUrl.slice(queryAt);
      // Which calls write is the provider's to say (Slack: by API method, whatever the HTTP method).
      const definition = services.providers.get(providerId)?.definition;
      const writes = definition?.isWrite ? definition.isWrite(request.method, segments) : restIsWrite(request.method);
      if (writes) requireRole(principal, principal.organizationId, 'admin');
      const readOnly = request.method === 'GET' || request.method === 'HEAD';

      const actor: AuditActor = { principal, requestId: request.id };
      let current = await services.lifecycle.usable(await services.lifecycle.loadForUse(principal.organizationId, providerId), actor);
      const base = current.provider.context.endpoints.apiUrl;
      const target = new URL(`${base}/${path}${query}`);
      const baseUrl = new URL(base);
      // Defence in depth: whatever the path was, the call stays under the API base.
      if (target.origin !== baseUrl.origin || !`${target.pathname}/`.startsWith(`${baseUrl.pathname.replace(/\/$/, '')}/`)) throw invalidPath();

      const body = readOnly || request.body === undefined ? undefined : JSON.stringify(request.body);
      let answer = await callProvider(services, current, target, request, body);
      let failure = current.provider.definition.classify(toResponse(answer));
      if (failure?.kind === 'revoked') {
        const usedToken = current.secrets.access_token ?? '';
        const recovered = await services.lifecycle.recover(current, usedToken, actor);
        if (!recovered) {
          await services.lifecycle.invalidate(current, actor);
          throw new AppError('TOKEN_VALIDATION_FAILED');
        }
        current = recovered;
        answer = await callProvider(services, current, target, request, body);
        failure = current.provider.definition.classify(toResponse(answer));
        if (failure?.kind === 'revoked') {
          await services.lifecycle.invalidate(current, actor);
          throw new AppError('TOKEN_VALIDATION_FAILED');
        }
      }
      if (failure?.kind === 'rateLimited') {
        throw new AppError('PROVIDER_RATE_LIMITED', { headers: { 'retry-after': String(failure.retryAfter ?? 60) } });
      }
      if (failure?.kind === 'transient') throw new AppError('PROVIDER_ERROR');
      if (failure?.kind === 'forbidden') await services.lifecycle.markForbidden(current, actor);

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

function toResponse(answer: ProxyAnswer) {
  return { status: answer.status, headers: answer.headers, body: answer.body.length > 65536 ? '' : answer.body.toString('utf8') };
}

/** One call to the provider: allowlisted headers, the stored token, a timeout, no redirects, a size cap. */
async function callProvider(services: Services, current: Current, target: URL, request: FastifyRequest, body: string | undefined): Promise<ProxyAnswer> {
  const headers: Record<string, string> = { 'user-agent': 'Tessera', authorization: current.provider.definition.authorization(current.secrets.access_token ?? '') };
  for (const name of REQUEST_HEADERS) {
    const value = request.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  let response: Response;
  const started = performance.now();
  const observe = (outcome: string) => services.metrics?.providerCall(current.provider.id, outcome, (performance.now() - started) / 1000);
  try {
    response = await fetch(target, {
      method: request.method,
      headers,
      ...(body !== undefined ? { body } : {}),
      redirect: 'manual',
      signal: AbortSignal.timeout(services.config.oauth.providerTimeout * 1000),
    });
    observe(String(response.status));
  } catch (error) {
    observe('transient');
    services.logger.warn({ provider: current.provider.id, integrationId: current.row.id, kind: 'transient' }, 'proxied call failed');
    throw new AppError('PROVIDER_ERROR', { cause: new ProviderError('transient', 'provider unreachable', { cause: error }) });
  }
  let answer: Buffer | null;
  try {
    answer = await readCapped(response, PROXY_MAX_BYTES);
  } catch (error) {
    throw new AppError('PROVIDER_ERROR', { cause: error });
  }
  if (!answer) throw new AppError('PROVIDER_ERROR', { message: 'The provider answer is larger than 10 MiB' });
  return { status: response.status, headers: response.headers, body: answer };
}
