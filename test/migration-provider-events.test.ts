// Migration 0014 (provider events) on a database holding rows of the schema before it: the
// workspace id is copied from the metadata the provider reported at connect, in the open; a row
// without that metadata lacks it (docs/providers.md, "Provider events"), and events still find
// it by account id where the event names one.
import { rmSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, buildApp } from '../src/app.ts';
import { queryRows } from '../src/db/client.ts';
import { createLogger } from '../src/http/logging.ts';
import { newId } from '../src/lib/ids.ts';
import { type SignedDelivery, slackEvents, zoomEvents } from './fakes/provider-events.ts';
import { LogCapture, testConfig } from './helpers/app.ts';
import { backend, createTestDatabase, migrationsBefore, type TestDatabase } from './helpers/database.ts';
import { eventsEnv, SECRETS } from './helpers/provider-events.ts';

const MIGRATION = 14;

let db: TestDatabase;
let app: App;
let folder: string;
const rows = {
  slackWithMetadata: { organizationId: newId(), id: newId(), provider: 'slack', account: 'T0OLD:U0ONE', metadata: { workspaceId: 'T0OLD' } },
  slackBeforeMetadata: { organizationId: newId(), id: newId(), provider: 'slack', account: 'T0OLD:U0TWO', metadata: {} },
  zoomWithMetadata: { organizationId: newId(), id: newId(), provider: 'zoom', account: 'zoomUser1', metadata: { accountId: 'zoomAccount1', apiUrl: 'https://api.zoom.us' } },
  github: { organizationId: newId(), id: newId(), provider: 'github', account: '583231', metadata: {} },
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

describe(`migration ${MIGRATION}: provider events`, () => {
  it('copies the workspace id from the metadata the provider reported, and leaves rows without it null', async () => {
    for (const row of Object.values(rows)) {
      await db.database.db.execute(sql`INSERT INTO organizations (id, name) VALUES (${row.organizationId}, ${`Legacy ${row.provider}`})`);
      await db.database.db.execute(sql`
        INSERT INTO integrations (organization_id, id, provider, name, description, provider_account_id, status, next_validation_at, metadata)
        VALUES (${row.organizationId}, ${row.id}, ${row.provider}, 'Legacy', 'Legacy', ${row.account}, 'connected', now() + interval '4 hours', ${JSON.stringify(row.metadata)}::jsonb)`);
    }

    await db.database.migrate();

    const migrated = await queryRows<{ id: string; provider_workspace_id: string | null }>(db.database.db, sql`SELECT id, provider_workspace_id FROM integrations`);
    const byId = Object.fromEntries(migrated.map((row) => [row.id, row.provider_workspace_id]));
    expect(byId).toEqual({ [rows.slackWithMetadata.id]: 'T0OLD', [rows.slackBeforeMetadata.id]: null, [rows.zoomWithMetadata.id]: 'zoomAccount1', [rows.github.id]: null });
  });

  it('events find the migrated rows: by workspace where it was copied, by account id everywhere', async () => {
    const env = {
      INTEGRATION_OAUTH_SLACK_CLIENT_ID: 'legacy-slack-client',
      INTEGRATION_OAUTH_SLACK_CLIENT_SECRET: 'legacy-slack-secret',
      INTEGRATION_OAUTH_ZOOM_CLIENT_ID: 'legacy-zoom-client',
      INTEGRATION_OAUTH_ZOOM_CLIENT_SECRET: 'legacy-zoom-secret',
      ...eventsEnv('slack', 'zoom'),
      RATE_LIMIT_MAX: '0',
    };
    app = await buildApp({ config: testConfig(env), database: db.database, logger: createLogger({ level: 'warn', stream: new LogCapture() }) });
    const post = async (provider: string, delivery: SignedDelivery) => {
      const res = await app.fastify.inject({ method: 'POST', url: `/v1/providers/${provider}/events`, headers: delivery.headers, payload: delivery.body });
      expect(res.statusCode, res.body).toBe(200);
    };
    const statuses = async () => {
      const found = await queryRows<{ id: string; status: string }>(db.database.db, sql`SELECT id, status FROM integrations`);
      const byId = Object.fromEntries(found.map((row) => [row.id, row.status]));
      return Object.fromEntries(Object.entries(rows).map(([name, row]) => [name, byId[row.id]]));
    };

    // app_uninstalled names the workspace: the row that lacks it is not found (what the migration note says).
    await post('slack', slackEvents(SECRETS.slack).appUninstalled('T0OLD'));
    expect(await statuses()).toEqual({ slackWithMetadata: 'invalid', slackBeforeMetadata: 'connected', zoomWithMetadata: 'connected', github: 'connected' });
    // tokens_revoked names the user, whose account id every row keeps.
    await post('slack', slackEvents(SECRETS.slack).tokensRevoked('T0OLD', ['U0TWO']));
    expect((await statuses()).slackBeforeMetadata).toBe('invalid');
    await post('zoom', zoomEvents(SECRETS.zoom).appDeauthorized('zoomAccount1', 'zoomUser1'));
    expect(await statuses()).toEqual({ slackWithMetadata: 'invalid', slackBeforeMetadata: 'invalid', zoomWithMetadata: 'invalid', github: 'connected' });
  });
});
