import { createSign, type KeyObject } from 'node:crypto';
import { allowedScheme, readAppPrivateKey } from '../../config/checks.ts';
import { type Config, ConfigError } from '../../config/load.ts';
import { atlassian } from './atlassian.ts';
import { bitbucket } from './bitbucket.ts';
import { discord } from './discord.ts';
import { github } from './github.ts';
import { githubapp } from './githubapp.ts';
import { gitlab } from './gitlab.ts';
import { google } from './google.ts';
import { linear } from './linear.ts';
import { microsoft } from './microsoft.ts';
import { notion } from './notion.ts';
import { salesforce } from './salesforce.ts';
import { slack } from './slack.ts';
import { stripe } from './stripe.ts';
import { twilio } from './twilio.ts';
import { zoom } from './zoom.ts';
import { zooms2s } from './zooms2s.ts';
import type { ProviderSettings } from '../../config/schema.ts';
import { customProvider } from './custom.ts';
import { eventsSecretProblem } from './event-secrets.ts';
import { fillTemplate, placeholders } from './json.ts';
import { type ObserveCall, type ProviderAnswer, type ProviderRequest, providerFetch } from './transport.ts';
import { EnteredValueRefused, enteredHostPattern, enteredUrlProblems, fillUrlTemplate, hostLabelFields } from './url-template.ts';
import { createOutboundGuard, type OutboundGuard } from '../../lib/outbound.ts';
import { type AuthTraits, authTraits } from './traits.ts';
import { type Metadata, type ProviderContext, type ProviderDefinition, type ProviderEndpoints, ProviderError } from './types.ts';

/** Every provider Tessera knows. Adding one: a definition file, then list it here. */
export const DEFINITIONS: readonly ProviderDefinition[] = [github, slack, gitlab, bitbucket, discord, google, microsoft, atlassian, linear, notion, zoom, salesforce, stripe, twilio, zooms2s, githubapp];

/** The largest answer a definition reads (token, account, hooks); the proxy has its own cap. */
const MAX_BODY = 1024 * 1024;

/** Which app a provider's credentials are (docs/contract.md §5e): a deployment app (the settings' default has the provider's id) or an organization's own. */
export interface AppRef {
  id: string;
  owner: 'deployment' | 'organization';
}

/** What an app brings to its provider's settings: its client, the scopes it may request, its events secret, a GitHub App's id, slug and key. */
export interface AppCredentials {
  clientId: string;
  clientSecret: string;
  scopes?: string[] | null;
  eventsSecret?: string;
  appId?: string;
  slug?: string;
  privateKey?: string;
}

/** A deployment app: the settings' default of a provider, or an entry of `integrationOauthApps`. */
export interface DeploymentApp {
  ref: AppRef;
  provider: string;
  name: string;
  clientId: string;
  /** The scopes it may request as configured (null: the provider's configured set). */
  scopes: string[] | null;
  /** Set: its events route is open (docs/contract.md §5b); stays on the server. */
  eventsSecret?: string;
  /** The organizations that may use it; null: every one. */
  organizations: readonly string[] | null;
  /** The provider bound to this app's credentials. */
  configured: ConfiguredProvider;
}

/** A provider with its configuration applied, bound to one app's credentials: usable for connect, refresh and calls. */
export interface ConfiguredProvider {
  id: string;
  displayName: string;
  definition: ProviderDefinition;
  /** How it connects, renews and what it stores (traits.ts): what code outside the providers room reads, never the mode's name. */
  traits: AuthTraits;
  /** The app whose credentials these are; null when the provider has no deployment app (offered to organizations' own apps only) and this is none's. */
  app: AppRef | null;
  clientId: string;
  /** Stays on the server: never in a response, an authUrl or a log line. */
  clientSecret: string;
  /** `<clientEndpoint>/v1/integrations/oauth/callback`. */
  redirectUri: string;
  /** Scopes requested when a start names none; also the allowed set. */
  scopes: string[];
  /** Entered fields that fill a host label of its URLs (§5c): entered as LDH labels, lower-cased. */
  hostFields: ReadonlySet<string>;
  /** The context before an integration exists (authorize URL, code exchange): endpoints that need no metadata. */
  context: ProviderContext;
  /** The context of one integration: endpoints filled from its metadata (Salesforce's instance, Zoom's API host). */
  contextFor(metadata: Metadata): ProviderContext;
  /**
   * Where the provider's configuration document is, when its events are security event tokens
   * signed by its own keys (spec.ts `SecurityEventTokenSpec`) and the setting that switches them on
   * is true (Google: `INTEGRATION_OAUTH_GOOGLE_RISC`); absent otherwise — its events route is then 404.
   */
  eventsConfigurationUrl?: string;
  /** A call to this provider through the one transport (transport.ts), with the configured timeout, its metrics, and a cap of `maxBytes` (default 1 MiB). */
  send(request: Omit<ProviderRequest, 'provider'>, maxBytes?: number): Promise<ProviderAnswer>;
}

export interface ProviderRegistry {
  /** The provider (known to this deployment), bound to its default deployment app — or to none, when only organizations' own apps may connect it. */
  get(id: string): ConfiguredProvider | undefined;
  /** Every provider this deployment offers. */
  list(): ConfiguredProvider[];
  /** A deployment app by id (a provider id names its default). */
  deploymentApp(id: string): DeploymentApp | undefined;
  /** Every deployment app, defaults first. */
  deploymentApps(): DeploymentApp[];
  /** The provider bound to an organization's own app (apps/catalog.ts caches these). */
  withApp(providerId: string, ref: AppRef, credentials: AppCredentials): ConfiguredProvider;
}

/**
 * Builds the registry once at start from the definitions and the configuration.
 * Configuration naming a provider without a definition is a start-up error.
 */
export function buildProviderRegistry(
  config: Config,
  definitions: readonly ProviderDefinition[] = DEFINITIONS,
  observe?: ObserveCall,
  guard?: OutboundGuard,
): ProviderRegistry {
  // Without one given (the command line), the guard the settings describe: a URL an entered value chose is never fetched unguarded.
  const outboundGuard = guard ?? createOutboundGuard({ enforce: config.isProduction, allowCidrs: config.outbound.allowCidrs });
  const byId = new Map(definitions.map((definition) => [definition.id, definition]));
  const problems: string[] = [];
  for (const [id, settings] of Object.entries(config.providers)) {
    const envBase = `INTEGRATION_OAUTH_${id.toUpperCase()}_* (integrationOauthProvider.${id})`;
    if (settings.definition === undefined) {
      if (!byId.has(id)) problems.push(`${envBase}: no provider definition "${id}"; known: ${[...byId.keys()].join(', ')} (or give it a definition in CONFIG_FILE)`);
      continue;
    }
    if (byId.has(id)) {
      problems.push(`integrationOauthProvider.${id}.definition: "${id}" has a built-in definition; remove the definition, or choose another id`);
      continue;
    }
    const custom = customProvider(id, settings.definition, config.isProduction);
    if (Array.isArray(custom)) problems.push(...custom);
    else byId.set(id, custom);
  }
  for (const definition of byId.values()) {
    const settings = config.providers[definition.id];
    if (authTraits(definition).connects === 'installation' && settings?.clientId && settings.clientSecret) problems.push(...appSettingsMissing(definition.id, settings));
    // The events secret in the shape the provider's scheme needs (Discord: the application's public key); the words never hold it.
    const eventsProblem = settings?.eventsSecret && definition.events ? eventsSecretProblem(definition.events, settings.eventsSecret) : undefined;
    if (eventsProblem) problems.push(`INTEGRATION_OAUTH_${definition.id.toUpperCase()}_EVENTS_SECRET (integrationOauthProvider.${definition.id}.eventsSecret): ${eventsProblem}`);
    // §5c: an entered value fills a URL only as a host label under a fixed suffix, a path segment or a query value.
    if (settings && definition.metadataFields.length > 0) {
      for (const [key, template] of Object.entries(templatesOf(definition, settings))) {
        for (const problem of enteredUrlProblems(template, definition.metadataFields)) problems.push(`integrationOauthProvider.${definition.id}.${key}: ${problem}`);
      }
    }
  }
  problems.push(...deploymentAppProblems(config, byId));
  if (problems.length > 0) throw new ConfigError(problems);

  const configured = new Map<string, ConfiguredProvider>();
  const apps = new Map<string, DeploymentApp>();
  for (const definition of byId.values()) {
    const settings = config.providers[definition.id];
    if (!settings) continue;
    if (authTraits(definition).connects === 'entered') {
      // Credentials a person enters need nothing of the deployment's: a custom definition, or a built-in switched on, is configured.
      if (settings.definition === undefined && settings.enabled !== true) continue;
      configured.set(definition.id, configure(config, definition, { ...settings, clientId: settings.clientId ?? '', clientSecret: settings.clientSecret ?? '' }, null, observe, outboundGuard));
      continue;
    }
    if (!settings.clientId || !settings.clientSecret) {
      // An entry without client credentials offers the provider to organizations' own apps only (docs/contract.md §5e).
      configured.set(definition.id, configure(config, definition, { ...settings, clientId: '', clientSecret: '' }, null, observe, outboundGuard));
      continue;
    }
    const ref: AppRef = { id: definition.id, owner: 'deployment' };
    const provider = configure(config, definition, settings as ProviderSettings & { clientId: string; clientSecret: string }, ref, observe, outboundGuard);
    configured.set(definition.id, provider);
    apps.set(definition.id, {
      ref,
      provider: definition.id,
      name: definition.displayName,
      clientId: settings.clientId,
      scopes: settings.scopes?.length ? settings.scopes : null,
      ...(settings.eventsSecret ? { eventsSecret: settings.eventsSecret } : {}),
      organizations: null,
      configured: provider,
    });
  }
  const withApp = (providerId: string, ref: AppRef, credentials: AppCredentials): ConfiguredProvider => {
    const definition = byId.get(providerId);
    const settings = config.providers[providerId];
    if (!definition || !settings) throw new Error(`no provider ${providerId} for app ${ref.id}`);
    return configure(config, definition, appSettings(settings, credentials, ref), ref, observe, outboundGuard);
  };
  for (const entry of config.apps) {
    const ref: AppRef = { id: entry.id, owner: 'deployment' };
    apps.set(entry.id, {
      ref,
      provider: entry.provider,
      name: entry.name ?? entry.id,
      clientId: entry.clientId,
      scopes: entry.scopes?.length ? entry.scopes : null,
      ...(entry.eventsSecret ? { eventsSecret: entry.eventsSecret } : {}),
      organizations: entry.organizations ?? null,
      configured: withApp(entry.provider, ref, entry),
    });
  }
  return {
    get: (id) => configured.get(id),
    list: () => [...configured.values()],
    deploymentApp: (id) => apps.get(id),
    deploymentApps: () => [...apps.values()],
    withApp,
  };
}

/**
 * A provider's settings with an app's credentials in place of its own. An app of its own installs
 * through its own slug (docs/contract.md §5e): the deployment's install URL is not its.
 */
function appSettings(settings: ProviderSettings, credentials: AppCredentials, ref: AppRef): ProviderSettings & { clientId: string; clientSecret: string } {
  const { clientId: _id, clientSecret: _secret, scopes: _scopes, eventsSecret: _events, appId: _app, slug: _slug, privateKey: _key, installUrl, ...rest } = settings;
  return {
    ...rest,
    ...(ref.owner === 'deployment' && installUrl && !credentials.slug ? { installUrl } : {}),
    clientId: credentials.clientId,
    clientSecret: credentials.clientSecret,
    ...(credentials.scopes?.length ? { scopes: credentials.scopes } : settings.scopes?.length ? { scopes: settings.scopes } : {}),
    ...(credentials.appId ? { appId: credentials.appId } : {}),
    ...(credentials.slug ? { slug: credentials.slug } : {}),
    ...(credentials.privateKey ? { privateKey: credentials.privateKey } : {}),
  };
}

/** `integrationOauthApps` entries (docs/contract.md §5e): each refused one is one line naming it by its id (or index), never a secret. */
function deploymentAppProblems(config: Config, byId: ReadonlyMap<string, ProviderDefinition>): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const [index, entry] of config.apps.entries()) {
    const at = `integrationOauthApps[${entry.id ? `"${entry.id}"` : index}]`;
    const definition = byId.get(entry.provider);
    if (byId.has(entry.id)) problems.push(`${at}.id: "${entry.id}" is a provider id; choose another`);
    else if (seen.has(entry.id)) problems.push(`${at}.id: listed twice`);
    seen.add(entry.id);
    if (!definition) {
      problems.push(`${at}.provider: no provider "${entry.provider}"; known: ${[...byId.keys()].join(', ')}`);
      continue;
    }
    const traits = authTraits(definition);
    if (traits.connects === 'entered') problems.push(`${at}.provider: ${definition.displayName} connects with entered credentials; it has no apps`);
    if (!config.providers[entry.provider]) problems.push(`${at}.provider: add integrationOauthProvider.${entry.provider} (it may hold no client credentials) to offer ${definition.displayName}`);
    if (traits.connects === 'installation') {
      if (!entry.privateKey || !entry.slug || !entry.appId) problems.push(`${at}: a GitHub App needs appId, slug and privateKey`);
    } else if (entry.privateKey || entry.slug || entry.appId) problems.push(`${at}: appId, slug and privateKey are a GitHub App's only`);
    const eventsProblem = entry.eventsSecret && definition.events ? eventsSecretProblem(definition.events, entry.eventsSecret) : undefined;
    if (eventsProblem) problems.push(`${at}.eventsSecret: ${eventsProblem}`);
    if (entry.privateKey) {
      try {
        readAppPrivateKey(entry.privateKey);
      } catch (error) {
        problems.push(`${at}.privateKey: ${(error as Error).message}`);
      }
    }
  }
  return problems;
}

/** An app installation's provider needs its private key and where it is installed (its slug, or an install URL) besides its client. */
function appSettingsMissing(id: string, settings: ProviderSettings): string[] {
  const env = `INTEGRATION_OAUTH_${id.toUpperCase()}`;
  const missing: string[] = [];
  if (!settings.privateKey) missing.push(`${env}_PRIVATE_KEY (integrationOauthProvider.${id}.privateKey): required for a GitHub App; paste the .pem file generated on the app's settings page`);
  if (!settings.slug && !settings.installUrl) missing.push(`${env}_SLUG (integrationOauthProvider.${id}.slug): required for a GitHub App (the name in https://github.com/apps/<slug>), or set ${env}_INSTALL_URL`);
  return missing;
}

/** An RS256 JWT signer over `key`, which stays in this closure: nothing outside it can read or print the key. */
function appJwtSigner(key: KeyObject): (claims: Record<string, unknown>) => string {
  const header = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT' })).toString('base64url');
  return (claims) => {
    const input = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
    return `${input}.${createSign('RSA-SHA256').update(input).sign(key, 'base64url')}`;
  };
}

/** A definition's endpoint templates with the deployment's overrides applied. */
function templatesOf(definition: ProviderDefinition, overrides: ProviderSettings): ProviderEndpoints {
  return {
    authUrl: overrides.installUrl ?? overrides.authUrl ?? definition.endpoints.authUrl,
    tokenUrl: overrides.tokenUrl ?? definition.endpoints.tokenUrl,
    apiUrl: (overrides.apiUrl ?? definition.endpoints.apiUrl).replace(/\/+$/, ''),
    ...(overrides.userinfoUrl ?? definition.endpoints.userInfoUrl ? { userInfoUrl: overrides.userinfoUrl ?? definition.endpoints.userInfoUrl } : {}),
    ...(overrides.revokeUrl ?? definition.endpoints.revokeUrl ? { revokeUrl: overrides.revokeUrl ?? definition.endpoints.revokeUrl } : {}),
  };
}

function configure(
  config: Config,
  definition: ProviderDefinition,
  settings: ProviderSettings & { clientId: string; clientSecret: string },
  app: AppRef | null,
  observe?: ObserveCall,
  guard?: OutboundGuard,
): ConfiguredProvider {
  const overrides = settings;
  const templates = templatesOf(definition, overrides);
  const entered = definition.metadataFields;
  const allTemplates = Object.values(templates) as string[];
  // A URL whose host an entered value chose is fetched through the outbound guard (docs/contract.md §1, §5c).
  const enteredHosts = allTemplates.map((template) => enteredHostPattern(template, entered)).filter((pattern): pattern is RegExp => pattern !== null);
  const outboundOf = (url: string | URL): ProviderRequest['outbound'] => {
    if (enteredHosts.length === 0) return undefined;
    let host: string;
    try {
      host = new URL(url).hostname;
    } catch {
      return undefined;
    }
    return enteredHosts.some((pattern) => pattern.test(host)) ? 'entered' : undefined;
  };
  const timeoutMs = config.oauth.providerTimeout * 1000;
  const send = (call: Omit<ProviderRequest, 'provider'>, maxBytes = MAX_BODY) => {
    const outbound = call.outbound ?? outboundOf(call.url);
    return providerFetch({ ...call, provider: definition.id, ...(outbound ? { outbound } : {}) }, { timeoutMs, maxBytes, ...(guard ? { guard } : {}) }, observe);
  };
  const request: ProviderContext['request'] = async (url, init) => {
    const answer = await send({ url, ...init });
    return { status: answer.status, headers: answer.headers, body: answer.body.toString('utf8') };
  };
  const settingValues = {
    ...(overrides.tenant ? { tenant: overrides.tenant } : {}),
    ...(overrides.slug ? { slug: overrides.slug } : {}),
    ...(settings.clientId ? { clientId: encodeURIComponent(settings.clientId) } : {}),
  };
  // Read once, at start (config/checks.ts has already refused a bad one, naming only the setting).
  const signAppJwt = settings.privateKey ? appJwtSigner(readAppPrivateKey(settings.privateKey)) : undefined;
  // URLs a provider's answer may choose are checked; entered fields (an account id in a path) are checked where they are entered.
  const fromMetadata = new Set(Object.values(templates).flatMap((template) => placeholders(template)).filter((name) => !definition.metadataFields.includes(name)));
  const contextFor = (metadata: Metadata): ProviderContext => {
    for (const [key, value] of Object.entries(metadata)) {
      if (fromMetadata.has(key)) checkMetadataUrl(definition, key, value, config.isProduction);
    }
    const values: Record<string, unknown> = { ...definition.defaults, ...metadata, ...settingValues };
    const endpoints = resolveEndpoints(templates, values, entered);
    const all = { ...values, ...endpoints };
    return {
      endpoints,
      clientId: settings.clientId,
      clientSecret: settings.clientSecret,
      resolve: (template) => fillEntered(template, all, entered),
      request,
      ...(signAppJwt ? { signAppJwt } : {}),
    };
  };
  const clientEndpoint = (settings.clientEndpoint ?? config.server.publicUrl).replace(/\/+$/, '');
  const signedByProvider = definition.events?.signature.kind === 'security_event_token' ? definition.events.signature : undefined;
  const setting = (key: string): unknown => (settings as Record<string, unknown>)[key];
  const configurationUrl = signedByProvider && setting(signedByProvider.enabledBy) === true ? setting(signedByProvider.configuration.setting) ?? signedByProvider.configuration.url : undefined;
  return {
    id: definition.id,
    displayName: definition.displayName,
    definition,
    traits: authTraits(definition),
    app,
    clientId: settings.clientId,
    clientSecret: settings.clientSecret,
    redirectUri: `${clientEndpoint}/v1/integrations/oauth/callback`,
    scopes: settings.scopes?.length ? settings.scopes : definition.defaultScopes,
    hostFields: hostLabelFields(allTemplates, entered),
    context: contextFor({}),
    contextFor,
    ...(typeof configurationUrl === 'string' ? { eventsConfigurationUrl: configurationUrl } : {}),
    send,
  };
}

/**
 * A URL a provider's answer chose for its API (Salesforce's `instance_url`, Zoom's `api_url`)
 * is used only when it is https on one of the definition's hosts (loopback http in
 * development, like any endpoint): a token answer must not be able to point our calls, with
 * the token attached, anywhere else.
 */
function checkMetadataUrl(definition: ProviderDefinition, key: string, value: unknown, isProduction: boolean): void {
  const refuse = () => new ProviderError('transient', `${definition.displayName} sent a ${key} that is not one of its hosts`);
  let url: URL;
  try {
    url = new URL(String(value));
  } catch {
    throw refuse();
  }
  const hosts = definition.metadataHosts ?? [];
  const listed = hosts.some((host) => (host.startsWith('.') ? url.hostname.endsWith(host) : url.hostname === host));
  // Loopback http (development) passes the https rule on its own; anything else must be https on a listed host.
  const loopback = url.protocol === 'http:' && allowedScheme(url, isProduction);
  if (url.username || url.password || !allowedScheme(url, isProduction) || !(loopback || listed)) throw refuse();
}

/**
 * A template filled, entered values as §5c says (url-template.ts). A stored value that is not a
 * host label (stored before the rule) leaves a host under `.invalid`, which never resolves
 * (RFC 6761): the call fails as the provider unreachable, and goes nowhere else.
 */
function fillEntered(template: string, values: Record<string, unknown>, entered: readonly string[]): string {
  try {
    return fillUrlTemplate(template, values, entered, fillTemplate);
  } catch (error) {
    if (error instanceof EnteredValueRefused) return 'https://entered-value-refused.invalid';
    throw error;
  }
}

/** Each endpoint template filled; one whose placeholder has no value yet (metadata to come) is left empty. */
function resolveEndpoints(templates: ProviderEndpoints, values: Record<string, unknown>, entered: readonly string[]): ProviderEndpoints {
  const fill = (template: string) => {
    try {
      return fillEntered(template, values, entered);
    } catch {
      return '';
    }
  };
  return {
    authUrl: fill(templates.authUrl),
    tokenUrl: fill(templates.tokenUrl),
    apiUrl: fill(templates.apiUrl),
    ...(templates.userInfoUrl ? { userInfoUrl: fill(templates.userInfoUrl) } : {}),
    ...(templates.revokeUrl ? { revokeUrl: fill(templates.revokeUrl) } : {}),
  };
}
