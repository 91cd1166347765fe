import type { FastifySchema, RouteOptions } from 'fastify';
import { SAFE_METHODS } from '../identity/csrf.ts';
import { serviceTokenRoute } from '../identity/service-token-rights.ts';
import { ERROR_CODES, type ErrorCode } from './errors.ts';
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
  // A service token naming an organization that does not exist (CONTRACT.md §5d).
  if ([...methods].some((method) => serviceTokenRoute(method, route.url)?.scope === 'organization')) add('NOT_FOUND');
  add(...(route.config?.errors ?? []));
  return codes;
}

/** Adds the route's error responses (the error shape, described by the codes of each status) and its security to its OpenAPI schema. */
export function documentRouteErrors(route: RouteOptions, routeClass: RouteClass): void {
  const schema = (route.schema ??= {}) as FastifySchema & Record<string, unknown>;
  const responses = (schema.response ??= {}) as Record<string, unknown>;
  const codes = routeErrorCodes(route, routeClass);
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) byStatus.set(ERROR_CODES[code].status, [...(byStatus.get(ERROR_CODES[code].status) ?? []), code]);
  for (const [status, listed] of [...byStatus].sort(([a], [b]) => a - b)) {
    if (!(status in responses)) responses[status] = { ...ErrorResponse, description: listed.join(', ') };
  }
  schema.security ??= routeClass === 'authenticated' ? [{ bearerAuth: [] }, { sessionCookie: [] }] : [];
}
