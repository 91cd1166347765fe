// Any POST /query — schema-derived and arbitrary GraphQL documents, batches, JSON and raw bodies,
// hostile headers, every kind of credential — gets a spec-shaped answer with the contract's codes,
// never a resolver failure, and leaks nothing.
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { credArb, graphqlBody, hostileHeaders, payloadOf, sometimes, withCredentials } from './arbitraries.ts';
import { defaultContentType, runCase } from './checks.ts';
import { RUNS, useHostileWorld } from './world.ts';

useHostileWorld();

describe('POST /query, under arbitrary documents', () => {
  it('POST /query survives arbitrary and schema-derived GraphQL documents, batches and headers', { timeout: 600_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(graphqlBody(), sometimes(hostileHeaders(), 50), credArb, fc.boolean(), async (body, headers, cred, goodCsrf) => {
        const { payload, describe } = payloadOf(body);
        const plain = (headers ?? {}) as Record<string, string>;
        const finalHeaders = defaultContentType(withCredentials(cred, plain, goodCsrf), payload);
        await runCase({ method: 'POST', url: '/query', headers: finalHeaders, body: describe }, payload);
      }),
      { numRuns: RUNS.graphql },
    );
  });
});
