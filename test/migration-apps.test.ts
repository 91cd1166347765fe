// Migration 0019 (OAuth apps as data, docs/contract.md §5e) on a database holding rows of the schema
// before it: every integration, OAuth state and queued revocation was made with the deployment app of
// its provider, and the service then reads, refreshes, finishes and revokes them with that app's
// client — the fake provider, which knows a second client (a second deployment app is configured),
// records which.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, buildApp } from '../src/app.ts';
import { queryRows } from '../src/db/client.ts';
import { createLogger } from '../src/http/logging.ts';
import { sha256, StateCodec } from '../src/integrations/state.ts';
import { sealSecrets } from '../src/integrations/secrets.ts';
import { newId } from '../src/lib/ids.ts';
import { seal } from '../src/secrets/crypto.ts';
import { type FakeClient, type FakeProvider, s256 } from './fakes/common.ts';
import { type FakeGitHubUser, startFakeGitHub } from './fakes/github.ts';
import { LogCapture, testConfig } from './helpers/app.ts';
import { backend, createTestDatabase, migrationsBefore, type TestDatabase } from './helpers/database.ts';
import { bearer, registerAndLogin } from './helpers/identity.ts';
import { providerEnv, REDIRECT_URI } from './helpers/providers.ts';

/** The migration under test: everything before it is "the previous schema". */
const MIGRATION = 19;
const CALLBACK = 'http://127.0.0.1:8080/v1/integrations/oauth/callback';

/** Tokens GitHub issued to `login` for the settings' app, as a connect flow of the old code would have stored them. */
async function grantOf(fake: FakeProvider, login: string): Promise<{ access_token: string; refresh_token: string; expires_in: number; scope: string }> {
  const authorize = new URL(fake.authUrl);
  for (const [name, value] of Object.entries({ client_id: fake.clientId, redirect_uri: CALLBACK, scope: 'read:user repo', state: 'legacy' })) authorize.searchParams.set(name, value);
  const { code } = fake.authorize(authorize.href, login);
  const form = new URLSearchParams({ client_id: fake.clientId, client_secret: fake.clientSecret, code, redirect_uri: CALLBACK, grant_type: 'authorization_code' });
  const res = await fetch(fake.tokenUrl, { method: 'POST', headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' }, body: form });
  return res.json() as never;
}

let gh: FakeProvider<FakeGitHubUser>;
let client1: FakeClient;
let client2: FakeClient;
let db: TestDatabase;
let app: App;
let folder: string;

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  client1 = gh.clients[0] as FakeClient;
  client2 = gh.registerClient();
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

describe(`migration ${MIGRATION}: OAuth apps as data`, () => {
  it('gives every integration, OAuth state and queued revocation the deployment app of its provider, with which the service reads, refreshes, finishes and revokes them', async () => {
    const before = await queryRows<{ table_name: string }>(db.database.db, sql`SELECT table_name FROM information_schema.columns WHERE column_name = 'app_id' AND table_schema = 'public'`);
    expect(before).toEqual([]);
    const config = testConfig(
      { ...providerEnv(gh), RATE_LIMIT_MAX: '0' },
      { integrationOauthApps: [{ id: 'gh-second', provider: 'github', clientId: client2.clientId, clientSecret: client2.clientSecret }] },
    );
    gh.addUser({ login: 'legacy', email: 'legacy@example.com' });
    gh.addUser({ login: 'legacy-gone' });
    const organizationId = newId();
    const integrationId = newId();
    const grant = await grantOf(gh, 'legacy');
    const gone = await grantOf(gh, 'legacy-gone');
    const account = await accountId('legacy');

    // Rows as the previous code wrote them: an organization's GitHub integration with its secrets, a flow
    // started and not yet finished (its state, PKCE verifier sealed), and a grant queued for revocation.
    const expiresAt = new Date(Date.now() + grant.expires_in * 1000);
    await db.database.db.execute(sql`INSERT INTO organizations (id, name) VALUES (${organizationId}, 'Legacy')`);
    await db.database.db.execute(sql`
      INSERT INTO integrations (organization_id, id, provider, name, description, scopes, provider_account_id, status, has_refresh_token, token_expires_at, next_validation_at, metadata)
      VALUES (${organizationId}, ${integrationId}, 'github', 'GitHub Integration (legacy)', 'OAuth integration with github for legacy',
              ${sql.param(grant.scope.split(','))}::text[], ${account}, 'connected', true, ${expiresAt.toISOString()}::timestamptz, now() + interval '4 hours', '{}'::jsonb)`);
    const ref = { organizationId, integrationId, provider: 'github' };
    const values = { access_token: grant.access_token, refresh_token: grant.refresh_token, expires_at: expiresAt.toISOString(), provider_user_id: account, provider_username: 'legacy' };
    for (const secret of sealSecrets(config.keyring, ref, values)) {
      await db.database.db.execute(sql`INSERT INTO integration_secrets (organization_id, integration_id, name, key_id, envelope) VALUES (${organizationId}, ${integrationId}, ${secret.name}, ${secret.keyId}, ${secret.envelope})`);
    }
    const { state, payload } = new StateCodec(config.keyring).create(organizationId, 'github');
    const nonceHash = sha256(payload.nonce);
    const verifier = randomBytes(32).toString('base64url');
    const sealedVerifier = seal(config.keyring, { organizationId, recordId: nonceHash, name: 'code_verifier' }, verifier);
    const tx = randomBytes(32).toString('base64url');
    await db.database.db.execute(sql`
      INSERT INTO oauth_states (organization_id, nonce_hash, user_id, popup, provider, redirect_uri, scopes, code_verifier, code_verifier_key_id, tx_hash, expires_at)
      VALUES (${organizationId}, ${nonceHash}, ${newId()}, false, 'github', ${REDIRECT_URI}, ${sql.param(['read:user', 'repo'])}::text[], ${sealedVerifier.envelope}, ${sealedVerifier.keyId}, ${sha256(tx)}, now() + interval '10 minutes')`);
    const revocationId = newId();
    const sealedGrant = seal(config.keyring, { organizationId, recordId: revocationId, name: 'grant_revocation' }, JSON.stringify({ accessToken: gone.access_token, refreshToken: gone.refresh_token }));
    await db.database.db.execute(sql`
      INSERT INTO grant_revocations (organization_id, id, integration_id, provider, reason, metadata, key_id, envelope)
      VALUES (${organizationId}, ${revocationId}, ${newId()}, 'github', 'integration.deleted', '{}'::jsonb, ${sealedGrant.keyId}, ${sealedGrant.envelope})`);

    await db.database.migrate();

    const apps = async (table: string) => queryRows<{ app_id: string | null }>(db.database.db, sql`SELECT app_id FROM ${sql.raw(table)} WHERE organization_id = ${organizationId}`);
    expect(await apps('integrations')).toEqual([{ app_id: 'github' }]);
    expect(await apps('oauth_states')).toEqual([{ app_id: 'github' }]);
    expect(await apps('grant_revocations')).toEqual([{ app_id: 'github' }]);
    const [revocation] = await queryRows<{ app_key_id: string | null; app_envelope: string | null }>(db.database.db, sql`SELECT app_key_id, app_envelope FROM grant_revocations`);
    expect(revocation).toEqual({ app_key_id: null, app_envelope: null });
    for (const table of ['oauth_apps', 'oauth_app_secrets', 'organization_default_apps']) {
      expect((await queryRows<{ n: number }>(db.database.db, sql`SELECT count(*)::int AS n FROM ${sql.raw(table)}`))[0]?.n, table).toBe(0);
    }

    app = await buildApp({ config, database: db.database, logger: createLogger({ level: 'warn', stream: new LogCapture() }) });
    const person = await registerAndLogin(app.fastify, 'legacy-owner');
    await db.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${organizationId}, ${person.userId}, 'owner')`);
    const switched = await app.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(person.token), payload: { organizationId } });
    const token = switched.json().accessToken as string;
    const since = gh.clientCalls.length;

    // Read: the deployment app `github`.
    const deploymentApp = { id: 'github', owner: 'deployment' };
    expect((await app.fastify.inject({ url: '/v1/integrations', headers: bearer(token) })).json().integrations).toEqual([expect.objectContaining({ id: integrationId, app: deploymentApp })]);
    const read = await app.fastify.inject({ url: '/v1/integrations/github/token', headers: bearer(token) });
    expect(read.statusCode, read.body).toBe(200);
    expect(read.json()).toMatchObject({ app: deploymentApp, token: { accessToken: grant.access_token } });

    // Refreshed with client 1.
    const refreshed = await app.fastify.inject({ method: 'POST', url: '/v1/integrations/github/refresh', headers: bearer(token) });
    expect(refreshed.statusCode, refreshed.body).toBe(200);

    // The queued revocation goes out with client 1.
    await expect.poll(async () => {
      await app.services.revocations.runOnce();
      return (await queryRows<{ n: number }>(db.database.db, sql`SELECT count(*)::int AS n FROM grant_revocations`))[0]?.n;
    }).toBe(0);
    expect(gh.tokensOf('legacy-gone')).toEqual([]);

    // The flow started before the migration finishes after it, exchanging with client 1: the person
    // (whom the state names; the row was written before they registered here) approves at GitHub.
    await db.database.db.execute(sql`UPDATE oauth_states SET user_id = ${person.userId} WHERE organization_id = ${organizationId}`);
    const authorize = new URL(gh.authUrl);
    const params = { client_id: client1.clientId, redirect_uri: CALLBACK, scope: 'read:user repo', state, code_challenge: s256(verifier), code_challenge_method: 'S256' };
    for (const [name, value] of Object.entries(params)) authorize.searchParams.set(name, value);
    const approved = gh.authorize(authorize.href, 'legacy');
    const finished = await app.fastify.inject({
      method: 'POST',
      url: '/v1/integrations/oauth/callback',
      headers: { ...bearer(token), cookie: `oauth_tx=${tx}` },
      payload: { provider: 'github', code: approved.code, state: approved.state },
    });
    expect(finished.statusCode, finished.body).toBe(200);
    expect(finished.json().integration.id).toBe(integrationId);

    // Deleted: its grant revoked with client 1.
    const current = gh.tokensOf('legacy').at(-1)?.accessToken as string;
    expect((await app.fastify.inject({ method: 'DELETE', url: `/v1/integrations/${integrationId}`, headers: bearer(token) })).statusCode).toBe(200);
    await expect.poll(async () => {
      await app.services.revocations.runOnce();
      return gh.tokensOf('legacy').length;
    }).toBe(0);
    const revokedToken = gh.requests.find((r) => r.method === 'DELETE' && r.body.includes(current));
    expect(revokedToken?.path).toBe(`/api/applications/${client1.clientId}/grant`);

    expect(gh.clientCalls.slice(since)).toEqual([
      { endpoint: 'refresh', clientId: client1.clientId },
      { endpoint: 'revoke', clientId: client1.clientId },
      { endpoint: 'authorize', clientId: client1.clientId },
      { endpoint: 'token', clientId: client1.clientId },
      { endpoint: 'revoke', clientId: client1.clientId },
    ]);
  });
});

/** GitHub's numeric id of a fake user, as the old code stored it. */
async function accountId(login: string): Promise<string> {
  const [family] = gh.tokensOf(login);
  const res = await fetch(`${gh.apiUrl}/user`, { headers: { authorization: `Bearer ${family?.accessToken}` } });
  return String(((await res.json()) as { id: number }).id);
}
