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
    expect(Object.keys(readyz.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '404', '500', '503']));
    expect(readyz.responses['404'].content['application/json'].schema.required).toEqual(['success', 'error', 'code', 'requestId']);
    expect(readyz.security).toEqual([]);
    expect(document.components.securitySchemes).toHaveProperty('bearerAuth');
    for (const path of Object.keys(document.paths)) expect(path.startsWith('/v1/') || !path.includes('v1')).toBe(true);
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
