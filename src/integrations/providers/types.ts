/**
 * The provider definition interface. One provider = one file exporting a
 * `ProviderDefinition`; its quirks are data fields or small functions here, never
 * `if (provider === 'x')` in shared code. Adding a provider: docs/providers.md.
 */

/**
 * How a provider call failed. Callers must be able to tell "revoked" from "provider down":
 * - `revoked`: the provider rejected the credentials (HTTP 401, `invalid_grant`, Slack
 *   `invalid_auth`/`token_revoked`…). The integration becomes `invalid` (after the retry rules).
 * - `forbidden`: authenticated, but not allowed (a 403 that is not a rate limit).
 * - `rateLimited`: the provider asked us to slow down; status unchanged. `retryAfter` in seconds.
 * - `transient`: network error, timeout, 5xx, garbage; try again later.
 */
export type ProviderFailureKind = 'revoked' | 'forbidden' | 'rateLimited' | 'transient';

/** A typed provider failure that keeps its cause; its message never holds provider text or tokens. */
export class ProviderError extends Error {
  readonly kind: ProviderFailureKind;
  readonly status?: number;
  /** Seconds, for `rateLimited`. */
  readonly retryAfter?: number;
  /**
   * The provider's own error code (e.g. `bad_refresh_token`) as a short identifier safe to
   * log, or `unrecognized` (see `providerIdentifier`).
   */
  readonly providerCode?: string;

  constructor(kind: ProviderFailureKind, message: string, options: { status?: number; retryAfter?: number; providerCode?: unknown; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'ProviderError';
    this.kind = kind;
    if (options.status !== undefined) this.status = options.status;
    if (options.retryAfter !== undefined) this.retryAfter = options.retryAfter;
    if (options.providerCode !== undefined) this.providerCode = providerIdentifier(options.providerCode);
  }
}

/** A token endpoint answer, normalized. */
export interface TokenSet {
  accessToken: string;
  /** Absent when the provider issued none (or, on refresh, did not rotate it). */
  refreshToken?: string;
  /** Seconds; absent means "no known expiry". */
  expiresIn?: number;
  refreshTokenExpiresIn?: number;
  /** The scopes the provider reports as granted (not the requested ones). */
  scopes: string[];
  tokenType: string;
}

/** Who the token belongs to at the provider. */
export interface ProviderAccount {
  /** The stable account id: it never changes for one account (GitHub numeric id; Slack `team:user`). */
  id: string;
  username: string;
  email?: string;
}

export interface ProviderEndpoints {
  /** The browser-facing authorize endpoint. */
  authUrl: string;
  /** The token endpoint (code exchange and refresh). */
  tokenUrl: string;
  /** The API base; the proxy appends paths to it. */
  apiUrl: string;
}

/** A provider's HTTP answer as the definition sees it. */
export interface ProviderResponse {
  status: number;
  headers: Headers;
  /** Decoded text (capped); may be anything, including HTML. */
  body: string;
}

/** What a definition's functions may use: the configured endpoints and credentials, and a fetch with a timeout. */
export interface ProviderContext {
  endpoints: ProviderEndpoints;
  clientId: string;
  clientSecret: string;
  /** Fetch with the configured timeout and no redirects; throws ProviderError('transient') on network failure. */
  request(url: string, init: RequestInit): Promise<ProviderResponse>;
}

export interface ProviderDefinition {
  /** Lower-case id, `^[a-z][a-z0-9]{1,31}$`; names the secrets (`<id>_access_token`…). */
  id: string;
  displayName: string;
  endpoints: ProviderEndpoints;
  /** Scopes requested when neither the request nor the configuration names any. */
  defaultScopes: string[];
  /** How scopes are joined in the authorize URL. */
  scopeSeparator: ' ' | ',';
  /** The authorize parameter carrying the scopes (`scope`; Slack user tokens: `user_scope`). */
  scopeParam: string;
  /** PKCE with S256. Off for Slack: PKCE makes a Slack app a public client whose refresh tokens expire. */
  pkce: boolean;
  /** How the client authenticates at the token endpoint. */
  clientAuth: 'client_secret_post' | 'client_secret_basic';
  /** Extra headers for token requests (GitHub answers form-encoded unless sent `Accept: application/json`). */
  tokenRequestHeaders?: Record<string, string>;
  /**
   * Reads a token endpoint answer (code exchange or refresh). Returns the token set;
   * throws ProviderError `revoked` with `providerCode` when the provider refused the
   * grant (bad code, dead refresh token — even when it says so with HTTP 200), and
   * `transient` for 5xx or an unreadable body.
   */
  parseTokenResponse(response: ProviderResponse): TokenSet;
  /**
   * Checks a token with a cheap authenticated call and reads the account. Throws
   * ProviderError: `revoked` when the provider rejects the token, `forbidden`,
   * `rateLimited` (with retryAfter) or `transient` when it cannot say.
   */
  validate(context: ProviderContext, accessToken: string): Promise<ProviderAccount>;
  /** The Authorization header value for API calls with `accessToken`. */
  authorization(accessToken: string): string;
  /**
   * Classifies an API answer: null when it is a normal answer to pass through, else the
   * failure it signals (rate limits by the provider's own signals, rejected tokens…).
   */
  classify(response: ProviderResponse): ProviderError | null;
  /**
   * Whether a proxied call writes (owner/admin or API token only) or only reads (members
   * too). `segments` are the decoded path segments under the API base. Absent: the REST
   * rule, every method but GET and HEAD writes. RPC-style APIs (Slack) decide by the method
   * named in the path, whatever the HTTP method.
   */
  isWrite?(method: string, segments: readonly string[]): boolean;
  /** Revokes the grant at the provider (best effort on delete); throws ProviderError on failure. */
  revoke(context: ProviderContext, tokens: { accessToken: string; refreshToken?: string }): Promise<void>;
}

const IDENTIFIER = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * Text a provider sent (an error code, a description) as it may reach a log line: itself
 * when it is a short identifier (at most 64 characters of `A-Za-z0-9_.:-`), else
 * `unrecognized`. A hostile or broken provider can put anything in its answer — a
 * 100 KB string, our client secret echoed back, markup.
 */
export function providerIdentifier(text: unknown): string {
  return typeof text === 'string' && IDENTIFIER.test(text) ? text : 'unrecognized';
}

/** The REST rule for `isWrite`: anything but GET and HEAD writes. */
export function restIsWrite(method: string): boolean {
  return method !== 'GET' && method !== 'HEAD';
}

/** Parses a JSON body, or returns undefined. */
export function parseJson(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

/** `Retry-After` in seconds (or from a reset epoch), else the fallback. */
export function retryAfterSeconds(headers: Headers, fallback = 60): number {
  const retryAfter = headers.get('retry-after');
  if (retryAfter && /^\d+$/.test(retryAfter.trim())) return Math.max(1, Number(retryAfter));
  const reset = headers.get('x-ratelimit-reset');
  if (reset && /^\d+$/.test(reset.trim())) return Math.max(1, Number(reset) - Math.floor(Date.now() / 1000));
  return fallback;
}
