// Any request to a documented REST route — arbitrary bodies, headers, path segments, methods and
// credentials — is answered as docs/contract.md §2 and the OpenAPI document say, and leaks nothing.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Route } from '../helpers/openapi.ts';
import { payloadOf, restCase, urlFor, withCredentials } from './arbitraries.ts';
import { defaultContentType, runCase } from './checks.ts';
import { checker, RUNS, useHostileWorld } from './world.ts';

useHostileWorld();

describe('every documented REST route, under arbitrary requests', () => {
  it('every documented REST route survives arbitrary bodies, headers, path segments and credentials', { timeout: 600_000 }, async () => {
    expect(checker.routes.length).toBeGreaterThan(20);
    await fc.assert(
      fc.asyncProperty(restCase(), async ({ route: key, method, segments, query, headers, cred, goodCsrf, body }) => {
        const route = checker.routes.find((r) => `${r.method} ${r.path}` === key) as Route;
        const { payload, describe } = payloadOf(body);
        const finalHeaders = defaultContentType(withCredentials(cred, headers as Record<string, string>, goodCsrf), payload);
        await runCase({ method, url: urlFor(route, segments, query), headers: finalHeaders, body: describe }, payload);
      }),
      { numRuns: RUNS.rest },
    );
  });

});
