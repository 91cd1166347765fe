import { and, count, eq, ne } from 'drizzle-orm';
import type { Keyring } from '../config/checks.ts';
import { type Db, queryRows, sql } from '../db/client.ts';
import { integrationSecrets } from '../db/schema.ts';
import { endpointSecretBinding } from '../events/endpoints.ts';
import { appSecretBinding } from '../integrations/apps/catalog.ts';
import { open, seal } from './crypto.ts';

export interface RotationProgress {
  done: number;
  total: number;
}

/**
 * Re-encrypts every integration secret not under the keyring's active key, in batches:
 * each batch decrypts, re-seals, then deletes and inserts its rows in one transaction
 * (rows are immutable). Then the webhook endpoints' signing secrets the same way (updated in
 * place), and organizations' apps' secrets (deleted and inserted). Resumable: a rerun picks up whatever is still under an old key.
 */
export async function rotateSecrets(
  db: Db,
  keyring: Keyring,
  options: { batchSize?: number; onProgress?: (progress: RotationProgress) => void } = {},
): Promise<RotationProgress> {
  const batchSize = options.batchSize ?? 200;
  const [{ value: integrationTotal } = { value: 0 }] = await db.select({ value: count() }).from(integrationSecrets).where(ne(integrationSecrets.keyId, keyring.activeId));
  const [{ value: endpointTotal } = { value: 0 }] = await queryRows<{ value: number }>(
    db,
    sql`SELECT count(*)::int AS value FROM webhook_endpoint_secrets WHERE key_id <> ${keyring.activeId}`,
  );
  const [{ value: appTotal } = { value: 0 }] = await queryRows<{ value: number }>(db, sql`SELECT count(*)::int AS value FROM oauth_app_secrets WHERE key_id <> ${keyring.activeId}`);
  const total = integrationTotal + endpointTotal + appTotal;
  let done = 0;
  options.onProgress?.({ done, total });
  for (;;) {
    const moved = await db.transaction(async (tx) => {
      const rows = await tx
        .select()
        .from(integrationSecrets)
        .where(ne(integrationSecrets.keyId, keyring.activeId))
        .orderBy(integrationSecrets.organizationId, integrationSecrets.integrationId, integrationSecrets.name)
        .limit(batchSize)
        .for('update', { skipLocked: true });
      if (rows.length === 0) return 0;
      const replacements = rows.map((row) => {
        const binding = { organizationId: row.organizationId, recordId: row.integrationId, name: row.name };
        const sealed = seal(keyring, binding, open(keyring, binding, row));
        return { ...row, keyId: sealed.keyId, envelope: sealed.envelope };
      });
      for (const row of rows) {
        await tx
          .delete(integrationSecrets)
          .where(
            and(
              eq(integrationSecrets.organizationId, row.organizationId),
              eq(integrationSecrets.integrationId, row.integrationId),
              eq(integrationSecrets.name, row.name),
            ),
          );
      }
      await tx.insert(integrationSecrets).values(replacements);
      return rows.length;
    });
    if (moved === 0) break;
    done += moved;
    options.onProgress?.({ done, total: Math.max(total, done) });
  }
  // Webhook endpoints' signing secrets (docs/contract.md §7): re-sealed in place, a batch per transaction.
  for (;;) {
    const moved = await db.transaction(async (tx) => {
      const rows = await queryRows<{ endpoint_id: string; id: string; key_id: string; envelope: string }>(
        tx as unknown as Db,
        sql`SELECT endpoint_id, id, key_id, envelope FROM webhook_endpoint_secrets WHERE key_id <> ${keyring.activeId}
            ORDER BY endpoint_id, id LIMIT ${batchSize} FOR UPDATE SKIP LOCKED`,
      );
      for (const row of rows) {
        const binding = endpointSecretBinding(row.endpoint_id, row.id);
        const sealed = seal(keyring, binding, open(keyring, binding, { keyId: row.key_id, envelope: row.envelope }));
        await tx.execute(sql`UPDATE webhook_endpoint_secrets SET key_id = ${sealed.keyId}, envelope = ${sealed.envelope} WHERE endpoint_id = ${row.endpoint_id} AND id = ${row.id}`);
      }
      return rows.length;
    });
    if (moved === 0) break;
    done += moved;
    options.onProgress?.({ done, total: Math.max(total, done) });
  }
  // Organizations' apps' secrets (docs/contract.md §5e): never updated in place, so deleted and inserted, a batch per transaction.
  for (;;) {
    const moved = await db.transaction(async (tx) => {
      const rows = await queryRows<{ organization_id: string; app_id: string; key_id: string; envelope: string; created_at: string }>(
        tx as unknown as Db,
        sql`SELECT organization_id, app_id, key_id, envelope, created_at FROM oauth_app_secrets WHERE key_id <> ${keyring.activeId}
            ORDER BY organization_id, app_id LIMIT ${batchSize} FOR UPDATE SKIP LOCKED`,
      );
      for (const row of rows) {
        const binding = appSecretBinding(row.organization_id, row.app_id);
        const sealed = seal(keyring, binding, open(keyring, binding, { keyId: row.key_id, envelope: row.envelope }));
        await tx.execute(sql`DELETE FROM oauth_app_secrets WHERE organization_id = ${row.organization_id} AND app_id = ${row.app_id}`);
        await tx.execute(
          sql`INSERT INTO oauth_app_secrets (organization_id, app_id, key_id, envelope, created_at) VALUES (${row.organization_id}, ${row.app_id}, ${sealed.keyId}, ${sealed.envelope}, ${row.created_at})`,
        );
      }
      return rows.length;
    });
    if (moved === 0) break;
    done += moved;
    options.onProgress?.({ done, total: Math.max(total, done) });
  }
  return { done, total: Math.max(total, done) };
}
