/**
 * docs/api.md is the API reference rendered from the served OpenAPI document (`npm run
 * docs:api`): this fails when a route changes and the committed reference was not regenerated.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderApiReference } from '../src/http/api-reference.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ background: false });
});
afterAll(() => t.close());

describe('docs/api.md', () => {
  it('is the reference the served OpenAPI document renders to (run `npm run docs:api` after changing a route)', async () => {
    const document = (await t.fastify.inject({ method: 'GET', url: '/api-docs' })).json();
    const committed = readFileSync(new URL('../docs/api.md', import.meta.url), 'utf8');
    expect(committed).toBe(renderApiReference(document));
  });

  it('names every operation of the document', async () => {
    const document = (await t.fastify.inject({ method: 'GET', url: '/api-docs' })).json();
    const committed = readFileSync(new URL('../docs/api.md', import.meta.url), 'utf8');
    for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, { operationId: string }>>)) {
      for (const [method, operation] of Object.entries(item)) {
        expect(committed, `${method} ${path}`).toContain(`### \`${method.toUpperCase()} ${path}\``);
        expect(committed).toContain(`\`${operation.operationId}\``);
      }
    }
  });
});
