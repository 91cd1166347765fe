import { resolve } from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { type CheckContext, checkSettings, type JwtKey, type Keyring } from './checks.ts';
import { GeneratedSecrets, type SecretsToStore } from './generated-secrets.ts';
import { ConfigSchema, type DeploymentAppSettings, type ProviderSettings, type RawConfig } from './schema.ts';
import { ENV_SETTINGS, readSources } from './sources.ts';


export interface Config {
  env: 'development' | 'production';
  isProduction: boolean;
  log: RawConfig['log'];
  server: Omit<RawConfig['server'], 'publicUrl'> & { publicUrl: string; publicOrigin: string };
  db: RawConfig['db'];
  keyring: Keyring;
  /** First signs, all verify. */
  jwtKeys: JwtKey[];
  auth: Omit<RawConfig['auth'], 'jwtSecret' | 'jwtSecrets' | 'registration'> & { registration: 'open' | 'invite' | 'closed' };
  csrf: RawConfig['csrf'];
  rateLimit: { max: number; window: number; organizationMax: number; serviceMax: number };
  limits: RawConfig['limits'];
  oauth: Omit<RawConfig['oauth'], 'redirectOrigins' | 'consentHandoffUrl'> & { redirectOrigins: string[]; consentHandoffUrl: string | null };
  events: RawConfig['events'];
  retention: RawConfig['retention'];
  graphql: { introspection: boolean; maxDepth: number; maxCost: number; maxBatch: number };
  providers: Record<string, ProviderSettings>;
  /** More deployment apps (docs/contract.md §5e), checked against the definitions by the registry. */
  apps: DeploymentAppSettings[];
  /** The outbound guard (docs/contract.md §1): ranges production may reach for webhook endpoints and entered values. */
  outbound: { allowCidrs: string[] };
  /** MCP clients (docs/contract.md §9a): whether they may register themselves at `POST /oauth/register`. */
  mcp: { clientRegistration: 'open' | 'closed' };
  /** Names of the secrets development mode generated (kept under DATA_DIR). */
  generatedSecrets: string[];
  /** Generated secrets not on disk yet: start-up writes them (`storeGeneratedSecrets`). */
  secretsToStore: SecretsToStore | null;
  /** What is suspicious but not wrong (a half-configured provider, an unknown `INTEGRATION_OAUTH_*` variable): start-up logs each. */
  warnings: string[];
}

/** Start-up refused: one line per problem, each naming the setting and the fix. */
export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export interface LoadOptions {
  env?: NodeJS.ProcessEnv;
  /** Values applied after the file and the environment (tests). */
  overrides?: Record<string, unknown>;
  /**
   * False (tests): secrets development mode generates are neither read from DATA_DIR
   * nor left for start-up to store there.
   */
  persistGeneratedSecrets?: boolean;
}

const envNameByPath = new Map(ENV_SETTINGS.map((item) => [item.path, item.env]));

/**
 * Parses the configuration once: file, then environment, then validation (Ajv for types
 * and bounds, then each setting's rule in checks.ts). Pure: it may read DATA_DIR's
 * generated secrets but writes nothing. Throws ConfigError.
 */
export function loadConfig(options: LoadOptions = {}): Config {
  const problems: string[] = [];
  const warnings: string[] = [];
  const raw = readSources(options.env ?? process.env, options.overrides ?? {}, problems, warnings);
  const validate = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: false, strict: false }).compile(ConfigSchema);
  if (!validate(raw)) {
    for (const error of validate.errors ?? []) problems.push(schemaProblem(error));
    throw new ConfigError(problems);
  }
  const config = raw as unknown as RawConfig;
  const isProduction = config.env === 'production';
  const generated = new GeneratedSecrets(config.db.dataDir, options.persistGeneratedSecrets !== false);
  const at = (label: string): CheckContext => ({
    isProduction,
    generated,
    problem: (text) => {
      problems.push(`${label}: ${text}`);
      return undefined;
    },
    warning: (text) => {
      warnings.push(`${label}: ${text}`);
    },
  });
  const checked = checkSettings(config, at);
  const { publicUrl, redirectOrigins, providers, keyring, jwtKeys, outboundAllowCidrs, consentHandoffUrl } = checked;
  if (problems.length > 0 || !publicUrl || !redirectOrigins || !providers || !keyring || !jwtKeys || !outboundAllowCidrs || consentHandoffUrl === undefined) throw new ConfigError(problems);

  const { jwtSecret: _s, jwtSecrets: _ss, ...auth } = config.auth;
  return {
    env: config.env,
    isProduction,
    log: config.log,
    server: { ...config.server, publicUrl, publicOrigin: new URL(publicUrl).origin },
    db: { ...config.db, dataDir: resolve(config.db.dataDir) },
    keyring,
    jwtKeys,
    auth: { ...auth, registration: auth.registration ?? (isProduction ? 'closed' : 'open') },
    csrf: config.csrf,
    rateLimit: {
      ...config.rateLimit,
      organizationMax: config.rateLimit.organizationMax ?? config.rateLimit.max * 4,
      serviceMax: config.rateLimit.serviceMax ?? config.rateLimit.max * 10,
    },
    limits: config.limits,
    oauth: { ...config.oauth, redirectOrigins, consentHandoffUrl },
    events: config.events,
    retention: config.retention,
    graphql: { ...config.graphql, introspection: config.graphql.introspection ?? !isProduction },
    providers,
    apps: config.integrationOauthApps,
    outbound: { allowCidrs: outboundAllowCidrs },
    mcp: { clientRegistration: config.mcp.clientRegistration ?? (isProduction ? 'closed' : 'open') },
    generatedSecrets: generated.used,
    secretsToStore: generated.toStore(),
    warnings,
  };
}

/** An Ajv error as one line naming the setting (its environment variable when it has one). */
function schemaProblem(error: ErrorObject): string {
  const path = error.instancePath.slice(1).replaceAll('/', '.');
  const missing = error.keyword === 'required' ? `${path ? `${path}.` : ''}${(error.params as { missingProperty: string }).missingProperty}` : '';
  const extra = error.keyword === 'additionalProperties' ? (error.params as { additionalProperty: string }).additionalProperty : '';
  const key = missing || (extra ? `${path ? `${path}.` : ''}${extra}` : path);
  const envName = envNameByPath.get(key);
  const label = envName ? `${envName} (${key})` : key || 'config';
  if (extra) return `${label}: unknown setting; remove it or check its spelling`;
  return `${label}: ${error.message ?? 'invalid'}`;
}
