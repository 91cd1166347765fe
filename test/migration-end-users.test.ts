// Migration 0011 (integrations per end user) on a database holding rows of the schema before
// it: every existing integration becomes the organization's own, and still reads and refreshes.
import { rmSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, buildApp } from '../src/app.ts';
import { queryRows } from '../src/db/client.ts';
import { createLogger } from '../src/http/logging.ts';
import { sealSecrets } from '../src/integrations/secrets.ts';
import { newId } from '../src/lib/ids.ts';
import type { FakeProvider } from './fakes/common.ts';
import { type FakeGitHubUser, startFakeGitHub } from './fakes/github.ts';
import { LogCapture, testConfig } from './helpers/app.ts';
import { backend, createTestDatabase, migrationsBefore, type TestDatabase } from './helpers/database.ts';
import { bearer, registerAndLogin } from './helpers/identity.ts';
import { providerEnv } from './helpers/providers.ts';

/** The migration under test: everything before it is "the previous schema". */
const MIGRATION = 11;

/** Tokens GitHub issued to `login` for this app, as a connect flow of the old code would have stored them. */
async function grantOf(fake: FakeProvider, login: string): Promise<{ access_token: string; refresh_token: string; expires_in: number; scope: string }> {
  const redirectUri = 'http://127.0.0.1:8080/v1/integrations/oauth/callback';
  const authorize = new URL(fake.authUrl);
  for (const [name, value] of Object.entries({ client_id: fake.clientId, redirect_uri: redirectUri, scope: 'read:user repo', state: 'legacy' })) authorize.searchParams.set(name, value);
  const { code } = fake.authorize(authorize.href, login);
  const form = new URLSearchParams({ client_id: fake.clientId, client_secret: fake.clientSecret, code, redirect_uri: redirectUri, grant_type: 'authorization_code' });
  const res = await fetch(fake.tokenUrl, { method: 'POST', headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' }, body: form });
  return res.json() as never;
}

let gh: FakeProvider<FakeGitHubUser>;
let db: TestDatabase;
let app: App;
let folder: string;
const legacy = { organizationId: newId(), integrationId: newId(), otherOrganizationId: newId(), otherIntegrationId: newId() };
let grant: Awaited<ReturnType<typeof grantOf>>;
let user: FakeGitHubUser;
let userTwo: FakeGitHubUser;

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  user = gh.addUser({ login: 'legacy', email: 'legacy@example.com' });
  userTwo = gh.addUser({ login: 'legacy-two' });
  db = await createTestDatabase({ migrate: false });
  folder = migrationsBefore(MIGRATION);
  const { migrate } = backend === 'pg' ? await import('drizzle-orm/node-postgres/migrator') : await import('drizzle-orm/pglite/migrator');
  await migrate(db.database.db as never, { migrationsFolder: folder });
});

afterAll(async () => {
  await app?.fastify.close();
  await db?.drop();
  await gh?.close();
  if (folder) rmSync(folder, { recursive: true, force: true });
});

describe(`migration ${MIGRATION}: integrations per end user`, () => {
  it('keeps every existing integration as its organization’s own, which still reads and refreshes', async () => {
    // The previous schema: an integration keyed by organization and provider alone.
    const columns = await queryRows<{ column_name: string }>(db.database.db, sql`SELECT column_name FROM information_schema.columns WHERE table_name = 'integrations' AND column_name IN ('end_user_key', 'end_user')`);
    expect(columns).toEqual([]);
    const config = testConfig({ ...providerEnv(gh), RATE_LIMIT_MAX: '0' });
    grant = await grantOf(gh, 'legacy');
    const other = await grantOf(gh, 'legacy-two');
    // Rows as the previous code wrote them: two organizations, a GitHub integration each (one connected
    // through a connect session for an end user, which the previous schema kept only in connected_via), and their secrets.
    const rows = [
      { organizationId: legacy.organizationId, integrationId: legacy.integrationId, tokens: grant, login: 'legacy', account: String(user.id), via: null },
      { organizationId: legacy.otherOrganizationId, integrationId: legacy.otherIntegrationId, tokens: other, login: 'legacy-two', account: String(userTwo.id), via: { sessionId: newId(), endUser: { id: 'customer-9' } } },
    ];
    for (const row of rows) {
      const expiresAt = new Date(Date.now() + row.tokens.expires_in * 1000);
      await db.database.db.execute(sql`INSERT INTO organizations (id, name) VALUES (${row.organizationId}, ${`Legacy ${row.login}`})`);
      await db.database.db.execute(sql`
        INSERT INTO integrations (organization_id, id, provider, name, description, scopes, provider_account_id, status, has_refresh_token, token_expires_at, next_validation_at, metadata, connected_via)
        VALUES (${row.organizationId}, ${row.integrationId}, 'github', ${`GitHub Integration (${row.login})`}, ${`OAuth integration with github for ${row.login}`},
                ${sql.param(row.tokens.scope.split(','))}::text[], ${row.account}, 'connected', true, ${expiresAt.toISOString()}::timestamptz, now() + interval '4 hours', '{}'::jsonb, ${row.via === null ? null : JSON.stringify(row.via)}::jsonb)`);
      const sealed = sealSecrets(config.keyring, { organizationId: row.organizationId, integrationId: row.integrationId, provider: 'github' }, {
        access_token: row.tokens.access_token,
        refresh_token: row.tokens.refresh_token,
        expires_at: expiresAt.toISOString(),
        provider_user_id: row.account,
        provider_username: row.login,
      });
      for (const secret of sealed) {
        await db.database.db.execute(sql`INSERT INTO integration_secrets (organization_id, integration_id, name, key_id, envelope) VALUES (${row.organizationId}, ${row.integrationId}, ${secret.name}, ${secret.keyId}, ${secret.envelope})`);
      }
    }

    await db.database.migrate();

    const migrated = await queryRows<{ id: string; end_user_key: string; end_user: unknown }>(db.database.db, sql`SELECT id, end_user_key, end_user FROM integrations ORDER BY id`);
    expect(migrated).toEqual(
      [
        { id: legacy.integrationId, end_user_key: '', end_user: null },
        { id: legacy.otherIntegrationId, end_user_key: '', end_user: null },
      ].sort((a, b) => a.id.localeCompare(b.id)),
    );
    const indexes = await queryRows<{ indexname: string }>(db.database.db, sql`SELECT indexname FROM pg_indexes WHERE tablename = 'integrations' AND indexname LIKE 'integrations_organization_provider%'`);
    expect(indexes.map((i) => i.indexname)).toEqual(['integrations_organization_provider_end_user_key']);

    app = await buildApp({ config, database: db.database, logger: createLogger({ level: 'warn', stream: new LogCapture() }) });
    const person = await registerAndLogin(app.fastify, 'legacy-owner');
    await db.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${legacy.organizationId}, ${person.userId}, 'owner')`);
    const switched = await app.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(person.token), payload: { organizationId: legacy.organizationId } });
    const token = switched.json().accessToken as string;

    const listed = (await app.fastify.inject({ url: '/v1/integrations', headers: bearer(token) })).json().integrations;
    expect(listed).toEqual([expect.objectContaining({ id: legacy.integrationId, provider: 'github', endUser: null, connectedVia: null })]);
    // The organization's own: addressed without endUser, and by no end user.
    const read = await app.fastify.inject({ url: '/v1/integrations/github/token', headers: bearer(token) });
    expect(read.statusCode, read.body).toBe(200);
    expect(read.json()).toMatchObject({ token: { accessToken: grant.access_token }, endUser: null });
    expect((await app.fastify.inject({ url: '/v1/integrations/github/token?endUser=customer-9', headers: bearer(token) })).statusCode).toBe(404);

    const refreshes = gh.stats.refreshes;
    const refreshed = await app.fastify.inject({ method: 'POST', url: '/v1/integrations/github/refresh', headers: bearer(token) });
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    expect(gh.stats.refreshes).toBe(refreshes + 1);
    expect(refreshed.json().token.accessToken).not.toBe(grant.access_token);
    expect(gh.tokensOf('legacy').map((t) => t.accessToken)).toContain(refreshed.json().token.accessToken);
    expect((await app.fastify.inject({ url: '/v1/integrations/github/proxy/user', headers: bearer(token) })).json().login).toBe('legacy');

    // The row connected through a session before the change is its organization's own too (its end user only in connectedVia).
    const [kept] = await queryRows<{ end_user_key: string; connected_via: unknown }>(db.database.db, sql`SELECT end_user_key, connected_via FROM integrations WHERE id = ${legacy.otherIntegrationId}`);
    expect(kept).toMatchObject({ end_user_key: '', connected_via: { endUser: { id: 'customer-9' } } });
  });
});
