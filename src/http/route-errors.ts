import type { FastifySchema, RouteOptions } from 'fastify';
import { SAFE_METHODS } from '../identity/csrf.ts';
import { serviceTokenRoute } from '../identity/service-token-rights.ts';
import { ERROR_CODES, type ErrorCode } from '../ground/errors.ts';
import type { RouteClass } from './pipeline.ts';
import { ErrorResponse } from './schemas.ts';

/** Codes of the HTTP layer itself (client-errors.ts): they answer before any route, so no route documents them. */
export type HttpLayerCode = 'REQUEST_TIMEOUT' | 'HEADERS_TOO_LARGE';

/** A code a route may declare as its own (`config.errors`). */
export type RouteErrorCode = Exclude<ErrorCode, HttpLayerCode>;

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The codes the route itself answers with (e.g. CONFLICT, INTEGRATION_NOT_FOUND), on
     * top of those its class, method and schema imply (`routeErrorCodes`); `[]` when it
     * adds none. OpenAPI documents exactly these per route.
     */
    errors?: readonly RouteErrorCode[];
    /** `header`: credentials only from the Authorization header; a cookie session gets 401 (the pipeline checks it). */
    credentials?: 'header';
  }
}

/** Methods whose bodies Fastify parses whatever the schema says: any of them can get a malformed, oversized or non-JSON body. */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Every code a route can answer with: always 500 and 503 (shutdown); by its class
 * (authenticated: a malformed `X-Organization-ID`, 401, 403, 429, and CSRF on unsafe
 * methods; public: 429 and CSRF on unsafe methods); by its method and schema (a body:
 * 400/413/415; params or querystring: 400; a path parameter too long for the router, or
 * an unknown organization named by a service token where it may act: 404); and the codes
 * it declares itself.
 */
function routeErrorCodes(route: Pick<RouteOptions, 'method' | 'url' | 'schema' | 'config'>, routeClass: RouteClass): Set<ErrorCode> {
  const methods = new Set((Array.isArray(route.method) ? route.method : [route.method]).map((method) => method.toUpperCase()));
  const unsafe = [...methods].some((method) => !SAFE_METHODS.has(method));
  const schema = route.schema ?? {};
  const codes = new Set<ErrorCode>(['INTERNAL', 'SERVICE_UNAVAILABLE']);
  const add = (...more: ErrorCode[]) => {
    for (const code of more) codes.add(code);
  };
  if (routeClass === 'authenticated') add('INVALID_INPUT', 'UNAUTHENTICATED', 'FORBIDDEN', 'RATE_LIMITED');
  if (routeClass === 'public') add('RATE_LIMITED');
  if (routeClass !== 'unauthenticated' && unsafe) add('CSRF_INVALID');
  if ([...methods].some((method) => BODY_METHODS.has(method))) add('INVALID_INPUT', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE');
  if (schema.params || schema.querystring) add('INVALID_INPUT');
  if (/[:*]/.test(route.url ?? '')) add('NOT_FOUND');
  // A service token naming an organization that does not exist (docs/contract.md §5d).
  if ([...methods].some((method) => serviceTokenRoute(method, route.url)?.scope === 'organization')) add('NOT_FOUND');
  add(...(route.config?.errors ?? []));
  return codes;
}

/**
 * Routes that take credentials from the Authorization header only, besides those declaring
 * `config.credentials: 'header'` themselves (docs/contract.md §4: raw token reads and proxy calls).
 * The pipeline refuses a cookie session there (401) and OpenAPI names the bearer scheme alone.
 * Connect sessions take the console's cookie session too (§5a).
 */
const HEADER_CREDENTIALS_ONLY: readonly RegExp[] = [/^\/v1\/integrations\/:provider\/(token|proxy\/\*)$/];

/** Whether the route takes header credentials only (its own `config.credentials`, or the list above). */
export function headerCredentialsOnly(route: Pick<RouteOptions, 'url' | 'config'>): boolean {
  return route.config?.credentials === 'header' || HEADER_CREDENTIALS_ONLY.some((pattern) => pattern.test(route.url ?? ''));
}

/**
 * Statuses a passthrough route (one documenting `default`: the proxy) answers with either
 * its own error or the provider's own answer: every 4xx except those the token policy turns
 * into Tessera's errors (a provider's 401 is a revocation, its 429 PROVIDER_RATE_LIMITED).
 */
function passedThrough(status: number): boolean {
  return status >= 400 && status < 500 && status !== 401 && status !== 429;
}

/** What OpenAPI names as the security of a route: none unless authenticated; the bearer scheme alone where cookies are refused. */
function routeSecurity(route: RouteOptions, routeClass: RouteClass): Record<string, string[]>[] {
  if (routeClass !== 'authenticated') return [];
  return headerCredentialsOnly(route) ? [{ bearerAuth: [] }] : [{ bearerAuth: [] }, { sessionCookie: [] }];
}

/**
 * Adds the route's error responses (the error shape, described by the codes of each status)
 * and its security to its OpenAPI schema, and a tag when it names none (the generated
 * client's grouping and the prefix of its operationId): its path's first segment.
 */
export function documentRouteErrors(route: RouteOptions, routeClass: RouteClass): void {
  const schema = (route.schema ??= {}) as FastifySchema & Record<string, unknown>;
  if (!(Array.isArray(schema.tags) && schema.tags.length > 0)) schema.tags = [defaultTag(route.url ?? '')];
  const responses = (schema.response ??= {}) as Record<string, unknown>;
  const passthrough = 'default' in responses;
  const codes = routeErrorCodes(route, routeClass);
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) byStatus.set(ERROR_CODES[code].status, [...(byStatus.get(ERROR_CODES[code].status) ?? []), code]);
  for (const [status, listed] of [...byStatus].sort(([a], [b]) => a - b)) {
    const declared = responses[status] as Record<string, unknown> | undefined;
    if (declared) {
      // The route's own answer for this status (a health check's 503), or the pipeline's error in the one shape (shutting down).
      if (!isErrorShape(declared)) responses[status] = { description: `${String(declared.description ?? 'The route’s own answer')}; or ${listed.join(', ')}`, anyOf: [declared, ErrorResponse] };
      continue;
    }
    responses[status] =
      passthrough && passedThrough(status)
        ? { description: `${listed.join(', ')}, or the provider's own ${status} passed through with its body`, anyOf: [ErrorResponse, PROVIDER_BODY] }
        : { ...ErrorResponse, description: listed.join(', ') };
  }
  schema.security ??= routeSecurity(route, routeClass);
}

/** A response schema that is the error shape already (a route's own `{...ErrorResponse, description}`). */
function isErrorShape(schema: Record<string, unknown>): boolean {
  return (schema.properties as Record<string, unknown> | undefined)?.code === ErrorResponse.properties.code;
}

/** `/v1/widgets/:id` → `widgets`: the tag of a route that names none. */
function defaultTag(url: string): string {
  const first = url.split('/').find((segment) => segment !== '' && segment !== 'v1' && !/^[:*]/.test(segment));
  return first?.replace(/[^A-Za-z0-9_-]/g, '') || 'default';
}

/** A provider's body as the proxy passes it through: whatever the provider sent. */
export const PROVIDER_BODY = { description: "The provider's own body, as it sent it" };
