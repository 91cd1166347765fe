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
import type { ProviderDefinition } from './types.ts';

const Url = Type.String({ minLength: 1, maxLength: 2048 });
const Path = Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9_.\\[\\]{}:-]+$' });

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
  },
  { additionalProperties: false },
);
export type CustomDefinition = Static<typeof CustomDefinition>;

const validate = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: false, strict: false }).compile(CustomDefinition);

/**
 * The definition of custom provider `id` from its configuration, or the problems with it, each
 * naming the key (`integrationOauthProvider.acme.definition.userInfo.id: is required`).
 */
export function customProvider(id: string, raw: unknown, isProduction: boolean): ProviderDefinition | string[] {
  const label = `integrationOauthProvider.${id}.definition`;
  const candidate: unknown = structuredClone(raw);
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
  const problems = urls.flatMap(([key, value]) => urlProblem(value, isProduction).map((problem) => `${label}.${key}: ${problem}`));
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
