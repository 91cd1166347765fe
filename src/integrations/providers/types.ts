import type { BudgetHeaders, EventsSpec, PaginationSpec } from './spec.ts';

/**
 * What the rest of Tessera sees of a provider: a `ProviderDefinition`, built by the engine
 * (engine.ts) from a provider's data (spec.ts). Provider quirks live in the data or in small
 * functions of the provider's own file, never in `if (provider === 'x')` in shared code.
 * Adding a provider: docs/providers.md.
 */

/**
 * How a provider call failed. Callers must be able to tell "revoked" from "provider down"
 * (what each means for an integration is tokens/policy.ts's to say):
 * - `revoked`: the provider rejected the credentials (HTTP 401, `invalid_grant`, Slack
 *   `invalid_auth`/`token_revoked`…).
 * - `misconfigured`: the provider rejected this deployment's own client credentials
 *   (`invalid_client`, `unauthorized_client`, GitHub `incorrect_client_credentials`): a
 *   configuration fault, never a revocation (docs/contract.md §2 `PROVIDER_MISCONFIGURED`).
 * - `forbidden`: authenticated, but not allowed (a 403 that is not a rate limit; a missing scope).
 * - `rateLimited`: the provider asked us to slow down. `retryAfter` in seconds.
 * - `transient`: network error, timeout, 5xx, garbage; try again later.
 * - `challenged`: the provider refused the token with a claims challenge (Microsoft's continuous
 *   access evaluation: a 401 whose `WWW-Authenticate` carries `error="insufficient_claims"` and
 *   `claims`, kept decoded in `claims`): a revocation signal that one refresh carrying those
 *   claims answers (docs/contract.md §5b).
 */
export type ProviderFailureKind = 'revoked' | 'misconfigured' | 'forbidden' | 'rateLimited' | 'transient' | 'challenged';

/** Every failure kind, in the order policy.ts's table lists them. */
export const PROVIDER_FAILURE_KINDS: readonly ProviderFailureKind[] = ['revoked', 'misconfigured', 'forbidden', 'rateLimited', 'transient', 'challenged'];

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
  /** Our words for the person, when this failure becomes the answer (a proxied answer over 10 MiB); else the error table's. */
  readonly answer?: string;
  /** `challenged`: the claims the provider asks a new token to carry (decoded JSON); sent back only to its token endpoint, never logged. */
  readonly claims?: Record<string, unknown>;

  constructor(
    kind: ProviderFailureKind,
    message: string,
    options: { status?: number; retryAfter?: number; providerCode?: unknown; answer?: string; cause?: unknown; claims?: Record<string, unknown> } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'ProviderError';
    this.kind = kind;
    if (options.status !== undefined) this.status = options.status;
    if (options.retryAfter !== undefined) this.retryAfter = options.retryAfter;
    if (options.providerCode !== undefined) this.providerCode = providerIdentifier(options.providerCode);
    if (options.answer !== undefined) this.answer = options.answer;
    if (options.claims !== undefined) this.claims = options.claims;
  }
}

/** Non-secret values a client needs to use a token (`instanceUrl`, `sites`, `workspaceId`…), documented per provider. */
export type Metadata = Record<string, unknown>;

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
  /** Metadata the answer carries (Salesforce `instance_url`, Zoom `api_url`). */
  metadata?: Metadata;
}

/** Who the token belongs to at the provider. */
export interface ProviderAccount {
  /** The stable account id: it never changes for one account (GitHub numeric id; Slack `team:user`). */
  id: string;
  username: string;
  email?: string;
  /** Metadata the account answer carries (Linear's organization, Zoom's account). */
  metadata?: Metadata;
  /** The workspace or account the user belongs to (Slack team, Zoom account), when the definition names one: events refer to it. */
  workspaceId?: string;
}

export interface ProviderEndpoints {
  /** The browser-facing authorize endpoint. */
  authUrl: string;
  /** The token endpoint (code exchange and refresh). */
  tokenUrl: string;
  /** The API base; the proxy appends paths to it. */
  apiUrl: string;
  userInfoUrl?: string;
  revokeUrl?: string;
}

/** A provider's HTTP answer as the definition sees it. */
export interface ProviderResponse {
  status: number;
  headers: Headers;
  /** Decoded text (capped); may be anything, including HTML. */
  body: string;
}

/** What an accepted installation brings to the connect flow: a first minted token, the account it is installed on, and metadata. */
export interface AcceptedInstallation {
  tokens: TokenSet;
  account: ProviderAccount;
  metadata: Metadata;
}

/** What a definition's functions may use: endpoints and credentials for one integration, and a fetch with a timeout. */
export interface ProviderContext {
  /** Resolved for this integration (tenant from settings, per-tenant URLs from its metadata). */
  endpoints: ProviderEndpoints;
  clientId: string;
  clientSecret: string;
  /** Fills a `{name}` template from the endpoints, settings and metadata of this integration. */
  resolve(template: string): string;
  /** A call through the one provider transport (transport.ts): the configured timeout, no redirects, a 1 MiB cap; throws ProviderError('transient') on network failure. */
  request(url: string, init: { method: string; headers: Record<string, string>; body?: string }): Promise<ProviderResponse>;
  /**
   * Signs `claims` as an RS256 JWT with the app's private key (`…_PRIVATE_KEY`), which never
   * leaves the registry. Present only where the deployment configured a private key.
   */
  signAppJwt?(claims: Record<string, unknown>): string;
}

/**
 * How a provider's integrations are credentialed (docs/contract.md §5c): the OAuth code flow
 * (`oauth2`), a GitHub App installation, or credentials a person enters — an API key, HTTP
 * Basic credentials, or an organization's own client credentials that mint tokens. What a mode
 * means (how it connects, renews, what it stores) is its traits (traits.ts).
 */
export type AuthMode = 'oauth2' | 'app_installation' | 'api_key' | 'basic' | 'client_credentials';

/** A field a person enters: its name in `credentials`, its label on the form, and whether it is secret (a password input; never in metadata). */
export interface CredentialField {
  name: string;
  label: string;
  secret: boolean;
}

/** What a mint starts from: the entered credentials (none for an app installation) and the integration's metadata (an installation id). */
export interface StoredGrant {
  credentials: Record<string, string>;
  metadata: Metadata;
}

/** A minted access token: cached encrypted until 5 minutes before `expiresAt` (null: no known expiry). */
export interface MintedToken {
  accessToken: string;
  expiresAt: Date | null;
  scopes: string[];
  tokenType: string;
  metadata?: Metadata;
}

/** A provider as the engine built it from its data; see spec.ts for what each part means. */
export interface ProviderDefinition {
  id: string;
  displayName: string;
  authMode: AuthMode;
  /** The fields a person enters ([] for `oauth2` and `app_installation`). */
  credentialFields: CredentialField[];
  /** Entered fields that are kept in `metadata` (a region, an account id): never secret ones. */
  metadataFields: string[];
  /**
   * The stored secret a request carries: `access_token` (OAuth, minted tokens), or the entered
   * `credentials` (api_key, basic), as JSON. `validate`, `carry` and `revoke` receive it.
   */
  presents: 'access_token' | 'credentials';
  /** How a request carries the presented secret: headers to set, query parameters to add. */
  carry(secret: string): { headers: Record<string, string>; query: Record<string, string> };
  /**
   * Checks credentials a person entered and reads the account they belong to: the
   * verification call (api_key, basic) or a first mint (client_credentials, which it returns).
   * Throws ProviderError: `revoked` or `forbidden` when the provider rejects them (a 400
   * `INVALID_CREDENTIALS`), `rateLimited`, `transient`. Absent for the modes nobody fills in.
   */
  verify?(context: ProviderContext, credentials: Record<string, string>): Promise<{ account: ProviderAccount; minted?: MintedToken }>;
  /**
   * Mints an access token from what is stored (client credentials; an app installation's
   * token): the mode's renewal, run by the token lifecycle through the refresh single-flight
   * (lease, store before serve). Throws ProviderError: `revoked` when the provider refuses the
   * stored grant (or the installation is gone), `misconfigured` for this deployment's own
   * credentials, `rateLimited`, `transient`. A minted mode is validated by minting.
   */
  mint?(context: ProviderContext, stored: StoredGrant): Promise<MintedToken>;
  /** Templates: `{tenant}` filled from settings, `{instanceUrl}` and the like from an integration's metadata. */
  endpoints: ProviderEndpoints;
  defaultScopes: string[];
  scopeSeparator: ' ' | ',';
  scopeParam: string;
  authorizeParams: Record<string, string>;
  /** PKCE with S256. Off for Slack: PKCE makes a Slack app a public client whose refresh tokens expire. */
  pkce: boolean;
  clientAuth: 'client_secret_post' | 'client_secret_basic';
  tokenFormat: 'form' | 'json';
  tokenHeaders: Record<string, string>;
  /** Claims declared on every token request (spec.ts `ProviderSpec.tokenClaims`), merged with a challenge's. */
  tokenClaims?: Record<string, unknown>;
  /** Placeholder values when neither the settings nor the metadata give one. */
  defaults: Record<string, string>;
  metadataHosts?: string[];
  /**
   * Reads a token endpoint answer (code exchange or refresh). Returns the token set;
   * throws ProviderError `revoked` with `providerCode` when the provider refused the grant
   * (bad code, dead refresh token — even when it says so with HTTP 200), `rateLimited`, and
   * `transient` for 5xx or an unreadable body.
   */
  parseTokenResponse(response: ProviderResponse): TokenSet;
  /**
   * Checks a token with a cheap authenticated call and reads the account. Throws
   * ProviderError: `revoked` when the provider rejects the token, `forbidden`,
   * `rateLimited` (with retryAfter) or `transient` when it cannot say.
   */
  validate(context: ProviderContext, accessToken: string): Promise<ProviderAccount>;
  /** Metadata found with a call after the exchange (Atlassian's sites); absent for most providers. */
  discover?(context: ProviderContext, accessToken: string): Promise<Metadata>;
  /** The Authorization header value for API calls with `accessToken`. */
  authorization(accessToken: string): string;
  /** Headers every API call carries (Notion-Version). */
  apiHeaders: Record<string, string>;
  /**
   * Classifies an API answer: null when it is a normal answer to pass through, else the
   * failure it signals (rate limits by the provider's own signals, rejected tokens…).
   */
  classify(response: ProviderResponse): ProviderError | null;
  /** Whether a proxied call writes (owner/admin or API token only) or only reads (members too). */
  isWrite(method: string, segments: readonly string[], body: unknown): boolean;
  /** The headers that tell an account's rate-limit budget (docs/contract.md §5f), read by src/integrations/budgets.ts. */
  budgetHeaders: readonly BudgetHeaders[];
  /** How list answers page (docs/contract.md §5f), read by src/integrations/pages.ts; null: they do not. */
  pagination: PaginationSpec | null;
  /** The provider's revocation events (spec.ts `EventsSpec`, read by src/integrations/events/); absent when it sends none. */
  events?: EventsSpec;
  /** Revokes the grant at the provider (best effort on delete); throws ProviderError on failure. Absent: no revoke endpoint. */
  revoke?(context: ProviderContext, tokens: { accessToken: string; refreshToken?: string }): Promise<void>;
  /**
   * `app_installation`: the connect callback's proof that the person may connect the installation
   * the browser named. `userToken` is the user token the callback's code was exchanged for (never
   * stored); `installationId` is what the redirect said. Resolves with a first minted token, the
   * installation's account and metadata; throws ProviderError — `revoked` when the user cannot
   * see that installation (a forged or foreign id: nothing may be stored), `misconfigured` when
   * the provider refuses the app's own credentials, else as `validate`.
   */
  acceptInstallation?(context: ProviderContext, userToken: string, installationId: string): Promise<AcceptedInstallation>;
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

/** The REST rule for which calls write: anything but GET and HEAD. */
export function restIsWrite(method: string): boolean {
  return method !== 'GET' && method !== 'HEAD';
}
