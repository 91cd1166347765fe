/**
 * Revoking grants at their providers after the commit that removed them — the one way it is
 * done (an integration deleted, an organization offboarded). The grants are written in the
 * transaction of the change (`queue`), encrypted like secrets, so a crash between the commit
 * and the provider calls loses none; any instance carries them out (`runOnce`: claimed with
 * SKIP LOCKED and a lease, like the event dispatcher's deliveries), and a failure is retried
 * with back-off until the provider answers or the grant is too old to matter.
 */
import type { Logger } from 'pino';
import type { Keyring } from '../config/checks.ts';
import type { Config } from '../config/load.ts';
import { type Db, queryRows, sql } from '../db/client.ts';
import type { UnitOfWork } from '../ground/work.ts';
import { newId } from '../lib/ids.ts';
import { open, type SecretBinding, seal } from '../secrets/crypto.ts';
import { ProviderError } from './providers/types.ts';
import type { AppCatalog } from './apps/catalog.ts';
import type { AppCredentials, ConfiguredProvider, ProviderRegistry } from './providers/registry.ts';

/** A grant to revoke once the change removing it has committed. */
export interface GrantToRevoke {
  organizationId: string;
  integrationId: string;
  provider: string;
  /** The app that made the grant: its credentials revoke it (docs/contract.md §5e). */
  appId: string;
  /** The integration's non-secret metadata (some providers' endpoints depend on it). */
  metadata: Record<string, unknown>;
  accessToken: string;
  refreshToken?: string;
  /** What removed it, for the logs: `integration.deleted`, `organization.deleted`… */
  reason: string;
}

/** After this long a grant still not revoked is given up (logged): the provider has kept refusing for days. */
const MAX_AGE_SECONDS = 3 * 24 * 60 * 60;
/** Grants claimed per round, and provider calls at once. */
const BATCH_SIZE = 20;
const CONCURRENCY = 4;

/** A revocation's tokens are bound to its own row: copied to another, they do not decrypt. */
function binding(organizationId: string, id: string): SecretBinding {
  return { organizationId, recordId: id, name: 'grant_revocation' };
}

/** An organization app's credentials, copied onto the revocation's row (the app may be deleted first) and bound to it. */
function appBinding(organizationId: string, id: string): SecretBinding {
  return { organizationId, recordId: id, name: 'grant_revocation.app' };
}

interface Claimed {
  organization_id: string;
  id: string;
  integration_id: string;
  provider: string;
  app_id: string;
  app_key_id: string | null;
  app_envelope: string | null;
  reason: string;
  metadata: Record<string, unknown>;
  key_id: string;
  envelope: string;
  attempts: number;
  too_old: boolean;
}

export interface RevocationsOptions {
  db: Db;
  config: Pick<Config, 'keyring' | 'events' | 'oauth'>;
  providers: ProviderRegistry;
  apps: AppCatalog;
  logger: Pick<Logger, 'info' | 'warn' | 'error'>;
}

/** The grant revocations of one instance: `queue` in a change's transaction, carried out by rounds after its commit. */
export class Revocations {
  private readonly options: RevocationsOptions;
  private readonly keyring: Keyring;
  private readonly leaseMs: number;
  private stopped = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private loop: Promise<void> | null = null;
  private again = false;

  constructor(options: RevocationsOptions) {
    this.options = options;
    this.keyring = options.config.keyring;
    // A claim outlasts a provider call (which times out) with room to record its outcome.
    this.leaseMs = 3 * options.config.oauth.providerTimeout * 1000;
  }

  /**
   * Records `grants` in `work`, the unit of work of the change that removed them, and asks for
   * a round once it has committed. Grants of providers this deployment cannot revoke at (no
   * revocation endpoint, not configured) are not recorded.
   */
  async queue(work: Pick<UnitOfWork, 'db' | 'afterCommit'>, grants: readonly GrantToRevoke[]): Promise<number> {
    const rows = [];
    for (const grant of grants.filter((grant) => this.options.providers.get(grant.provider)?.definition.revoke && grant.accessToken)) {
      const id = newId();
      const tokens = { accessToken: grant.accessToken, ...(grant.refreshToken ? { refreshToken: grant.refreshToken } : {}) };
      const sealed = seal(this.keyring, binding(grant.organizationId, id), JSON.stringify(tokens));
      // An organization's app may be deleted (with its organization) before the provider answers: its credentials travel with the grant.
      const app = await this.options.apps.organizationApp(work.db, grant.organizationId, grant.appId);
      const credentials: AppCredentials | null = app ? { clientId: app.client_id, clientSecret: '', scopes: app.scopes, ...(app.github_app_id ? { appId: app.github_app_id } : {}), ...(app.slug ? { slug: app.slug } : {}) } : null;
      if (app && credentials) {
        const secrets = this.options.apps.secrets(app);
        credentials.clientSecret = secrets.clientSecret ?? '';
        if (secrets.privateKey) credentials.privateKey = secrets.privateKey;
      }
      const sealedApp = credentials ? seal(this.keyring, appBinding(grant.organizationId, id), JSON.stringify(credentials)) : null;
      rows.push(
        sql`(${grant.organizationId}, ${id}, ${grant.integrationId}, ${grant.provider}, ${grant.appId}, ${sealedApp?.keyId ?? null}, ${sealedApp?.envelope ?? null}, ${grant.reason}, ${JSON.stringify(grant.metadata)}::jsonb, ${sealed.keyId}, ${sealed.envelope})`,
      );
    }
    if (rows.length === 0) return 0;
    await work.db.execute(
      sql`INSERT INTO grant_revocations (organization_id, id, integration_id, provider, app_id, app_key_id, app_envelope, reason, metadata, key_id, envelope) VALUES ${sql.join(rows, sql`, `)}`,
    );
    work.afterCommit(() => this.wake());
    return rows.length;
  }

  /**
   * Polls for grants due again (retries, and those a stopped instance left) every
   * `EVENTS_POLL_INTERVAL`. Without it, a commit still runs a round at once (`wake`).
   */
  start(): void {
    if (this.stopped || this.pollTimer) return;
    this.pollTimer = setInterval(() => this.wake(), this.options.config.events.pollInterval * 1000);
    this.pollTimer.unref();
    this.wake();
  }

  /** Stops polling and waking, and waits for the running round; what is left stays for any instance. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.pollTimer);
    await this.loop;
  }

  /** Asks for a round soon; a wake during a round causes one more right after. */
  wake(): void {
    if (this.stopped) return;
    this.again = true;
    this.loop ??= this.drain().finally(() => {
      this.loop = null;
      // A wake that came as the round was ending.
      if (this.again) this.wake();
    });
  }

  /** One round: claims due grants and revokes each; returns how many it tried. */
  async runOnce(): Promise<number> {
    const claimed = await this.claim();
    const queue = [...claimed];
    await Promise.all(
      Array.from({ length: Math.min(CONCURRENCY, queue.length) }, async () => {
        for (let row = queue.shift(); row; row = queue.shift()) {
          try {
            await this.record(row, await this.attempt(row));
          } catch (error) {
            // The claim lapses after the lease and the grant is tried again.
            this.options.logger.error({ revocationId: row.id, provider: row.provider, err: error }, 'recording a grant revocation failed');
          }
        }
      }),
    );
    return claimed.length;
  }

  private async drain(): Promise<void> {
    // Off the committing request's stack: the round starts once the answer is on its way.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.again && !this.stopped) {
      this.again = false;
      try {
        if ((await this.runOnce()) >= BATCH_SIZE) this.again = true;
      } catch (error) {
        this.options.logger.error({ err: error }, 'grant revocation round failed');
      }
    }
  }

  private claim(): Promise<Claimed[]> {
    // One statement is its own short transaction; SKIP LOCKED and the lease keep other instances off these rows.
    return queryRows<Claimed>(
      this.options.db,
      sql`WITH due AS MATERIALIZED (
            SELECT organization_id, id FROM grant_revocations
            WHERE next_attempt_at <= now() AND (locked_until IS NULL OR locked_until < now())
            ORDER BY next_attempt_at
            LIMIT ${BATCH_SIZE}
            FOR UPDATE SKIP LOCKED
          )
          UPDATE grant_revocations AS r
          SET locked_until = now() + ${this.leaseMs}::int * interval '1 millisecond', attempts = r.attempts + 1
          FROM due
          WHERE r.organization_id = due.organization_id AND r.id = due.id
          RETURNING r.organization_id, r.id, r.integration_id, r.provider, r.app_id, r.app_key_id, r.app_envelope, r.reason, r.metadata, r.key_id, r.envelope, r.attempts,
                    r.created_at < now() - ${MAX_AGE_SECONDS}::int * interval '1 second' AS too_old`,
    );
  }

  /** One revocation at the provider: null when done, else why not and whether trying again could help. */
  private async attempt(row: Claimed): Promise<{ error: string; retry: boolean } | null> {
    const provider = await this.appOf(row);
    const revoke = provider?.definition.revoke;
    // Not configured (any more): the setting may come back, so the grant waits like any failure.
    if (!provider || !revoke) return { error: 'provider not configured', retry: true };
    try {
      const tokens = JSON.parse(open(this.keyring, binding(row.organization_id, row.id), { keyId: row.key_id, envelope: row.envelope })) as { accessToken: string; refreshToken?: string };
      await revoke(provider.contextFor(row.metadata), tokens);
      return null;
    } catch (error) {
      if (!(error instanceof ProviderError)) return { error: error instanceof Error ? error.name : 'error', retry: true };
      // `forbidden`: the provider answered, and not "revoked": asking again gets the same answer.
      return { error: error.status ? `${error.kind} (HTTP ${error.status})` : error.kind, retry: error.kind !== 'forbidden' };
    }
  }

  /**
   * The provider bound to the app that made the grant: a deployment app from the settings; an
   * organization's as it is now (a secret fixed after the grant was queued is used), else — the
   * app deleted, with its organization — from the row's own copy.
   */
  private async appOf(row: Claimed): Promise<ConfiguredProvider | undefined> {
    if (!this.options.providers.get(row.provider)) return undefined;
    const current = row.app_key_id ? await this.options.apps.organizationApp(this.options.db, row.organization_id, row.app_id) : null;
    if (current?.provider === row.provider) return this.options.apps.bind(current);
    if (row.app_key_id && row.app_envelope) {
      const credentials = JSON.parse(open(this.keyring, appBinding(row.organization_id, row.id), { keyId: row.app_key_id, envelope: row.app_envelope })) as AppCredentials;
      return this.options.providers.withApp(row.provider, { id: row.app_id, owner: 'organization' }, credentials);
    }
    const app = this.options.providers.deploymentApp(row.app_id);
    return app?.provider === row.provider ? app.configured : undefined;
  }

  private async record(row: Claimed, failure: { error: string; retry: boolean } | null): Promise<void> {
    const log = { revocationId: row.id, integrationId: row.integration_id, organizationId: row.organization_id, provider: row.provider, reason: row.reason, attempt: row.attempts };
    const key = sql`organization_id = ${row.organization_id} AND id = ${row.id}`;
    if (failure === null || !failure.retry || row.too_old) {
      await this.options.db.execute(sql`DELETE FROM grant_revocations WHERE ${key}`);
      if (failure === null) this.options.logger.info(log, 'grant revoked at the provider');
      else this.options.logger.warn({ ...log, error: failure.error }, 'gave up revoking the grant at the provider');
      return;
    }
    const { retryBase, retryMax } = this.options.config.events;
    const delayMs = Math.round(Math.random() * Math.min(retryMax * 1000, retryBase * 1000 * 2 ** Math.min(row.attempts - 1, 40)));
    // Only while the claim is still ours (attempts unchanged): an instance that took over after the lease decides.
    await this.options.db.execute(sql`
      UPDATE grant_revocations
      SET next_attempt_at = now() + ${delayMs}::int * interval '1 millisecond', last_error = ${failure.error.slice(0, 200)}, locked_until = NULL
      WHERE ${key} AND attempts = ${row.attempts}`);
    this.options.logger.warn({ ...log, error: failure.error, retryInMs: delayMs }, 'could not revoke the grant at the provider; will retry');
  }
}
