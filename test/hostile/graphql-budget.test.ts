// A GraphQL batch whose operations together cost more than GRAPHQL_MAX_COST runs none of them —
// however the cost is spread (aliases of a root field, pages of a list) — and one within it runs.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { type Account, bearer, registerAndLogin } from '../helpers/identity.ts';
import { SCALE } from './world.ts';

let app: TestApp;
let account: Account;

beforeAll(async () => {
  app = await createTestApp({ background: false, env: { RATE_LIMIT_MAX: '0', LIMIT_ORGANIZATIONS_PER_USER: '1000' } });
  account = await registerAndLogin(app.fastify, 'classes');
});

afterAll(async () => {
  await app?.close();
});

describe('a GraphQL batch over the cost budget runs nothing', () => {
  it('a batch over the cost budget runs nothing, however its cost is spread', { timeout: 300_000 }, async () => {
    const organizations = async () => (await app.fastify.inject({ method: 'POST', url: '/query', headers: bearer(account.token), payload: { query: '{ organizations { id } }' } })).json().data.organizations.length;
    const before = await organizations();
    const operation = fc.oneof(
      // A root field reads the database (10 each time, every alias counted); a field of what it loaded costs 1:
      // up to 455 aliases of `me`, as up to 2,500 were before, span the budget.
      fc.integer({ min: 1, max: 455 }).map((n) => ({ query: `{ ${Array.from({ length: n }, (_, i) => `m${i}: me { id }`).join(' ')} }`, cost: 11 * n })),
      fc.tuple(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 1, max: 100 })).map(([n, first]) => ({
        query: `{ ${Array.from({ length: n }, (_, i) => `a${i}: auditLogs(first: ${first}) { nodes { id } }`).join(' ')} }`,
        cost: n * (10 + 2 * first),
      })),
    );
    let created = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 2, maxLength: 4 }), async (operations) => {
        const total = operations.reduce((sum, op) => sum + op.cost, 0);
        const batch = [{ query: 'mutation { createOrganization(name: "Budgeted") { id } }' }, ...operations.map(({ query }) => ({ query }))];
        const res = await app.fastify.inject({ method: 'POST', url: '/query', headers: bearer(account.token), payload: batch });
        if (total + 11 > 5000) {
          expect(res.statusCode).toBe(400);
          for (const result of res.json() as { data?: unknown }[]) expect(result.data).toBeUndefined();
        } else {
          expect(res.statusCode, res.body.slice(0, 200)).toBe(200);
          created++;
        }
      }),
      { numRuns: Math.ceil(40 * SCALE) },
    );
    // Only batches under the budget created their organization.
    expect(await organizations()).toBe(before + created);
  });
});
