import { and, eq, isNull, lt, or, type SQL, sql } from 'drizzle-orm';
import { newId as ulid } from '../lib/ids.ts';
import { type AuditActor, nextAuditId as auditId } from '../audit/audit.ts';
import type { Principal, Role } from '../http/context.ts';
import { CALLER_COLUMNS, type CallerColumns, callerCheck, callerValues, type DeferredCredential, principalFromCaller } from '../identity/caller-check.ts';
import { Batcher, Slots } from '../db/batch.ts';
import { HotStatement, queryRows } from '../db/client.ts';
import { integrationSecrets, integrations } from '../db/schema.ts';
import { AppError } from '../http/errors.ts';
import type { Services } from '../services.ts';
import { findIntegrationById, findIntegrationByProvider, type IntegrationRow } from './integrations.ts';
import { providerFailure } from './provider-errors.ts';
import type { ConfiguredProvider } from './providers/registry.ts';
import { ProviderError, type TokenSet } from './providers/types.ts';
import { decryptRows, readSecrets, type SecretValues, sealSecrets } from './secrets.ts';
import { applyTransition, type Transition } from './status.ts';
import { accessTokenExpiry, refreshTokenExpiry, tokenRequest } from './token-endpoint.ts';

/** Token reads refresh first when the token expires within this window. */
export const REFRESH_AHEAD_MS = 5 * 60 * 1000;
/** A refresh asked for this soon after another one gets that one's result instead of a provider call. */
export const REFRESH_COALESCE_MS = 10 * 1000;

/** An integration with its decrypted secrets and its configured provider. */
export interface Current {
  row: IntegrationRow;
  provider: ConfiguredProvider;
  secrets: SecretValues;
}

export type ValidationOutcome =
  | { kind: 'valid' }
  | { kind: 'invalid' }
  | { kind: 'forbidden' }
  | { kind: 'rateLimited'; retryAfter: number }
  | { kind: 'transient' };

const INVALID_REASON = 'token unauthorized';
const REFRESH_REJECTED = 'refresh token rejected';
const FORBIDDEN_REASON = 'API access forbidden';
const UNREACHABLE_REASON = 'provider unreachable during validation';

/**
 * An integration row as `row_to_json` gives it on both backends (timestamps as ISO 8601
 * strings): one column to describe and parse instead of 22 — the driver's per-column work
 * was a visible share of a token read — and cheaper for PostgreSQL than building the
 * object field by field.
 */
interface RawIntegration {
  organization_id: string;
  id: string;
  provider: string;
  name: string;
  description: string;
  scopes: string[];
  provider_account_id: string;
  status: IntegrationRow['status'];
  token_valid: boolean;
  has_refresh_token: boolean;
  last_error: string | null;
  detected_at: string | null;
  last_validated_at: string | null;
  token_expires_at: string | null;
  refresh_token_expires_at: string | null;
  last_refreshed_at: string | null;
  token_version: number;
  next_validation_at: string | null;
  lease_owner: string | null;
  lease_until: string | null;
  created_at: string;
  updated_at: string;
}

/** A `loadForUse` row: the integration with its access token's envelope. */
type UseRow = { integration: RawIntegration; key_id: string | null; envelope: string | null };
/**
 * A `loadForUseAs` answer: the caller's check and, when it may read, the integration —
 * all in one `json` column, since the driver describes and parses each column of every
 * row it receives anew.
 */
type UseAsRow = { r: UseAsAnswer };
type UseAsAnswer = CallerColumns & { n: number; integration: RawIntegration | null; key_id: string | null; envelope: string | null };

const accessTokenName = (providerId: string) => `${providerId}_access_token`;

const date = (value: string | null): Date | null => (value === null ? null : new Date(value));

function fromRaw(raw: RawIntegration): IntegrationRow {
  return {
    organizationId: raw.organization_id,
    id: raw.id,
    provider: raw.provider,
    name: raw.name,
    description: raw.description,
    scopes: raw.scopes,
    providerAccountId: raw.provider_account_id,
    status: raw.status,
    tokenValid: raw.token_valid,
    hasRefreshToken: raw.has_refresh_token,
    lastError: raw.last_error,
    detectedAt: date(raw.detected_at),
    lastValidatedAt: date(raw.last_validated_at),
    tokenExpiresAt: date(raw.token_expires_at),
    refreshTokenExpiresAt: date(raw.refresh_token_expires_at),
    lastRefreshedAt: date(raw.last_refreshed_at),
    tokenVersion: raw.token_version,
    nextValidationAt: date(raw.next_validation_at),
    leaseOwner: raw.lease_owner,
    leaseUntil: date(raw.lease_until),
    createdAt: new Date(raw.created_at),
    updatedAt: new Date(raw.updated_at),
  };
}

const p = sql.placeholder;
const AUDIT_COLUMNS = sql.raw('organization_id, id, actor_user_id, impersonator_user_id, credential_kind, credential_id, action, target_type, target_id, request_id, detail');
const USE_SELECT = sql`SELECT row_to_json(i) AS integration, s.key_id, s.envelope
  FROM i LEFT JOIN integration_secrets s ON s.organization_id = i.organization_id AND s.integration_id = i.id AND s.name = ${p('secretName')}`;
const USE_INTEGRATION = sql`i AS (SELECT * FROM integrations WHERE organization_id = ${p('organizationId')} AND provider = ${p('providerId')})`;

/** `loadForUse` without an audit row (proxy calls audit on their own). */
const USE = new HotStatement<UseRow>(sql`WITH ${USE_INTEGRATION} ${USE_SELECT}`);

/** `loadForUse` writing the audit row in the same statement. */
const USE_AUDITED = new HotStatement<UseRow>(sql`WITH ${USE_INTEGRATION}, audit AS (
    INSERT INTO audit_logs (${AUDIT_COLUMNS})
    SELECT organization_id, ${p('auditId')}, ${p('actorUserId')}, ${p('impersonatorId')}, ${p('credentialKind')}, ${p('credentialId')},
           ${p('action')}, 'integration', id, ${p('requestId')}, jsonb_build_object('provider', ${p('providerId')}::text)
    FROM i RETURNING 1)
  ${USE_SELECT}`);

/** The kinds of `loadForUseAs` statement: one per deferred credential, and an API token's without recording its use. */
type ReadVariant = 'jwt' | 'api_token' | 'api_token_untouched';

/** One token read in a `loadForUseAs` batch: a row of its `q`. */
type ReadItem = ReturnType<typeof callerValues> & {
  /** The provider, '' when it is no longer configured (the caller is still checked; nothing is read or audited). */
  prov: string;
  secret: string;
  roles: readonly Role[];
  kind: DeferredCredential['kind'];
  action: string;
  audit_id: string;
  req: string;
};

/** A `loadForUseAs` batch: its reads as JSON, each with its position `n` in the batch. */
function readSource(kind: DeferredCredential['kind']): SQL {
  const credential = kind === 'jwt' ? 'org text, sid text, usr text' : 'hash text';
  return sql`SELECT * FROM json_to_recordset(${p('batch')}::json)
    AS b(n int, ${sql.raw(credential)}, prov text, secret text, roles text[], kind text, action text, audit_id text, req text)`;
}

/**
 * `loadForUseAs`, for any number of reads at once: for each, the caller, its integration
 * when its role may read, and the envelope (lateral `LIMIT 1` probes, so each read stays
 * a few index lookups), feeding both the answers and the audit rows — one statement and
 * one commit for all the reads that arrived together (decision 72).
 */
const USE_AS: Record<ReadVariant, HotStatement<UseAsRow>> = Object.fromEntries(
  (
    [
      ['jwt', callerCheck('jwt', readSource('jwt'))],
      ['api_token', callerCheck('api_token', readSource('api_token'))],
      ['api_token_untouched', callerCheck('api_token', readSource('api_token'), false)],
    ] as const
  ).map(([variant, caller]) => [
    variant,
    new HotStatement<UseAsRow>(sql`WITH ${caller},
      r AS (
        SELECT c.n, ${CALLER_COLUMNS}, c.prov, c.kind, c.action, c.audit_id, c.req,
               i.id AS integration_id, row_to_json(i) AS integration, s.key_id, s.envelope
        FROM caller c
        LEFT JOIN LATERAL (
          SELECT * FROM integrations
          WHERE c.caller_active AND c.caller_role = ANY(c.roles) AND organization_id = c.caller_organization_id AND provider = c.prov
          LIMIT 1) i ON true
        LEFT JOIN LATERAL (
          SELECT key_id, envelope FROM integration_secrets
          WHERE organization_id = i.organization_id AND integration_id = i.id AND name = c.secret
          LIMIT 1) s ON true
      ), audit AS (
        INSERT INTO audit_logs (${AUDIT_COLUMNS})
        SELECT caller_organization_id, audit_id, caller_user_id, NULL, kind, caller_credential_id,
               action, 'integration', integration_id, req, jsonb_build_object('provider', prov)
        FROM r WHERE integration_id IS NOT NULL RETURNING 1)
      SELECT row_to_json(a) AS r FROM (SELECT n, ${CALLER_COLUMNS}, integration, key_id, envelope FROM r) a`),
  ]),
) as Record<ReadVariant, HotStatement<UseAsRow>>;

/** The most reads one `loadForUseAs` statement carries. */
const READ_BATCH_MAX = 64;
/** The most reads that may wait for a statement, per kind; more answer 503 at once. */
const READ_WAITING_MAX = 4096;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Keeps tokens alive: refresh (single-flight in this process, and across processes by
 * a lease on the integration row), validation with the 401 retry rules, and the
 * status transitions both lead to. Never holds a transaction across a provider call.
 */
export class TokenLifecycle {
  /** Identifies this process in refresh leases. */
  readonly instanceId = ulid();
  private readonly services: Services;
  private readonly inflight = new Map<string, Promise<Current>>();
  private readonly leaseMs: number;
  /** Token reads that arrive together share a statement (group commit, decision 72). */
  private readonly readers: Record<ReadVariant, Batcher<ReadItem, UseAsAnswer | Error>>;

  constructor(services: Services) {
    this.services = services;
    // Longer than a provider call can take, so a live holder never loses its lease mid-call.
    this.leaseMs = services.config.oauth.providerTimeout * 2000 + 5000;
    // PostgreSQL: a quarter of the pool for all token reads, so they queue up behind a few statements (and batch there) while
    // the other routes keep the rest. PGlite runs one statement at a time on this thread: one at once, after taking in what
    // else has arrived.
    const pglite = services.database.kind === 'pglite';
    const slots = new Slots(pglite ? 1 : Math.ceil(services.config.db.poolMax / 4));
    const overloaded = () => new AppError('SERVICE_UNAVAILABLE', { message: 'Too many token reads are waiting for the database', headers: { 'retry-after': '1' } });
    const reader = (variant: ReadVariant) =>
      new Batcher({
        slots,
        maxSize: READ_BATCH_MAX,
        maxWaiting: READ_WAITING_MAX,
        overloaded,
        gather: pglite,
        execute: (items: ReadItem[]) => this.readBatch(USE_AS[variant], items),
      });
    this.readers = { jwt: reader('jwt'), api_token: reader('api_token'), api_token_untouched: reader('api_token_untouched') };
  }

  /** The organization's integration for `providerId`, decrypted; 404 when there is none. */
  async load(organizationId: string, providerId: string): Promise<Current> {
    const row = await findIntegrationByProvider(this.services.db, organizationId, providerId);
    return this.withSecrets(row);
  }

  /**
   * The hot path of token reads and proxy calls: one statement reads the integration
   * and its access token and, when `audit` is given, writes the audit row too; only the
   * access token is decrypted (a refresh re-reads everything under its lease).
   */
  async loadForUse(organizationId: string, providerId: string, audit?: { actor: AuditActor; action: string }): Promise<Current> {
    const provider = this.services.providers.get(providerId);
    if (!provider) throw new AppError('INTEGRATION_NOT_FOUND');
    const principal = audit?.actor.principal ?? null;
    const values = { organizationId, providerId, secretName: accessTokenName(providerId) };
    const [found] = audit
      ? await USE_AUDITED.rows(this.services.db, {
          ...values,
          auditId: auditId(),
          action: audit.action,
          requestId: audit.actor.requestId,
          actorUserId: principal?.userId ?? null,
          impersonatorId: principal?.impersonatorId ?? null,
          credentialKind: principal?.kind ?? null,
          credentialId: principal?.credentialId ?? null,
        })
      : await USE.rows(this.services.db, values);
    if (!found) throw new AppError('INTEGRATION_NOT_FOUND');
    return this.fromUseRow(found, provider);
  }

  /**
   * `loadForUse` for a route that defers the credential check (`deferCredentialCheck`):
   * the same statement also checks the session or API token, and reads the integration
   * and writes the audit row only when the caller holds one of `roles` — one round trip
   * for the whole request. Throws the usual 401/403; `current` is null when the
   * organization has no such integration (the route decides the 404 after its own checks).
   */
  async loadForUseAs(
    credential: DeferredCredential,
    providerId: string,
    roles: readonly Role[],
    audit: { action: string; requestId: string },
  ): Promise<{ principal: Principal; current: Current | null }> {
    const provider = this.services.providers.get(providerId);
    const variant: ReadVariant = credential.kind === 'api_token' && !credential.touch ? 'api_token_untouched' : credential.kind;
    const found = await this.readers[variant].run({
      ...callerValues(credential),
      // Only a configured provider's id reaches the statement (a path segment may hold anything, NULs included).
      prov: provider ? providerId : '',
      secret: provider ? accessTokenName(providerId) : '',
      roles,
      kind: credential.kind,
      action: audit.action,
      audit_id: auditId(),
      req: audit.requestId,
    });
    if (found instanceof Error) throw found;
    const principal = principalFromCaller(credential, found);
    const current = found.integration && provider ? this.fromUseRow({ ...found, integration: found.integration }, provider) : null;
    return { principal, current };
  }

  /** One statement for a batch of `loadForUseAs` reads; their answers in the batch's order (an Error for a read without one). */
  private async readBatch(statement: HotStatement<UseAsRow>, items: ReadItem[]): Promise<(UseAsAnswer | Error)[]> {
    const rows = await statement.rows(this.services.db, { batch: JSON.stringify(items.map((item, n) => ({ ...item, n }))) });
    const answers = new Map(rows.map(({ r }) => [r.n, r]));
    return items.map((_item, n) => answers.get(n) ?? new Error('a token read in a batch got no answer'));
  }

  private fromUseRow(found: UseRow, provider: ConfiguredProvider): Current {
    const row = fromRaw(found.integration);
    const name = accessTokenName(provider.id);
    const secrets: SecretValues =
      found.key_id && found.envelope
        ? decryptRows(this.services.config.keyring, { organizationId: row.organizationId, integrationId: row.id, provider: provider.id }, [{ name, keyId: found.key_id, envelope: found.envelope }])
        : {};
    return { row, provider, secrets };
  }

  /** Re-reads an integration by id, decrypted; 404 when it is gone. */
  async reload(organizationId: string, integrationId: string): Promise<Current> {
    const row = await findIntegrationById(this.services.db, organizationId, integrationId);
    return this.withSecrets(row);
  }

  /** Loads many integrations with their secrets in two statements (background passes). */
  async loadMany(keys: { organizationId: string; id: string }[]): Promise<Current[]> {
    if (keys.length === 0) return [];
    const pairs = sql.join(
      keys.map((key) => sql`(${key.organizationId}, ${key.id})`),
      sql`, `,
    );
    const rows = await this.services.db.select().from(integrations).where(sql`(${integrations.organizationId}, ${integrations.id}) IN (${pairs})`);
    const secretRows = await this.services.db
      .select()
      .from(integrationSecrets)
      .where(sql`(${integrationSecrets.organizationId}, ${integrationSecrets.integrationId}) IN (${pairs})`);
    const byIntegration = new Map<string, (typeof secretRows)[number][]>();
    for (const secret of secretRows) {
      const key = `${secret.organizationId}:${secret.integrationId}`;
      byIntegration.set(key, [...(byIntegration.get(key) ?? []), secret]);
    }
    const loaded: Current[] = [];
    for (const row of rows) {
      const provider = this.services.providers.get(row.provider);
      if (!provider) continue;
      const secrets = decryptRows(this.services.config.keyring, { organizationId: row.organizationId, integrationId: row.id, provider: row.provider }, byIntegration.get(`${row.organizationId}:${row.id}`) ?? []);
      loaded.push({ row, provider, secrets });
    }
    return loaded;
  }

  private async withSecrets(row: IntegrationRow | null): Promise<Current> {
    const provider = row ? this.services.providers.get(row.provider) : undefined;
    if (!row || !provider) throw new AppError('INTEGRATION_NOT_FOUND');
    const secrets = await readSecrets(this.services.db, this.services.config.keyring, { organizationId: row.organizationId, integrationId: row.id, provider: row.provider });
    return { row, provider, secrets };
  }

  /**
   * A token to hand out: refreshed first when it expires within 5 minutes and a refresh
   * token exists. If that refresh cannot reach the provider, a token still valid is
   * served. An `invalid` (or expired, unrefreshable) integration is a 409.
   */
  async usable(current: Current, actor: AuditActor): Promise<Current> {
    if (current.row.status === 'invalid') throw new AppError('TOKEN_VALIDATION_FAILED');
    const expiresAt = current.row.tokenExpiresAt?.getTime();
    if (expiresAt === undefined || expiresAt - Date.now() > REFRESH_AHEAD_MS) return current;
    if (!current.row.hasRefreshToken) {
      if (expiresAt > Date.now()) return current;
      throw new AppError('TOKEN_VALIDATION_FAILED', { message: 'The token has expired; reconnect the integration' });
    }
    try {
      return await this.refresh(current, actor);
    } catch (error) {
      const stillValid = expiresAt > Date.now();
      if (stillValid && error instanceof AppError && (error.code === 'PROVIDER_ERROR' || error.code === 'PROVIDER_RATE_LIMITED')) return current;
      throw error;
    }
  }

  /**
   * Refreshes, once for all concurrent callers: in this process they share one promise;
   * across processes a lease on the row lets one instance call the provider while the
   * others wait and then read what it stored.
   */
  refresh(current: Current, actor: AuditActor): Promise<Current> {
    const key = `${current.row.organizationId}:${current.row.id}`;
    const running = this.inflight.get(key);
    if (running) return running;
    const promise = this.refreshAcrossInstances(current, actor).finally(() => this.inflight.delete(key));
    this.inflight.set(key, promise);
    return promise;
  }

  private async refreshAcrossInstances(seen: Current, actor: AuditActor): Promise<Current> {
    const { organizationId, id } = seen.row;
    const deadline = Date.now() + this.leaseMs + 2000;
    for (;;) {
      const leased = await this.acquireLease(organizationId, id);
      if (leased) {
        try {
          // Under the lease, re-read: another instance may have refreshed since `seen`.
          const latest = await this.withSecrets(leased);
          if (latest.row.tokenVersion !== seen.row.tokenVersion) return latest;
          // Requests that were concurrent at the client may reach us a little apart: one call serves them all.
          const sinceRefresh = Date.now() - (latest.row.lastRefreshedAt?.getTime() ?? 0);
          if (sinceRefresh < REFRESH_COALESCE_MS && latest.row.status === 'connected') return latest;
          return await this.refreshHoldingLease(latest, actor);
        } finally {
          await this.releaseLease(organizationId, id);
        }
      }
      await sleep(50);
      const row = await findIntegrationById(this.services.db, organizationId, id);
      if (!row) throw new AppError('INTEGRATION_NOT_FOUND');
      if (row.tokenVersion !== seen.row.tokenVersion) return this.withSecrets(row);
      if (row.status === 'invalid' && seen.row.status !== 'invalid') throw new AppError('TOKEN_VALIDATION_FAILED');
      if (Date.now() > deadline) throw new AppError('PROVIDER_ERROR', { message: 'A refresh by another instance did not finish in time' });
    }
  }

  private async acquireLease(organizationId: string, id: string): Promise<IntegrationRow | null> {
    const [row] = await this.services.db
      .update(integrations)
      .set({ leaseOwner: this.instanceId, leaseUntil: sql`now() + ${`${this.leaseMs} milliseconds`}::interval` })
      .where(
        and(
          eq(integrations.organizationId, organizationId),
          eq(integrations.id, id),
          or(isNull(integrations.leaseUntil), lt(integrations.leaseUntil, sql`now()`), eq(integrations.leaseOwner, this.instanceId)),
        ),
      )
      .returning();
    return row ?? null;
  }

  private async releaseLease(organizationId: string, id: string): Promise<void> {
    // Only our own lease: never release one another instance took after ours expired.
    await this.services.db
      .update(integrations)
      .set({ leaseOwner: null, leaseUntil: null })
      .where(and(eq(integrations.organizationId, organizationId), eq(integrations.id, id), eq(integrations.leaseOwner, this.instanceId)));
  }

  private async refreshHoldingLease(current: Current, actor: AuditActor): Promise<Current> {
    const refreshToken = current.secrets.refresh_token;
    if (!refreshToken) {
      // Nothing to refresh with: re-validate the current token and hand it back.
      const { current: after, outcome } = await this.validate(current, actor, { recover: false });
      if (outcome.kind === 'invalid') throw new AppError('TOKEN_VALIDATION_FAILED');
      if (outcome.kind === 'rateLimited') throw new AppError('PROVIDER_RATE_LIMITED', { headers: { 'retry-after': String(outcome.retryAfter) } });
      if (outcome.kind === 'transient') throw new AppError('PROVIDER_ERROR');
      return after;
    }
    let tokens: TokenSet;
    try {
      tokens = await tokenRequest(current.provider, { grant_type: 'refresh_token', refresh_token: refreshToken });
      this.services.metrics?.refreshOutcome(current.provider.id, 'ok');
    } catch (error) {
      this.services.metrics?.refreshOutcome(current.provider.id, error instanceof ProviderError ? error.kind : 'error');
      if (error instanceof ProviderError && error.kind === 'revoked') {
        // invalid_grant is not yet proof: if the stored refresh token changed, another refresh won.
        const latest = await this.reload(current.row.organizationId, current.row.id);
        if (latest.secrets.refresh_token !== refreshToken) return latest;
        await this.transition(latest, { status: 'invalid', lastError: REFRESH_REJECTED, tokenValid: false }, actor);
        throw new AppError('TOKEN_VALIDATION_FAILED', { cause: error });
      }
      throw providerFailure(error, 'validate');
    }
    // The provider has already retired the old refresh token: store the new one before anything else.
    const stored = await this.storeRefreshed(current, tokens, actor);
    const { current: validated, outcome } = await this.validate(stored, actor, { recover: false });
    if (outcome.kind === 'invalid') throw new AppError('TOKEN_VALIDATION_FAILED');
    return validated;
  }

  /** Stores a refreshed token set: compare-and-set on the token version, then replace the secrets. */
  private async storeRefreshed(current: Current, tokens: TokenSet, actor: AuditActor): Promise<Current> {
    const { organizationId, id } = current.row;
    const now = Date.now();
    const tokenExpiresAt = accessTokenExpiry(tokens, now);
    const refreshToken = tokens.refreshToken ?? current.secrets.refresh_token;
    const secrets: SecretValues = {
      ...current.secrets,
      access_token: tokens.accessToken,
      refresh_token: refreshToken,
      expires_at: tokenExpiresAt?.toISOString(),
    };
    const ref = { organizationId, integrationId: id, provider: current.row.provider };
    const sealed = sealSecrets(this.services.config.keyring, ref, secrets);
    const principal = actor.principal;
    const refreshExpiresAt = tokens.refreshToken ? refreshTokenExpiry(tokens, now) : undefined;
    // One statement — compare-and-set, replace the secrets, audit — so the window between the
    // provider's answer and a durable copy of the rotated token is a single round trip.
    const [stored] = await queryRows<{ integration: RawIntegration }>(
      this.services.db,
      sql`WITH upd AS (
            UPDATE integrations SET
              token_version = token_version + 1,
              last_refreshed_at = now(),
              token_expires_at = ${tokenExpiresAt ? tokenExpiresAt.toISOString() : null}::timestamptz,
              refresh_token_expires_at = ${refreshExpiresAt === undefined ? sql`refresh_token_expires_at` : sql`${refreshExpiresAt ? refreshExpiresAt.toISOString() : null}::timestamptz`},
              has_refresh_token = ${refreshToken !== undefined},
              scopes = ${tokens.scopes.length > 0 ? sql`${sql.param(tokens.scopes)}::text[]` : sql`scopes`},
              updated_at = now()
            WHERE organization_id = ${organizationId} AND id = ${id} AND token_version = ${current.row.tokenVersion}
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
          ), audit AS (
            INSERT INTO audit_logs (${AUDIT_COLUMNS})
            SELECT organization_id, ${auditId()}, ${principal?.userId ?? actor.userId ?? null}, ${principal?.impersonatorId ?? null}, ${principal?.kind ?? null}, ${principal?.credentialId ?? null},
                   'integration.refreshed', 'integration', id, ${actor.requestId}, ${JSON.stringify({ provider: current.row.provider })}::jsonb
            FROM upd RETURNING 1
          )
          SELECT row_to_json(i) AS integration, (SELECT count(*) FROM ins)::int AS secrets_written, (SELECT count(*) FROM audit)::int AS audited FROM upd AS i`,
    );
    const row = stored ? fromRaw(stored.integration) : null;
    if (!row) {
      // Only possible if our lease lapsed mid-call and another instance stored first.
      this.services.logger.error({ integrationId: id, provider: current.row.provider }, 'refreshed token lost a compare-and-set; keeping the stored one');
      return this.reload(organizationId, id);
    }
    return { row, provider: current.provider, secrets };
  }

  /**
   * Validates the current token live and persists what follows. A rejection first goes
   * through the 401 rules (re-read; else refresh; retry once) unless `recover` is false.
   */
  async validate(current: Current, actor: AuditActor, options: { recover?: boolean } = {}): Promise<{ current: Current; outcome: ValidationOutcome }> {
    const token = current.secrets.access_token;
    if (!token) throw new AppError('INTERNAL', { message: 'integration has no access token' });
    const nextValidationAt = new Date(Date.now() + this.services.config.oauth.validationInterval * 1000);
    try {
      await current.provider.definition.validate(current.provider.context, token);
      this.services.metrics?.validationOutcome(current.provider.id, 'valid');
      // The common case, connected and still connected, is one statement; a change takes the full transition.
      const [unchanged] = await this.services.db
        .update(integrations)
        .set({ tokenValid: true, lastError: null, detectedAt: null, lastValidatedAt: sql`now()`, nextValidationAt })
        .where(and(eq(integrations.organizationId, current.row.organizationId), eq(integrations.id, current.row.id), eq(integrations.status, 'connected')))
        .returning();
      if (unchanged) return { current: { ...current, row: unchanged }, outcome: { kind: 'valid' } };
      const row = await this.transition(current, { status: 'connected', lastError: null, tokenValid: true, validated: true, nextValidationAt }, actor);
      return { current: { ...current, row: row ?? current.row }, outcome: { kind: 'valid' } };
    } catch (error) {
      if (!(error instanceof ProviderError)) throw error;
      this.services.metrics?.validationOutcome(current.provider.id, error.kind);
      switch (error.kind) {
        case 'revoked': {
          if (options.recover !== false) {
            const recovered = await this.recover(current, token, actor);
            if (recovered) return this.validate(recovered, actor, { recover: false });
          }
          const row = await this.transition(current, { status: 'invalid', lastError: INVALID_REASON, tokenValid: false, validated: true, nextValidationAt }, actor);
          return { current: { ...current, row: row ?? current.row }, outcome: { kind: 'invalid' } };
        }
        case 'forbidden': {
          const row = await this.transition(current, { status: 'warning', lastError: FORBIDDEN_REASON, tokenValid: true, validated: true, nextValidationAt }, actor);
          return { current: { ...current, row: row ?? current.row }, outcome: { kind: 'forbidden' } };
        }
        case 'rateLimited':
          // Not a verdict on the token: leave the status alone and come back later.
          await this.services.db
            .update(integrations)
            .set({ nextValidationAt: new Date(Date.now() + (error.retryAfter ?? 60) * 1000) })
            .where(and(eq(integrations.organizationId, current.row.organizationId), eq(integrations.id, current.row.id)));
          return { current, outcome: { kind: 'rateLimited', retryAfter: error.retryAfter ?? 60 } };
        case 'transient': {
          const row = await this.transition(current, { status: 'warning', lastError: UNREACHABLE_REASON, nextValidationAt }, actor);
          return { current: { ...current, row: row ?? current.row }, outcome: { kind: 'transient' } };
        }
      }
    }
  }

  /**
   * After the provider rejected `usedToken`: a 401 is not yet proof of revocation (a
   * rotation kills the old token at once). Returns a newer token to retry with — the
   * stored one if it changed meanwhile, else a refresh (joining one in flight) — or null.
   */
  async recover(current: Current, usedToken: string, actor: AuditActor): Promise<Current | null> {
    const latest = await this.reload(current.row.organizationId, current.row.id);
    if (latest.secrets.access_token && latest.secrets.access_token !== usedToken) return latest;
    if (!latest.secrets.refresh_token) return null;
    try {
      return await this.refresh(latest, actor);
    } catch (error) {
      if (error instanceof AppError && error.code === 'TOKEN_VALIDATION_FAILED') return null;
      throw error;
    }
  }

  /** Marks the integration invalid (the provider rejected its credentials for good). */
  async invalidate(current: Current, actor: AuditActor): Promise<void> {
    await this.transition(current, { status: 'invalid', lastError: INVALID_REASON, tokenValid: false }, actor);
  }

  /** Marks the integration suspicious: a 403 that was not a rate limit. */
  async markForbidden(current: Current, actor: AuditActor): Promise<void> {
    await this.transition(current, { status: 'warning', lastError: FORBIDDEN_REASON, tokenValid: true }, actor);
  }

  private transition(current: Current, next: Transition, actor: AuditActor): Promise<IntegrationRow | null> {
    return applyTransition({ db: this.services.db, outbox: this.services.outbox, actor }, current.row.organizationId, current.row.id, next);
  }
}
