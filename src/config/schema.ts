import { Type, type Static } from 'typebox';

const Seconds = (defaultValue: number, description: string) =>
  Type.Integer({ minimum: 1, default: defaultValue, description });

const ProviderSettings = Type.Object(
  {
    clientId: Type.Optional(Type.String({ minLength: 1 })),
    clientSecret: Type.Optional(Type.String({ minLength: 1 })),
    clientEndpoint: Type.Optional(Type.String({ minLength: 1 })),
    scopes: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    authUrl: Type.Optional(Type.String({ minLength: 1 })),
    tokenUrl: Type.Optional(Type.String({ minLength: 1 })),
    apiUrl: Type.Optional(Type.String({ minLength: 1 })),
  },
  { additionalProperties: false },
);

const Webhook = Type.Object(
  { url: Type.String({ minLength: 1 }), secret: Type.String({ minLength: 1 }) },
  { additionalProperties: false },
);

/**
 * Every setting of CONTRACT.md §1 (and a few of our own), as the config file spells it.
 * Environment variables are mapped onto these paths by `ENV_SETTINGS` in load.ts.
 */
export const ConfigSchema = Type.Object(
  {
    env: Type.Union([Type.Literal('development'), Type.Literal('production')], { default: 'development' }),
    log: Type.Object(
      {
        level: Type.Union(
          ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
          { default: 'info' },
        ),
      },
      { additionalProperties: false, default: {} },
    ),
    server: Type.Object(
      {
        host: Type.String({ minLength: 1, default: '127.0.0.1' }),
        port: Type.Integer({ minimum: 0, maximum: 65535, default: 8080 }),
        publicUrl: Type.Optional(Type.String({ minLength: 1 })),
        trustProxy: Type.Array(Type.String({ minLength: 1 }), { default: [] }),
        corsOrigins: Type.Array(Type.String({ minLength: 1 }), { default: [] }),
        shutdownTimeout: Seconds(10, 'seconds in-flight requests get to finish on SIGTERM'),
        requestTimeout: Seconds(30, "seconds for a request's headers and body to arrive"),
        metricsEnabled: Type.Boolean({ default: false }),
      },
      { additionalProperties: false, default: {} },
    ),
    db: Type.Object(
      {
        url: Type.Optional(Type.String({ minLength: 1 })),
        dataDir: Type.String({ minLength: 1, default: './data' }),
        poolMax: Type.Integer({ minimum: 1, default: 10 }),
        statementTimeout: Seconds(30, 'seconds a statement may run'),
        connectTimeout: Seconds(5, 'seconds to wait for a connection'),
      },
      { additionalProperties: false, default: {} },
    ),
    secrets: Type.Object(
      { keys: Type.Optional(Type.String({ minLength: 1 })) },
      { additionalProperties: false, default: {} },
    ),
    auth: Type.Object(
      {
        jwtSecret: Type.Optional(Type.String({ minLength: 32 })),
        jwtSecrets: Type.Optional(Type.String({ minLength: 1 })),
        sessionTtl: Seconds(3600, 'session lifetime'),
        bootstrapAdmin: Type.Optional(
          Type.Object(
            { email: Type.String({ minLength: 3 }), password: Type.String({ minLength: 12, maxLength: 256 }) },
            { additionalProperties: false },
          ),
        ),
        passwordCost: Type.Integer({
          minimum: 1,
          maximum: 20,
          default: 17,
          description: 'log2 of scrypt N; tests lower it, production keeps 17',
        }),
      },
      { additionalProperties: false, default: {} },
    ),
    csrf: Type.Object({ enabled: Type.Boolean({ default: true }) }, { additionalProperties: false, default: {} }),
    rateLimit: Type.Object(
      {
        max: Type.Integer({ minimum: 0, default: 600 }),
        window: Seconds(60, 'rate-limit window'),
      },
      { additionalProperties: false, default: {} },
    ),
    oauth: Type.Object(
      {
        statusMaxAge: Seconds(60, 'age after which status re-validates live'),
        stateExpiry: Seconds(300, 'OAuth state lifetime'),
        validationInterval: Seconds(14400, 'background validation interval'),
        redirectOrigins: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
        providerTimeout: Seconds(10, 'seconds a provider call may take'),
      },
      { additionalProperties: false, default: {} },
    ),
    events: Type.Object(
      {
        webhooks: Type.Array(Webhook, { default: [] }),
        pollInterval: Seconds(5, 'seconds between outbox polls (commits also wake the dispatcher)'),
        retryBase: Seconds(1, 'first retry delay of a failed delivery, seconds (doubles, with jitter)'),
        retryMax: Seconds(600, 'longest retry delay, seconds'),
      },
      { additionalProperties: false, default: {} },
    ),
    graphql: Type.Object(
      {
        introspection: Type.Optional(Type.Boolean({ description: 'default: on in development, off in production' })),
        maxDepth: Type.Integer({ minimum: 1, default: 10 }),
        maxCost: Type.Integer({ minimum: 1, default: 5000 }),
        maxBatch: Type.Integer({ minimum: 1, default: 5 }),
      },
      { additionalProperties: false, default: {} },
    ),
    integrationOauthProvider: Type.Record(Type.String(), ProviderSettings, { default: {} }),
  },
  { additionalProperties: false },
);

export type RawConfig = Static<typeof ConfigSchema>;
export type ProviderSettings = Static<typeof ProviderSettings>;
