// How much memory an embedded database zeroes at start (decision 341): a deployment's server keeps
// PostgreSQL's 128 MB of shared buffers; a command (`tessera migrate`, `doctor`, `service-tokens`…)
// opens its DATA_DIR with 16 MB, and a test database with 4 MB.
import { rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { openConfiguredDatabase } from '../src/cli/database.ts';
import { openDatabase } from '../src/server.ts';
import { type Database, queryRows, sql } from '../src/db/client.ts';
import { testConfig } from './helpers/app.ts';
import { createTestDatabase, newDataDir, TEST_DATABASE_URL } from './helpers/database.ts';

const sharedBuffers = async (database: Database) => (await queryRows<{ shared_buffers: string }>(database.db, sql`SHOW shared_buffers`))[0]?.shared_buffers;

describe.skipIf(TEST_DATABASE_URL)('the embedded database’s shared buffers', () => {
  const dataDir = newDataDir('tessera-buffers-');
  const config = testConfig({ DATA_DIR: dataDir });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('are PostgreSQL’s 128MB for the server, 16MB for a command, 4MB for a test database', async () => {
    expect(config.db.url).toBeUndefined();
    const served = await openDatabase(config);
    try {
      expect(await sharedBuffers(served)).toBe('128MB');
    } finally {
      await served.close();
    }
    const command = await openConfiguredDatabase(config);
    try {
      expect(await sharedBuffers(command)).toBe('16MB');
    } finally {
      await command.close();
    }
    const test = await createTestDatabase();
    try {
      expect(await sharedBuffers(test.database)).toBe('4MB');
    } finally {
      await test.drop();
    }
  });
});
