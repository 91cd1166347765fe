import { createPrivateKey, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import type { GeneratedSecrets } from './generated-secrets.ts';
import type { ProviderSettings, RawConfig } from './schema.ts';
import { shorten, splitList } from './sources.ts';
import { PROVIDER_ID } from '../lib/ids.ts';

export interface Keyring {
  /** Id of the key that encrypts new secrets (the first listed). */
  activeId: string;
  keys: ReadonlyMap<string, Buffer>;
}

export interface JwtKey {
  kid: string;
  secret: Buffer;
}

/** What a rule reports to: the setting's name in messages, the mode, and development's generated secrets. */
export interface CheckContext {
  isProduction: boolean;
  generated: GeneratedSecrets;
  /** Records `<label>: <text>` (the text never quotes a secret setting's value); undefined, for a rule to return. */
  problem(text: string): undefined;
  /** Records `<label>: <text>` as a warning: start-up goes on and logs it. */
  warning(text: string): void;
}

/** A context for the setting named `label` (its environment variable, with its config path for secrets). */
export type At = (label: string) => CheckContext;

/**
 * Each setting's own rule beyond its schema type (which Ajv checks first), one line each:
 * where its value is read, the rule, and the name problems give it. Listed in the order
 * their problems are reported. A rule returns the value to use (normalized), or undefined
 * after reporting a problem; loading fails if any did.
 */
export const SETTING_CHECKS = {
  publicUrl: (c: RawConfig, at: At) => url(c.server.publicUrl ?? defaultPublicUrl(c.server), at('PUBLIC_URL')),
  // Added to PUBLIC_URL's origin, which is always allowed (docs/contract.md §5d): Tessera's own pages redirect there.
  redirectOrigins: (c: RawConfig, at: At, done: { publicUrl?: string | undefined }) => {
    const added = each(c.oauth.redirectOrigins ?? [], (value) => origin(value, at('OAUTH_REDIRECT_ORIGINS')));
    return added && [...new Set([...(done.publicUrl ? [new URL(done.publicUrl).origin] : []), ...added])];
  },
  corsOrigins: (c: RawConfig, at: At) => each(c.server.corsOrigins, (value) => url(value, at('CORS_ORIGINS'), { anyMode: true })),
  trustProxy: (c: RawConfig, at: At) => each(c.server.trustProxy, (value) => cidr(value, at('TRUST_PROXY'))),
  outboundAllowCidrs: (c: RawConfig, at: At) => each(c.outbound.allowCidrs, (value) => cidr(value, at('OUTBOUND_ALLOW_CIDRS'))),
  databaseUrl: (c: RawConfig, at: At) => (c.db.url === undefined ? null : postgresUrl(c.db.url, at('DATABASE_URL (db.url)'))),
  webhooks: (c: RawConfig, at: At) => each(c.events.webhooks, (hook, index) => webhook(hook, index, at)),
  providers: (c: RawConfig, at: At) => providers(c.integrationOauthProvider, at),
  keyring: (c: RawConfig, at: At) => keyring(c.secrets.keys, at('ENCRYPTION_KEYS (secrets.keys)')),
  jwtKeys: (c: RawConfig, at: At) => jwtKeys(c.auth, at),
  // People are sent there with a request id in its query: the https rule of §1, as for PUBLIC_URL.
  consentHandoffUrl: (c: RawConfig, at: At) => (c.oauth.consentHandoffUrl === undefined ? null : url(c.oauth.consentHandoffUrl, at('OAUTH_CONSENT_HANDOFF_URL (oauth.consentHandoffUrl)'))),
};

/** The checked values, by the table's names; undefined only where a problem was reported. */
export type Checked = { [K in keyof typeof SETTING_CHECKS]: ReturnType<(typeof SETTING_CHECKS)[K]> };

/** Runs every rule of the table, in order, each seeing what the rules before it established. */
export function checkSettings(config: RawConfig, at: At): Checked {
  const done: Record<string, unknown> = {};
  for (const [name, check] of Object.entries(SETTING_CHECKS)) done[name] = check(config, at, done);
  return done as Checked;
}

/** True for loopback hosts, which development mode may reach over plain http. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** The https rule (docs/contract.md §1): https, or http to a loopback host outside production. */
export function allowedScheme(url: URL, isProduction: boolean): boolean {
  return url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname) && !isProduction);
}

/** Every value checked, or undefined when any was refused (each refusal reported). */
function each<T, U>(values: readonly T[], check: (value: T, index: number) => U | undefined): U[] | undefined {
  const checked = values.map(check);
  return checked.every((value) => value !== undefined) ? (checked as U[]) : undefined;
}

/**
 * HTTPS, or http to a loopback host in development (`anyMode`: in production too); no
 * userinfo or fragment. Normalized without a trailing slash. A secret URL (a webhook's,
 * which may carry the receiver's credential) is never quoted.
 */
function url(value: string, at: CheckContext, options: { anyMode?: boolean; secret?: boolean } = {}): string | undefined {
  const got = (text: string) => (options.secret ? '' : `, got "${shorten(text)}"`);
  const production = at.isProduction && !options.anyMode;
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    return at.problem(`expected an absolute URL${got(value)}`);
  }
  if (parsed.username || parsed.password || parsed.hash) return at.problem('must not carry userinfo or a fragment');
  if (!allowedScheme(parsed, production)) {
    return at.problem(`must use https:${production ? '' : ' (http: is allowed only for loopback hosts in development)'}${got(`${parsed.protocol}//${parsed.host}`)}`);
  }
  return parsed.href.replace(/\/$/, '');
}

function origin(value: string, at: CheckContext): string | undefined {
  const checked = url(value, at);
  return checked === undefined ? undefined : new URL(checked).origin;
}

function defaultPublicUrl(server: RawConfig['server']): string {
  const host = server.host === '0.0.0.0' ? '127.0.0.1' : server.host === '::' ? '[::1]' : isIP(server.host) === 6 ? `[${server.host}]` : server.host;
  return `http://${host}:${server.port}`;
}

/** An IP address, or an address/prefix-length within its family's bits. */
function cidr(value: string, at: CheckContext): string | undefined {
  const [address = '', bits, ...rest] = value.split('/');
  const family = isIP(address);
  const valid = rest.length === 0 && family !== 0 && (bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128)));
  return valid ? value : at.problem(`expected a comma list of IP addresses or CIDRs, got "${shorten(value)}"`);
}

function postgresUrl(value: string, at: CheckContext): string | undefined {
  try {
    const parsed = new URL(value);
    if ((parsed.protocol === 'postgres:' || parsed.protocol === 'postgresql:') && parsed.hostname !== '') return value;
  } catch {
    // reported below, without the value
  }
  return at.problem('expected postgres://user:password@host:port/database (the value is not shown: it may hold a password)');
}

/** A webhook's URL (secret: never quoted) and its Standard Webhooks secret, `whsec_` + base64 of 24–64 bytes. */
function webhook(hook: RawConfig['events']['webhooks'][number], index: number, at: At) {
  const checkedUrl = url(hook.url, at(`EVENTS_WEBHOOK_URL (events.webhooks[${index}].url)`), { secret: true });
  const secret = /^whsec_([A-Za-z0-9+/=]+)$/.exec(hook.secret);
  const bytes = secret?.[1] ? Buffer.from(secret[1], 'base64').length : 0;
  if (bytes < 24 || bytes > 64) {
    return at(`EVENTS_WEBHOOK_SECRET (events.webhooks[${index}].secret)`).problem('expected "whsec_" + base64 of 24–64 random bytes, e.g. whsec_$(openssl rand -base64 32)');
  }
  return checkedUrl === undefined ? undefined : hook;
}

const PROVIDER_URLS = [
  ['clientEndpoint', 'CLIENT_ENDPOINT'],
  ['authUrl', 'AUTH_URL'],
  ['tokenUrl', 'TOKEN_URL'],
  ['apiUrl', 'API_URL'],
  ['userinfoUrl', 'USERINFO_URL'],
  ['revokeUrl', 'REVOKE_URL'],
  ['installUrl', 'INSTALL_URL'],
  ['riscConfigUrl', 'RISC_CONFIG_URL'],
] as const;

/** Provider ids match `^[a-z][a-z0-9]{1,31}$`; their endpoints follow the https rule (normalized copies). */
function providers(configured: Record<string, ProviderSettings>, at: At): Record<string, ProviderSettings> | undefined {
  let valid = true;
  const checked: Record<string, ProviderSettings> = {};
  for (const [id, settings] of Object.entries(configured)) {
    const envBase = `INTEGRATION_OAUTH_${id.toUpperCase()}`;
    if (!PROVIDER_ID.test(id)) {
      at(`${envBase}_* (integrationOauthProvider.${id})`).problem('provider ids match ^[a-z][a-z0-9]{1,31}$');
      valid = false;
    }
    const copy = { ...settings };
    for (const [key, suffix] of PROVIDER_URLS) {
      const value = settings[key];
      if (value === undefined) continue;
      const normalized = url(value, at(`${envBase}_${suffix}`));
      if (normalized === undefined) valid = false;
      else copy[key] = normalized;
    }
    if (settings.privateKey !== undefined && appPrivateKey(settings.privateKey, at(`${envBase}_PRIVATE_KEY (integrationOauthProvider.${id}.privateKey)`)) === undefined) valid = false;
    checked[id] = copy;
    halfConfigured(id, settings, at);
  }
  return valid ? checked : undefined;
}

/**
 * A provider needs its client id and its secret: with one of them, or only other settings, it is
 * silently not configured — say so, naming what is set and what is missing (never a value).
 */
function halfConfigured(id: string, settings: ProviderSettings, at: At): void {
  const envBase = `INTEGRATION_OAUTH_${id.toUpperCase()}`;
  const hasId = settings.clientId !== undefined;
  const hasSecret = settings.clientSecret !== undefined;
  if (hasId && hasSecret) return;
  // Providers whose credentials people enter need neither (docs/contract.md §5c); the registry judges those.
  const mode = (settings.definition as { authMode?: unknown } | undefined)?.authMode;
  if (settings.enabled !== undefined || (mode !== undefined && mode !== 'oauth2')) return;
  const outcome = `so provider "${id}" is not configured: it has no deployment app, and only organizations' own apps (POST /v1/apps) may connect it; set both, or remove the rest`;
  if (hasId) at(`${envBase}_CLIENT_ID (integrationOauthProvider.${id}.clientId)`).warning(`set, but ${envBase}_CLIENT_SECRET is not, ${outcome}`);
  else if (hasSecret) at(`${envBase}_CLIENT_SECRET (integrationOauthProvider.${id}.clientSecret)`).warning(`set, but ${envBase}_CLIENT_ID is not, ${outcome}`);
  else if (Object.keys(settings).length > 0) at(`${envBase}_* (integrationOauthProvider.${id})`).warning(`settings given, but neither ${envBase}_CLIENT_ID nor ${envBase}_CLIENT_SECRET, ${outcome}`);
}

/**
 * An app's private key (a GitHub App's PEM, PKCS#1 or PKCS#8; `\n` escapes allowed, as an
 * environment variable often carries it) as a key object: RSA of at least 2048 bits, since the
 * app JWT is RS256. Throws an error that quotes nothing of the value (never the parser's words).
 */
export function readAppPrivateKey(value: string): KeyObject {
  let key: KeyObject | undefined;
  try {
    key = createPrivateKey({ key: value.includes('\n') ? value : value.replaceAll('\\n', '\n'), format: 'pem' });
  } catch {
    key = undefined;
  }
  if (!key) throw new Error('not a PEM private key; paste the whole .pem file the provider generated (BEGIN and END lines included; newlines or \\n escapes)');
  if (key.asymmetricKeyType !== 'rsa' || (key.asymmetricKeyDetails?.modulusLength ?? 0) < 2048) throw new Error('must be an RSA private key of at least 2048 bits (the app JWT is RS256)');
  return key;
}

/** The private-key rule at start: the problem is only ever `readAppPrivateKey`'s own words. */
function appPrivateKey(value: string, at: CheckContext): KeyObject | undefined {
  try {
    return readAppPrivateKey(value);
  } catch (error) {
    return at.problem((error as Error).message);
  }
}

const KEY_ENTRY = /^([A-Za-z0-9_-]{1,32}):([A-Za-z0-9+/=_-]+)$/;

/** `keyId:base64(32 bytes)`, comma-listed; required in production, generated in development. */
function keyring(value: string | undefined, at: CheckContext): Keyring | undefined {
  if (value === undefined) {
    if (at.isProduction) return at.problem('required in production; set "keyId:base64(32 bytes)", e.g. k1:$(openssl rand -base64 32)');
    return keyring(at.generated.take('ENCRYPTION_KEYS'), at);
  }
  const keys = new Map<string, Buffer>();
  let activeId = '';
  for (const entry of splitList(value)) {
    const match = KEY_ENTRY.exec(entry);
    const key = match?.[2] ? Buffer.from(match[2], 'base64') : undefined;
    if (!match?.[1] || !key || key.length !== 32) {
      // Never any part of the value: an entry without "keyId:" is the key itself.
      const got = !match ? 'an entry that is not "keyId:base64"' : `${key?.length ?? 0} bytes`;
      at.problem(`expected "keyId:base64(32 bytes)", got ${got}; generate one with: openssl rand -base64 32`);
      continue;
    }
    if (keys.has(match[1])) at.problem(`key id "${match[1]}" is listed twice`);
    keys.set(match[1], key);
    activeId ||= match[1];
  }
  return activeId ? { activeId, keys } : undefined;
}

/** `JWT_SECRETS` (`kid:base64(≥ 32 bytes)`, comma-listed) over `JWT_SECRET`; required in production, generated in development. */
function jwtKeys(auth: RawConfig['auth'], at: At): JwtKey[] | undefined {
  if (auth.jwtSecrets !== undefined) {
    const keys: JwtKey[] = [];
    for (const entry of splitList(auth.jwtSecrets)) {
      const match = KEY_ENTRY.exec(entry);
      const secret = match?.[2] ? Buffer.from(match[2], 'base64') : undefined;
      if (match?.[1] && secret && secret.length >= 32) keys.push({ kid: match[1], secret });
      else at('JWT_SECRETS (auth.jwtSecrets)').problem('expected a comma list of "kid:base64(at least 32 bytes)", e.g. k1:$(openssl rand -base64 32)');
    }
    return keys;
  }
  const single = at('JWT_SECRET (auth.jwtSecret)');
  if (auth.jwtSecret !== undefined) return [{ kid: 'default', secret: Buffer.from(auth.jwtSecret, 'utf8') }];
  if (single.isProduction) return single.problem('required in production; set a random string of at least 32 characters, e.g. $(openssl rand -base64 48)');
  return [{ kid: 'default', secret: Buffer.from(single.generated.take('JWT_SECRET'), 'utf8') }];
}
