/**
 * The hot path of token reads and proxy calls, fenced in one file (decisions 60–72): one
 * statement reads the integration and its access-token envelope — and, for token reads,
 * checks the caller and writes the audit row in the same round trip — and reads that
 * arrive together share one statement (group commit). Everything else in the token
 * lifecycle loads through loaded.ts.
 */
import { type SQL, sql } from 'drizzle-orm';
import type { AuditActor } from '../../ground/work.ts';
import { auditInsert, nextAuditId } from '../../audit/audit.ts';
import { Batcher, Slots } from '../../db/batch.ts';
import { HotStatement } from '../../db/client.ts';
import type { Principal, Role } from '../../ground/principal.ts';
import { AppError } from '../../ground/errors.ts';
import { CALLER_COLUMNS, type CallerColumns, callerCheck, callerValues, principalFromCaller } from '../../identity/caller-check.ts';
import { CREDENTIAL_KINDS, DEFERRABLE_KINDS, type DeferrableKind, type DeferredCredential, type TouchedKind } from '../../identity/credential-kinds.ts';
import { BUDGET_JOIN, type Budget, budgetFromJson, ownsBudget } from '../budgets.ts';
import { endUserKey, integrationKey } from '../integrations.ts';
import type { ConfiguredProvider } from '../providers/registry.ts';
import { secretName } from '../secrets.ts';
import { integrationFromJson, type LoadDeps, type LoadedIntegration, providerOf, withAccessToken } from './loaded.ts';

const p = sql.placeholder;

/** A row of the single reads: the integration as `row_to_json`, and its access token's envelope. */
type UseRow = { integration: Record<string, unknown>; key_id: string | null; envelope: string | null };

const USE_SELECT = sql`SELECT row_to_json(i) AS integration, s.key_id, s.envelope
  FROM i LEFT JOIN integration_secrets s ON s.organization_id = i.organization_id AND s.integration_id = i.id AND s.name = ${p('secretName')}`;
const USE_INTEGRATION = sql`i AS (SELECT * FROM integrations WHERE ${integrationKey(p('organizationId'), p('providerId'), p('endUserKey'))})`;

/** `loadForCall`: the integration, its access token and its provider budget (docs/contract.md §5f) in one statement. */
const CALL = new HotStatement<UseRow & { budget: Record<string, unknown> | null }>(sql`WITH ${USE_INTEGRATION} SELECT row_to_json(i) AS integration, s.key_id, s.envelope, row_to_json(b) AS budget
  FROM i LEFT JOIN integration_secrets s ON s.organization_id = i.organization_id AND s.integration_id = i.id AND s.name = ${p('secretName')} ${BUDGET_JOIN}`);

/** `loadForUse` writing the audit row in the same statement. */
const USE_AUDITED = new HotStatement<UseRow>(sql`WITH ${USE_INTEGRATION}, audit AS (${auditInsert(
  {
    organizationId: sql`organization_id`,
    id: p('auditId'),
    actorUserId: p('actorUserId'),
    impersonatorUserId: p('impersonatorId'),
    credentialKind: p('credentialKind'),
    credentialId: p('credentialId'),
    action: p('action'),
    targetType: sql`'integration'`,
    targetId: sql`id`,
    requestId: p('requestId'),
    detail: sql`jsonb_build_object('provider', ${p('providerId')}::text)`,
  },
  sql`i`,
)})
  ${USE_SELECT}`);

/** The kinds of `loadForUseAs` statement: one per deferrable credential kind, and a token's without recording its use. */
type ReadVariant = DeferrableKind | `${TouchedKind}_untouched`;

/** One token read in a `loadForUseAs` batch: a row of its `q`. */
type ReadItem = ReturnType<typeof callerValues> & {
  /** The provider, '' when it is no longer configured (the caller is still checked; nothing is read or audited). */
  prov: string;
  /** The end user's key: their id, '' for the organization's own integration. */
  eu: string;
  secret: string;
  roles: readonly Role[];
  kind: DeferrableKind;
  action: string;
  audit_id: string;
  req: string;
};

/**
 * A `loadForUseAs` answer: the caller's check and, when it may read, the integration — all
 * in one `json` column, since the driver describes and parses each column of every row it
 * receives anew.
 */
type UseAsRow = { r: UseAsAnswer };
type UseAsAnswer = CallerColumns & { n: number; integration: Record<string, unknown> | null; key_id: string | null; envelope: string | null };

/** A `loadForUseAs` batch: its reads as JSON, each with its position `n` in the batch. */
function readSource(kind: DeferrableKind): SQL {
  return sql`SELECT * FROM json_to_recordset(${p('batch')}::json)
    AS b(n int, ${sql.raw(CREDENTIAL_KINDS[kind].deferred.columns)}, prov text, eu text, secret text, roles text[], kind text, action text, audit_id text, req text)`;
}

/**
 * `loadForUseAs`, for any number of reads at once: for each, the caller, its integration
 * when its role may read, and the envelope (lateral `LIMIT 1` probes, so each read stays a
 * few index lookups), feeding both the answers and the audit rows — one statement and one
 * commit for all the reads that arrived together (decision 72).
 */
function readStatement(caller: SQL): HotStatement<UseAsRow> {
  return new HotStatement<UseAsRow>(sql`WITH ${caller},
      r AS (
        SELECT c.n, ${CALLER_COLUMNS}, c.prov, c.kind, c.action, c.audit_id, c.req,
               i.id AS integration_id, row_to_json(i) AS integration, s.key_id, s.envelope
        FROM caller c
        LEFT JOIN LATERAL (
          SELECT * FROM integrations
          WHERE c.caller_active AND c.caller_role = ANY(c.roles) AND ${integrationKey(sql`c.caller_organization_id`, sql`c.prov`, sql`c.eu`)}
          LIMIT 1) i ON true
        LEFT JOIN LATERAL (
          SELECT key_id, envelope FROM integration_secrets
          WHERE organization_id = i.organization_id AND integration_id = i.id AND name = c.secret
          LIMIT 1) s ON true
      ), audit AS (${auditInsert(
        {
          organizationId: sql`caller_organization_id`,
          id: sql`audit_id`,
          actorUserId: sql`caller_user_id`,
          impersonatorUserId: sql`NULL`,
          credentialKind: sql`kind`,
          credentialId: sql`caller_credential_id`,
          action: sql`action`,
          targetType: sql`'integration'`,
          targetId: sql`integration_id`,
          requestId: sql`req`,
          detail: sql`jsonb_build_object('provider', prov)`,
        },
        sql`r WHERE integration_id IS NOT NULL`,
      )})
      SELECT row_to_json(a) AS r FROM (SELECT n, ${CALLER_COLUMNS}, integration, key_id, envelope FROM r) a`);
}

/** Each variant's kind, and whether it records the token's use: derived from the kinds' table, once. */
const VARIANTS = new Map<ReadVariant, { kind: DeferrableKind; touch: boolean }>(
  DEFERRABLE_KINDS.flatMap((kind) => {
    const variants: [ReadVariant, { kind: DeferrableKind; touch: boolean }][] = [[kind, { kind, touch: true }]];
    if (CREDENTIAL_KINDS[kind].deferred.touch !== null) variants.push([`${kind as TouchedKind}_untouched`, { kind, touch: false }]);
    return variants;
  }),
);

/** The statements, built once at load (prepared by name per connection, decision 60). */
const USE_AS = new Map([...VARIANTS].map(([variant, { kind, touch }]) => [variant, readStatement(callerCheck(kind, readSource(kind), touch))]));

/** The most reads one `loadForUseAs` statement carries. */
const READ_BATCH_MAX = 64;
/** The most reads that may wait for a statement, per kind; more answer 503 at once. */
const READ_WAITING_MAX = 4096;

/** How the database runs statements, which decides how token reads batch: PGlite one at a time, PostgreSQL over a pool of `size`. */
export interface ReadPool {
  pglite: boolean;
  size: number;
}

/** The single-statement reads of the hot path; one per process (its batchers hold the waiting reads). */
export class FastReads {
  private readonly deps: LoadDeps;
  /** Token reads that arrive together share a statement (group commit, decision 72). */
  private readonly readers: Map<ReadVariant, Batcher<ReadItem, UseAsAnswer | Error>>;

  constructor(deps: LoadDeps & { pool: ReadPool }) {
    this.deps = deps;
    // One statement at a time for all token reads, on both databases (decision 338): reads that arrive while it runs wait
    // and go together in the next one. On PostgreSQL that measured 1.02–1.16× the one-row baseline where a quarter of the
    // pool (3 of 10) ran 0.83–0.96×; the other routes keep the whole pool. PGlite runs one statement at a time on this
    // thread anyway, and takes in what else has arrived before starting one.
    const pglite = deps.pool.pglite;
    const slots = new Slots(1);
    const overloaded = () => new AppError('SERVICE_UNAVAILABLE', { message: 'Too many token reads are waiting for the database', headers: { 'retry-after': '1' } });
    const reader = (statement: HotStatement<UseAsRow>) =>
      new Batcher({
        slots,
        maxSize: READ_BATCH_MAX,
        maxWaiting: READ_WAITING_MAX,
        overloaded,
        gather: pglite,
        execute: (items: ReadItem[]) => this.readBatch(statement, items),
      });
    this.readers = new Map([...USE_AS].map(([variant, statement]) => [variant, reader(statement)]));
  }

  /**
   * The integration of `providerId` for the end user `endUserId` (null: the organization's
   * own) and its access token in one statement which writes the audit row too; only the access
   * token is decrypted. (An API call reads with `loadForCall`, and audits on its own.)
   */
  async loadForUse(organizationId: string, providerId: string, endUserId: string | null, audit: { actor: AuditActor; action: string }): Promise<LoadedIntegration> {
    const provider = this.deps.providers.get(providerId);
    if (!provider) throw new AppError('INTEGRATION_NOT_FOUND');
    const principal = audit.actor.principal;
    const [found] = await USE_AUDITED.rows(this.deps.db, {
      organizationId,
      providerId,
      endUserKey: endUserKey(endUserId),
      secretName: secretName(providerId, provider.definition.presents),
      auditId: nextAuditId(),
      action: audit.action,
      requestId: audit.actor.requestId,
      actorUserId: principal?.userId ?? null,
      impersonatorId: principal?.impersonatorId ?? null,
      credentialKind: principal?.kind ?? null,
      credentialId: principal?.credentialId ?? null,
    });
    if (!found) throw new AppError('INTEGRATION_NOT_FOUND');
    return this.loaded(found.integration, provider, found);
  }

  /**
   * `loadForUse` for an API call (the proxy, the MCP tools): the integration with its access token and
   * the account's provider budget as every instance left it (docs/contract.md §5f) — in the same statement,
   * so the budget costs the hot path no round trip.
   */
  async loadForCall(organizationId: string, providerId: string, endUserId: string | null): Promise<{ loaded: LoadedIntegration; budget: Budget | null }> {
    const provider = this.deps.providers.get(providerId);
    if (!provider) throw new AppError('INTEGRATION_NOT_FOUND');
    const values = { organizationId, providerId, endUserKey: endUserKey(endUserId), secretName: secretName(providerId, provider.definition.presents), perIntegration: ownsBudget(provider) };
    const [found] = await CALL.rows(this.deps.db, values);
    if (!found) throw new AppError('INTEGRATION_NOT_FOUND');
    return { loaded: await this.loaded(found.integration, provider, found), budget: budgetFromJson(found.budget) };
  }

  /**
   * `loadForUse` for a route that defers the credential check (`deferCredentialCheck`):
   * the same statement also checks the session, API token or service token, and reads the integration and
   * writes the audit row only when the caller holds one of `roles` — one round trip for the
   * whole request. Throws the usual 401/403 (and a service token's 404); `loaded` is null when the organization has no
   * such integration for that end user (the route decides the 404 after its own checks).
   */
  async loadForUseAs(
    credential: DeferredCredential,
    providerId: string,
    endUserId: string | null,
    roles: readonly Role[],
    audit: { action: string; requestId: string },
  ): Promise<{ principal: Principal; loaded: LoadedIntegration | null }> {
    const provider = this.deps.providers.get(providerId);
    const variant: ReadVariant = 'touch' in credential && !credential.touch ? `${credential.kind}_untouched` : credential.kind;
    const reader = this.readers.get(variant);
    if (!reader) throw new Error(`no token read for ${variant}`);
    const found = await reader.run({
      ...callerValues(credential),
      // Only a configured provider's id reaches the statement (a path segment may hold anything, NULs included).
      prov: provider ? providerId : '',
      eu: endUserKey(endUserId),
      secret: provider ? secretName(providerId, provider.definition.presents) : '',
      roles,
      kind: credential.kind,
      action: audit.action,
      audit_id: nextAuditId(),
      req: audit.requestId,
    });
    if (found instanceof Error) throw found;
    const principal = principalFromCaller(credential, found);
    // A service token names an organization that no longer exists: 404, as its usual check answers (checkServiceToken).
    if (principal.organizationId === '') throw new AppError('NOT_FOUND', { message: 'No such organization' });
    const read = found.integration && provider ? this.loaded(found.integration, provider, found) : null;
    const loaded = read instanceof Promise ? await read : read;
    return { principal, loaded };
  }

  /** One statement for a batch of `loadForUseAs` reads; their answers in the batch's order (an Error for a read without one). */
  private async readBatch(statement: HotStatement<UseAsRow>, items: ReadItem[]): Promise<(UseAsAnswer | Error)[]> {
    const rows = await statement.rows(this.deps.db, { batch: JSON.stringify(items.map((item, n) => ({ ...item, n }))) });
    const answers = new Map(rows.map(({ r }) => [r.n, r]));
    return items.map((_item, n) => answers.get(n) ?? new Error('a token read in a batch got no answer'));
  }

  /** The row with its access token, bound to the app that made its grant: the provider's default app needs no statement (docs/contract.md §5e). */
  private loaded(json: Record<string, unknown>, provider: ConfiguredProvider, envelope: { key_id: string | null; envelope: string | null }): LoadedIntegration | Promise<LoadedIntegration> {
    const row = integrationFromJson(json);
    const sealed = { keyId: envelope.key_id, envelope: envelope.envelope };
    // The common case stays synchronous: no promise, no extra turn of the event loop.
    if (row.appId === provider.app?.id) return withAccessToken(this.deps.config.keyring, row, provider, sealed);
    return providerOf(this.deps, row).then((bound) => withAccessToken(this.deps.config.keyring, row, bound, sealed));
  }
}
