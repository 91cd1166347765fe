/**
 * Auth modes past the OAuth code flow (docs/contract.md §5c), as data on a definition: the
 * fields a person enters, how requests carry them, which entered values are metadata, and how
 * a token is minted. The engine (engine.ts) turns a definition's `authMode` into its
 * behaviour here, the same way for every provider: there is no per-provider branch, and the
 * token lifecycle only sees `presents`, `carry`, `verify` and `mint` (and traits.ts what they
 * mean). This file imports nothing of the engine: what it needs of it comes in `EngineParts`.
 */
import { fillTemplate, parseJson } from './json.ts';
import type { AccountSpec } from './spec.ts';
import {
  type AuthMode,
  type CredentialField,
  type MintedToken,
  type ProviderAccount,
  type ProviderContext,
  type ProviderDefinition,
  ProviderError,
  type ProviderResponse,
  type StoredGrant,
  type TokenSet,
} from './types.ts';

/** How a `client_credentials` definition mints: the token endpoint's grant, from the entered fields. */
export interface GrantSpec {
  /** `client_credentials` (RFC 6749 §4.4), or the provider's own (Zoom `account_credentials`). */
  grantType: string;
  /** Extra parameters, templates over the entered fields (Zoom `account_id: "{accountId}"`). */
  params?: Record<string, string>;
  /** Where the grant's parameters go: the form body (default), or the query string (Zoom documents it so). */
  paramsIn?: 'form' | 'query';
  /** How the entered client id and secret authenticate. Default `client_secret_basic`. */
  clientAuth?: 'client_secret_basic' | 'client_secret_post';
  /** Scopes requested (`scope`, space-separated); none by default (the app's own). */
  scopes?: string[];
}

/** A definition's `authMode` (spec.ts): absent for `oauth2`. */
export interface AuthModeSpec {
  mode: Exclude<AuthMode, 'oauth2'>;
  /** What a person enters. `client_credentials` needs `clientId` and `clientSecret` among them. */
  credentials: CredentialField[];
  /** api_key: headers carrying the fields, templates (`Authorization: "Bearer {apiKey}"`). */
  headers?: Record<string, string>;
  /** basic: HTTP Basic from two templates (`{ username: "{accountSid}", password: "{authToken}" }`). */
  basic?: { username: string; password: string };
  /** api_key: query parameters carrying the fields (`api_key: "{apiKey}"`). */
  query?: Record<string, string>;
  /** Entered, non-secret fields kept in `metadata` and usable in URL templates (a region, an account id). */
  metadata?: string[];
  /** client_credentials: the grant that mints tokens. */
  grant?: GrantSpec;
  /** client_credentials without an account call: the account, templates over the entered fields (Zoom: the account id). */
  accountFromFields?: { id: string; username?: string };
  /** Code for a mint the grant cannot say (a GitHub App's installation token); replaces `grant`. */
  mint?(context: ProviderContext, stored: StoredGrant): Promise<MintedToken>;
}

/** What the engine hands over: reading an account with a presented secret, and reading a token answer whose refusals are all the grant's. */
export interface EngineParts {
  displayName: string;
  account: AccountSpec | undefined;
  readAccount(context: ProviderContext, secret: string, carry: ProviderDefinition['carry']): Promise<ProviderAccount>;
  parseGrantAnswer(response: ProviderResponse): TokenSet;
  /** The OAuth bearer carriage (`{scheme} {token}`). */
  bearer(secret: string): { headers: Record<string, string>; query: Record<string, string> };
  /** A client's request to a token endpoint (engine.ts `clientRequest`): its credentials where `auth` puts them, the fields form-encoded. */
  clientRequest(
    client: { clientId: string; clientSecret: string },
    params: Record<string, string>,
    options: { auth: 'basic' | 'body' | 'none'; format: 'form' | 'json' },
  ): { headers: Record<string, string>; body?: string };
}

type ModeParts = Pick<ProviderDefinition, 'authMode' | 'credentialFields' | 'metadataFields' | 'presents' | 'carry'> & Partial<Pick<ProviderDefinition, 'verify' | 'mint'>>;

/** The mode-specific parts of a definition: for `oauth2` (no `authMode`) the bearer carriage only. */
export function authModeParts(spec: AuthModeSpec | undefined, engine: EngineParts): ModeParts {
  if (!spec) return { authMode: 'oauth2', credentialFields: [], metadataFields: [], presents: 'access_token', carry: engine.bearer };
  const base = { authMode: spec.mode, credentialFields: spec.credentials, metadataFields: spec.metadata ?? [] };
  if (spec.mode === 'api_key' || spec.mode === 'basic') {
    const carry = (secret: string) => carryEntered(spec, parseCredentials(secret));
    return {
      ...base,
      presents: 'credentials',
      carry,
      verify: async (context, credentials) => {
        if (!engine.account) throw new ProviderError('transient', `${engine.displayName} has no verification call`);
        return { account: await engine.readAccount(context, JSON.stringify(credentials), carry) };
      },
    };
  }
  const mint = spec.mint ?? (spec.grant ? grantMint(spec.grant, engine) : undefined);
  const minted: ModeParts = { ...base, presents: 'access_token', carry: engine.bearer, ...(mint ? { mint } : {}) };
  if (!mint || spec.mode !== 'client_credentials') return minted;
  return {
    ...minted,
    // Verified by minting; the account is read with the new token where the definition has a call, else from the fields.
    verify: async (context, credentials) => {
      const token = await mint(context, { credentials, metadata: {} });
      if (engine.account) return { account: await engine.readAccount(context, token.accessToken, engine.bearer), minted: token };
      const from = spec.accountFromFields ?? { id: '{clientId}' };
      const id = fillTemplate(from.id, credentials);
      return { account: { id, username: from.username ? fillTemplate(from.username, credentials) : id }, minted: token };
    },
  };
}

/** Entered credentials as stored (a JSON object of strings); {} when unreadable. */
export function parseCredentials(secret: string | undefined): Record<string, string> {
  const value = secret ? parseJson(secret) : undefined;
  if (!value || typeof value !== 'object' || Array.isArray(value)) return {};
  return Object.fromEntries(Object.entries(value).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
}

/** api_key and basic: the headers and query parameters a request carries, filled from the entered fields. */
function carryEntered(spec: AuthModeSpec, fields: Record<string, string>): { headers: Record<string, string>; query: Record<string, string> } {
  const fill = (templates: Record<string, string> | undefined) => Object.fromEntries(Object.entries(templates ?? {}).map(([name, template]) => [name, safeFill(template, fields)]));
  const headers = fill(spec.headers);
  // RFC 7617: the user-id and password as they are, joined by a colon.
  if (spec.basic) headers.authorization = `Basic ${Buffer.from(`${safeFill(spec.basic.username, fields)}:${safeFill(spec.basic.password, fields)}`).toString('base64')}`;
  return { headers, query: fill(spec.query) };
}

/** A template filled from the fields; a missing field leaves it empty (the provider then rejects the call, as it should). */
function safeFill(template: string, fields: Record<string, string>): string {
  try {
    return fillTemplate(template, fields);
  } catch {
    return '';
  }
}

/**
 * A client-credentials mint (RFC 6749 §4.4, or a provider's variant): the grant at the token
 * endpoint, authenticated with the entered client id and secret. Every refusal is of those
 * entered credentials — not this deployment's — so it is `revoked`, never `misconfigured`.
 */
function grantMint(grant: GrantSpec, engine: EngineParts) {
  return async (context: ProviderContext, stored: StoredGrant): Promise<MintedToken> => {
    const fields = stored.credentials;
    const params: Record<string, string> = { grant_type: grant.grantType };
    for (const [name, template] of Object.entries(grant.params ?? {})) params[name] = safeFill(template, fields);
    if (grant.scopes?.length) params.scope = grant.scopes.join(' ');
    const client = { clientId: fields.clientId ?? '', clientSecret: fields.clientSecret ?? '' };
    const auth = (grant.clientAuth ?? 'client_secret_basic') === 'client_secret_basic' ? 'basic' : 'body';
    const inQuery = grant.paramsIn === 'query';
    const url = new URL(context.endpoints.tokenUrl);
    if (inQuery) for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
    // In the query, the parameters leave the body empty: only the HTTP Basic credentials remain (as before, none for `client_secret_post`).
    const request = inQuery ? engine.clientRequest(client, {}, { auth: auth === 'basic' ? 'basic' : 'none', format: 'form' }) : engine.clientRequest(client, params, { auth, format: 'form' });
    const started = Date.now();
    const tokens = engine.parseGrantAnswer(await context.request(url.href, { method: 'POST', ...request }));
    return {
      accessToken: tokens.accessToken,
      expiresAt: tokens.expiresIn !== undefined ? new Date(started + tokens.expiresIn * 1000) : null,
      scopes: tokens.scopes,
      tokenType: tokens.tokenType,
      ...(tokens.metadata ? { metadata: tokens.metadata } : {}),
    };
  };
}
