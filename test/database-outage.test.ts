// A database outage and connection slots (issue 35, docs/contract.md §2 503 SERVICE_UNAVAILABLE, decisions 250–253).
// PostgreSQL only: each test starts a THROWAWAY cluster of its own (initdb/pg_ctl as user postgres on a free port,
// bench/faults/lib.ts), never the shared server, because it stops it or fills its connection slots.
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { type Answer, baseEnv, call, type PgCluster, registerAndLogin, sleep, startCluster, waitReady } from '../bench/faults/lib.ts';
import { createTestApp } from './helpers/app.ts';
import { runCli } from './helpers/cli.ts';
import { TEST_DATABASE_URL } from './helpers/database.ts';
import { bearer, registerAndLogin as registerInProcess } from './helpers/identity.ts';
import { type ServiceProcess, spawnService } from './helpers/process.ts';

const clusters: PgCluster[] = [];
const services: ServiceProcess[] = [];
afterAll(async () => {
  for (const service of services) await service.stop();
  for (const cluster of clusters) cluster.destroy();
});

async function cluster(settings: string[] = []): Promise<PgCluster> {
  const started = await startCluster(settings);
  clusters.push(started);
  return started;
}

async function service(env: Record<string, string>): Promise<ServiceProcess> {
  const spawned = await spawnService(baseEnv({ LIMIT_ORGANIZATIONS_PER_USER: '100000', ...env }));
  services.push(spawned);
  await waitReady(spawned, 60_000);
  return spawned;
}

const graphql = (base: string, token: string, query: string) => call(base, 'POST', '/query', { token, body: { query }, timeoutMs: 20_000 });

/** The §2 shape of a 503 for an unavailable database: code, message, request id, Retry-After — within 10 s. */
function expectUnavailable(answer: Answer): void {
  expect(answer.status, answer.text).toBe(503);
  expect(answer.json).toEqual({ success: false, error: expect.any(String), code: 'SERVICE_UNAVAILABLE', requestId: answer.headers.get('x-request-id') });
  expect(answer.headers.get('retry-after')).toMatch(/^[1-5]$/);
  expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
  expect(answer.ms).toBeLessThan(10_000);
}

type Entry = { level: number; msg: string } & Record<string, unknown>;
const warnings = (output: string): string[] =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Entry)
    .filter((line) => line.level === 40)
    .map((line) => line.msg);

describe('the database closed under the app (a shutdown past its timeout)', () => {
  it('answers 503 SERVICE_UNAVAILABLE with Retry-After in the §2 shape, never 500 or 401, on REST, GraphQL and /readyz', async () => {
    const test = await createTestApp({ background: false });
    try {
      const account = await registerInProcess(test.fastify, 'closed');
      await test.database.close();
      const answers = [
        await test.fastify.inject({ method: 'GET', url: '/v1/integrations', headers: bearer(account.token) }),
        await test.fastify.inject({ method: 'POST', url: '/query', headers: bearer(account.token), payload: { query: '{ organizations { id } }' } }),
        await test.fastify.inject({ method: 'POST', url: '/v1/login', payload: { email: account.email, password: account.password } }),
      ];
      for (const res of answers) {
        expect(res.statusCode, res.body).toBe(503);
        expect(res.json()).toEqual({ success: false, error: 'The database is unavailable; retry shortly', code: 'SERVICE_UNAVAILABLE', requestId: res.headers['x-request-id'] });
        expect(res.headers['retry-after']).toBe('2');
      }
      const readyz = await test.fastify.inject({ method: 'GET', url: '/readyz' });
      expect(readyz.statusCode).toBe(503);
      expect(readyz.json()).toEqual({ status: 'unavailable', reason: 'database unreachable' });
      // Not a bug: no error line with a stack.
      expect(test.logs.text).not.toMatch(/"level":50/);
    } finally {
      await test.close();
    }
  }, 240_000);
});

describe.runIf(TEST_DATABASE_URL)('PostgreSQL stopped and started under load (own throwaway cluster)', () => {
  it('answers 503 SERVICE_UNAVAILABLE with Retry-After within 10 s during the outage (REST, GraphQL, /readyz), succeeds after it without a restart, and loses or half-does nothing', async () => {
    const pgc = await cluster();
    const url = await pgc.createDatabase('tessera_outage');
    const tessera = await service({ DATABASE_URL: url, DB_POOL_MAX: '4', DB_CONNECT_TIMEOUT: '2' });
    const base = tessera.url;
    const pid = tessera.child.pid;
    const { token } = await registerAndLogin(base, 'outage@example.com');
    const before: string[] = [];
    for (let i = 0; i < 3; i++) {
      const made = await graphql(base, token, `mutation { createOrganization(name: "before-${i}") { id } }`);
      expect(made.status, made.text).toBe(200);
      before.push(made.json.data.createOrganization.id);
    }

    type Sample = Answer & { kind: 'rest' | 'graphql' | 'write' | 'readyz'; endedAt: number; name?: string };
    const samples: Sample[] = [];
    let running = true;
    const record = (kind: Sample['kind'], answer: Answer, name?: string): void => {
      samples.push({ ...answer, kind, endedAt: performance.now(), ...(name ? { name } : {}) });
    };
    const loop = async (kind: Sample['kind'], once: (i: number) => Promise<void>) => {
      for (let i = 0; running; i++) {
        await once(i);
        await sleep(kind === 'readyz' ? 50 : 15);
      }
    };
    const loops = [
      loop('rest', async () => record('rest', await call(base, 'GET', '/v1/integrations', { token, timeoutMs: 20_000 }))),
      loop('rest', async () => record('rest', await call(base, 'GET', '/v1/integrations?provider=github', { token, timeoutMs: 20_000 }))),
      loop('graphql', async () => record('graphql', await graphql(base, token, '{ organizations { id name } integrations { id } }'))),
      loop('write', async (i) => {
        const name = `write-${i}`;
        record('write', await graphql(base, token, `mutation { createOrganization(name: "${name}") { id } }`), name);
      }),
      loop('readyz', async () => record('readyz', await call(base, 'GET', '/readyz', { timeoutMs: 20_000 }))),
    ];

    await sleep(1500);
    const down = performance.now();
    await pgc.stop();
    await sleep(3000);
    await pgc.start();
    const back = performance.now();
    let recovered = Number.POSITIVE_INFINITY;
    for (let waited = 0; waited < 30_000 && recovered === Number.POSITIVE_INFINITY; waited += 50) {
      recovered = samples.find((s) => s.kind === 'readyz' && s.startedAt > back && s.status === 200)?.startedAt ?? Number.POSITIVE_INFINITY;
      await sleep(50);
    }
    const lastReadyz = samples.filter((s) => s.kind === 'readyz').slice(-3);
    expect(recovered, `readyz: ${lastReadyz.map((s) => `${s.status} ${s.text} ${s.error ?? ''}`).join('; ')}\n${tessera.output().slice(-3000)}`).toBeLessThan(Number.POSITIVE_INFINITY);
    await sleep(1500);
    running = false;
    await Promise.all(loops);

    // The same process throughout.
    expect(tessera.child.exitCode).toBeNull();
    expect(tessera.child.pid).toBe(pid);

    const steady = samples.filter((s) => s.endedAt < down);
    expect(steady.length).toBeGreaterThan(0);
    expect(steady.filter((s) => s.status !== 200).map((s) => `${s.kind} ${s.status} ${s.text}`)).toEqual([]);

    // During the outage: 200 (served before it began or from a connection still alive) or the 503 of §2, never a 500 or a hang.
    const during = samples.filter((s) => s.endedAt >= down && s.startedAt < recovered);
    expect(during.filter((s) => s.status !== 200 && s.status !== 503).map((s) => `${s.kind} ${s.status} ${s.error ?? ''} ${s.text}`)).toEqual([]);
    for (const kind of ['rest', 'graphql', 'write'] as const) {
      const failed = during.filter((s) => s.kind === kind && s.status === 503);
      expect(failed.length, `${kind} answered 503 during the outage`).toBeGreaterThan(0);
      for (const answer of failed) expectUnavailable(answer);
    }
    expect(Math.max(...during.map((s) => s.ms))).toBeLessThan(10_000);
    const readyz = during.filter((s) => s.kind === 'readyz' && s.status === 503);
    expect(readyz.length).toBeGreaterThan(0);
    for (const answer of readyz) expect(answer.json).toEqual({ status: 'unavailable', reason: expect.any(String) });

    // After it: everything succeeds again, without restarting Tessera.
    const after = samples.filter((s) => s.startedAt >= recovered);
    expect(after.filter((s) => s.kind !== 'readyz').length).toBeGreaterThan(0);
    expect(after.filter((s) => s.status !== 200 || s.json.errors).map((s) => `${s.kind} ${s.status} ${s.text}`)).toEqual([]);

    // Nothing lost, nothing half-done: every organization made before is there; a write that answered 200 is there
    // whole (its owner's membership with it), one that answered 503 left nothing.
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      const { rows } = await db.query<{ id: string; name: string; owners: number }>(
        `SELECT o.id, o.name, count(m.user_id) FILTER (WHERE m.role = 'owner')::int AS owners FROM organizations o LEFT JOIN memberships m ON m.organization_id = o.id GROUP BY o.id, o.name`,
      );
      const byName = new Map(rows.map((row) => [row.name, row]));
      for (const id of before) expect(rows.find((row) => row.id === id)?.owners).toBe(1);
      const writes = samples.filter((s) => s.kind === 'write');
      for (const write of writes) {
        const row = byName.get(write.name as string);
        if (write.status === 200) expect(row?.owners, `${write.name} answered 200`).toBe(1);
        else expect(row, `${write.name} answered ${write.status}`).toBeUndefined();
      }
      expect(rows.every((row) => row.owners === 1)).toBe(true);
    } finally {
      await db.end();
    }
    // An outage is not a bug: no error line with a stack per failed request.
    expect(tessera.output()).not.toMatch(/"level":50[^\n]*"msg":"unhandled error"/);
  }, 240_000);
});

describe.runIf(TEST_DATABASE_URL)('connection slots (own throwaway cluster, max_connections 20: 17 usable)', () => {
  it('warns at start and in `tessera doctor` when instances × DB_POOL_MAX can exceed the slots, and answers 503 (never 500) when they are full', async () => {
    const pgc = await cluster(['max_connections=20']);
    const url = await pgc.createDatabase('tessera_slots');
    const env = { DATABASE_URL: url, DB_POOL_MAX: '10', DB_CONNECT_TIMEOUT: '2' };

    // One instance: 10 of 17 fit, nothing said.
    const first = await service(env);
    expect(warnings(first.output()).filter((msg) => msg.startsWith('connection slots'))).toEqual([]);
    // A second: 2 × 10 = 20 > 17, said at its start with the numbers and the fix.
    const second = await service(env);
    expect(warnings(second.output())).toContainEqual(
      'connection slots: 2 Tessera instances × DB_POOL_MAX 10 = 20 connections can exceed the 17 PostgreSQL allows (max_connections 20 − 3 reserved); when they are all taken requests answer 503. Fix: lower DB_POOL_MAX to 8 or less, or raise max_connections to at least 23',
    );
    // doctor judges for one more instance than it sees connected (two now: three).
    const doctor = await runCli(['doctor'], { ...env, ENCRYPTION_KEYS: baseEnv().ENCRYPTION_KEYS as string, JWT_SECRET: baseEnv().JWT_SECRET as string });
    expect(doctor.stdout).toMatch(
      /^WARN\s+connections\s+3 Tessera instances × DB_POOL_MAX 10 = 30 connections can exceed the 17 PostgreSQL allows \(max_connections 20 − 3 reserved\); when they are all taken requests answer 503\. — fix: lower DB_POOL_MAX to 5 or less, or raise max_connections to at least 33$/m,
    );
    expect(await second.stop()).toBe(0);
    services.splice(services.indexOf(second), 1);

    // Every slot taken by other clients: requests that need a new connection answer 503 with Retry-After, never 500.
    const { token } = await registerAndLogin(first.url, 'slots@example.com');
    const holders: pg.Client[] = [];
    try {
      for (let i = 0; i < 25; i++) {
        const client = new pg.Client({ connectionString: url });
        client.on('error', () => {});
        try {
          await client.connect();
          holders.push(client);
        } catch (error) {
          expect((error as { code?: string }).code).toBe('53300');
          break;
        }
      }
      const answers = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          i % 2 === 0 ? call(first.url, 'GET', '/v1/integrations', { token, timeoutMs: 20_000 }) : graphql(first.url, token, '{ organizations { id } members { role } }'),
        ),
      );
      expect(answers.filter((a) => a.status !== 200 && a.status !== 503).map((a) => `${a.status} ${a.text}`)).toEqual([]);
      const refused = answers.filter((a) => a.status === 503);
      expect(refused.length).toBeGreaterThan(0);
      for (const answer of refused) expectUnavailable(answer);
      const readyz = await call(first.url, 'GET', '/readyz');
      expect([200, 503]).toContain(readyz.status);
    } finally {
      await Promise.all(holders.map((client) => client.end().catch(() => {})));
    }
    // Slots free again: served, same process.
    const again = await Promise.all(Array.from({ length: 12 }, () => call(first.url, 'GET', '/v1/integrations', { token, timeoutMs: 20_000 })));
    expect(again.map((a) => a.status)).toEqual(Array(12).fill(200));
    expect(first.output()).not.toMatch(/"level":50[^\n]*"msg":"unhandled error"/);
  }, 240_000);
});
