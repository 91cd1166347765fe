/**
 * The one engine that turns a provider's data (spec.ts) into its behaviour: token answers,
 * account checks, API-answer classification and revocation read the same way for every
 * provider, so a rule fixed here is fixed for all of them.
 */
import { authModeParts } from './auth-modes.ts';
import { fillTemplate, parseJson, textAt, valueAt, valuesAt } from './json.ts';
import type { AccountSpec, BudgetHeaders, ProviderSpec, RevokeSpec, Signal, TokenAnswerSpec } from './spec.ts';
import {
  type Metadata,
  type ProviderAccount,
  type ProviderContext,
  type ProviderDefinition,
  ProviderError,
  type ProviderResponse,
  restIsWrite,
  type TokenSet,
} from './types.ts';

/** Builds a provider's definition from its data. */
export function defineProvider(spec: ProviderSpec): ProviderDefinition {
  const classify = (response: ProviderResponse) => classifyAnswer(spec, response);
  const scheme = spec.api?.scheme ?? 'Bearer';
  const apiHeaders = spec.api?.headers ?? {};
  const bearer = (token: string) => ({ headers: { authorization: `${scheme} ${token}` }, query: {} });
  const readWith = (context: ProviderContext, secret: string, carry: ProviderDefinition['carry']) => {
    if (!spec.account) throw new ProviderError('transient', `${spec.displayName} has no account call`);
    return readAccount(spec.displayName, spec.account, context, secret, { carry, apiHeaders, classify });
  };
  const mode = authModeParts(spec.authMode, {
    displayName: spec.displayName,
    account: spec.account,
    readAccount: readWith,
    // A mint's refusals are all of the stored grant (entered credentials, an installation): never this deployment's client.
    parseGrantAnswer: (response) => parseTokenAnswer(spec.displayName, { ...spec.token, clientErrors: [] }, response),
    bearer,
    clientRequest,
  });
  const definition: ProviderDefinition = {
    id: spec.id,
    displayName: spec.displayName,
    ...mode,
    endpoints: spec.endpoints,
    defaultScopes: spec.defaultScopes,
    scopeSeparator: spec.scopeSeparator ?? ' ',
    scopeParam: spec.scopeParam ?? 'scope',
    authorizeParams: spec.authorizeParams ?? {},
    pkce: spec.pkce ?? true,
    clientAuth: spec.clientAuth ?? 'client_secret_post',
    tokenFormat: spec.tokenFormat ?? 'form',
    tokenHeaders: spec.tokenHeaders ?? {},
    ...(spec.tokenClaims ? { tokenClaims: spec.tokenClaims } : {}),
    defaults: spec.defaults ?? {},
    ...(spec.metadataHosts ? { metadataHosts: spec.metadataHosts } : {}),
    parseTokenResponse: (response) => parseTokenAnswer(spec.displayName, spec.token ?? {}, response),
    validate: (context, secret) => readWith(context, secret, mode.carry),
    ...(spec.discover ? { discover: spec.discover } : {}),
    authorization: (accessToken) => `${scheme} ${accessToken}`,
    apiHeaders,
    classify,
    // The REST rule itself, not a wrapper: the agents' tools tell a REST API from an RPC-style one by it.
    isWrite: spec.isWrite ?? restIsWrite,
    budgetHeaders: spec.api?.budgetHeaders ?? BUDGET_HEADERS,
    pagination: spec.pagination ?? null,
    ...(spec.revoke ? { revoke: revoker(spec.displayName, spec.revoke, classify) } : {}),
    // Read by src/integrations/events/, the one place deliveries are received.
    ...(spec.events ? { events: spec.events } : {}),
  };
  return definition;
}

/** The budget headers of any provider (docs/contract.md §5f): GitHub's, then the IETF `RateLimit-*` ones (GitLab sends both spellings). */
const BUDGET_HEADERS: readonly BudgetHeaders[] = [
  // GitHub keeps a budget per resource and names it: only the REST API's own (`core`) stands for the account.
  { remaining: 'x-ratelimit-remaining', reset: 'x-ratelimit-reset', resource: { header: 'x-ratelimit-resource', equals: ['core'] } },
  { remaining: 'ratelimit-remaining', reset: 'ratelimit-reset' },
];

/** RFC 6749 §5.2's refusals of the client itself (TokenAnswerSpec.clientErrors). */
const CLIENT_ERRORS = ['invalid_client', 'unauthorized_client'];

function parseTokenAnswer(name: string, spec: TokenAnswerSpec, response: ProviderResponse): TokenSet {
  const body = parseJson(response.body);
  if (response.status === 429) throw new ProviderError('rateLimited', `${name} rate-limited the token endpoint`, { status: 429, retryAfter: retryAfterSeconds(response, undefined) });
  if (response.status >= 500 || !body || typeof body !== 'object' || Array.isArray(body)) {
    throw new ProviderError('transient', `${name} token endpoint answered badly`, { status: response.status });
  }
  const answer = body as Record<string, unknown>;
  const failed = spec.okField !== undefined && answer[spec.okField] !== true;
  const refusedInBody = spec.errors === 'body' && answer.error !== undefined && answer.error !== null;
  if (failed || refusedInBody || response.status >= 400) {
    // A refusal, whatever the status it came with: of our client credentials (a configuration
    // fault), or else of the grant (a bad code, a dead refresh token).
    const code = typeof answer.error === 'string' ? answer.error : typeof answer.errorCode === 'string' ? answer.errorCode : undefined;
    if (code !== undefined && (spec.clientErrors ?? CLIENT_ERRORS).includes(code)) {
      throw new ProviderError('misconfigured', `${name} rejected this deployment's client credentials`, { status: response.status, providerCode: code });
    }
    throw new ProviderError('revoked', `${name} refused the grant`, { status: response.status, providerCode: code ?? 'unrecognized' });
  }
  const nested = spec.userTokenPath ? valueAt(answer, spec.userTokenPath) : undefined;
  const user = nested && typeof nested === 'object' && typeof (nested as Record<string, unknown>).access_token === 'string' ? (nested as Record<string, unknown>) : answer;
  const accessToken = user.access_token;
  if (typeof accessToken !== 'string' || !accessToken) throw new ProviderError('transient', `${name} token answer carries no access token`, { status: response.status });
  const expiresIn = seconds(user.expires_in) ?? spec.expiresInDefault;
  const refreshTokenExpiresIn = seconds(user.refresh_token_expires_in);
  const metadata = { ...pickMetadata(answer, spec.metadata), ...pickMetadata(idTokenClaims(answer.id_token), spec.idTokenClaims) };
  return {
    accessToken,
    ...(typeof user.refresh_token === 'string' && user.refresh_token ? { refreshToken: user.refresh_token } : {}),
    ...(expiresIn !== undefined ? { expiresIn } : {}),
    ...(refreshTokenExpiresIn !== undefined ? { refreshTokenExpiresIn } : {}),
    scopes: scopesOf(user.scope ?? user.scopes),
    tokenType: typeof user.token_type === 'string' ? user.token_type : 'bearer',
    ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
  };
}

interface ApiCall {
  /** How the presented secret rides on the call (a bearer token, an API key header, HTTP Basic, a query parameter). */
  carry: ProviderDefinition['carry'];
  apiHeaders: Record<string, string>;
  classify(response: ProviderResponse): ProviderError | null;
}

async function readAccount(name: string, spec: AccountSpec, context: ProviderContext, secret: string, api: ApiCall): Promise<ProviderAccount> {
  const carried = api.carry(secret);
  const headers: Record<string, string> = { accept: 'application/json', ...api.apiHeaders, ...carried.headers };
  if (spec.body !== undefined) headers['content-type'] = 'application/json';
  let url = context.resolve(spec.url);
  if (Object.keys(carried.query).length > 0) {
    const withQuery = new URL(url);
    for (const [param, value] of Object.entries(carried.query)) withQuery.searchParams.set(param, value);
    url = withQuery.href;
  }
  const response = await context.request(url, {
    method: spec.method ?? 'GET',
    headers,
    ...(spec.body !== undefined ? { body: JSON.stringify(spec.body) } : {}),
  });
  const failure = api.classify(response);
  if (failure) throw failure;
  const body = parseJson(response.body);
  const id = response.status >= 200 && response.status < 300 ? accountId(body, spec.id) : undefined;
  if (!id) throw new ProviderError('transient', `${name} account check answered badly`, { status: response.status });
  const username = textAt(body, spec.username) ?? id;
  let email = textAt(body, spec.email);
  if (!email && spec.fetchEmail) email = await spec.fetchEmail(context, secret, body).catch(() => undefined);
  const metadata = pickMetadata(body, spec.metadata);
  const workspaceId = spec.workspaceId ? accountId(body, spec.workspaceId) : undefined;
  return { id, username, ...(email ? { email } : {}), ...(Object.keys(metadata).length > 0 ? { metadata } : {}), ...(workspaceId ? { workspaceId } : {}) };
}

/** An id of the account answer (the account's, its workspace's): a path, or a template of paths (`{team_id}:{user_id}`); undefined when a part is missing. */
function accountId(body: unknown, idSpec: string): string | undefined {
  if (!idSpec.includes('{')) return textAt(body, idSpec);
  try {
    return fillTemplate(idSpec, (body ?? {}) as Record<string, unknown>);
  } catch {
    return undefined;
  }
}

/**
 * Rate limits of any provider (docs/contract.md §5): a 429, or a 403 that says so — no requests
 * left, a `Retry-After`, or a "secondary rate limit" message. A definition adds its own.
 */
const RATE_LIMITS: Signal[] = [
  { status: 429 },
  { status: 403, header: { name: 'x-ratelimit-remaining', equals: '0' } },
  { status: 403, header: { name: 'retry-after' } },
  { status: 403, text: 'secondary rate limit' },
];

/** Whether an API answer signals a failure, and which (see ApiSpec for the order). */
function classifyAnswer(spec: ProviderSpec, response: ProviderResponse): ProviderError | null {
  const api = spec.api ?? {};
  const { status } = response;
  let body: unknown;
  const json = () => (body ??= parseJson(response.body) ?? null);
  const matches = (signals: Signal[] | undefined) => (signals ?? []).some((signal) => signalMatches(signal, response, json));
  const name = spec.displayName;
  if (matches(api.missingScope)) return new ProviderError('forbidden', `${name} says a scope is missing`, { status });
  const claims = api.claimsChallenge && status === 401 ? challengedClaims(response.headers.get('www-authenticate'), api.claimsChallenge.error) : undefined;
  if (claims) return new ProviderError('challenged', `${name} asks for a token with more claims`, { status, claims });
  if (matches(api.deadToken ?? [{ status: 401 }])) return new ProviderError('revoked', `${name} rejected the token`, { status });
  if (matches(RATE_LIMITS) || matches(api.rateLimit)) {
    return new ProviderError('rateLimited', `${name} rate limit`, { status, retryAfter: retryAfterSeconds(response, api.retryAfterPath ? textAt(json(), api.retryAfterPath) : undefined) });
  }
  if (status === 403) return new ProviderError('forbidden', `${name} forbade the call`, { status });
  if (status >= 500) return new ProviderError('transient', `${name} answered with a server error`, { status });
  return null;
}

/**
 * The claims of a challenge in a `WWW-Authenticate` value (`Bearer realm="", error="<error>",
 * claims="<base64>"`, RFC 6750 §3 auth-params): the decoded JSON object, or undefined when the
 * header is not such a challenge or its claims are not a JSON object.
 */
export function challengedClaims(header: string | null, error: string): Record<string, unknown> | undefined {
  if (!header || header.length > 8192) return undefined;
  const params = new Map<string, string>();
  for (const match of header.matchAll(/([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/g)) {
    params.set((match[1] as string).toLowerCase(), match[2] !== undefined ? match[2].replace(/\\(.)/g, '$1') : (match[3] as string));
  }
  const encoded = params.get('claims');
  if (params.get('error') !== error || !encoded) return undefined;
  const value = parseJson(Buffer.from(encoded, encoded.includes('-') || encoded.includes('_') ? 'base64url' : 'base64').toString('utf8'));
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

function signalMatches(signal: Signal, response: ProviderResponse, json: () => unknown): boolean {
  if (signal.status !== undefined && !(Array.isArray(signal.status) ? signal.status : [signal.status]).includes(response.status)) return false;
  if (signal.header) {
    const value = response.headers.get(signal.header.name);
    if (value === null || (signal.header.equals !== undefined && value.trim() !== signal.header.equals)) return false;
  }
  if (signal.text !== undefined && !new RegExp(signal.text, 'i').test(response.body)) return false;
  if (signal.body) {
    const { path, equals, matches } = signal.body;
    const wanted = equals === undefined ? undefined : Array.isArray(equals) ? equals : [equals];
    const pattern = matches === undefined ? undefined : new RegExp(matches, 'i');
    const found = valuesAt(json(), path).some(
      (value) => (wanted === undefined || wanted.includes(value as string)) && (pattern === undefined || (typeof value === 'string' && pattern.test(value))),
    );
    if (!found) return false;
  }
  return true;
}

function revoker(name: string, spec: RevokeSpec, classify: (response: ProviderResponse) => ProviderError | null) {
  return async (context: ProviderContext, tokens: { accessToken: string; refreshToken?: string }): Promise<void> => {
    const token = spec.token === 'refresh' && tokens.refreshToken ? tokens.refreshToken : tokens.accessToken;
    const auth = spec.auth ?? 'body';
    const request = clientRequest(context, spec.param ? { [spec.param]: token } : {}, {
      auth: auth === 'bearer' ? 'none' : auth,
      format: spec.format ?? 'form',
      headers: auth === 'bearer' ? { authorization: `Bearer ${token}` } : {},
    });
    const response = await context.request(context.resolve(spec.url), { method: spec.method ?? 'POST', ...request });
    const failure = classify(response);
    // A token the provider no longer accepts is as good as revoked (when it was the token that authenticated the call).
    const deadToken = failure?.kind === 'revoked' && auth === 'bearer';
    if (deadToken || ((spec.okStatuses ?? [200, 204]).includes(response.status) && !failure)) return;
    throw failure ?? new ProviderError('forbidden', `${name} did not revoke the grant`, { status: response.status });
  };
}

/**
 * A client's request to one of the provider's OAuth endpoints (token, revocation): its
 * credentials where `auth` puts them (HTTP Basic, or `client_id`/`client_secret` fields), the
 * fields encoded as `format` says; no body when there are no fields.
 */
export function clientRequest(
  client: { clientId: string; clientSecret: string },
  params: Record<string, string>,
  options: { auth: 'basic' | 'body' | 'none'; format: 'form' | 'json'; headers?: Record<string, string> },
): { headers: Record<string, string>; body?: string } {
  const fields = options.auth === 'body' ? { ...params, client_id: client.clientId, client_secret: client.clientSecret } : params;
  const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
  if (options.auth === 'basic') headers.authorization = `Basic ${basicCredentials(client.clientId, client.clientSecret)}`;
  if (Object.keys(fields).length === 0) return { headers };
  const json = options.format === 'json';
  headers['content-type'] = json ? 'application/json' : 'application/x-www-form-urlencoded';
  return { headers, body: json ? JSON.stringify(fields) : new URLSearchParams(fields).toString() };
}

/** HTTP Basic client credentials, each part form-encoded first (RFC 6749 §2.3.1). */
export function basicCredentials(clientId: string, clientSecret: string): string {
  return Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`).toString('base64');
}

/**
 * Seconds to wait before trying again: `Retry-After` (seconds, an HTTP date or an ISO
 * timestamp — Zoom's daily limit), a value from the body (Discord's `retry_after`, fractional),
 * or a reset time (`X-RateLimit-Reset`, `RateLimit-Reset`: epoch seconds or milliseconds, or
 * ISO 8601 as Atlassian sends it); else 60.
 */
export function retryAfterSeconds(response: Pick<ProviderResponse, 'headers'>, fromBody: string | undefined, now = Date.now()): number {
  const delay = (value: string | null | undefined, relative: boolean): number | undefined => {
    if (!value) return undefined;
    const text = value.trim();
    if (/^\d+(\.\d+)?$/.test(text)) {
      const n = Number(text);
      if (n > 1e12) return (n - now) / 1000;
      if (n > 1e9) return n - now / 1000;
      return relative ? n : undefined;
    }
    const at = Date.parse(text);
    return Number.isNaN(at) ? undefined : (at - now) / 1000;
  };
  const headers = response.headers;
  const seconds =
    delay(headers.get('retry-after'), true) ??
    delay(fromBody, true) ??
    delay(headers.get('x-ratelimit-reset'), false) ??
    delay(headers.get('ratelimit-reset'), true) ??
    delay(headers.get('x-ratelimit-requests-reset'), false);
  return seconds === undefined || !Number.isFinite(seconds) ? 60 : Math.max(1, Math.ceil(seconds));
}

function seconds(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? n : undefined;
}

function scopesOf(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((scope): scope is string => typeof scope === 'string' && scope !== '');
  return typeof value === 'string' ? value.split(/[\s,]+/).filter(Boolean) : [];
}

/** The claims of an id_token (a JWT), unverified (see TokenAnswerSpec.idTokenClaims); {} when it is not one. */
function idTokenClaims(token: unknown): unknown {
  const payload = typeof token === 'string' ? token.split('.')[1] : undefined;
  if (!payload) return {};
  return parseJson(Buffer.from(payload, 'base64url').toString('utf8')) ?? {};
}

function pickMetadata(answer: unknown, paths: Record<string, string> | undefined): Metadata {
  const metadata: Metadata = {};
  for (const [key, path] of Object.entries(paths ?? {})) {
    const value = valueAt(answer, path);
    if (value !== undefined && value !== null && value !== '') metadata[key] = value;
  }
  return metadata;
}
