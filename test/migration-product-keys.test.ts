// Migration 0016 (the product's key, decision 229) on a database holding rows of the schema before
// it, where any person could give an organization an externalId, unique only per creating user:
// a person's value stays where it collides with nothing; colliding ones are cleared, one audit row
// per cleared organization; service tokens' values stay; then the key is unique across the
// deployment, and the service token's lookup finds only its own customer.
import { rmSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, buildApp } from '../src/app.ts';
import { queryRows } from '../src/db/client.ts';
import { createLogger } from '../src/http/logging.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import { newId, ULID } from '../src/lib/ids.ts';
import { LogCapture, testConfig } from './helpers/app.ts';
import { backend, createTestDatabase, migrationsBefore, type TestDatabase } from './helpers/database.ts';
import { graphqlData } from './helpers/graphql.ts';
import { bearer, login } from './helpers/identity.ts';

const MIGRATION = 16;

let db: TestDatabase;
let app: App;
let folder: string;

/** Organizations as the previous schema allowed them. */
const rows = {
  serviceCustomer: { id: newId(), externalId: 'cust-1', user: null, service: 'st_old' },
  squatter: { id: newId(), externalId: 'cust-1', user: 'u_squatter', service: null },
  personA: { id: newId(), externalId: 'shared', user: 'u_a', service: null },
  personB: { id: newId(), externalId: 'shared', user: 'u_b', service: null },
  lonePerson: { id: newId(), externalId: 'only-mine', user: 'u_a', service: null },
  loneService: { id: newId(), externalId: 'cust-2', user: null, service: 'st_old' },
  caseOnly: { id: newId(), externalId: 'CUST-1', user: 'u_b', service: null },
  none: { id: newId(), externalId: null, user: 'u_a', service: null },
};

beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
  folder = migrationsBefore(MIGRATION);
  const { migrate } = backend === 'pg' ? await import('drizzle-orm/node-postgres/migrator') : await import('drizzle-orm/pglite/migrator');
  await migrate(db.database.db as never, { migrationsFolder: folder });
});

afterAll(async () => {
  await app?.fastify.close();
  await db?.drop();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

describe(`migration ${MIGRATION}: the product's key`, () => {
  it('keeps values that collide with nothing, clears the colliding ones a person set (an audit row each), then holds the key unique', async () => {
    for (const row of Object.values(rows)) {
      await db.database.db.execute(
        sql`INSERT INTO organizations (id, name, external_id, created_by_user_id, created_by_service_token_id) VALUES (${row.id}, 'Legacy', ${row.externalId}, ${row.user}, ${row.service})`,
      );
    }

    await db.database.migrate();

    const migrated = await queryRows<{ id: string; external_id: string | null }>(db.database.db, sql`SELECT id, external_id FROM organizations`);
    const byId = Object.fromEntries(migrated.map((row) => [row.id, row.external_id]));
    expect(byId).toEqual({
      [rows.serviceCustomer.id]: 'cust-1',
      [rows.squatter.id]: null,
      [rows.personA.id]: null,
      [rows.personB.id]: null,
      [rows.lonePerson.id]: 'only-mine',
      [rows.loneService.id]: 'cust-2',
      // Matched exactly: another letter case collides with nothing.
      [rows.caseOnly.id]: 'CUST-1',
      [rows.none.id]: null,
    });

    const audit = await queryRows<{ organization_id: string; id: string; action: string; target_id: string; detail: { externalId: string } }>(
      db.database.db,
      sql`SELECT organization_id, id, action, target_id, detail FROM audit_logs WHERE action = 'organization.external_id_cleared' ORDER BY organization_id`,
    );
    const cleared = [rows.squatter, rows.personA, rows.personB].sort((a, b) => a.id.localeCompare(b.id));
    expect(audit.map((row) => [row.organization_id, row.target_id, row.detail.externalId])).toEqual(cleared.map((row) => [row.id, row.id, row.externalId]));
    for (const row of audit) expect(row.id).toMatch(ULID);
    expect(new Set(audit.map((row) => row.id)).size).toBe(audit.length);

    // The key is unique across the deployment now, whoever inserts it.
    await expect(db.database.db.execute(sql`INSERT INTO organizations (id, name, external_id, created_by_user_id) VALUES (${newId()}, 'Again', 'only-mine', 'u_other')`)).rejects.toThrow();
  });

  it("the service token's lookup finds only its customer, and a kept value is the product's key from now on", async () => {
    const config = testConfig({ BOOTSTRAP_ADMIN_EMAIL: 'root@example.com', BOOTSTRAP_ADMIN_PASSWORD: 'bootstrap admin password', RATE_LIMIT_MAX: '0' });
    app = await buildApp({ config, database: db.database, logger: createLogger({ level: 'warn', stream: new LogCapture() }) });
    await ensureBootstrapAdmin(app.services);
    const admin = await login(app.fastify, 'root@example.com', 'bootstrap admin password');
    const service = (await graphqlData(app.fastify, admin.token, 'mutation { createServiceToken(name: "backend") { token } }')).createServiceToken.token;

    const found = await app.fastify.inject({ url: '/v1/organizations?externalId=cust-1', headers: bearer(service) });
    expect(found.statusCode, found.body).toBe(200);
    expect(found.json().organizations.map((o: { id: string }) => o.id)).toEqual([rows.serviceCustomer.id]);
    for (const taken of ['cust-1', 'only-mine', 'CUST-1']) {
      const res = await app.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(service), payload: { name: 'New', externalId: taken } });
      expect(res.statusCode, taken).toBe(409);
    }
    // A cleared value is free for the product.
    const shared = await app.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(service), payload: { name: 'Shared', externalId: 'shared' } });
    expect(shared.statusCode, shared.body).toBe(201);
  });
});
