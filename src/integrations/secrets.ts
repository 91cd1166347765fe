import { and, eq } from 'drizzle-orm';
import type { Keyring } from '../config/checks.ts';
import type { Db } from '../db/client.ts';
import { integrationSecrets } from '../db/schema.ts';
import { open, seal } from '../secrets/crypto.ts';

/**
 * The secrets of an integration by their short names: the six of docs/seed.md, and the
 * `credentials` a person entered (docs/contract.md §5c: an API key, a token, client
 * credentials), as one JSON object.
 */
export const SECRET_KINDS = ['access_token', 'refresh_token', 'expires_at', 'provider_user_id', 'provider_username', 'provider_email', 'credentials'] as const;
export type SecretKind = (typeof SECRET_KINDS)[number];
export type SecretValues = Partial<Record<SecretKind, string>>;

export interface IntegrationRef {
  organizationId: string;
  integrationId: string;
  provider: string;
}

/** `<provider>_<kind>`, e.g. `github_access_token`. */
export function secretName(provider: string, kind: SecretKind): string {
  return `${provider}_${kind}`;
}

/**
 * Replaces every secret of the integration: delete, then insert the values present
 * (a value the provider did not give is absent, not stored empty). Run it inside the
 * transaction of the change; secrets are never updated in place.
 */
export async function replaceSecrets(tx: Db, keyring: Keyring, ref: IntegrationRef, values: SecretValues): Promise<void> {
  await tx
    .delete(integrationSecrets)
    .where(and(eq(integrationSecrets.organizationId, ref.organizationId), eq(integrationSecrets.integrationId, ref.integrationId)));
  const rows = sealSecrets(keyring, ref, values).map((row) => ({ organizationId: ref.organizationId, integrationId: ref.integrationId, ...row }));
  if (rows.length > 0) await tx.insert(integrationSecrets).values(rows);
}

/** Encrypts the values present (absent or empty ones are not stored), each bound to its row. */
export function sealSecrets(keyring: Keyring, ref: IntegrationRef, values: SecretValues): { name: string; keyId: string; envelope: string }[] {
  return SECRET_KINDS.filter((kind) => values[kind] !== undefined && values[kind] !== '').map((kind) => {
    const name = secretName(ref.provider, kind);
    const sealed = seal(keyring, { organizationId: ref.organizationId, recordId: ref.integrationId, name }, values[kind] as string);
    return { name, keyId: sealed.keyId, envelope: sealed.envelope };
  });
}

/** Reads and decrypts the integration's secrets; a row that fails to decrypt throws (a 500). */
export async function readSecrets(db: Db, keyring: Keyring, ref: IntegrationRef): Promise<SecretValues> {
  const rows = await db
    .select({ name: integrationSecrets.name, keyId: integrationSecrets.keyId, envelope: integrationSecrets.envelope })
    .from(integrationSecrets)
    .where(and(eq(integrationSecrets.organizationId, ref.organizationId), eq(integrationSecrets.integrationId, ref.integrationId)));
  return decryptRows(keyring, ref, rows);
}

/** Decrypts secret rows already read for `ref`. */
export function decryptRows(keyring: Keyring, ref: IntegrationRef, rows: { name: string; keyId: string; envelope: string }[]): SecretValues {
  const values: SecretValues = {};
  for (const row of rows) {
    const kind = SECRET_KINDS.find((candidate) => secretName(ref.provider, candidate) === row.name);
    if (!kind) continue;
    values[kind] = open(keyring, { organizationId: ref.organizationId, recordId: ref.integrationId, name: row.name }, row);
  }
  return values;
}
