/**
 * Which app's credentials a grant uses (docs/contract.md §5e). The deployment's apps come from the
 * settings (the registry holds them, bound); an organization's own are rows whose secrets are one
 * sealed envelope, opened here and bound to their provider on first use, then kept in memory by
 * (organization, app, last change) — a change makes a new key, so every instance reads the new
 * secret on its next use and nothing needs telling.
 */
import type { Keyring } from '../../config/checks.ts';
import type { SQL } from 'drizzle-orm';
import { type Db, queryRows, sql } from '../../db/client.ts';
import { AppError } from '../../ground/errors.ts';
import { remember } from '../../lib/bounded.ts';
import { ULID } from '../../lib/ids.ts';
import { open, type SecretBinding } from '../../secrets/crypto.ts';
import type { AppRef, ConfiguredProvider, DeploymentApp, ProviderRegistry } from '../providers/registry.ts';

/** An app id read alone: an organization's apps are ULIDs (upper case), a deployment's are lower case. */
export function appRef(id: string): AppRef {
  return { id, owner: ULID.test(id) ? 'organization' : 'deployment' };
}

/** What an organization app's sealed secrets are bound to: another app's or organization's row does not open them. */
export function appSecretBinding(organizationId: string, appId: string): SecretBinding {
  return { organizationId, recordId: appId, name: 'oauth_app.secrets' };
}

/** An organization app's secrets, as its envelope holds them. */
export interface AppSecrets {
  clientSecret?: string;
  eventsSecret?: string;
  privateKey?: string;
}

/** An organization's app row as the catalog reads it, with its sealed secrets. */
export interface OrganizationAppRow {
  organization_id: string;
  id: string;
  provider: string;
  name: string;
  client_id: string;
  scopes: string[] | null;
  github_app_id: string | null;
  slug: string | null;
  has_events_secret: boolean;
  created_at: string;
  updated_at: string;
  key_id: string | null;
  envelope: string | null;
}

/** The columns of an organization's app, without its secrets (times as ISO text, so they also key the cache). */
export const APP_ROW_COLUMNS = sql`a.organization_id, a.id, a.provider, a.name, a.client_id, a.scopes, a.github_app_id, a.slug, a.has_events_secret,
  to_char(a.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at,
  to_char(a.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS updated_at`;

/** One organization's app row with its sealed envelope, found by `where` (locked for a change when `lock`). */
async function appRow(db: Db, where: SQL, lock: boolean): Promise<OrganizationAppRow | null> {
  const [row] = await queryRows<OrganizationAppRow>(
    db,
    sql`SELECT ${APP_ROW_COLUMNS}, s.key_id, s.envelope FROM oauth_apps a LEFT JOIN oauth_app_secrets s ON s.organization_id = a.organization_id AND s.app_id = a.id
        WHERE ${where}${lock ? sql` FOR UPDATE OF a` : sql``}`,
  );
  return row ?? null;
}

const CACHED_APPS = 1000;

/**
 * An app as its events route reads it (docs/contract.md §5e): the provider bound to it, the
 * client id its events may name, the secret they are signed with, and — for an organization's
 * own app — that organization, the only one whose integrations its events may touch.
 */
export interface EventsApp {
  ref: AppRef;
  provider: ConfiguredProvider;
  clientId: string;
  eventsSecret?: string;
  organizationId?: string;
}

export class AppCatalog {
  private readonly bound = new Map<string, ConfiguredProvider>();
  private readonly deps: { providers: ProviderRegistry; config: { keyring: Keyring } };

  constructor(deps: { providers: ProviderRegistry; config: { keyring: Keyring } }) {
    this.deps = deps;
  }

  /** A deployment app this organization may use: every one, unless its entry lists organizations. */
  mayUse(app: DeploymentApp, organizationId: string): boolean {
    return app.organizations === null || app.organizations.includes(organizationId);
  }

  /** The deployment apps `organizationId` may use, of one provider or all. */
  deploymentApps(organizationId: string, providerId?: string): DeploymentApp[] {
    return this.deps.providers.deploymentApps().filter((app) => (providerId === undefined || app.provider === providerId) && this.mayUse(app, organizationId));
  }

  /** The secrets of an organization's app row. */
  secrets(row: Pick<OrganizationAppRow, 'organization_id' | 'id' | 'key_id' | 'envelope'>): AppSecrets {
    if (!row.key_id || !row.envelope) return {};
    return JSON.parse(open(this.deps.config.keyring, appSecretBinding(row.organization_id, row.id), { keyId: row.key_id, envelope: row.envelope })) as AppSecrets;
  }

  /** The provider bound to an organization's app row (kept while the row does not change). */
  bind(row: OrganizationAppRow): ConfiguredProvider {
    const key = `${row.organization_id}:${row.id}:${row.updated_at}`;
    const cached = this.bound.get(key);
    if (cached) return cached;
    const secrets = this.secrets(row);
    const configured = this.deps.providers.withApp(row.provider, { id: row.id, owner: 'organization' }, {
      clientId: row.client_id,
      clientSecret: secrets.clientSecret ?? '',
      scopes: row.scopes,
      ...(row.github_app_id ? { appId: row.github_app_id } : {}),
      ...(row.slug ? { slug: row.slug } : {}),
      ...(secrets.privateKey ? { privateKey: secrets.privateKey } : {}),
    });
    remember(this.bound, key, configured, CACHED_APPS);
    return configured;
  }

  /** An organization's own app row, or null; `lock` takes its row for a change. */
  organizationApp(db: Db, organizationId: string, appId: string, options: { lock?: boolean } = {}): Promise<OrganizationAppRow | null> {
    if (!ULID.test(appId)) return Promise.resolve(null);
    return appRow(db, sql`a.organization_id = ${organizationId} AND a.id = ${appId}`, options.lock === true);
  }

  /**
   * An organization's own app found by its id alone, or null: a provider's event names no
   * organization, and an app's ULID is unique across them (index `oauth_apps_id_idx`).
   */
  organizationAppById(db: Db, appId: string): Promise<OrganizationAppRow | null> {
    if (!ULID.test(appId)) return Promise.resolve(null);
    return appRow(db, sql`a.id = ${appId}`, false);
  }

  /**
   * The app behind `POST /v1/apps/{id}/events` (docs/contract.md §5e): a deployment app of a
   * configured provider, or an organization's own app of a provider still offered; undefined
   * otherwise. Whether it has events at all is its definition's and its secret's to say.
   */
  async eventsApp(db: Db, appId: string): Promise<EventsApp | undefined> {
    const deployment = this.deps.providers.deploymentApp(appId);
    if (deployment) {
      if (!this.deps.providers.get(deployment.provider)) return undefined;
      return { ref: deployment.ref, provider: deployment.configured, clientId: deployment.clientId, ...(deployment.eventsSecret ? { eventsSecret: deployment.eventsSecret } : {}) };
    }
    const row = await this.organizationAppById(db, appId);
    if (!row || !this.deps.providers.get(row.provider)) return undefined;
    // The envelope is the truth of what the app holds; `has_events_secret` is what its answers read.
    const { eventsSecret } = this.secrets(row);
    return { ref: { id: row.id, owner: 'organization' }, provider: this.bind(row), clientId: row.client_id, organizationId: row.organization_id, ...(eventsSecret ? { eventsSecret } : {}) };
  }

  /**
   * The provider bound to the app `appId` that made a grant of `organizationId` for `providerId`:
   * the settings' default needs no statement. Undefined when the app is gone or is another
   * provider's (or the provider is no longer offered).
   */
  async provider(db: Db, organizationId: string, appId: string, providerId: string): Promise<ConfiguredProvider | undefined> {
    const deployment = this.deps.providers.deploymentApp(appId);
    if (deployment) return deployment.provider === providerId ? deployment.configured : undefined;
    const provider = this.deps.providers.get(providerId);
    if (!provider) return undefined;
    // Entered credentials are no app's: their grants keep the provider's id.
    if (appId === providerId) return provider.traits.connects === 'entered' ? provider : undefined;
    const row = await this.organizationApp(db, organizationId, appId);
    return row && row.provider === providerId ? this.bind(row) : undefined;
  }

  /** The organization's default app of a provider (its choice), if it chose one. */
  async chosenDefault(db: Db, organizationId: string, providerId: string): Promise<string | null> {
    const [row] = await queryRows<{ app_id: string }>(db, sql`SELECT app_id FROM organization_default_apps WHERE organization_id = ${organizationId} AND provider = ${providerId}`);
    return row?.app_id ?? null;
  }

  /**
   * The app a connect uses (docs/contract.md §5e): `requested` — one this organization may use,
   * of `providerId` (else 400 INVALID_INPUT at `path`) — or the organization's default, else the
   * provider's deployment app; else 400 PROVIDER_NOT_CONFIGURED.
   */
  async choose(db: Db, organizationId: string, providerId: string, requested: string | undefined, path = 'body.app'): Promise<ConfiguredProvider> {
    if (requested !== undefined) {
      const chosen = await this.usable(db, organizationId, requested);
      if (!chosen || chosen.id !== providerId) {
        throw new AppError('INVALID_INPUT', { details: [{ path, message: `no app "${requested}" of ${providerId} that this organization may use` }] });
      }
      return chosen;
    }
    const chosenId = await this.chosenDefault(db, organizationId, providerId);
    const chosen = chosenId ? await this.usable(db, organizationId, chosenId) : undefined;
    if (chosen && chosen.id === providerId) return chosen;
    const deployment = this.deps.providers.deploymentApp(providerId);
    if (deployment && this.mayUse(deployment, organizationId)) return deployment.configured;
    throw new AppError('PROVIDER_NOT_CONFIGURED');
  }

  /** An app this organization may use, bound; undefined otherwise. */
  async usable(db: Db, organizationId: string, appId: string): Promise<ConfiguredProvider | undefined> {
    const deployment = this.deps.providers.deploymentApp(appId);
    if (deployment) return this.mayUse(deployment, organizationId) ? deployment.configured : undefined;
    const row = await this.organizationApp(db, organizationId, appId);
    return row && this.deps.providers.get(row.provider) ? this.bind(row) : undefined;
  }

  /**
   * The providers this organization may connect — "usable" (docs/contract.md §5e): one whose
   * credentials people enter when it is configured, any other when it may use at least one of its
   * apps — each with the ids of those apps.
   */
  async usableProviders(db: Db, organizationId: string): Promise<{ provider: ConfiguredProvider; apps: string[] }[]> {
    const apps = await this.usableByProvider(db, organizationId);
    return this.deps.providers
      .list()
      .map((provider) => ({ provider, apps: apps.get(provider.id) ?? [] }))
      .filter(({ provider, apps }) => provider.traits.connects === 'entered' || apps.length > 0);
  }

  /** The ids of the apps this organization may use, by provider: the deployment's it may use, then its own. */
  async usableByProvider(db: Db, organizationId: string): Promise<Map<string, string[]>> {
    const byProvider = new Map<string, string[]>();
    const add = (provider: string, id: string) => byProvider.set(provider, [...(byProvider.get(provider) ?? []), id]);
    for (const app of this.deploymentApps(organizationId)) add(app.provider, app.ref.id);
    const own = await queryRows<{ id: string; provider: string }>(db, sql`SELECT id, provider FROM oauth_apps WHERE organization_id = ${organizationId} ORDER BY id`);
    for (const row of own) if (this.deps.providers.get(row.provider)) add(row.provider, row.id);
    return byProvider;
  }
}
