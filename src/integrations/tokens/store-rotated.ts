import { type SQL, sql } from 'drizzle-orm';
import type { AuditActor } from '../../ground/work.ts';
import { actorValues, auditInsert } from '../../audit/audit.ts';
import { holdConnection, queryRows } from '../../db/client.ts';
import { databaseUnavailable } from '../../db/failure.ts';
import { prepareSeal, type SealKey, seal } from '../../secrets/crypto.ts';
import type { TokenSet } from '../providers/types.ts';
import { type SecretKind, type SecretValues, secretName } from '../secrets.ts';
import { accessTokenExpiry, refreshTokenExpiry } from '../token-endpoint.ts';
import { integrationFromJson, type LoadDeps, type LoadedIntegration } from './loaded.ts';

/** The secrets a refresh replaces; the account's (id, name, e-mail) stay as they are. */
const ROTATED: SecretKind[] = ['access_token', 'refresh_token', 'expires_at'];

/** How long a store that could not reach the database is tried again, from the provider's answer (docs/contract.md §2: 503 within 10 s). */
export const STORE_RETRY_MS = 5000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The store of one refresh's answer, made ready before the provider is called. */
export interface RotatedStore {
  /**
   * Stores the provider's answer at once: one statement on the connection held since before
   * the call. Returns the stored integration, or null when the compare-and-set lost (only if
   * our lease lapsed mid-call and another instance stored first). A store that cannot reach
   * the database is tried again for `STORE_RETRY_MS`; then the error is thrown.
   */
  store(tokens: TokenSet): Promise<LoadedIntegration | null>;
  /** Gives the held connection back (always, once the store or the call is over). */
  release(): void;
}

/**
 * Everything the store of a rotated token needs that does not depend on the answer, done
 * before the token request (decision 255): a pool connection taken now (so the statement never
 * queues behind request traffic) and the record keys derived (HKDF) for the three secrets a
 * refresh replaces. The store is then one statement (decision 53), sent as soon as the answer
 * is parsed.
 */
export async function prepareRotatedStore(
  deps: Pick<LoadDeps, 'db' | 'config'>,
  loaded: LoadedIntegration,
  actor: AuditActor,
  options: { hold?: boolean } = {},
): Promise<RotatedStore> {
  const { keyring } = deps.config;
  const keys = new Map<SecretKind, SealKey>(ROTATED.map((kind) => [kind, prepareSeal(keyring)]));
  let held = options.hold === false ? null : await holdConnection(deps.db);
  const release = (broken = false) => {
    held?.release(broken);
    held = null;
  };
  return {
    release: () => release(),
    async store(tokens) {
      const answeredAt = Date.now();
      const { statement, secrets } = rotatedStatement(loaded, tokens, actor, keys, keyring, answeredAt);
      for (let attempt = 0; ; attempt++) {
        try {
          const [stored] = held ? await held.rows<StoredRow>(statement) : await queryRows<StoredRow>(deps.db, statement);
          return stored ? { row: integrationFromJson(stored.integration), provider: loaded.provider, secrets } : null;
        } catch (error) {
          release(true);
          // The compare-and-set makes a repeat harmless: a first attempt that did commit makes it find nothing to update.
          const wait = Math.min(1000, 100 * 2 ** attempt);
          if (!databaseUnavailable(error) || Date.now() + wait > answeredAt + STORE_RETRY_MS) throw error;
          await sleep(wait);
        }
      }
    },
  };
}

/** Stores a token set already in hand (a minted one: the grant it came from stays valid), on any pool connection. */
export async function storeRotated(deps: Pick<LoadDeps, 'db' | 'config'>, loaded: LoadedIntegration, tokens: TokenSet, actor: AuditActor): Promise<LoadedIntegration | null> {
  const store = await prepareRotatedStore(deps, loaded, actor, { hold: false });
  return store.store(tokens);
}

interface StoredRow {
  integration: Record<string, unknown>;
}

/** The one statement: compare-and-set on the version, the rotated secrets deleted and re-inserted, the audit row. */
function rotatedStatement(
  loaded: LoadedIntegration,
  tokens: TokenSet,
  actor: AuditActor,
  keys: Map<SecretKind, SealKey>,
  keyring: Parameters<typeof prepareSeal>[0],
  now: number,
): { statement: SQL; secrets: SecretValues } {
  const { organizationId, id, provider } = loaded.row;
  const tokenExpiresAt = accessTokenExpiry(tokens, now);
  const refreshToken = tokens.refreshToken ?? loaded.secrets.refresh_token;
  const rotated: SecretValues = { access_token: tokens.accessToken, refresh_token: refreshToken, expires_at: tokenExpiresAt?.toISOString() };
  const secrets: SecretValues = { ...loaded.secrets, ...rotated };
  if (secrets.expires_at === undefined) delete secrets.expires_at;
  const names = ROTATED.map((kind) => secretName(provider, kind));
  const sealed = ROTATED.filter((kind) => rotated[kind] !== undefined && rotated[kind] !== '').map((kind) => {
    const name = secretName(provider, kind);
    return { name, ...seal(keyring, { organizationId, recordId: id, name }, rotated[kind] as string, keys.get(kind)) };
  });
  const refreshExpiresAt = tokens.refreshToken ? refreshTokenExpiry(tokens, now) : undefined;
  const statement = sql`WITH upd AS (
      UPDATE integrations SET
        token_version = token_version + 1,
        last_refreshed_at = now(),
        token_expires_at = ${tokenExpiresAt ? tokenExpiresAt.toISOString() : null}::timestamptz,
        refresh_token_expires_at = ${refreshExpiresAt === undefined ? sql`refresh_token_expires_at` : sql`${refreshExpiresAt ? refreshExpiresAt.toISOString() : null}::timestamptz`},
        has_refresh_token = ${refreshToken !== undefined || loaded.provider.traits.renews === 'mint'},
        scopes = ${tokens.scopes.length > 0 ? sql`${sql.param(tokens.scopes)}::text[]` : sql`scopes`},
        metadata = metadata || ${JSON.stringify(tokens.metadata ?? {})}::jsonb,
        updated_at = now()
      WHERE organization_id = ${organizationId} AND id = ${id} AND token_version = ${loaded.row.tokenVersion}
      RETURNING *
    ), del AS (
      DELETE FROM integration_secrets
      WHERE organization_id = ${organizationId} AND integration_id = ${id} AND name = ANY(${sql.param(names)}::text[]) AND EXISTS (SELECT 1 FROM upd)
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
    SELECT row_to_json(i) AS integration, (SELECT count(*) FROM ins)::int AS secrets_written, (SELECT count(*) FROM audit)::int AS audited FROM upd AS i`;
  return { statement, secrets };
}
