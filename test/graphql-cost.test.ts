// One GraphQL request must not buy a database flood (docs/contract.md §6): the same field under many
// aliases costs each time, a field that reads the database costs more than one that does not, and
// the request's own objects (`me`, `organization`, …) are read once per request, however often
// they are asked for. Statements are observed on the real database through Drizzle's logger.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';

let t: TestApp;
let alice: Account;
let bob: Account;
let statements = 0;

beforeAll(async () => {
  t = await createTestApp({ background: false, env: { RATE_LIMIT_MAX: '0' }, onQuery: () => statements++ });
  alice = await registerAndLogin(t.fastify, 'flood-alice');
  bob = await registerAndLogin(t.fastify, 'flood-bob');
});

afterAll(async () => {
  await t?.close();
});

const aliased = (count: number, field: string) => `{ ${Array.from({ length: count }, (_, i) => `a${i}: ${field}`).join(' ')} }`;

async function post(token: string, payload: object) {
  const res = await t.fastify.inject({ method: 'POST', url: '/query', headers: bearer(token), payload });
  return { status: res.statusCode, body: res.json(), raw: res.body };
}

/** The answer to one request, and how many statements the database ran for it (nothing else runs meanwhile). */
async function counted(token: string, payload: object) {
  const before = statements;
  const answer = await post(token, payload);
  return { ...answer, statements: statements - before };
}

describe('an alias flood', () => {
  it('of 2,450 `me { id }` is refused before it runs: no more statements than one `me`', async () => {
    const one = await counted(alice.token, { query: '{ me { id } }' });
    expect(one.status, one.raw).toBe(200);
    const flood = await counted(alice.token, { query: aliased(2450, 'me { id }') });
    expect(flood.status, flood.raw.slice(0, 300)).toBe(400);
    expect(flood.body.errors[0]).toMatchObject({ message: expect.stringMatching(/too expensive/), extensions: { code: 'INVALID_INPUT' } });
    expect(flood.body.data).toBeUndefined();
    expect(flood.statements).toBeLessThanOrEqual(one.statements);
  });

  it('within the budget reads each per-request object once: 400 `organization { name }` cost what one does', async () => {
    const one = await counted(alice.token, { query: '{ organization { name } }' });
    expect(one.status, one.raw).toBe(200);
    const flood = await counted(alice.token, { query: aliased(400, 'organization { name }') });
    expect(flood.status, flood.raw.slice(0, 300)).toBe(200);
    const names = Object.values(flood.body.data as Record<string, { name: string }>).map((organization) => organization.name);
    expect(names).toHaveLength(400);
    expect(new Set(names)).toEqual(new Set([one.body.data.organization.name]));
    expect(flood.statements).toBe(one.statements);

    // Several of them, and a batch sharing one budget: still one read of each.
    const pair = await counted(alice.token, { query: '{ me { id } organization { name } members { role } }' });
    const mixed = await counted(alice.token, {
      query: `{ ${Array.from({ length: 80 }, (_, i) => `m${i}: me { id } o${i}: organization { name } r${i}: members { role }`).join(' ')} }`,
    });
    expect(mixed.status, mixed.raw.slice(0, 300)).toBe(200);
    expect(mixed.statements).toBe(pair.statements);
    const batch = await counted(alice.token, Array.from({ length: 5 }, () => ({ query: aliased(80, 'organization { name }') })));
    expect(batch.status, batch.raw.slice(0, 300)).toBe(200);
    expect(batch.statements).toBe(one.statements);
  });

  it('is priced by what it reads: an over-budget flood of any database-reading field is refused', async () => {
    for (const field of ['organization { name }', 'members { role }', 'integrations { id }', 'organizations { id }', 'auditLogs(first: 1) { nodes { id } }']) {
      const flood = await counted(alice.token, { query: aliased(1000, field) });
      expect(flood.status, `${field}: ${flood.raw.slice(0, 200)}`).toBe(400);
      expect(flood.body.errors[0].extensions.code).toBe('INVALID_INPUT');
    }
    // Distinct arguments are distinct reads: each costs, and a flood of them stops at the budget.
    const distinct = `{ ${Array.from({ length: 1000 }, (_, i) => `a${i}: organizationByExternalId(externalId: "x${i}") { id }`).join(' ')} }`;
    expect((await post(alice.token, { query: distinct })).status).toBe(400);
  });

  it('a write in the request is seen by the reads after it', async () => {
    const [first, created, after] = (
      await post(alice.token, [{ query: '{ organizations { id } }' }, { query: 'mutation { createOrganization(name: "Second") { id } }' }, { query: '{ organizations { id } }' }])
    ).body as { data: { organizations?: { id: string }[]; createOrganization?: { id: string } } }[];
    expect(after?.data.organizations?.map((organization) => organization.id)).toEqual(expect.arrayContaining([...(first?.data.organizations ?? []).map((o) => o.id), created?.data.createOrganization?.id]));
    expect(after?.data.organizations).toHaveLength((first?.data.organizations?.length ?? 0) + 1);
  });

  it("does not hold another tenant's request: four floods at once, and Bob's console query answers promptly", async () => {
    const floods = [aliased(2450, 'me { id }'), aliased(400, 'organization { name }'), aliased(2450, 'me { id }'), aliased(400, 'organization { name }')];
    const before = statements;
    const running = floods.map((query) => post(alice.token, { query }));
    const started = Date.now();
    const bobs = await post(bob.token, { query: '{ me { email } organization { name role } integrations { id name status } }' });
    const waited = Date.now() - started;
    expect(bobs.status, bobs.raw).toBe(200);
    expect(bobs.body.data.me.email).toBe(bob.email);
    await Promise.all(running);
    // Four floods and Bob's request: a handful of statements each, not thousands.
    expect(statements - before).toBeLessThan(100);
    // Generous (the finding held Bob 5 s; this takes tens of milliseconds): it proves he is not queued behind the floods.
    expect(waited).toBeLessThan(3000);
  });
});
