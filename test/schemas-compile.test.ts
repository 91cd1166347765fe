// Every route's schemas compile (decision 342): they are compiled at a route's first use, so a
// schema the compilers refuse would otherwise surface only when that route, or that answer, is
// first used. This compiles all of them — request validators and every status's serializer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileAllSchemas } from '../src/http/lazy-compilers.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
  await t.fastify.ready();
});
afterAll(() => t?.close());

describe("the app's route schemas", () => {
  it('all compile: every validator and every answer serializer of every route', () => {
    const compiled = compileAllSchemas(t.fastify);
    expect(compiled).toBeGreaterThan(300);
    // Compiled once: nothing is left for a first request to compile.
    expect(compileAllSchemas(t.fastify)).toBe(0);
  });
});
