// `tessera service-tokens create|list|revoke` (docs/contract.md §10): the operator's commands on the
// configured database (PGlite, or PostgreSQL when TEST_DATABASE_URL is set) — the first service token
// needs no login, no GraphQL and no other tool; its audit rows name the actor `operator`; on the
// embedded database, a running server makes them say so and exit 1.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { queryRows, sql } from '../src/db/client.ts';
import { createLogger } from '../src/http/logging.ts';
import { LogCapture, TEST_ENCRYPTION_KEY, TEST_JWT_SECRET, testConfig } from './helpers/app.ts';
import { emptyStore, runCli, type Store } from './helpers/cli.ts';
import { TEST_DATABASE_URL } from './helpers/database.ts';

const ENV = { ENCRYPTION_KEYS: TEST_ENCRYPTION_KEY, JWT_SECRET: TEST_JWT_SECRET };
let store: Store;

beforeAll(async () => {
  store = await emptyStore();
});
afterAll(async () => {
  await store?.drop();
});

/** Serves a request on the store's database in this process (the commands have exited), then closes. */
async function request(token: string, url: string): Promise<number> {
  const database = await store.open();
  const app = await buildApp({ config: testConfig(store.env), database, logger: createLogger({ level: 'warn', stream: new LogCapture() }) });
  try {
    return (await app.fastify.inject({ url, headers: { authorization: `Bearer ${token}` } })).statusCode;
  } finally {
    await app.fastify.close();
    await database.close();
  }
}

describe('tessera service-tokens', () => {
  it('creates the first service token on a new database, printed once beside its id; lists it without its value; revokes it', async () => {
    const created = await runCli(['service-tokens', 'create', 'product backend', '--expires-in', '30'], { ...store.env, ...ENV });
    expect(created.code, created.stderr).toBe(0);
    const last = created.stdout.trimEnd().split('\n').at(-1) ?? '';
    const [id, token] = last.split(' ');
    expect(id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(token).toMatch(/^tss_[A-Za-z0-9_-]{20,}$/);
    expect(created.stdout).toMatch(/^name\s+product backend$/m);
    expect(created.stdout).toMatch(/^expires\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/m);
    // Printed once: the value appears on that one line only.
    expect(created.stdout.split(token as string)).toHaveLength(2);

    // It works: a service token lists organizations (none yet) with no X-Organization-ID.
    expect(await request(token as string, '/v1/organizations')).toBe(200);

    const listed = await runCli(['service-tokens', 'list'], { ...store.env, ...ENV });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain(id as string);
    expect(listed.stdout).toContain(`tss_…${(token as string).slice(-4)}`);
    expect(listed.stdout).not.toContain(token as string);
    const json = await runCli(['service-tokens', 'list', '--json'], { ...store.env, ...ENV });
    const { serviceTokens } = JSON.parse(json.stdout) as { serviceTokens: { id: string; name: string; revokedAt: string | null; expiresAt: string | null }[] };
    expect(serviceTokens).toEqual([expect.objectContaining({ id, name: 'product backend', revokedAt: null, expiresAt: expect.any(String) })]);
    expect(json.stdout).not.toContain(token as string);

    const revoked = await runCli(['service-tokens', 'revoke', id as string], { ...store.env, ...ENV });
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toBe(`revoked service token ${id} (product backend): it is refused from its next request on\n`);
    expect(await request(token as string, '/v1/organizations')).toBe(401);

    // Again: nothing active by that id.
    const again = await runCli(['service-tokens', 'revoke', id as string, '--json'], { ...store.env, ...ENV });
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stderr)).toMatchObject({ success: false, code: 'NOT_FOUND' });

    // The audit rows name the operator, in the deployment's own rows.
    const database = await store.open();
    try {
      const rows = await queryRows<{ action: string; credential_kind: string | null; actor_user_id: string | null; organization_id: string; target_id: string }>(
        database.db,
        sql`SELECT action, credential_kind, actor_user_id, organization_id, target_id FROM audit_logs WHERE target_type = 'service_token' ORDER BY id`,
      );
      expect(rows).toEqual([
        { action: 'service_token.created', credential_kind: 'operator', actor_user_id: null, organization_id: 'deployment', target_id: id },
        { action: 'service_token.revoked', credential_kind: 'operator', actor_user_id: null, organization_id: 'deployment', target_id: id },
      ]);
    } finally {
      await database.close();
    }
  }, 240_000);

  it('refuses a name that is no name with INVALID_INPUT, and creates nothing', async () => {
    const bad = await runCli(['service-tokens', 'create', 'evil\u202Ename', '--json'], { ...store.env, ...ENV });
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.stderr)).toMatchObject({ success: false, code: 'INVALID_INPUT' });
    const listed = await runCli(['service-tokens', 'list', '--json'], { ...store.env, ...ENV });
    expect((JSON.parse(listed.stdout) as { serviceTokens: { name: string }[] }).serviceTokens.map((token) => token.name)).toEqual(['product backend']);
  }, 120_000);

  it.skipIf(TEST_DATABASE_URL)('on the embedded database, says the server must be stopped while one runs, and exits 1', async () => {
    const running = await store.open();
    try {
      const refused = await runCli(['service-tokens', 'create', 'while running'], { ...store.env, ...ENV });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/^fix: stop the Tessera that uses DATA_DIR/m);
    } finally {
      await running.close();
    }
  });
});
