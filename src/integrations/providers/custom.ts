/**
 * Custom providers from configuration alone (docs/contract.md §5 "Custom providers"): a
 * `definition` under `integrationOauthProvider.<id>` describing any provider that follows
 * RFC 6749 — errors at the token endpoint as HTTP 4xx `{error}` (`invalid_grant`: a dead
 * grant), and on API calls 401 revoked, 403 forbidden, 429 rate limited, 5xx transient: the
 * engine's defaults. Checked at start, one problem per line naming the key.
 */
import { Ajv, type ErrorObject } from 'ajv';
import { type Static, Type } from 'typebox';
import { allowedScheme } from '../../config/checks.ts';
import { defineProvider } from './engine.ts';
import { placeholders } from './json.ts';
import { enteredUrlProblems } from './url-template.ts';
import type { ProviderDefinition } from './types.ts';

const Url = Type.String({ minLength: 1, maxLength: 2048 });
const Path = Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9_.\\[\\]{}:-]+$' });
/** How list answers page (docs/contract.md §5f): an RFC 8288 `Link`, or a cursor at a dot path of the body sent back as a query parameter. */
const Pagination = Type.Union([
  Type.Object({ type: Type.Literal('link') }, { additionalProperties: false }),
  Type.Object({ type: Type.Literal('cursor'), from: Path, param: Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9_.\\[\\]-]+$' }) }, { additionalProperties: false }),
]);

/** The shape of a custom definition, as the contract writes it. */
export const CustomDefinition = Type.Object(
  {
    displayName: Type.String({ minLength: 1, maxLength: 100 }),
    authUrl: Url,
    tokenUrl: Url,
    apiUrl: Url,
    scopes: Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { default: [] }),
    scopeSeparator: Type.Union([Type.Literal(' '), Type.Literal(',')], { default: ' ' }),
    pkce: Type.Boolean({ default: true }),
    clientAuth: Type.Union([Type.Literal('client_secret_post'), Type.Literal('client_secret_basic')], { default: 'client_secret_post' }),
    authorizeParams: Type.Record(Type.String({ minLength: 1, maxLength: 100 }), Type.String({ maxLength: 1000 }), { default: {} }),
    userInfo: Type.Object({ url: Url, id: Path, username: Type.Optional(Path), email: Type.Optional(Path) }, { additionalProperties: false }),
    revokeUrl: Type.Optional(Url),
    pagination: Type.Optional(Pagination),
  },
  { additionalProperties: false },
);
export type CustomDefinition = Static<typeof CustomDefinition>;

const FieldName = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z][A-Za-z0-9_]*$' });
const Templates = Type.Record(Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9_-]+$' }), Type.String({ minLength: 1, maxLength: 1000 }));

/** A custom provider whose credentials people enter (docs/contract.md §5c): `authMode` api_key, basic or client_credentials. */
export const CustomCredentialDefinition = Type.Object(
  {
    displayName: Type.String({ minLength: 1, maxLength: 100 }),
    authMode: Type.Union([Type.Literal('api_key'), Type.Literal('basic'), Type.Literal('client_credentials')]),
    apiUrl: Url,
    credentials: Type.Array(Type.Object({ name: FieldName, label: Type.String({ minLength: 1, maxLength: 100 }), secret: Type.Boolean({ default: true }) }, { additionalProperties: false }), {
      minItems: 1,
      maxItems: 10,
    }),
    headers: Type.Optional(Templates),
    basic: Type.Optional(Type.Object({ username: Type.String({ maxLength: 1000 }), password: Type.String({ maxLength: 1000 }) }, { additionalProperties: false })),
    query: Type.Optional(Templates),
    /** Entered, non-secret fields kept in metadata (and usable in `userInfo.url`). */
    metadata: Type.Optional(Type.Array(FieldName)),
    userInfo: Type.Optional(Type.Object({ url: Url, id: Path, username: Type.Optional(Path), email: Type.Optional(Path) }, { additionalProperties: false })),
    tokenUrl: Type.Optional(Url),
    grantType: Type.String({ minLength: 1, maxLength: 200, default: 'client_credentials' }),
    clientAuth: Type.Union([Type.Literal('client_secret_post'), Type.Literal('client_secret_basic')], { default: 'client_secret_basic' }),
    scopes: Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { default: [] }),
    pagination: Type.Optional(Pagination),
  },
  { additionalProperties: false },
);
export type CustomCredentialDefinition = Static<typeof CustomCredentialDefinition>;

const ajv = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: false, strict: false });
const validate = ajv.compile(CustomDefinition);
const validateCredentials = ajv.compile(CustomCredentialDefinition);

/**
 * The definition of custom provider `id` from its configuration, or the problems with it, each
 * naming the key (`integrationOauthProvider.acme.definition.userInfo.id: is required`).
 */
export function customProvider(id: string, raw: unknown, isProduction: boolean): ProviderDefinition | string[] {
  const label = `integrationOauthProvider.${id}.definition`;
  const mode = (raw as { authMode?: unknown } | null)?.authMode;
  if (mode !== undefined && mode !== 'oauth2') return customCredentialProvider(id, raw, isProduction);
  const candidate: unknown = structuredClone(raw && typeof raw === 'object' ? Object.fromEntries(Object.entries(raw).filter(([key]) => key !== 'authMode')) : raw);
  if (!validate(candidate)) return (validate.errors ?? []).map((error) => `${label}${keyOf(error)}: ${messageOf(error)}`);
  // Ajv has filled the defaults in place.
  const definition = candidate as CustomDefinition;
  const urls: [string, string][] = [
    ['authUrl', definition.authUrl],
    ['tokenUrl', definition.tokenUrl],
    ['apiUrl', definition.apiUrl],
    ['userInfo.url', definition.userInfo.url],
    ...(definition.revokeUrl ? ([['revokeUrl', definition.revokeUrl]] as [string, string][]) : []),
  ];
  const problems = urls.flatMap(([key, value]) => [...placeholderProblems(value, []), ...urlProblem(value, isProduction)].map((problem) => `${label}.${key}: ${problem}`));
  if (problems.length > 0) return problems;
  return defineProvider({
    id,
    displayName: definition.displayName,
    endpoints: {
      authUrl: definition.authUrl,
      tokenUrl: definition.tokenUrl,
      apiUrl: definition.apiUrl.replace(/\/+$/, ''),
      userInfoUrl: definition.userInfo.url,
      ...(definition.revokeUrl ? { revokeUrl: definition.revokeUrl } : {}),
    },
    defaultScopes: definition.scopes,
    scopeSeparator: definition.scopeSeparator,
    pkce: definition.pkce,
    clientAuth: definition.clientAuth,
    authorizeParams: definition.authorizeParams,
    ...(definition.pagination ? { pagination: definition.pagination } : {}),
    account: {
      url: '{userInfoUrl}',
      id: definition.userInfo.id,
      ...(definition.userInfo.username ? { username: definition.userInfo.username } : {}),
      ...(definition.userInfo.email ? { email: definition.userInfo.email } : {}),
    },
    // RFC 7009: the token in a form, the client authenticated as at the token endpoint. The refresh token when there
    // is one: §2.1 lets a server revoke only the access token it is given, leaving the grant alive (docs/contract.md §5b).
    ...(definition.revokeUrl
      ? { revoke: { url: '{revokeUrl}', token: 'refresh' as const, param: 'token', auth: definition.clientAuth === 'client_secret_basic' ? ('basic' as const) : ('body' as const) } }
      : {}),
  });
}

/** A custom api_key, basic or client_credentials provider, or the problems with its definition, each naming the key. */
function customCredentialProvider(id: string, raw: unknown, isProduction: boolean): ProviderDefinition | string[] {
  const label = `integrationOauthProvider.${id}.definition`;
  const candidate: unknown = structuredClone(raw);
  if (!validateCredentials(candidate)) return (validateCredentials.errors ?? []).map((error) => `${label}${keyOf(error)}: ${messageOf(error)}`);
  const definition = candidate as CustomCredentialDefinition;
  const names = definition.credentials.map((field) => field.name);
  const problems: string[] = [];
  const need = (ok: boolean, key: string, message: string) => {
    if (!ok) problems.push(`${label}.${key}: ${message}`);
  };
  need(new Set(names).size === names.length, 'credentials', 'field names must be unique');
  const secret = new Set(definition.credentials.filter((field) => field.secret).map((field) => field.name));
  for (const name of definition.metadata ?? []) need(names.includes(name) && !secret.has(name), 'metadata', `"${name}" must name an entered field that is not secret`);
  if (definition.authMode === 'api_key') need(definition.headers !== undefined || definition.query !== undefined, 'headers', 'api_key needs headers or query to carry the credentials');
  if (definition.authMode === 'basic') need(definition.basic !== undefined, 'basic', 'basic needs { username, password } templates');
  if (definition.authMode !== 'client_credentials') need(definition.userInfo !== undefined, 'userInfo', 'is required (the verification call)');
  if (definition.authMode === 'client_credentials') {
    need(definition.tokenUrl !== undefined, 'tokenUrl', 'is required for client_credentials');
    need(names.includes('clientId') && names.includes('clientSecret'), 'credentials', 'client_credentials needs fields named clientId and clientSecret');
  }
  const urls: [string, string][] = [['apiUrl', definition.apiUrl]];
  if (definition.userInfo) urls.push(['userInfo.url', definition.userInfo.url]);
  if (definition.tokenUrl) urls.push(['tokenUrl', definition.tokenUrl]);
  const metadata = definition.metadata ?? [];
  problems.push(
    ...urls.flatMap(([key, value]) =>
      [...placeholderProblems(value, metadata), ...urlProblem(value.replace(/\{[A-Za-z][A-Za-z0-9_.]*\}/g, 'x'), isProduction)].map((problem) => `${label}.${key}: ${problem}`),
    ),
  );
  if (problems.length > 0) return problems;
  return defineProvider({
    id,
    displayName: definition.displayName,
    ...(definition.pagination ? { pagination: definition.pagination } : {}),
    authMode: {
      mode: definition.authMode,
      credentials: definition.credentials,
      ...(definition.headers ? { headers: definition.headers } : {}),
      ...(definition.basic ? { basic: definition.basic } : {}),
      ...(definition.query ? { query: definition.query } : {}),
      ...(definition.metadata ? { metadata: definition.metadata } : {}),
      ...(definition.authMode === 'client_credentials' ? { grant: { grantType: definition.grantType, clientAuth: definition.clientAuth, scopes: definition.scopes } } : {}),
    },
    endpoints: { authUrl: '', tokenUrl: definition.tokenUrl ?? '', apiUrl: definition.apiUrl.replace(/\/+$/, ''), ...(definition.userInfo ? { userInfoUrl: definition.userInfo.url } : {}) },
    defaultScopes: definition.scopes,
    ...(definition.userInfo
      ? {
          account: {
            url: '{userInfoUrl}',
            id: definition.userInfo.id,
            ...(definition.userInfo.username ? { username: definition.userInfo.username } : {}),
            ...(definition.userInfo.email ? { email: definition.userInfo.email } : {}),
          },
        }
      : {}),
  });
}

/**
 * §5c: a placeholder in a URL names an entered, non-secret metadata field, and stands only for a
 * whole host label under a fixed suffix, a path segment or a query value — never the scheme,
 * the userinfo, the whole host or the port.
 */
function placeholderProblems(value: string, metadata: readonly string[]): string[] {
  const named = placeholders(value);
  const unknown = [...new Set(named.filter((name) => !metadata.includes(name)))].map((name) => `{${name}} is not a metadata field: only an entered field listed under metadata may fill a URL`);
  return [...enteredUrlProblems(value, named), ...unknown];
}

/** HTTPS, except loopback http in development (docs/contract.md §1); no userinfo or fragment. */
function urlProblem(value: string, isProduction: boolean): string[] {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return ['expected an absolute URL'];
  }
  if (url.username || url.password || url.hash) return ['must not carry userinfo or a fragment'];
  return allowedScheme(url, isProduction) ? [] : [`must use https:${isProduction ? '' : ' (http: only for loopback hosts in development)'}`];
}

function keyOf(error: ErrorObject): string {
  const path = error.instancePath.replaceAll('/', '.');
  if (error.keyword === 'required') return `${path}.${(error.params as { missingProperty: string }).missingProperty}`;
  if (error.keyword === 'additionalProperties') return `${path}.${(error.params as { additionalProperty: string }).additionalProperty}`;
  return path;
}

function messageOf(error: ErrorObject): string {
  if (error.keyword === 'required') return 'is required';
  if (error.keyword === 'additionalProperties') return 'unknown key; remove it or check its spelling';
  return error.message ?? 'is invalid';
}
