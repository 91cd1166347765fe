/**
 * An organization's apps as data (docs/contract.md §5e): its own — made, changed and deleted
 * through the API, their secrets one sealed envelope (replaced, never updated in place) — listed
 * beside the deployment's apps it may use, which are read-only here but for the choice of the
 * default. Every consumer (REST, GraphQL) calls these use cases; each checks its own role. An app
 * reads as `AppView`: never a secret, a private key or a part of one.
 */
import type { SQL } from 'drizzle-orm';
import { recordAudit } from '../../audit/audit.ts';
import { readAppPrivateKey } from '../../config/checks.ts';
import { type Db, queryRows, sql } from '../../db/client.ts';
import { AppError, type ErrorDetail } from '../../ground/errors.ts';
import { checkName } from '../../ground/names.ts';
import type { Principal } from '../../ground/principal.ts';
import type { Work } from '../../ground/work.ts';
import { requireRole } from '../../identity/authorize.ts';
import { newId } from '../../lib/ids.ts';
import { seal } from '../../secrets/crypto.ts';
import type { Services } from '../../services.ts';
import { eventsSecretProblem } from '../providers/event-secrets.ts';
import type { ConfiguredProvider, DeploymentApp } from '../providers/registry.ts';
import { tokenScheme } from '../events/delivery.ts';
import { APP_ROW_COLUMNS, type AppSecrets, appSecretBinding, type OrganizationAppRow } from './catalog.ts';

/** What the use cases read: the settings (public URL, limits, keyring), the providers and the catalog. */
export type AppServices = Pick<Services, 'config' | 'providers' | 'apps'>;

/** A client id as a provider issues one (docs/contract.md §5e): it fills a URL only as one percent-encoded path segment. */
export const CLIENT_ID = /^[A-Za-z0-9._~-]{1,255}$/;
/** A GitHub App's slug: the name in https://github.com/apps/<slug>. */
export const SLUG = /^[a-z0-9][a-z0-9-]{0,99}$/;
/** A GitHub App's id: digits. */
export const GITHUB_APP_ID = /^[0-9]{1,20}$/;
/** A scope: no whitespace (they are joined with spaces or commas). */
export const SCOPE = /^\S{1,200}$/;
export const NAME_MAX = 100;
export const SECRET_MAX = 4096;
export const PRIVATE_KEY_MAX = 16384;
export const SCOPES_MAX = 100;

/** Deployment apps come from the settings: they read this process's start as made and changed. */
const STARTED = new Date().toISOString();

/** An app as the API shows it (docs/contract.md §5e). */
export interface AppView {
  id: string;
  provider: string;
  owner: 'deployment' | 'organization';
  name: string;
  clientId: string;
  /** The scopes it may request; null: the provider's configured set. */
  scopes: string[] | null;
  /** Whether it is this organization's default app of its provider. */
  default: boolean;
  /** The callback to register at the provider. */
  redirectUri: string;
  /** Where the provider sends its events for this app; null when the provider sends none. */
  eventsUrl: string | null;
  hasEventsSecret: boolean;
  createdAt: string;
  updatedAt: string;
}

export interface NewApp {
  provider: string;
  name?: string | undefined;
  clientId: string;
  clientSecret?: string | undefined;
  scopes?: string[] | undefined;
  eventsSecret?: string | undefined;
  appId?: string | undefined;
  slug?: string | undefined;
  privateKey?: string | undefined;
  default?: boolean | undefined;
}

/** A change: absent (undefined) fields stay; `scopes: null` returns to the provider's set, `eventsSecret: null` removes it. */
export interface AppChange {
  name?: string | undefined;
  clientSecret?: string | undefined;
  scopes?: string[] | null | undefined;
  eventsSecret?: string | null | undefined;
  privateKey?: string | undefined;
  default?: boolean | undefined;
}

const refuse = (path: string, message: string) => new AppError('INVALID_INPUT', { message: `${path} ${message}`, details: [{ path, message }] });

/** The caller, if a member of its organization (any member reads apps). */
function reader(work: Work): Principal {
  const principal = work.actor.principal;
  return requireRole(principal, principal?.organizationId ?? '', 'member');
}

/** The caller, if it may change apps: owner/admin, an API token, or a service token in the organization it names. */
function writer(work: Work): Principal {
  const principal = work.actor.principal;
  return requireRole(principal, principal?.organizationId ?? '', 'admin');
}

function publicUrl(services: AppServices): string {
  return services.config.server.publicUrl.replace(/\/+$/, '');
}

/** The callback to register: the provider's own (the same for every app of it). */
function redirectUriOf(services: AppServices, providerId: string): string {
  return services.providers.get(providerId)?.redirectUri ?? `${publicUrl(services)}/v1/integrations/oauth/callback`;
}

/** Where the provider's events for this app go: only the definition's `events` decides whether there are any. */
function eventsUrlOf(services: AppServices, providerId: string, appId: string): string | null {
  const provider = services.providers.get(providerId);
  if (!provider?.definition.events) return null;
  // Signed with the provider's own keys (Google's RISC): there are events only once the deployment switched them on.
  if (tokenScheme(provider.definition.events) && !provider.eventsConfigurationUrl) return null;
  // The settings' default app keeps the provider's own route (docs/contract.md §5b).
  return appId === providerId ? `${publicUrl(services)}/v1/providers/${providerId}/events` : `${publicUrl(services)}/v1/apps/${appId}/events`;
}

/** An events secret is for a provider that signs with one: refused where it sends no events, or signs them with its own keys (Google). */
function refuseEventsSecret(provider: ConfiguredProvider | undefined, providerId = provider?.id ?? ''): void {
  const events = provider?.definition.events;
  if (!events) throw refuse('eventsSecret', `${provider?.displayName ?? providerId} sends no events`);
  if (tokenScheme(events)) throw refuse('eventsSecret', `${provider?.displayName ?? providerId} signs its events with its own keys; it needs no events secret`);
}

function deploymentView(services: AppServices, app: DeploymentApp, defaults: ReadonlyMap<string, string>): AppView {
  return {
    id: app.ref.id,
    provider: app.provider,
    owner: 'deployment',
    name: app.name,
    clientId: app.clientId,
    scopes: app.scopes,
    default: defaults.get(app.provider) === app.ref.id,
    redirectUri: redirectUriOf(services, app.provider),
    eventsUrl: eventsUrlOf(services, app.provider, app.ref.id),
    hasEventsSecret: Boolean(app.eventsSecret),
    createdAt: STARTED,
    updatedAt: STARTED,
  };
}

type AppRow = Omit<OrganizationAppRow, 'key_id' | 'envelope'>;

function organizationView(services: AppServices, row: AppRow, defaults: ReadonlyMap<string, string>): AppView {
  return {
    id: row.id,
    provider: row.provider,
    owner: 'organization',
    name: row.name,
    clientId: row.client_id,
    scopes: row.scopes,
    default: defaults.get(row.provider) === row.id,
    redirectUri: redirectUriOf(services, row.provider),
    eventsUrl: eventsUrlOf(services, row.provider, row.id),
    hasEventsSecret: row.has_events_secret,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** The organization's default app by provider. */
async function defaultsOf(db: Db, organizationId: string): Promise<Map<string, string>> {
  const rows = await queryRows<{ provider: string; app_id: string }>(db, sql`SELECT provider, app_id FROM organization_default_apps WHERE organization_id = ${organizationId}`);
  return new Map(rows.map((row) => [row.provider, row.app_id]));
}

const notFound = () => new AppError('NOT_FOUND', { message: 'No such app' });

/** The deployment app `id`, if this organization may use it. */
function deploymentAppOf(services: AppServices, organizationId: string, id: string): DeploymentApp | undefined {
  const app = services.providers.deploymentApp(id);
  return app && services.apps.mayUse(app, organizationId) ? app : undefined;
}

/** The apps this organization may use — the deployment's first, then its own, oldest first — of one provider or all (any member). */
export async function listApps(services: AppServices, work: Work, provider?: string): Promise<AppView[]> {
  const { organizationId } = reader(work);
  const defaults = await defaultsOf(work.db, organizationId);
  const rows = await queryRows<AppRow>(
    work.db,
    sql`SELECT ${APP_ROW_COLUMNS} FROM oauth_apps a WHERE a.organization_id = ${organizationId}${provider === undefined ? sql`` : sql` AND a.provider = ${provider}`} ORDER BY a.id`,
  );
  return [...services.apps.deploymentApps(organizationId, provider).map((app) => deploymentView(services, app, defaults)), ...rows.map((row) => organizationView(services, row, defaults))];
}

/** One app this organization may use, or 404 (another organization's, or none). */
export async function getApp(services: AppServices, work: Work, id: string): Promise<AppView> {
  const { organizationId } = reader(work);
  const defaults = await defaultsOf(work.db, organizationId);
  const deployment = deploymentAppOf(services, organizationId, id);
  if (deployment) return deploymentView(services, deployment, defaults);
  const row = await services.apps.organizationApp(work.db, organizationId, id);
  if (!row) throw notFound();
  return organizationView(services, row, defaults);
}

/** Makes `id` the organization's default app of `provider` (replacing any other), or — `false` — stops it being the default. */
async function setDefault(db: Db, organizationId: string, provider: string, id: string, value: boolean): Promise<void> {
  if (value) {
    await db.execute(
      sql`INSERT INTO organization_default_apps (organization_id, provider, app_id) VALUES (${organizationId}, ${provider}, ${id})
          ON CONFLICT (organization_id, provider) DO UPDATE SET app_id = excluded.app_id`,
    );
  } else {
    await db.execute(sql`DELETE FROM organization_default_apps WHERE organization_id = ${organizationId} AND provider = ${provider} AND app_id = ${id}`);
  }
}

/** Seals `secrets` as the app's one envelope, replacing any before it (never updated in place). */
async function storeSecrets(services: AppServices, db: Db, organizationId: string, id: string, secrets: AppSecrets): Promise<void> {
  const sealed = seal(services.config.keyring, appSecretBinding(organizationId, id), JSON.stringify(secrets));
  await db.execute(sql`DELETE FROM oauth_app_secrets WHERE organization_id = ${organizationId} AND app_id = ${id}`);
  await db.execute(sql`INSERT INTO oauth_app_secrets (organization_id, app_id, key_id, envelope) VALUES (${organizationId}, ${id}, ${sealed.keyId}, ${sealed.envelope})`);
}

function checkScopes(scopes: readonly string[], path = 'scopes'): string[] {
  if (scopes.length === 0 || scopes.length > SCOPES_MAX) throw refuse(path, `must list 1–${SCOPES_MAX} scopes (leave it out for the provider's configured set)`);
  scopes.forEach((scope, index) => {
    if (!SCOPE.test(scope)) throw refuse(`${path}.${index}`, 'must be 1–200 characters without spaces');
  });
  return [...new Set(scopes)];
}

function checkSecret(value: string, path: string, max = SECRET_MAX): string {
  if (value.length === 0 || value.length > max) throw refuse(path, `must be 1–${max} characters`);
  return value;
}

/** An events secret of the shape its provider's signature scheme needs (Discord: the application's public key, 64 hex characters). */
function checkEventsSecret(provider: ConfiguredProvider, value: string): string {
  checkSecret(value, 'eventsSecret');
  const problem = provider.definition.events ? eventsSecretProblem(provider.definition.events, value) : undefined;
  if (problem) throw refuse('eventsSecret', problem);
  return value;
}

function checkPrivateKey(value: string): string {
  checkSecret(value, 'privateKey', PRIVATE_KEY_MAX);
  try {
    readAppPrivateKey(value);
  } catch (error) {
    // readAppPrivateKey's words name the rule, never the key.
    throw refuse('privateKey', (error as Error).message);
  }
  return value;
}

/** The provider an organization may add an app of, or 400 (not offered: PROVIDER_NOT_CONFIGURED; entered credentials: INVALID_INPUT). */
function appProvider(services: AppServices, providerId: string): ConfiguredProvider {
  const provider = services.providers.get(providerId);
  if (!provider) throw new AppError('PROVIDER_NOT_CONFIGURED', { message: `This deployment does not offer the provider "${providerId}"` });
  if (provider.traits.connects === 'entered') throw refuse('provider', `${provider.displayName} connects with entered credentials (docs/contract.md §5c): it has no apps`);
  return provider;
}

/**
 * Refuses an app beyond the organization's limit (LIMIT_APPS_PER_ORGANIZATION): the
 * organization's row is locked for the count, so concurrent creations count each other.
 */
async function assertAppQuota(db: Db, organizationId: string, limit: number): Promise<void> {
  await queryRows(db, sql`SELECT 1 FROM organizations WHERE id = ${organizationId} FOR UPDATE`);
  // A statement of its own, after the lock: its snapshot sees what the previous holder committed.
  const [row] = await queryRows<{ count: number }>(db, sql`SELECT count(*)::int AS count FROM oauth_apps WHERE organization_id = ${organizationId}`);
  if ((row?.count ?? 0) >= limit) {
    throw new AppError('CONFLICT', { message: `The organization has reached the limit of ${limit} apps of its own (LIMIT_APPS_PER_ORGANIZATION); delete one first` });
  }
}

/** Creates one of the organization's own apps (owner/admin, an API token, a service token in the organization). */
export async function createApp(services: AppServices, work: Work, input: NewApp): Promise<AppView> {
  const { organizationId } = writer(work);
  const provider = appProvider(services, input.provider);
  const installation = provider.traits.connects === 'installation';
  if (!CLIENT_ID.test(input.clientId)) throw refuse('clientId', 'must be 1–255 characters of A-Z a-z 0-9 . _ ~ -');
  const name = input.name === undefined ? provider.displayName : checkName(input.name, 'name', { max: NAME_MAX });
  if (installation) {
    const missing = (['appId', 'slug', 'privateKey', 'clientSecret'] as const).filter((field) => input[field] === undefined);
    if (missing.length > 0) {
      throw new AppError('INVALID_INPUT', {
        message: `A GitHub App needs appId, slug, privateKey and clientSecret; missing: ${missing.join(', ')}`,
        details: missing.map((path) => ({ path, message: 'required for a GitHub App' })),
      });
    }
  } else {
    const extra = (['appId', 'slug', 'privateKey'] as const).filter((field) => input[field] !== undefined);
    if (extra.length > 0) {
      throw new AppError('INVALID_INPUT', { message: `${extra.join(', ')}: a GitHub App's only`, details: extra.map((path) => ({ path, message: "a GitHub App's only" })) });
    }
  }
  // No definition authenticates its client without a secret (spec.ts `clientAuth`): it is always required (decision 292).
  if (input.clientSecret === undefined) throw refuse('clientSecret', 'is required');
  if (input.appId !== undefined && !GITHUB_APP_ID.test(input.appId)) throw refuse('appId', "must be the GitHub App's numeric id");
  if (input.slug !== undefined && !SLUG.test(input.slug)) throw refuse('slug', 'must match ^[a-z0-9][a-z0-9-]{0,99}$ (the name in https://github.com/apps/<slug>)');
  if (input.eventsSecret !== undefined) refuseEventsSecret(provider);
  const secrets: AppSecrets = {
    clientSecret: checkSecret(input.clientSecret, 'clientSecret'),
    ...(input.eventsSecret !== undefined ? { eventsSecret: checkEventsSecret(provider, input.eventsSecret) } : {}),
    ...(input.privateKey !== undefined ? { privateKey: checkPrivateKey(input.privateKey) } : {}),
  };
  const scopes = input.scopes === undefined ? null : checkScopes(input.scopes);
  await assertAppQuota(work.db, organizationId, services.config.limits.appsPerOrganization);
  const id = newId();
  await work.db.execute(
    sql`INSERT INTO oauth_apps (organization_id, id, provider, name, client_id, scopes, github_app_id, slug, has_events_secret)
        VALUES (${organizationId}, ${id}, ${provider.id}, ${name}, ${input.clientId}, ${textArray(scopes)}, ${input.appId ?? null}, ${input.slug ?? null}, ${secrets.eventsSecret !== undefined})`,
  );
  await storeSecrets(services, work.db, organizationId, id, secrets);
  if (input.default) await setDefault(work.db, organizationId, provider.id, id, true);
  await recordAudit(work.db, work.actor, { organizationId, action: 'app.created', targetType: 'app', targetId: id, detail: { provider: provider.id, default: input.default === true } });
  return getApp(services, work, id);
}

function textArray(values: readonly string[] | null) {
  return values === null ? null : sql`ARRAY[${sql.join(values.map((value) => sql`${value}`), sql`, `)}]::text[]`;
}

/** The names of the fields a change sets (its values never leave this function in an audit row). */
function changedFields(change: AppChange): string[] {
  return Object.entries(change)
    .filter(([, value]) => value !== undefined)
    .map(([key]) => key);
}

/**
 * Changes an app. The organization's own: any of name, clientSecret, scopes, eventsSecret,
 * privateKey (a GitHub App's), default — a secret change re-seals the envelope and makes every
 * instance use it on its next use. A deployment app: `default` alone (else 403).
 */
export async function updateApp(services: AppServices, work: Work, id: string, change: AppChange): Promise<AppView> {
  const { organizationId } = writer(work);
  const fields = changedFields(change);
  const deployment = deploymentAppOf(services, organizationId, id);
  if (deployment) {
    if (fields.some((field) => field !== 'default')) {
      throw new AppError('FORBIDDEN', { message: 'A deployment app is read-only here (it comes from the settings): only default may be chosen' });
    }
    if (change.default !== undefined) {
      await setDefault(work.db, organizationId, deployment.provider, id, change.default);
      await recordAudit(work.db, work.actor, { organizationId, action: 'app.updated', targetType: 'app', targetId: id, detail: { provider: deployment.provider, changed: fields } });
    }
    return getApp(services, work, id);
  }
  const row = await services.apps.organizationApp(work.db, organizationId, id, { lock: true });
  if (!row) throw notFound();
  const provider = services.providers.get(row.provider);
  const set: SQL[] = [];
  if (change.name !== undefined) set.push(sql`name = ${checkName(change.name, 'name', { max: NAME_MAX })}`);
  if (change.scopes !== undefined) set.push(sql`scopes = ${change.scopes === null ? null : textArray(checkScopes(change.scopes))}`);
  const secretsChange = change.clientSecret !== undefined || change.eventsSecret !== undefined || change.privateKey !== undefined;
  if (change.privateKey !== undefined && provider?.traits.connects !== 'installation') throw refuse('privateKey', "a GitHub App's only");
  if (typeof change.eventsSecret === 'string') refuseEventsSecret(provider, row.provider);
  if (secretsChange) {
    const secrets: AppSecrets = { ...services.apps.secrets(row) };
    if (change.clientSecret !== undefined) secrets.clientSecret = checkSecret(change.clientSecret, 'clientSecret');
    if (change.privateKey !== undefined) secrets.privateKey = checkPrivateKey(change.privateKey);
    if (change.eventsSecret === null) delete secrets.eventsSecret;
    else if (change.eventsSecret !== undefined && provider) secrets.eventsSecret = checkEventsSecret(provider, change.eventsSecret);
    await storeSecrets(services, work.db, organizationId, id, secrets);
    set.push(sql`has_events_secret = ${secrets.eventsSecret !== undefined}`);
  }
  if (change.default !== undefined) await setDefault(work.db, organizationId, row.provider, id, change.default);
  if (fields.length > 0) {
    // The catalog keys what it bound on updated_at: every change moves it on, even twice in one transaction (now() would not).
    set.push(sql`updated_at = GREATEST(clock_timestamp(), updated_at + interval '1 microsecond')`);
    await work.db.execute(sql`UPDATE oauth_apps SET ${sql.join(set, sql`, `)} WHERE organization_id = ${organizationId} AND id = ${id}`);
    await recordAudit(work.db, work.actor, { organizationId, action: 'app.updated', targetType: 'app', targetId: id, detail: { provider: row.provider, changed: fields } });
  }
  return getApp(services, work, id);
}

/** What still uses an app: integrations, pending connect sessions, unexpired OAuth states. */
async function usesOf(db: Db, organizationId: string, id: string): Promise<{ integrations: number; connectSessions: number; oauthStates: number }> {
  const [row] = await queryRows<{ integrations: number; sessions: number; states: number }>(
    db,
    sql`SELECT
          (SELECT count(*)::int FROM integrations WHERE organization_id = ${organizationId} AND app_id = ${id}) AS integrations,
          (SELECT count(*)::int FROM connect_sessions WHERE organization_id = ${organizationId} AND app_id = ${id} AND status = 'pending' AND expires_at > now()) AS sessions,
          (SELECT count(*)::int FROM oauth_states WHERE organization_id = ${organizationId} AND app_id = ${id} AND expires_at > now()) AS states`,
  );
  return { integrations: row?.integrations ?? 0, connectSessions: row?.sessions ?? 0, oauthStates: row?.states ?? 0 };
}

const plural = (count: number, one: string, many: string) => `${count} ${count === 1 ? one : many}`;

/** Deletes one of the organization's own apps, unless something still uses it (409 saying what); a deployment app → 403. */
export async function deleteApp(services: AppServices, work: Work, id: string): Promise<void> {
  const { organizationId } = writer(work);
  if (deploymentAppOf(services, organizationId, id)) throw new AppError('FORBIDDEN', { message: 'A deployment app is read-only here (it comes from the settings): it cannot be deleted' });
  const row = await services.apps.organizationApp(work.db, organizationId, id, { lock: true });
  if (!row) throw notFound();
  const uses = await usesOf(work.db, organizationId, id);
  const details: ErrorDetail[] = [];
  if (uses.integrations > 0) details.push({ path: 'integrations', message: `${plural(uses.integrations, 'integration uses', 'integrations use')} it: delete or reconnect them through another app` });
  if (uses.connectSessions > 0) details.push({ path: 'connectSessions', message: `${plural(uses.connectSessions, 'pending connect session uses', 'pending connect sessions use')} it: revoke them or let them expire` });
  if (uses.oauthStates > 0) details.push({ path: 'oauthStates', message: `${plural(uses.oauthStates, 'OAuth flow in progress uses', 'OAuth flows in progress use')} it: let them finish or expire` });
  if (details.length > 0) {
    const words = [
      uses.integrations > 0 ? plural(uses.integrations, 'integration', 'integrations') : null,
      uses.connectSessions > 0 ? plural(uses.connectSessions, 'pending connect session', 'pending connect sessions') : null,
      uses.oauthStates > 0 ? plural(uses.oauthStates, 'unexpired OAuth state', 'unexpired OAuth states') : null,
    ].filter(Boolean);
    throw new AppError('CONFLICT', { message: `The app is in use: ${words.join(', ')}`, details });
  }
  await work.db.execute(sql`DELETE FROM organization_default_apps WHERE organization_id = ${organizationId} AND app_id = ${id}`);
  await work.db.execute(sql`DELETE FROM oauth_apps WHERE organization_id = ${organizationId} AND id = ${id}`);
  await recordAudit(work.db, work.actor, { organizationId, action: 'app.deleted', targetType: 'app', targetId: id, detail: { provider: row.provider } });
}
