import { sql } from 'drizzle-orm';
import { type AuditActor, actorValues, auditInsert } from '../../audit/audit.ts';
import { queryRows } from '../../db/client.ts';
import type { TokenSet } from '../providers/types.ts';
import { type SecretValues, sealSecrets } from '../secrets.ts';
import { accessTokenExpiry, refreshTokenExpiry } from '../token-endpoint.ts';
import { integrationFromJson, type LoadDeps, type LoadedIntegration } from './loaded.ts';

/**
 * Stores a refreshed token set the moment the provider answers (it has already retired the
 * old refresh token): compare-and-set on the token version, delete and re-insert of the
 * secrets (a refresh token the provider did not return again is kept), and the audit row —
 * one statement (decision 53), so the window between the provider's answer and a durable
 * copy is a single round trip. Returns the stored integration, or null when the
 * compare-and-set lost (only if our lease lapsed mid-call and another instance stored first).
 */
export async function storeRotated(
  deps: Pick<LoadDeps, 'db' | 'config'>,
  loaded: LoadedIntegration,
  tokens: TokenSet,
  actor: AuditActor,
): Promise<LoadedIntegration | null> {
  const { organizationId, id, provider } = loaded.row;
  const now = Date.now();
  const tokenExpiresAt = accessTokenExpiry(tokens, now);
  const refreshToken = tokens.refreshToken ?? loaded.secrets.refresh_token;
  const secrets: SecretValues = { ...loaded.secrets, access_token: tokens.accessToken, refresh_token: refreshToken, expires_at: tokenExpiresAt?.toISOString() };
  const sealed = sealSecrets(deps.config.keyring, { organizationId, integrationId: id, provider }, secrets);
  const refreshExpiresAt = tokens.refreshToken ? refreshTokenExpiry(tokens, now) : undefined;
  const [stored] = await queryRows<{ integration: Record<string, unknown> }>(
    deps.db,
    sql`WITH upd AS (
          UPDATE integrations SET
            token_version = token_version + 1,
            last_refreshed_at = now(),
            token_expires_at = ${tokenExpiresAt ? tokenExpiresAt.toISOString() : null}::timestamptz,
            refresh_token_expires_at = ${refreshExpiresAt === undefined ? sql`refresh_token_expires_at` : sql`${refreshExpiresAt ? refreshExpiresAt.toISOString() : null}::timestamptz`},
            has_refresh_token = ${refreshToken !== undefined || loaded.provider.definition.mint !== undefined},
            scopes = ${tokens.scopes.length > 0 ? sql`${sql.param(tokens.scopes)}::text[]` : sql`scopes`},
            metadata = metadata || ${JSON.stringify(tokens.metadata ?? {})}::jsonb,
            updated_at = now()
          WHERE organization_id = ${organizationId} AND id = ${id} AND token_version = ${loaded.row.tokenVersion}
          RETURNING *
        ), del AS (
          DELETE FROM integration_secrets
          WHERE organization_id = ${organizationId} AND integration_id = ${id} AND EXISTS (SELECT 1 FROM upd)
          RETURNING 1
        ), ins AS (
          INSERT INTO integration_secrets (organization_id, integration_id, name, key_id, envelope)
          SELECT ${organizationId}, ${id}, s.name, s.key_id, s.envelope
          FROM unnest(${sql.param(sealed.map((r) => r.name))}::text[], ${sql.param(sealed.map((r) => r.keyId))}::text[], ${sql.param(sealed.map((r) => r.envelope))}::text[]) AS s(name, key_id, envelope),
               (SELECT count(*) FROM del) AS deleted
          WHERE EXISTS (SELECT 1 FROM upd)
          RETURNING 1
        ), audit AS (${auditInsert(
          {
            organizationId: sql`organization_id`,
            ...actorValues(actor),
            action: sql`'integration.refreshed'`,
            targetType: sql`'integration'`,
            targetId: sql`id`,
            detail: sql`${JSON.stringify({ provider })}::jsonb`,
          },
          sql`upd`,
        )})
        SELECT row_to_json(i) AS integration, (SELECT count(*) FROM ins)::int AS secrets_written, (SELECT count(*) FROM audit)::int AS audited FROM upd AS i`,
  );
  return stored ? { row: integrationFromJson(stored.integration), provider: loaded.provider, secrets } : null;
}
