import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { ConfigSchema, type SettingInfo, type SettingKind, settingsOf } from './schema.ts';

/** Settings with an environment variable, from their declarations (schema.ts). */
export const ENV_SETTINGS = settingsOf().filter((item): item is SettingInfo & { env: string } => item.env !== undefined);

/** `INTEGRATION_OAUTH_<P>_<KEY>`: each provider setting's env suffix is its key in SNAKE_CASE (clientSecret → CLIENT_SECRET). */
const PROVIDER_SETTINGS = settingsOf(ConfigSchema.properties.integrationOauthProvider).map((item) => {
  const key = item.path.split('.').at(-1) as string;
  return { ...item, key, suffix: key.replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase() };
});
const PROVIDER_ENV = new RegExp(`^INTEGRATION_OAUTH_([A-Z][A-Z0-9]*)_(${PROVIDER_SETTINGS.map((item) => item.suffix).join('|')})$`);

/**
 * The configuration as given, before validation: the file (`CONFIG_FILE`), then the
 * environment, then `overrides`. Text that cannot be read as its setting's kind is a
 * problem (appended to `problems`), quoted only when the setting is not secret.
 */
export function readSources(env: NodeJS.ProcessEnv, overrides: Record<string, unknown>, problems: string[], warnings: string[] = []): Record<string, unknown> {
  const raw: Record<string, unknown> = env.CONFIG_FILE ? readConfigFile(env.CONFIG_FILE, problems) : {};
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
    if (!match && name.startsWith('INTEGRATION_OAUTH_')) warnings.push(unknownProviderVariable(name));
    if (!match || value === undefined || value === '') continue;
    const [, provider = '', suffix = ''] = match;
    const setting = PROVIDER_SETTINGS.find((item) => item.suffix === suffix) as (typeof PROVIDER_SETTINGS)[number];
    const parsed = setting.kind === 'list' ? splitList(value) : setting.kind === 'bool' ? parseEnvValue(value, 'bool') : value;
    if (parsed === undefined) problems.push(`${name}: expected ${kindText('bool')}, got "${shorten(value)}"`);
    else setPath(raw, ['integrationOauthProvider', provider.toLowerCase(), setting.key], parsed);
  }
  if (env.EVENTS_WEBHOOK_URL || env.EVENTS_WEBHOOK_SECRET) {
    const listed = getPath(raw, 'events.webhooks');
    const webhooks = Array.isArray(listed) ? listed : [];
    webhooks.push({ url: env.EVENTS_WEBHOOK_URL ?? '', secret: env.EVENTS_WEBHOOK_SECRET ?? '' });
    setPath(raw, 'events.webhooks', webhooks);
  }
  for (const [path, value] of Object.entries(overrides)) setPath(raw, path, value);
  return raw;
}

/** A variable that looks like a provider setting but is none: ignored, said by name (never its value), with the likely one. */
function unknownProviderVariable(name: string): string {
  const rest = name.slice('INTEGRATION_OAUTH_'.length);
  const squeezed = rest.replaceAll('_', '');
  const meant = PROVIDER_SETTINGS.map((item) => item.suffix).find((suffix) => squeezed.endsWith(suffix.replaceAll('_', '')) && squeezed.length > suffix.replaceAll('_', '').length);
  const provider = meant ? squeezed.slice(0, squeezed.length - meant.replaceAll('_', '').length) : '';
  const hint = meant && /^[A-Z][A-Z0-9]*$/.test(provider) ? `did you mean INTEGRATION_OAUTH_${provider}_${meant}?` : `a provider's settings are INTEGRATION_OAUTH_<P>_{${PROVIDER_SETTINGS.map((item) => item.suffix).join(',')}}`;
  return `${name}: not a setting, ignored; ${hint}`;
}

function readConfigFile(file: string, problems: string[]): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    problems.push(`CONFIG_FILE: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`);
    return {};
  }
  try {
    const parsed: unknown = parseYaml(text);
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
    if (parsed != null) problems.push(`CONFIG_FILE: ${file} must hold a YAML or JSON object`);
  } catch (error) {
    // The parser's message quotes the file, which holds secrets: only where the problem is.
    const at = (error as { linePos?: { line: number; col: number }[] }).linePos?.[0];
    problems.push(`CONFIG_FILE: ${file} is not valid YAML or JSON${at ? ` (line ${at.line}, column ${at.col})` : ''}`);
  }
  return {};
}

/** A config file may write a list as one comma-separated string, as the environment does. */
function normalizeFileLists(raw: Record<string, unknown>): void {
  for (const path of ['server.trustProxy', 'server.corsOrigins', 'oauth.redirectOrigins', 'outbound.allowCidrs']) {
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

/** A comma list's entries, trimmed, empty ones dropped. */
export function splitList(value: string): string[] {
  return value.split(',').map((part) => part.trim()).filter(Boolean);
}

/** A value short enough to quote in a problem line (only ever a non-secret one). */
export function shorten(value: string): string {
  // A URL's userinfo may be a password (even in a setting not marked secret): never quoted.
  const shown = value.replace(/\/\/.*@/s, '//[REDACTED]@');
  return shown.length > 40 ? `${shown.slice(0, 37)}...` : shown;
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
