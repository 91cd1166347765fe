/**
 * The commands that talk to a running Tessera. They are a consumer of the public API only,
 * through `@tessera/client`, like any product's backend: no server module is imported here.
 */
import { Tessera, TesseraError } from '@tessera/client';
import { readFileSync } from 'node:fs';
import type { Apps, WebhookEndpoints } from '../../packages/client/src/resources.js';
import type { ApiOptions, AppOptions } from './index.ts';
import { CliFailure, line, printFields, printJson, printTable, when } from './output.ts';

/** What to do about a failed call, by its code. */
const FIXES: Record<string, string> = {
  NETWORK_ERROR: 'is Tessera running there? Check TESSERA_URL (or --url)',
  UNEXPECTED_RESPONSE: "check that TESSERA_URL is Tessera's base URL (without /v1)",
  UNAUTHENTICATED: 'check TESSERA_TOKEN (or --token): it may be mistyped, expired or revoked',
  FORBIDDEN: "this credential may not do that: check its role or kind; a service token acts in an organization given with --org <id>",
  INTEGRATION_NOT_FOUND: 'see which exist with `tessera integrations list` (an end user\'s need --end-user <id>)',
  PROVIDER_NOT_CONFIGURED: 'see which are configured with `tessera providers`',
  RATE_LIMITED: 'wait and try again',
};

/** A client for the running Tessera the options name, or a failure that says which setting is missing. */
function connect(options: ApiOptions): Tessera {
  if (!options.url) throw new CliFailure('no Tessera to talk to', { fix: 'set TESSERA_URL (or pass --url), e.g. TESSERA_URL=http://127.0.0.1:8080' });
  const url = URL.parse(options.url);
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new CliFailure('TESSERA_URL (--url) is not an http(s) URL', { fix: 'set it to Tessera\'s base URL, e.g. https://tessera.example.com' });
  }
  if (!options.token) {
    throw new CliFailure('no credentials', { fix: 'set TESSERA_TOKEN (or pass --token) to an API token (tsa_…), a service token (tss_…) or a personal access token (tsp_…)' });
  }
  return new Tessera({ baseUrl: options.url, token: options.token, ...(options.org ? { organizationId: options.org } : {}) });
}

/** Runs one call; a TesseraError becomes a failure with its code, request id and a fix. */
async function call<T>(pending: () => Promise<T>): Promise<T> {
  try {
    return await pending();
  } catch (error) {
    if (!(error instanceof TesseraError)) throw error;
    throw new CliFailure(error.message, { code: error.code, requestId: error.requestId, details: error.details, fix: FIXES[error.code] });
  }
}

/** `tessera providers`. */
export async function providers(options: ApiOptions): Promise<number> {
  const { providers } = await call(() => connect(options).providers.list());
  if (options.json) printJson(providers);
  else printTable(['id', 'name', 'default scopes'], providers.map((provider) => [provider.id, provider.displayName, provider.defaultScopes.join(' ')]), 'no provider is configured');
  return 0;
}

/** `tessera integrations list`. */
export async function listIntegrations(options: ApiOptions & { provider?: string; endUser?: string }): Promise<number> {
  const { integrations } = await call(() => connect(options).integrations.list({ provider: options.provider, endUser: options.endUser }));
  if (options.json) printJson(integrations);
  else {
    printTable(
      ['id', 'provider', 'end user', 'status', 'name', 'updated'],
      integrations.map((integration) => [integration.id, integration.provider, integration.endUser?.id ?? '', integration.status, integration.name, when(integration.updatedAt)]),
      'no integration',
    );
  }
  return 0;
}

/** `tessera integrations status <provider>`. */
export async function integrationStatus(provider: string, options: ApiOptions & { endUser?: string }): Promise<number> {
  const { status } = await call(() => connect(options).integrations.status(provider, { endUser: options.endUser }));
  if (options.json) printJson(status);
  else {
    printFields({
      provider: status.provider,
      'end user': options.endUser,
      status: status.status,
      connected: status.connected ? 'yes' : 'no',
      'token valid': status.tokenValid ? 'yes' : 'no',
      'token expired': status.tokenExpired ? 'yes' : 'no',
      'last validated': when(status.lastValidated) || 'never',
      message: status.message,
      actions: status.actions.length > 0 ? status.actions : undefined,
      'last error': status.lastError,
    });
  }
  return 0;
}

/** `tessera integrations refresh <provider>`: says when the new token expires; the token itself is never printed, not even with --json. */
export async function refreshIntegration(provider: string, options: ApiOptions & { endUser?: string }): Promise<number> {
  const refreshed = await call(() => connect(options).integrations.refresh(provider, { endUser: options.endUser }));
  const token = refreshed.token ? { tokenType: refreshed.token.tokenType, expiresAt: refreshed.token.expiresAt, scopes: refreshed.token.scopes } : undefined;
  if (options.json) printJson({ message: refreshed.message, ...(token ? { token } : {}) });
  else {
    printFields({
      provider,
      'end user': options.endUser,
      result: refreshed.message,
      expires: token ? when(token.expiresAt) || 'never' : undefined,
      scopes: token?.scopes,
    });
  }
  return 0;
}

/** `tessera integrations delete <id>`. */
export async function deleteIntegration(id: string, options: ApiOptions): Promise<number> {
  const deleted = await call(() => connect(options).integrations.delete(id));
  if (options.json) printJson({ id, message: deleted.message });
  else line(`${deleted.message} (${id})`);
  return 0;
}

/** `tessera sessions create`: the link holds the session's secret, so it is printed here, where it is made, on a line of its own. */
export async function createSession(options: ApiOptions & { redirectUri: string; provider?: string[]; endUser?: string }): Promise<number> {
  const { session } = await call(() =>
    connect(options).connectSessions.create({
      redirectUri: options.redirectUri,
      ...(options.provider?.length ? { allowedProviders: options.provider } : {}),
      ...(options.endUser ? { endUser: { id: options.endUser } } : {}),
    }),
  );
  if (options.json) printJson(session);
  else {
    printFields({
      session: session.id,
      expires: when(session.expiresAt),
      providers: session.allowedProviders.length > 0 ? session.allowedProviders : 'any configured',
      'end user': session.endUser?.id,
    });
    line();
    line('Open this link to connect (shown this once):');
    line(session.url);
  }
  return 0;
}

/** `tessera orgs create <name>`. */
export async function createOrganization(name: string, options: ApiOptions & { externalId?: string }): Promise<number> {
  const { organization } = await call(() => connect(options).organizations.create({ name, ...(options.externalId ? { externalId: options.externalId } : {}) }));
  if (options.json) printJson(organization);
  else printFields({ id: organization.id, name: organization.name, 'external id': organization.externalId ?? undefined });
  return 0;
}

/** `tessera api-tokens create <name>`: the one place a secret is printed — the new token, once, on a line of its own, never in the table. */
export async function createApiToken(name: string, options: ApiOptions): Promise<number> {
  const created = await call(() => connect(options).apiTokens.create({ name, organizationId: options.org }));
  if (options.json) printJson(created);
  else {
    printFields({ id: created.id, name: created.name, display: created.display, expires: when(created.expiresAt) || 'never' });
    line();
    line('The token (shown this once; store it now):');
    line(created.token);
  }
  return 0;
}

/**
 * The client's `webhookEndpoints` group. Typed from the package's own source: a worktree whose
 * node_modules links another checkout's @tessera/client would not see a group added beside it.
 */
function endpoints(options: ApiOptions): WebhookEndpoints {
  return (connect(options) as Tessera & { webhookEndpoints: WebhookEndpoints }).webhookEndpoints;
}

/** `tessera webhooks list`. */
export async function listWebhooks(options: ApiOptions): Promise<number> {
  const { endpoints: listed } = await call(() => endpoints(options).list());
  if (options.json) printJson(listed);
  else {
    printTable(
      ['id', 'url', 'source', 'enabled', 'event types', 'description'],
      listed.map((endpoint) => [endpoint.id, endpoint.url, endpoint.source, endpoint.enabled ? 'yes' : 'no', endpoint.eventTypes.join(' '), endpoint.description ?? '']),
      'no webhook endpoint',
    );
  }
  return 0;
}

/** `tessera webhooks add <url>`: its secret printed once, on a line of its own, never in the table. */
export async function addWebhook(url: string, options: ApiOptions & { eventType?: string[]; description?: string; disabled?: boolean }): Promise<number> {
  const { endpoint } = await call(() =>
    endpoints(options).create({
      url,
      ...(options.eventType ? { eventTypes: options.eventType } : {}),
      ...(options.description ? { description: options.description } : {}),
      ...(options.disabled ? { enabled: false } : {}),
    }),
  );
  if (options.json) printJson(endpoint);
  else {
    printFields({ id: endpoint.id, url: endpoint.url, enabled: endpoint.enabled ? 'yes' : 'no', 'event types': endpoint.eventTypes.join(' ') });
    line();
    line('The signing secret (shown this once; store it now):');
    line(endpoint.secret);
  }
  return 0;
}

/** `tessera webhooks rotate <id>`. */
export async function rotateWebhook(id: string, options: ApiOptions & { overlap?: number }): Promise<number> {
  const rotated = await call(() => endpoints(options).rotateSecret(id, { overlapSeconds: options.overlap }));
  if (options.json) printJson(rotated);
  else {
    printFields({ id, 'old secret signs until': when(rotated.overlapEndsAt) });
    line();
    line('The new signing secret (shown this once; store it now):');
    line(rotated.secret);
  }
  return 0;
}

/** `tessera webhooks test <id>`. */
export async function testWebhook(id: string, options: ApiOptions): Promise<number> {
  const { delivery } = await call(() => endpoints(options).test(id));
  if (options.json) printJson(delivery);
  else {
    const last = delivery.attempts.at(-1);
    printFields({ delivery: delivery.id, event: delivery.eventId, endpoint: delivery.endpoint, status: delivery.status, answered: last?.responseStatus ?? last?.error ?? undefined });
  }
  return delivery.status === 'delivered' ? 0 : 1;
}

/** `tessera webhooks delete <id>`. */
export async function deleteWebhook(id: string, options: ApiOptions): Promise<number> {
  await call(() => endpoints(options).delete(id));
  if (options.json) printJson({ deleted: id });
  else line(`deleted ${id}`);
  return 0;
}

/**
 * The client's `apps` group, typed from the package's own source (as `endpoints` above).
 */
function appsOf(options: ApiOptions): Apps {
  return (connect(options) as Tessera & { apps: Apps }).apps;
}

/** A secret from a file (`-`: standard input): a line's ending is not part of a client or events secret; a PEM file is taken whole. */
function secretFrom(path: string | undefined, option: string, whole = false): string | undefined {
  if (path === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (error) {
    throw new CliFailure(`${option}: cannot read ${path === '-' ? 'standard input' : path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`, { fix: 'give a readable file, or - for standard input' });
  }
  return whole ? text : text.replace(/\r?\n$/, '');
}

type AppRow = Awaited<ReturnType<Apps['get']>>['app'];

function printApp(app: AppRow): void {
  printFields({
    id: app.id,
    provider: app.provider,
    owner: app.owner,
    name: app.name,
    'client id': app.clientId,
    scopes: app.scopes ?? "the provider's configured set",
    default: app.default ? 'yes' : 'no',
    'redirect URI': app.redirectUri,
    'events URL': app.eventsUrl ?? undefined,
    'events secret': app.hasEventsSecret ? 'set' : 'none',
  });
}

/** `tessera apps list`. */
export async function listApps(options: ApiOptions & { provider?: string }): Promise<number> {
  const { apps } = await call(() => appsOf(options).list({ provider: options.provider }));
  if (options.json) printJson(apps);
  else {
    printTable(
      ['id', 'provider', 'owner', 'name', 'client id', 'default', 'redirect URI'],
      apps.map((app) => [app.id, app.provider, app.owner, app.name, app.clientId, app.default ? 'yes' : '', app.redirectUri]),
      'no app',
    );
  }
  return 0;
}

/** `tessera apps add <provider>`: the redirect URI to register at the provider is printed with it; no secret ever is. */
export async function addApp(provider: string, options: AppOptions): Promise<number> {
  const clientSecret = secretFrom(options.clientSecretFile, '--client-secret-file');
  const eventsSecret = secretFrom(options.eventsSecretFile, '--events-secret-file');
  const privateKey = secretFrom(options.privateKeyFile, '--private-key-file', true);
  const { app } = await call(() =>
    appsOf(options).create({
      provider,
      clientId: options.clientId ?? '',
      ...(clientSecret !== undefined ? { clientSecret } : {}),
      ...(options.name ? { name: options.name } : {}),
      ...(options.scope?.length ? { scopes: options.scope } : {}),
      ...(eventsSecret !== undefined ? { eventsSecret } : {}),
      ...(options.appId ? { appId: options.appId } : {}),
      ...(options.slug ? { slug: options.slug } : {}),
      ...(privateKey !== undefined ? { privateKey } : {}),
      ...(options.default ? { default: true } : {}),
    }),
  );
  if (options.json) printJson(app);
  else printApp(app);
  return 0;
}

/** `tessera apps update <id>`. */
export async function updateApp(id: string, options: AppOptions): Promise<number> {
  const clientSecret = secretFrom(options.clientSecretFile, '--client-secret-file');
  const eventsSecret = secretFrom(options.eventsSecretFile, '--events-secret-file');
  const privateKey = secretFrom(options.privateKeyFile, '--private-key-file', true);
  const { app } = await call(() =>
    appsOf(options).update(id, {
      ...(options.name ? { name: options.name } : {}),
      ...(clientSecret !== undefined ? { clientSecret } : {}),
      ...(options.scope?.length ? { scopes: options.scope } : {}),
      ...(eventsSecret !== undefined ? { eventsSecret } : {}),
      ...(privateKey !== undefined ? { privateKey } : {}),
      ...(options.default !== undefined ? { default: options.default } : {}),
    }),
  );
  if (options.json) printJson(app);
  else printApp(app);
  return 0;
}

/** `tessera apps delete <id>`. */
export async function deleteApp(id: string, options: ApiOptions): Promise<number> {
  await call(() => appsOf(options).delete(id));
  if (options.json) printJson({ deleted: id });
  else line(`deleted ${id}`);
  return 0;
}
