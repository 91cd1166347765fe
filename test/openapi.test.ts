import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from './helpers/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => {
  await t?.close();
});

describe('GET /api-docs', () => {
  it('serves an OpenAPI 3.1 document that a real validator accepts', async () => {
    const res = await t.fastify.inject({ url: '/api-docs' });
    expect(res.statusCode).toBe(200);
    const document = res.json();
    expect(document.openapi).toBe('3.1.0');
    await expect(SwaggerParser.validate(structuredClone(document))).resolves.toBeTruthy();
  });

  it('documents every route with its error responses and security', async () => {
    const document = (await t.fastify.inject({ url: '/api-docs' })).json();
    expect(Object.keys(document.paths)).toEqual(expect.arrayContaining(['/livez', '/readyz', '/api-docs']));
    const readyz = document.paths['/readyz'].get;
    expect(Object.keys(readyz.responses)).toEqual(['200', '500', '503']);
    // The error shape is one named component (docs/contract.md §8: shared shapes are components.schemas).
    expect(readyz.responses['500'].content['application/json'].schema.$ref).toBe('#/components/schemas/Error');
    expect(document.components.schemas.Error.required).toEqual(['success', 'error', 'code', 'requestId']);
    expect(readyz.security).toEqual([]);
    expect(document.components.securitySchemes).toHaveProperty('bearerAuth');
    for (const path of Object.keys(document.paths)) expect(path.startsWith('/v1/') || !path.includes('v1')).toBe(true);
  });
});

describe('documented error responses', () => {
  /** Status → the codes its description lists, for one operation. */
  function errorsOf(operation: { responses: Record<string, { description: string }> }): Record<string, string[]> {
    return Object.fromEntries(Object.entries(operation.responses).filter(([status]) => Number(status) >= 400).map(([status, response]) => [status, response.description.split(', ')]));
  }

  it('lists per route only what it can answer: an unauthenticated route 500 and 503', async () => {
    const document = (await t.fastify.inject({ url: '/api-docs' })).json();
    expect(Object.keys(document.paths['/livez'].get.responses)).toEqual(['200', '500', '503']);
    expect(errorsOf(document.paths['/api-docs'].get)).toEqual({ '500': ['INTERNAL'], '503': ['SERVICE_UNAVAILABLE'] });
    expect(errorsOf(document.paths['/query'].get)).toMatchObject({ '405': ['METHOD_NOT_ALLOWED'] });
  });

  it('adds the class\'s codes: an authenticated GET without parameters documents no 413 or 415, and 404 only where a service token may name an organization', async () => {
    const document = (await t.fastify.inject({ url: '/api-docs' })).json();
    // docs/contract.md §5d: a service token naming an unknown organization in X-Organization-ID gets 404.
    expect(errorsOf(document.paths['/v1/account/access'].get)).toEqual({
      '400': ['INVALID_INPUT'],
      '401': ['UNAUTHENTICATED'],
      '403': ['FORBIDDEN'],
      '404': ['NOT_FOUND'],
      '429': ['RATE_LIMITED'],
      '500': ['INTERNAL'],
      '503': ['SERVICE_UNAVAILABLE'],
    });
    expect(errorsOf(document.paths['/v1/csrf'].get)).toEqual({ '429': ['RATE_LIMITED'], '500': ['INTERNAL'], '503': ['SERVICE_UNAVAILABLE'] });
    // Service tokens may not switch: nothing there answers 404.
    expect(errorsOf(document.paths['/v1/account/switch'].post)['404']).toBeUndefined();
  });

  it('adds the body\'s codes and CSRF on unsafe methods, and the codes a route declares', async () => {
    const document = (await t.fastify.inject({ url: '/api-docs' })).json();
    expect(errorsOf(document.paths['/v1/login'].post)).toEqual({
      '400': ['INVALID_INPUT'],
      '401': ['UNAUTHENTICATED'],
      '403': ['CSRF_INVALID'],
      '413': ['PAYLOAD_TOO_LARGE'],
      '415': ['UNSUPPORTED_MEDIA_TYPE'],
      '429': ['RATE_LIMITED'],
      '500': ['INTERNAL'],
      '503': ['SERVICE_UNAVAILABLE'],
    });
    expect(errorsOf(document.paths['/v1/register'].post)['409']).toEqual(['CONFLICT']);
    expect(errorsOf(document.paths['/v1/logout'].post)['403']).toEqual(['FORBIDDEN', 'CSRF_INVALID']);
    expect(document.paths['/v1/logout'].post.security).toEqual([{ bearerAuth: [] }, { sessionCookie: [] }]);
  });

  it('never documents the HTTP layer\'s own codes (408, 431) on a route', async () => {
    const document = (await t.fastify.inject({ url: '/api-docs' })).json();
    for (const item of Object.values(document.paths) as Record<string, { responses: Record<string, unknown> }>[]) {
      for (const operation of Object.values(item)) expect(Object.keys(operation.responses)).not.toEqual(expect.arrayContaining(['408']));
      for (const operation of Object.values(item)) expect(Object.keys(operation.responses)).not.toEqual(expect.arrayContaining(['431']));
    }
  });
});

describe('readiness', () => {
  it('answers /readyz 503 when the database is unreachable', async () => {
    const other = await createTestApp();
    await other.database.close();
    const res = await other.fastify.inject({ url: '/readyz' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ status: 'unavailable', reason: 'database unreachable' });
    await other.fastify.close();
  });
});

describe('readiness checks', () => {
  it('answers 503, not 500, when a readiness check itself fails', async () => {
    const other = await createTestApp();
    try {
      other.app.readiness.checks.push(async () => {
        throw new Error('relation "integration_secrets" does not exist');
      });
      const res = await other.fastify.inject({ url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ status: 'unavailable', reason: 'readiness check failed' });
    } finally {
      await other.close();
    }
  });
});

describe('documented error statuses', () => {
  it('are each route’s own: no GET documents a body’s errors, and a route’s own codes are listed', async () => {
    const document = (await t.fastify.inject({ url: '/api-docs' })).json();
    for (const [path, operations] of Object.entries(document.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>)) {
      for (const [method, operation] of Object.entries(operations)) {
        const statuses = Object.keys(operation.responses).filter((status) => /^[45]\d\d$/.test(status));
        // The proxy is one route for every method, documented once for all of them.
        if ((method === 'get' || method === 'head') && !path.includes('/proxy/')) expect(statuses, `${method} ${path}`).not.toContain('413');
      }
    }
    const token = document.paths['/v1/integrations/{provider}/token'].get.responses;
    expect(Object.keys(token).sort()).toEqual(['200', '400', '401', '403', '404', '409', '429', '500', '502', '503']);
    expect(token['404'].description).toContain('INTEGRATION_NOT_FOUND');
    expect(token['409'].description).toBe('TOKEN_VALIDATION_FAILED');
    expect(token['429'].description).toContain('PROVIDER_RATE_LIMITED');
    const sessions = document.paths['/v1/connect/sessions'].post.responses;
    expect(Object.keys(sessions)).toEqual(expect.arrayContaining(['201', '400', '401', '403', '413', '415', '429']));
    expect(sessions['400'].description).toMatch(/INVALID_REDIRECT_URI.*PROVIDER_NOT_CONFIGURED|PROVIDER_NOT_CONFIGURED.*INVALID_REDIRECT_URI/);
  });
});
