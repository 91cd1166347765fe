import type { Keyring } from '../config/checks.ts';
import { type Db, queryRows, sql } from '../db/client.ts';

/** Key ids that stored ciphertexts name but the keyring lacks (at most a few). */
export async function missingKeyIds(db: Db, keyring: Keyring): Promise<string[]> {
  const known = [...keyring.keys.keys()];
  const rows = await queryRows<{ key_id: string }>(
    db,
    sql`SELECT DISTINCT key_id FROM (
          (SELECT key_id FROM integration_secrets WHERE NOT (key_id = ANY(${sql.param(known)}::text[])) LIMIT 100)
          UNION ALL
          -- Grants still to revoke carry their tokens encrypted too (integrations/revocations.ts).
          (SELECT key_id FROM grant_revocations WHERE NOT (key_id = ANY(${sql.param(known)}::text[])) LIMIT 100)
          UNION ALL
          -- Webhook endpoints' signing secrets (events/endpoints.ts).
          (SELECT key_id FROM webhook_endpoint_secrets WHERE NOT (key_id = ANY(${sql.param(known)}::text[])) LIMIT 100)
          UNION ALL
          -- Organizations' apps' secrets (integrations/apps/).
          (SELECT key_id FROM oauth_app_secrets WHERE NOT (key_id = ANY(${sql.param(known)}::text[])) LIMIT 100)
        ) AS unknown_keys`,
  );
  return rows.map((row) => row.key_id);
}

/** A readiness check: not ready while any secret is encrypted under a key id missing from ENCRYPTION_KEYS. */
export function keyringReadiness(db: Db, keyring: Keyring): () => Promise<string | null> {
  return async () => {
    const missing = await missingKeyIds(db, keyring);
    return missing.length > 0 ? `secrets encrypted under key id(s) missing from ENCRYPTION_KEYS: ${missing.join(', ')}` : null;
  };
}
