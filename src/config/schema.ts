import { type Static, type TSchema, Type } from 'typebox';

/**
 * One declaration per setting: its type, default and bounds (TypeBox, checked by Ajv), the
 * environment variable that sets it, and whether it is a secret. A secret's value never
 * appears in any message, whatever is wrong with it (docs/contract.md §1). The environment
 * table (`settingsOf`) is derived from these declarations, so there is one list to keep.
 * Rules beyond type and bounds (the https rule, CIDRs, key formats…) are the table
 * `SETTING_CHECKS` in checks.ts, one line per setting.
 */
interface SettingOptions {
  env?: string;
  secret?: boolean;
}

/** Marks a schema as a setting: `env` sets it, `secret` keeps its value out of every message. */
function setting<T extends TSchema>(schema: T, options: SettingOptions): T {
  return Object.assign(schema, { 'x-env': options.env, 'x-secret': options.secret === true });
}

const Seconds = (env: string, defaultValue: number, description: string) => setting(Type.Integer({ minimum: 1, default: defaultValue, description }), { env });
const Count = (env: string, minimum: number, defaultValue: number, description?: string) =>
  setting(Type.Integer({ minimum, default: defaultValue, ...(description ? { description } : {}) }), { env });
const Text = (env: string, extra: Record<string, unknown> = {}, secret = false) => setting(Type.String({ minLength: 1, ...extra }), { env, secret });
const List = (env: string) => setting(Type.Array(Type.String({ minLength: 1 }), { default: [] }), { env });
const Flag = (env: string, defaultValue: boolean) => setting(Type.Boolean({ default: defaultValue }), { env });

/** A provider's settings; the environment's `INTEGRATION_OAUTH_<P>_<KEY>` map onto them (sources.ts). */
const ProviderSettings = Type.Object(
  {
    clientId: Type.Optional(Type.String({ minLength: 1 })),
    clientSecret: Type.Optional(setting(Type.String({ minLength: 1 }), { secret: true })),
    clientEndpoint: Type.Optional(Type.String({ minLength: 1 })),
    scopes: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    authUrl: Type.Optional(Type.String({ minLength: 1 })),
    tokenUrl: Type.Optional(Type.String({ minLength: 1 })),
    apiUrl: Type.Optional(Type.String({ minLength: 1 })),
    userinfoUrl: Type.Optional(Type.String({ minLength: 1 })),
    revokeUrl: Type.Optional(Type.String({ minLength: 1 })),
    /** The secret the provider signs its revocation events with (docs/contract.md §5b); set, its events route is open. */
    eventsSecret: Type.Optional(setting(Type.String({ minLength: 16, maxLength: 512 }), { secret: true })),
    /** Google: receive Cross-Account Protection's security event tokens (docs/contract.md §5b); default off. */
    risc: Type.Optional(Type.Boolean()),
    /** Google: the RISC configuration document (default https://accounts.google.com/.well-known/risc-configuration); its `jwks_uri` names the keys. */
    riscConfigUrl: Type.Optional(Type.String({ minLength: 1 })),
    /** A value for the definition's `{tenant}` placeholder (Microsoft: common, organizations, consumers or a tenant id). */
    tenant: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9._-]+$' })),
    /** A GitHub App's numeric app id (`githubapp`; the app JWT names the client id, which GitHub also accepts). */
    appId: Type.Optional(Type.String({ minLength: 1, maxLength: 32, pattern: '^[0-9]+$' })),
    /** A GitHub App's private key (PEM, as GitHub generated it): signs the app JWT; parsed once at start, never printed. */
    privateKey: Type.Optional(setting(Type.String({ minLength: 1 }), { secret: true })),
    /** A GitHub App's URL name (`https://github.com/apps/<slug>`): fills the install URL. */
    slug: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9_-]+$' })),
    /** Where a GitHub App is installed (default `https://github.com/apps/<slug>/installations/new`). */
    installUrl: Type.Optional(Type.String({ minLength: 1 })),
    /** A custom provider's definition (docs/contract.md §5 "Custom providers"), checked by src/integrations/providers/custom.ts. */
    definition: Type.Optional(Type.Unknown()),
    /** Offers a built-in provider whose credentials people enter (docs/contract.md §5c: api_key, basic, client_credentials); it needs no client id or secret. */
    enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

/** A deployment app beside the settings' default one (docs/contract.md §5e): CONFIG_FILE only. */
const DeploymentApp = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 63, pattern: '^[a-z0-9][a-z0-9-]{0,62}$' }),
    provider: Type.String({ minLength: 1 }),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    clientId: Type.String({ minLength: 1, maxLength: 255, pattern: '^[A-Za-z0-9._~-]+$' }),
    clientSecret: setting(Type.String({ minLength: 1 }), { secret: true }),
    scopes: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    eventsSecret: Type.Optional(setting(Type.String({ minLength: 16, maxLength: 512 }), { secret: true })),
    appId: Type.Optional(Type.String({ minLength: 1, maxLength: 32, pattern: '^[0-9]+$' })),
    slug: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: '^[a-z0-9][a-z0-9-]{0,99}$' })),
    privateKey: Type.Optional(setting(Type.String({ minLength: 1 }), { secret: true })),
    organizations: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
  },
  { additionalProperties: false },
);

const Webhook = Type.Object(
  {
    // A webhook URL may carry a credential of the receiver's (a path token): secret too.
    url: setting(Type.String({ minLength: 1 }), { secret: true }),
    secret: setting(Type.String({ minLength: 1 }), { secret: true }),
  },
  { additionalProperties: false },
);

const section = <T extends Record<string, TSchema>>(properties: T) => Type.Object(properties, { additionalProperties: false, default: {} });

/** Every setting of docs/contract.md §1 (and a few of our own), as the config file spells it. */
export const ConfigSchema = Type.Object(
  {
    env: setting(Type.Union([Type.Literal('development'), Type.Literal('production')], { default: 'development' }), { env: 'APP_ENV' }),
    log: section({
      level: setting(Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)), { default: 'info' }), { env: 'LOG_LEVEL' }),
      format: Type.Optional(
        setting(Type.Union([Type.Literal('json'), Type.Literal('pretty')], { description: 'default: pretty when stdout is a terminal, else json' }), { env: 'LOG_FORMAT' }),
      ),
    }),
    server: section({
      host: setting(Type.String({ minLength: 1, default: '127.0.0.1' }), { env: 'HOST' }),
      port: setting(Type.Integer({ minimum: 0, maximum: 65535, default: 8080 }), { env: 'PORT' }),
      publicUrl: Type.Optional(Text('PUBLIC_URL')),
      trustProxy: List('TRUST_PROXY'),
      corsOrigins: List('CORS_ORIGINS'),
      shutdownTimeout: Seconds('SHUTDOWN_TIMEOUT', 10, 'seconds in-flight requests get to finish on SIGTERM'),
      requestTimeout: Seconds('REQUEST_TIMEOUT', 30, "seconds for a request's headers and body to arrive"),
      metricsEnabled: Flag('METRICS_ENABLED', false),
    }),
    db: section({
      // Its password must never be shown: the whole URL is treated as a secret.
      url: Type.Optional(Text('DATABASE_URL', {}, true)),
      dataDir: setting(Type.String({ minLength: 1, default: './data' }), { env: 'DATA_DIR' }),
      poolMax: Count('DB_POOL_MAX', 1, 10),
      statementTimeout: Seconds('DB_STATEMENT_TIMEOUT', 30, 'seconds a statement may run'),
      // At most 10: a request that needs the database is answered within 10 seconds, a 503 when it waited for none (docs/contract.md §2, decision 251).
      connectTimeout: setting(Type.Integer({ minimum: 1, maximum: 10, default: 5, description: 'seconds to wait for a connection (1–10)' }), { env: 'DB_CONNECT_TIMEOUT' }),
    }),
    secrets: section({ keys: Type.Optional(Text('ENCRYPTION_KEYS', {}, true)) }),
    auth: section({
      jwtSecret: Type.Optional(Text('JWT_SECRET', { minLength: 32 }, true)),
      jwtSecrets: Type.Optional(Text('JWT_SECRETS', {}, true)),
      sessionTtl: Seconds('SESSION_TTL', 3600, 'session lifetime'),
      bootstrapAdmin: Type.Optional(
        Type.Object(
          {
            email: setting(Type.String({ minLength: 3 }), { env: 'BOOTSTRAP_ADMIN_EMAIL' }),
            password: setting(Type.String({ minLength: 12, maxLength: 256 }), { env: 'BOOTSTRAP_ADMIN_PASSWORD', secret: true }),
          },
          { additionalProperties: false },
        ),
      ),
      registration: Type.Optional(
        setting(Type.Union([Type.Literal('open'), Type.Literal('invite'), Type.Literal('closed')], { description: 'default: open in development, closed in production' }), {
          env: 'REGISTRATION',
        }),
      ),
      passwordCost: setting(Type.Integer({ minimum: 1, maximum: 20, default: 17, description: 'log2 of scrypt N; tests lower it, production keeps 17' }), { env: 'PASSWORD_COST' }),
    }),
    csrf: section({ enabled: Flag('CSRF_ENABLED', true) }),
    rateLimit: section({
      max: Count('RATE_LIMIT_MAX', 0, 600),
      window: Seconds('RATE_LIMIT_WINDOW', 60, 'rate-limit window'),
      // Defaults follow RATE_LIMIT_MAX (load.ts): four and ten times it.
      organizationMax: Type.Optional(setting(Type.Integer({ minimum: 0, description: 'every credential of one organization together' }), { env: 'RATE_LIMIT_ORGANIZATION_MAX' })),
      serviceMax: Type.Optional(setting(Type.Integer({ minimum: 0, description: 'each service token' }), { env: 'RATE_LIMIT_SERVICE_MAX' })),
    }),
    limits: section({
      organizationsPerUser: Count('LIMIT_ORGANIZATIONS_PER_USER', 1, 20, 'organizations one user may create'),
      apiTokens: Count('LIMIT_API_TOKENS', 1, 20, 'live API tokens one organization may hold'),
      appsPerOrganization: Count('LIMIT_APPS_PER_ORGANIZATION', 1, 20, 'OAuth apps of its own one organization may hold'),
    }),
    oauth: section({
      statusMaxAge: Seconds('OAUTH_STATUS_MAX_AGE', 60, 'age after which status re-validates live'),
      stateExpiry: Seconds('OAUTH_STATE_EXPIRY', 300, 'OAuth state lifetime'),
      validationInterval: Seconds('OAUTH_TOKEN_VALIDATION_INTERVAL', 14400, 'background validation interval'),
      redirectOrigins: Type.Optional(setting(Type.Array(Type.String({ minLength: 1 })), { env: 'OAUTH_REDIRECT_ORIGINS' })),
      providerTimeout: Seconds('PROVIDER_TIMEOUT', 10, 'seconds a provider call may take'),
      // Where a product signs its own people in for an MCP client's consent (docs/contract.md §9a).
      consentHandoffUrl: Type.Optional(Text('OAUTH_CONSENT_HANDOFF_URL')),
    }),
    mcp: section({
      clientRegistration: Type.Optional(
        setting(Type.Union([Type.Literal('open'), Type.Literal('closed')], { description: 'dynamic registration of MCP clients (§9a); default: open in development, closed in production' }), {
          env: 'MCP_CLIENT_REGISTRATION',
        }),
      ),
    }),
    events: section({
      webhooks: Type.Array(Webhook, { default: [] }),
      pollInterval: Seconds('EVENTS_POLL_INTERVAL', 5, 'seconds between outbox polls (commits also wake the dispatcher)'),
      retryBase: Seconds('EVENTS_RETRY_BASE', 1, 'first retry delay of a failed delivery, seconds (doubles, with jitter)'),
      retryMax: Seconds('EVENTS_RETRY_MAX', 600, 'longest retry delay, seconds'),
      maxAge: Seconds('EVENTS_WEBHOOK_MAX_AGE', 259200, 'seconds after its event a delivery still failing becomes failed and retries stop'),
    }),
    retention: section({
      days: Count('RETENTION_DAYS', 1, 30, 'days finished connect sessions, finished deliveries and used OAuth states are kept'),
    }),
    graphql: section({
      introspection: Type.Optional(setting(Type.Boolean({ description: 'default: on in development, off in production' }), { env: 'GRAPHQL_INTROSPECTION' })),
      maxDepth: Count('GRAPHQL_MAX_DEPTH', 1, 10),
      maxCost: Count('GRAPHQL_MAX_COST', 1, 5000),
      maxBatch: Count('GRAPHQL_MAX_BATCH', 1, 5),
    }),
    outbound: section({
      // Ranges the outbound guard lets production reach, for webhook endpoints and URLs built from entered values (docs/contract.md §1).
      allowCidrs: List('OUTBOUND_ALLOW_CIDRS'),
    }),
    integrationOauthProvider: Type.Record(Type.String(), ProviderSettings, { default: {} }),
    integrationOauthApps: Type.Array(DeploymentApp, { default: [] }),
  },
  { additionalProperties: false },
);

export type RawConfig = Static<typeof ConfigSchema>;
export type ProviderSettings = Static<typeof ProviderSettings>;
export type DeploymentAppSettings = Static<typeof DeploymentApp>;

/** How an environment variable's text is read. */
export type SettingKind = 'string' | 'int' | 'bool' | 'list';

/** A setting as the loader sees it: where it lives, how its text reads, and whether it is secret. */
export interface SettingInfo {
  /** Dotted path in the config file; `*` for a record's key and `[]` for an array's items. */
  path: string;
  env?: string;
  kind: SettingKind;
  secret: boolean;
}

/** Every declared setting, found by walking a schema (default: the whole configuration). */
export function settingsOf(schema: TSchema = ConfigSchema, path = ''): SettingInfo[] {
  const node = schema as TSchema & { properties?: Record<string, TSchema>; patternProperties?: Record<string, TSchema>; items?: TSchema; anyOf?: TSchema[]; type?: string; 'x-env'?: string; 'x-secret'?: boolean };
  const join = (key: string) => (path ? `${path}.${key}` : key);
  if (node.properties && !('x-env' in node)) return Object.entries(node.properties).flatMap(([key, child]) => settingsOf(child, join(key)));
  if (node.patternProperties) return Object.values(node.patternProperties).flatMap((child) => settingsOf(child, join('*')));
  if (node.type === 'array' && node.items && (node.items as { properties?: unknown }).properties) return settingsOf(node.items, `${path}[]`);
  const kind: SettingKind = node.type === 'integer' ? 'int' : node.type === 'boolean' ? 'bool' : node.type === 'array' ? 'list' : 'string';
  return [{ path, kind, secret: node['x-secret'] === true, ...(node['x-env'] ? { env: node['x-env'] } : {}) }];
}
