import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { ConfigSchema, type ProviderSettings, type RawConfig, type SettingInfo, type SettingKind, settingsOf } from './schema.ts';

/** Settings with an environment variable, from their declarations (schema.ts). */
const SETTINGS = settingsOf();
const ENV_SETTINGS = SETTINGS.filter((item): item is SettingInfo & { env: string } => item.env !== undefined);

/** `INTEGRATION_OAUTH_<P>_<KEY>`: each provider setting's env suffix is its key in SNAKE_CASE (clientSecret → CLIENT_SECRET). */
const PROVIDER_SETTINGS = settingsOf(ConfigSchema.properties.integrationOauthProvider).map((item) => {
  const key = item.path.split('.').at(-1) as string;
  return { ...item, key, suffix: key.replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase() };
});
const PROVIDER_ENV = new RegExp(`^INTEGRATION_OAUTH_([A-Z][A-Z0-9]*)_(${PROVIDER_SETTINGS.map((item) => item.suffix).join('|')})$`);

export interface Keyring {
  /** Id of the key that encrypts new secrets (the first listed). */
  activeId: string;
  keys: ReadonlyMap<string, Buffer>;
}

export interface JwtKey {
  kid: string;
  secret: Buffer;
}

export interface Config {
  env: 'development' | 'production';
  isProduction: boolean;
  log: { level: string };
  server: Omit<RawConfig['server'], 'publicUrl'> & { publicUrl: string; publicOrigin: string };
  db: RawConfig['db'];
  keyring: Keyring;
  /** First signs, all verify. */
  jwtKeys: JwtKey[];
  auth: Omit<RawConfig['auth'], 'jwtSecret' | 'jwtSecrets'>;
  csrf: RawConfig['csrf'];
  rateLimit: RawConfig['rateLimit'];
  oauth: Omit<RawConfig['oauth'], 'redirectOrigins'> & { redirectOrigins: string[] };
  events: RawConfig['events'];
  graphql: { introspection: boolean; maxDepth: number; maxCost: number; maxBatch: number };
  providers: Record<string, ProviderSettings>;
  /** Names of secrets that development mode generated and stored under DATA_DIR. */
  generatedSecrets: string[];
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
  /** Development mode writes generated secrets under DATA_DIR unless this is false. */
  persistGeneratedSecrets?: boolean;
}

const envNameByPath = new Map(ENV_SETTINGS.map((item) => [item.path, item.env]));

/** Parses the configuration once: file, then environment, then validation. Throws ConfigError. */
export function loadConfig(options: LoadOptions = {}): Config {
  const env = options.env ?? process.env;
  const problems: string[] = [];
  const raw: Record<string, unknown> = {};

  if (env.CONFIG_FILE) {
    let text: string | undefined;
    try {
      text = readFileSync(env.CONFIG_FILE, 'utf8');
    } catch (error) {
      problems.push(`CONFIG_FILE: cannot read ${env.CONFIG_FILE} (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`);
    }
    try {
      const parsed: unknown = text === undefined ? null : parseYaml(text);
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) Object.assign(raw, parsed);
      else if (parsed != null) problems.push(`CONFIG_FILE: ${env.CONFIG_FILE} must hold a YAML or JSON object`);
    } catch (error) {
      // The parser's message quotes the file, which holds secrets: only where the problem is.
      const at = (error as { linePos?: { line: number; col: number }[] }).linePos?.[0];
      problems.push(`CONFIG_FILE: ${env.CONFIG_FILE} is not valid YAML or JSON${at ? ` (line ${at.line}, column ${at.col})` : ''}`);
    }
  }
  normalizeFileLists(raw);

  for (const { env: name, path, kind, secret } of ENV_SETTINGS) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    const parsed = parseEnvValue(value, kind);
    if (parsed === undefined) problems.push(`${name}: expected ${kindText(kind)}${secret ? '' : `, got "${shorten(value)}"`}`);
    else setPath(raw, path, parsed);
  }
  for (const [name, value] of Object.entries(env)) {
    const match = PROVIDER_ENV.exec(name);
    if (!match || value === undefined || value === '') continue;
    const [, provider = '', suffix = ''] = match;
    const setting = PROVIDER_SETTINGS.find((item) => item.suffix === suffix) as (typeof PROVIDER_SETTINGS)[number];
    setPath(raw, ['integrationOauthProvider', provider.toLowerCase(), setting.key], setting.kind === 'list' ? splitList(value) : value);
  }
  if (env.EVENTS_WEBHOOK_URL || env.EVENTS_WEBHOOK_SECRET) {
    const webhooks = Array.isArray(getPath(raw, 'events.webhooks')) ? (getPath(raw, 'events.webhooks') as unknown[]) : [];
    webhooks.push({ url: env.EVENTS_WEBHOOK_URL ?? '', secret: env.EVENTS_WEBHOOK_SECRET ?? '' });
    setPath(raw, 'events.webhooks', webhooks);
  }
  for (const [path, value] of Object.entries(options.overrides ?? {})) setPath(raw, path, value);

  const ajv = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: false, strict: false });
  const validate = ajv.compile(ConfigSchema);
  if (!validate(raw)) {
    for (const error of validate.errors ?? []) problems.push(schemaProblem(error));
    throw new ConfigError(problems);
  }
  const config = raw as unknown as RawConfig;
  const isProduction = config.env === 'production';

  const publicUrl = checkUrl(config.server.publicUrl ?? `http://${hostForUrl(config.server.host)}:${config.server.port}`, 'PUBLIC_URL', isProduction, problems);
  const publicOrigin = publicUrl ? new URL(publicUrl).origin : '';
  const redirectOrigins = (config.oauth.redirectOrigins ?? (publicOrigin ? [publicOrigin] : [])).map((origin) => {
    const url = checkUrl(origin, 'OAUTH_REDIRECT_ORIGINS', isProduction, problems);
    return url ? new URL(url).origin : '';
  });
  for (const origin of config.server.corsOrigins) checkUrl(origin, 'CORS_ORIGINS', false, problems);
  for (const cidr of config.server.trustProxy) {
    if (!isCidr(cidr)) problems.push(`TRUST_PROXY: expected a comma list of IP addresses or CIDRs, got "${shorten(cidr)}"`);
  }
  if (config.db.url !== undefined && !isPostgresUrl(config.db.url)) {
    problems.push('DATABASE_URL (db.url): expected postgres://user:password@host:port/database (the value is not shown: it may hold a password)');
  }
  for (const [index, hook] of config.events.webhooks.entries()) {
    checkUrl(hook.url, `EVENTS_WEBHOOK_URL (events.webhooks[${index}].url)`, isProduction, problems, { secret: true });
    const secret = /^whsec_([A-Za-z0-9+/=]+)$/.exec(hook.secret);
    const bytes = secret?.[1] ? Buffer.from(secret[1], 'base64').length : 0;
    if (bytes < 24 || bytes > 64) {
      problems.push(`EVENTS_WEBHOOK_SECRET (events.webhooks[${index}].secret): expected "whsec_" + base64 of 24–64 random bytes, e.g. whsec_$(openssl rand -base64 32)`);
    }
  }
  for (const [id, provider] of Object.entries(config.integrationOauthProvider)) {
    const envBase = `INTEGRATION_OAUTH_${id.toUpperCase()}`;
    if (!/^[a-z][a-z0-9]{1,31}$/.test(id)) problems.push(`${envBase}_* (integrationOauthProvider.${id}): provider ids match ^[a-z][a-z0-9]{1,31}$`);
    for (const [key, suffix] of [['clientEndpoint', 'CLIENT_ENDPOINT'], ['authUrl', 'AUTH_URL'], ['tokenUrl', 'TOKEN_URL'], ['apiUrl', 'API_URL'], ['userinfoUrl', 'USERINFO_URL'], ['revokeUrl', 'REVOKE_URL']] as const) {
      const value = provider[key];
      if (value !== undefined) {
        const checked = checkUrl(value, `${envBase}_${suffix}`, isProduction, problems);
        if (checked) provider[key] = checked;
      }
    }
  }

  const generatedSecrets: string[] = [];
  const generated = () => developmentSecrets(config.db.dataDir, options.persistGeneratedSecrets !== false);
  let keyring: Keyring | undefined;
  if (config.secrets.keys) keyring = parseKeyring(config.secrets.keys, problems);
  else if (isProduction) problems.push('ENCRYPTION_KEYS (secrets.keys): required in production; set "keyId:base64(32 bytes)", e.g. k1:$(openssl rand -base64 32)');
  else {
    keyring = parseKeyring(generated().encryptionKeys, problems);
    generatedSecrets.push('ENCRYPTION_KEYS');
  }

  let jwtKeys: JwtKey[] = [];
  if (config.auth.jwtSecrets) jwtKeys = parseJwtSecrets(config.auth.jwtSecrets, problems);
  else if (config.auth.jwtSecret) jwtKeys = [{ kid: 'default', secret: Buffer.from(config.auth.jwtSecret, 'utf8') }];
  else if (isProduction) problems.push('JWT_SECRET (auth.jwtSecret): required in production; set a random string of at least 32 characters, e.g. $(openssl rand -base64 48)');
  else {
    jwtKeys = [{ kid: 'default', secret: Buffer.from(generated().jwtSecret, 'utf8') }];
    generatedSecrets.push('JWT_SECRET');
  }

  if (problems.length > 0 || !keyring) throw new ConfigError(problems);
  const { jwtSecret: _s, jwtSecrets: _ss, ...auth } = config.auth;
  return {
    env: config.env,
    isProduction,
    log: config.log,
    server: { ...config.server, publicUrl: publicUrl.replace(/\/$/, ''), publicOrigin },
    db: { ...config.db, dataDir: resolve(config.db.dataDir) },
    keyring,
    jwtKeys,
    auth,
    csrf: config.csrf,
    rateLimit: config.rateLimit,
    oauth: { ...config.oauth, redirectOrigins },
    events: config.events,
    graphql: { ...config.graphql, introspection: config.graphql.introspection ?? !isProduction },
    providers: config.integrationOauthProvider,
    generatedSecrets,
  };
}

/** True for loopback hosts, which development mode may reach over plain http. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * Returns the URL normalized, or '' after recording a problem. HTTPS except loopback in
 * development. A secret URL (a webhook's, which may carry the receiver's credential) is
 * never quoted.
 */
function checkUrl(value: string, name: string, isProduction: boolean, problems: string[], options: { secret?: boolean } = {}): string {
  const got = (text: string) => (options.secret ? '' : `, got "${shorten(text)}"`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problems.push(`${name}: expected an absolute URL${got(value)}`);
    return '';
  }
  if (url.username || url.password || url.hash) {
    problems.push(`${name}: must not carry userinfo or a fragment`);
    return '';
  }
  const loopbackHttp = url.protocol === 'http:' && isLoopbackHost(url.hostname);
  if (url.protocol !== 'https:' && !(loopbackHttp && !isProduction)) {
    problems.push(`${name}: must use https:${isProduction ? '' : ' (http: is allowed only for loopback hosts in development)'}${got(`${url.protocol}//${url.host}`)}`);
    return '';
  }
  return url.href.replace(/\/$/, '');
}

function isPostgresUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'postgres:' || url.protocol === 'postgresql:') && url.hostname !== '';
  } catch {
    return false;
  }
}

function parseKeyring(value: string, problems: string[]): Keyring | undefined {
  const keys = new Map<string, Buffer>();
  let activeId = '';
  for (const entry of splitList(value)) {
    const match = /^([A-Za-z0-9_-]{1,32}):([A-Za-z0-9+/=_-]+)$/.exec(entry);
    const key = match?.[2] ? Buffer.from(match[2], 'base64') : undefined;
    if (!match?.[1] || !key || key.length !== 32) {
      // Never any part of the value: an entry without "keyId:" is the key itself.
      const got = !match ? 'an entry that is not "keyId:base64"' : `${key?.length ?? 0} bytes`;
      problems.push(`ENCRYPTION_KEYS (secrets.keys): expected "keyId:base64(32 bytes)", got ${got}; generate one with: openssl rand -base64 32`);
      continue;
    }
    if (keys.has(match[1])) problems.push(`ENCRYPTION_KEYS (secrets.keys): key id "${match[1]}" is listed twice`);
    keys.set(match[1], key);
    activeId ||= match[1];
  }
  return activeId ? { activeId, keys } : undefined;
}

function parseJwtSecrets(value: string, problems: string[]): JwtKey[] {
  const keys: JwtKey[] = [];
  for (const entry of splitList(value)) {
    const match = /^([A-Za-z0-9_-]{1,32}):([A-Za-z0-9+/=_-]+)$/.exec(entry);
    const secret = match?.[2] ? Buffer.from(match[2], 'base64') : undefined;
    if (!match?.[1] || !secret || secret.length < 32) {
      problems.push('JWT_SECRETS (auth.jwtSecrets): expected a comma list of "kid:base64(at least 32 bytes)", e.g. k1:$(openssl rand -base64 32)');
      continue;
    }
    keys.push({ kid: match[1], secret });
  }
  return keys;
}

interface DevSecrets {
  encryptionKeys: string;
  jwtSecret: string;
}

let devSecretsCache: { dir: string; secrets: DevSecrets } | undefined;

/** Development only: secrets generated once and kept under DATA_DIR with mode 0600. */
function developmentSecrets(dataDir: string, persist: boolean): DevSecrets {
  const dir = resolve(dataDir);
  if (devSecretsCache?.dir === dir) return devSecretsCache.secrets;
  const file = join(dir, 'generated-secrets.json');
  let secrets: DevSecrets | undefined;
  if (persist && existsSync(file)) secrets = JSON.parse(readFileSync(file, 'utf8')) as DevSecrets;
  if (!secrets) {
    secrets = {
      encryptionKeys: `dev1:${randomBytes(32).toString('base64')}`,
      jwtSecret: randomBytes(48).toString('base64url'),
    };
    if (persist) {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      writeFileSync(file, `${JSON.stringify(secrets)}\n`, { mode: 0o600, flag: 'wx' });
      chmodSync(file, 0o600);
    }
  }
  devSecretsCache = { dir, secrets };
  return secrets;
}

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

function normalizeFileLists(raw: Record<string, unknown>): void {
  for (const path of ['server.trustProxy', 'server.corsOrigins', 'oauth.redirectOrigins']) {
    const value = getPath(raw, path);
    if (typeof value === 'string') setPath(raw, path, splitList(value));
  }
  const providers = raw.integrationOauthProvider;
  if (providers && typeof providers === 'object') {
    for (const provider of Object.values(providers as Record<string, Record<string, unknown>>)) {
      if (provider && typeof provider.scopes === 'string') provider.scopes = splitList(provider.scopes);
    }
  }
}

function parseEnvValue(value: string, kind: SettingKind): unknown {
  switch (kind) {
    case 'string':
      return value;
    case 'int':
      return /^-?\d{1,15}$/.test(value.trim()) ? Number(value.trim()) : undefined;
    case 'bool':
      return /^(true|1|yes|on)$/i.test(value) ? true : /^(false|0|no|off)$/i.test(value) ? false : undefined;
    case 'list':
      return splitList(value);
  }
}

function kindText(kind: SettingKind): string {
  return { string: 'a string', int: 'an integer', bool: 'true or false', list: 'a comma-separated list' }[kind];
}

function splitList(value: string): string[] {
  return value.split(',').map((part) => part.trim()).filter(Boolean);
}

function isCidr(value: string): boolean {
  const [address = '', bits, ...rest] = value.split('/');
  if (rest.length > 0) return false;
  const family = isIP(address);
  if (!family) return false;
  if (bits === undefined) return true;
  const n = Number(bits);
  return /^\d+$/.test(bits) && n >= 0 && n <= (family === 4 ? 32 : 128);
}

function hostForUrl(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return isIP(host) === 6 ? `[${host}]` : host;
}

function shorten(value: string): string {
  return value.length > 40 ? `${value.slice(0, 37)}...` : value;
}

function getPath(target: Record<string, unknown>, path: string): unknown {
  let node: unknown = target;
  for (const part of path.split('.')) node = node && typeof node === 'object' ? (node as Record<string, unknown>)[part] : undefined;
  return node;
}

function setPath(target: Record<string, unknown>, path: string | string[], value: unknown): void {
  const parts = Array.isArray(path) ? path : path.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    if (!node[part] || typeof node[part] !== 'object') node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts[parts.length - 1] as string] = value;
}
