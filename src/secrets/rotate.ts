import { and, count, eq, ne } from 'drizzle-orm';
import type { Keyring } from '../config/checks.ts';
import type { Db } from '../db/client.ts';
import { integrationSecrets } from '../db/schema.ts';
import { open, seal } from './crypto.ts';

export interface RotationProgress {
  done: number;
  total: number;
}

/**
 * Re-encrypts every integration secret not under the keyring's active key, in batches:
 * each batch decrypts, re-seals, then deletes and inserts its rows in one transaction
 * (rows are immutable). Resumable: a rerun picks up whatever is still under an old key.
 */
export async function rotateSecrets(
  db: Db,
  keyring: Keyring,
  options: { batchSize?: number; onProgress?: (progress: RotationProgress) => void } = {},
): Promise<RotationProgress> {
  const batchSize = options.batchSize ?? 200;
  const [{ value: total } = { value: 0 }] = await db.select({ value: count() }).from(integrationSecrets).where(ne(integrationSecrets.keyId, keyring.activeId));
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
  return { done, total: Math.max(total, done) };
}
