import { sql } from 'drizzle-orm';
import type { Keyring } from '../../config/checks.ts';
import { type Db, HotStatement, rowFromJson } from '../../db/client.ts';
import { integrations } from '../../db/schema.ts';
import { AppError } from '../../ground/errors.ts';
import { findIntegrationById, findIntegrationByProvider, type IntegrationRow } from '../integrations.ts';
import type { AppCatalog } from '../apps/catalog.ts';
import type { ConfiguredProvider, ProviderRegistry } from '../providers/registry.ts';
import { decryptRows, readSecrets, type SecretValues, secretName } from '../secrets.ts';

/**
 * An integration loaded for use: its row, its configured provider, and the secrets read
 * with it — all six, or only the access token on the hot path (a refresh re-reads the rest
 * under its lease).
 */
export interface LoadedIntegration {
  row: IntegrationRow;
  provider: ConfiguredProvider;
  secrets: SecretValues;
}

/** What loading needs: the database, the configured providers, the apps their grants were made with, and the keys that open secrets (`config.keyring`). */
export interface LoadDeps {
  db: Db;
  providers: ProviderRegistry;
  apps: AppCatalog;
  config: { keyring: Keyring };
}

/** An integration row as a statement returned it with `row_to_json`. */
export const integrationFromJson = rowFromJson(integrations);

/** The integration for `providerId` and the end user `endUserId` (null: the organization's own), with its secrets; 404 when there is none (or its provider is no longer configured). */
export async function loadByProvider(deps: LoadDeps, organizationId: string, providerId: string, endUserId: string | null): Promise<LoadedIntegration> {
  return withSecrets(deps, await findIntegrationByProvider(deps.db, organizationId, providerId, endUserId));
}

/** The organization's integration `id`, re-read with its secrets; 404 when it is gone. */
export async function loadById(deps: LoadDeps, organizationId: string, id: string): Promise<LoadedIntegration> {
  return withSecrets(deps, await findIntegrationById(deps.db, organizationId, id));
}

/** The row, when there is one and its provider is still configured; 404 otherwise. */
export function configuredRow(deps: Pick<LoadDeps, 'providers'>, row: IntegrationRow | null): IntegrationRow & { provider: string } {
  if (!row || !deps.providers.get(row.provider)) throw new AppError('INTEGRATION_NOT_FOUND');
  return row;
}

/** The provider bound to the app that made the row's grant (docs/contract.md §5e); 404 when that app or its provider is gone. */
export async function providerOf(deps: Pick<LoadDeps, 'db' | 'apps'>, row: Pick<IntegrationRow, 'organizationId' | 'appId' | 'provider'>): Promise<ConfiguredProvider> {
  const provider = await deps.apps.provider(deps.db, row.organizationId, row.appId, row.provider);
  if (!provider) throw new AppError('INTEGRATION_NOT_FOUND');
  return provider;
}

/** A row with its secrets; 404 for no row, or a provider (or app) no longer configured. */
export async function withSecrets(deps: LoadDeps, found: IntegrationRow | null): Promise<LoadedIntegration> {
  const row = configuredRow(deps, found);
  const provider = await providerOf(deps, row);
  const secrets = await readSecrets(deps.db, deps.config.keyring, { organizationId: row.organizationId, integrationId: row.id, provider: row.provider });
  return { row, provider, secrets };
}

/** An integration with only the secret its requests carry (the access token; entered credentials for api_key and basic), decrypted from the envelope a statement read with the row. */
export function withAccessToken(keyring: Keyring, row: IntegrationRow, provider: ConfiguredProvider, envelope: { keyId: string | null; envelope: string | null }): LoadedIntegration {
  const ref = { organizationId: row.organizationId, integrationId: row.id, provider: provider.id };
  const name = secretName(provider.id, provider.definition.presents);
  const secrets = envelope.keyId && envelope.envelope ? decryptRows(keyring, ref, [{ name, keyId: envelope.keyId, envelope: envelope.envelope }]) : {};
  return { row, provider, secrets };
}

const LOAD_MANY = new HotStatement<{ i: Record<string, unknown>; s: { name: string; key_id: string; envelope: string }[] | null }>(
  sql`SELECT row_to_json(i) AS i,
        (SELECT json_agg(json_build_object('name', s.name, 'key_id', s.key_id, 'envelope', s.envelope)) FROM integration_secrets s
          WHERE s.organization_id = i.organization_id AND s.integration_id = i.id) AS s
      FROM integrations i
      JOIN unnest(${sql.placeholder('organizationIds')}::text[], ${sql.placeholder('ids')}::text[]) AS k(organization_id, id) ON i.organization_id = k.organization_id AND i.id = k.id`,
);

/**
 * Many integrations with their secrets, in one prepared statement (background passes), rows read
 * from `row_to_json` by hand; rows of unconfigured providers are skipped.
 */
export async function loadMany(deps: LoadDeps, keys: { organizationId: string; id: string }[]): Promise<LoadedIntegration[]> {
  if (keys.length === 0) return [];
  const found = await LOAD_MANY.rows(deps.db, { organizationIds: keys.map((key) => key.organizationId), ids: keys.map((key) => key.id) });
  const loaded: LoadedIntegration[] = [];
  for (const { i, s } of found) {
    const row = integrationFromJson(i);
    const provider = await deps.apps.provider(deps.db, row.organizationId, row.appId, row.provider);
    if (!provider) continue;
    const ref = { organizationId: row.organizationId, integrationId: row.id, provider: row.provider };
    loaded.push({ row, provider, secrets: decryptRows(deps.config.keyring, ref, (s ?? []).map((one) => ({ name: one.name, keyId: one.key_id, envelope: one.envelope }))) });
  }
  return loaded;
}
