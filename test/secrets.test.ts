import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.ts';
import { queryRows } from '../src/db/client.ts';
import { readSecrets, replaceSecrets } from '../src/integrations/secrets.ts';
import { SecretDecryptionError } from '../src/secrets/crypto.ts';
import { keyringReadiness } from '../src/secrets/keyring-check.ts';
import { rotateSecrets } from '../src/secrets/rotate.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { registerAndLogin } from './helpers/identity.ts';

let t: TestApp;
let organizationId: string;
const k1 = `k1:${Buffer.alloc(32, 1).toString('base64')}`;
const k2 = `k2:${Buffer.alloc(32, 2).toString('base64')}`;
const keyring = (keys: string) => loadConfig({ env: { ENCRYPTION_KEYS: keys, JWT_SECRET: 'j'.repeat(32) }, persistGeneratedSecrets: false }).keyring;

beforeAll(async () => {
  t = await createTestApp();
  organizationId = (await registerAndLogin(t.fastify, 'secrets')).organizationId;
});
afterAll(async () => {
  await t?.close();
});

const ref = (integrationId: string) => ({ organizationId, integrationId, provider: 'github' });

describe('secret store', () => {
  it('stores ciphertexts only, bound to their row: a moved ciphertext fails to decrypt', async () => {
    await replaceSecrets(t.database.db, t.config.keyring, ref('INT-A'), { access_token: 'gho_plaintext_token_a', provider_username: 'alice' });
    await replaceSecrets(t.database.db, t.config.keyring, ref('INT-B'), { access_token: 'gho_plaintext_token_b' });
    const rows = await queryRows<{ integration_id: string; name: string; envelope: string; key_id: string }>(t.database.db, sql`SELECT * FROM integration_secrets WHERE organization_id = ${organizationId}`);
    expect(JSON.stringify(rows)).not.toMatch(/plaintext_token|alice/);
    expect(rows.every((row) => row.key_id === 'test1' && row.envelope.startsWith('v1.'))).toBe(true);

    const a = rows.find((row) => row.integration_id === 'INT-A' && row.name === 'github_access_token');
    await t.database.db.execute(sql`DELETE FROM integration_secrets WHERE integration_id = 'INT-B'`);
    await t.database.db.execute(
      sql`INSERT INTO integration_secrets (organization_id, integration_id, name, key_id, envelope) VALUES (${organizationId}, 'INT-B', 'github_access_token', ${a?.key_id}, ${a?.envelope})`,
    );
    await expect(readSecrets(t.database.db, t.config.keyring, ref('INT-B'))).rejects.toBeInstanceOf(SecretDecryptionError);
    // Same row, another secret name: also refused.
    await t.database.db.execute(
      sql`INSERT INTO integration_secrets (organization_id, integration_id, name, key_id, envelope) VALUES (${organizationId}, 'INT-A', 'github_refresh_token', ${a?.key_id}, ${a?.envelope})`,
    );
    await expect(readSecrets(t.database.db, t.config.keyring, ref('INT-A'))).rejects.toBeInstanceOf(SecretDecryptionError);
  });

  it('rejects UPDATE on secret rows in the database itself', async () => {
    await replaceSecrets(t.database.db, t.config.keyring, ref('INT-C'), { access_token: 'x' });
    await expect(t.database.db.execute(sql`UPDATE integration_secrets SET envelope = 'v1.a.b.c' WHERE integration_id = 'INT-C'`)).rejects.toThrow();
    const [row] = await queryRows<{ envelope: string }>(t.database.db, sql`SELECT envelope FROM integration_secrets WHERE integration_id = 'INT-C'`);
    expect(row?.envelope).not.toBe('v1.a.b.c');
  });

  it('rotates every secret to the active key, keeping all readable and none under the old key', async () => {
    await t.database.db.execute(sql`DELETE FROM integration_secrets`);
    const old = keyring(k1);
    const values = Array.from({ length: 25 }, (_, i) => ({ id: `ROT-${String(i).padStart(2, '0')}`, token: `gho_rotating_${i}` }));
    for (const value of values) await replaceSecrets(t.database.db, old, ref(value.id), { access_token: value.token, provider_username: `user${value.id}` });
    const rotated = keyring(`${k2},${k1}`);
    const readiness = keyringReadiness(t.database.db, keyring(k2));
    expect(await readiness()).toMatch(/missing from ENCRYPTION_KEYS: k1/);
    const progress: number[] = [];
    const result = await rotateSecrets(t.database.db, rotated, { batchSize: 7, onProgress: ({ done }) => progress.push(done) });
    expect(result.done).toBeGreaterThanOrEqual(50);
    expect(progress.at(-1)).toBe(result.done);
    const [left] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM integration_secrets WHERE key_id = 'k1'`);
    expect(left?.n).toBe(0);
    const onlyNew = keyring(k2);
    for (const value of values) {
      expect(await readSecrets(t.database.db, onlyNew, ref(value.id))).toEqual({ access_token: value.token, provider_username: `user${value.id}` });
    }
    // Rerunning is a no-op: the rotation is resumable.
    expect((await rotateSecrets(t.database.db, rotated)).done).toBe(0);
    await t.database.db.execute(sql`DELETE FROM integration_secrets`);
  });

  it('answers /readyz 503 while a stored secret names a key id missing from the keyring', async () => {
    await replaceSecrets(t.database.db, keyring(`ghost:${Buffer.alloc(32, 5).toString('base64')}`), ref('INT-GHOST'), { access_token: 'x' });
    const res = await t.fastify.inject({ url: '/readyz' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({ status: 'unavailable', reason: expect.stringContaining('ghost') });
    await t.database.db.execute(sql`DELETE FROM integration_secrets WHERE integration_id = 'INT-GHOST'`);
    expect((await t.fastify.inject({ url: '/readyz' })).statusCode).toBe(200);
  });
});
