/**
 * A provider definition as data (docs/contract.md §5 "A provider definition is mostly data").
 * One shared engine (engine.ts) reads it: the authorize URL, token requests and answers,
 * the account check that validates a token, the classification of API answers, and
 * revocation. A provider's file is one `defineProvider({...})`; code appears there only for
 * what data cannot say (choosing Atlassian sites, Slack's read methods), as the optional
 * functions below.
 */
import type { AuthModeSpec } from './auth-modes.ts';
import type { ProviderContext } from './types.ts';

/**
 * A condition on an API answer. Every given part must hold: `status` (one of), `body`
 * (a value at a dot path of the JSON answer — `equals` one of, or `matches` a pattern;
 * `[]` in a path means "any item"), `text` (a pattern over the raw body), `header` (present,
 * or equal to a value).
 */
export interface Signal {
  status?: number | number[];
  body?: { path: string; equals?: string | number | boolean | (string | number | boolean)[]; matches?: string };
  text?: string;
  header?: { name: string; equals?: string };
}

/** How the token endpoint answers (code exchange and refresh). */
export interface TokenAnswerSpec {
  /**
   * Where a refusal is told: `status` (RFC 6749: HTTP 4xx with `{error}`), or `body` (any
   * status, HTTP 200 included: GitHub's `{error}`, Slack's `{ok:false,error}`). Default `status`.
   */
  errors?: 'status' | 'body';
  /** A boolean field that is false on failure (Slack `ok`). */
  okField?: string;
  /**
   * The refusal codes by which the provider rejects this deployment's own client credentials
   * rather than the grant: a configuration fault (docs/contract.md §2 `PROVIDER_MISCONFIGURED`),
   * never a revocation. Default `invalid_client`, `unauthorized_client` (RFC 6749 §5.2).
   */
  clientErrors?: readonly string[];
  /** An object holding the user's token when it is present (Slack: `authed_user`); else the answer's top level. */
  userTokenPath?: string;
  /** Seconds assumed when the answer has no `expires_in` (GitLab versions that omit it: 7200). Default: no known expiry. */
  expiresInDefault?: number;
  /** Metadata kept from the token answer: metadata key → dot path (Salesforce `instanceUrl: instance_url`). */
  metadata?: Record<string, string>;
  /**
   * Metadata kept from the claims of the answer's `id_token`: metadata key → claim (Microsoft
   * `tenantId: tid`). Read without checking the signature: the token came straight from the
   * token endpoint over TLS (OpenID Connect Core §3.1.3.7), and is only metadata.
   */
  idTokenClaims?: Record<string, string>;
}

/** How a token is checked and its account read: one authenticated call. */
export interface AccountSpec {
  /** The URL: `{userInfoUrl}` or `{apiUrl}/path` (placeholders: endpoints, metadata, settings). */
  url: string;
  method?: 'GET' | 'POST';
  /** A JSON body for a POST (Linear's GraphQL `viewer` query). */
  body?: unknown;
  /** The stable account id: a dot path, or a template of paths (`{team_id}:{user_id}`). */
  id: string;
  /** The username: dot paths, the first present wins. Default: the id. */
  username?: string | string[];
  /** The e-mail: dot paths, the first present wins. */
  email?: string | string[];
  /** Metadata kept from the account answer: metadata key → dot path. */
  metadata?: Record<string, string>;
  /**
   * The workspace or account the user belongs to at the provider (Slack `team_id`, Zoom
   * `account_id`): a dot path, or a template of paths. Kept on the integration, indexed, because
   * the provider's events name it (docs/contract.md §5b; `EventRule.match`).
   */
  workspaceId?: string;
  /** Code for an e-mail a second call must fetch (GitHub `/user/emails`); any failure means "no e-mail". */
  fetchEmail?(context: ProviderContext, accessToken: string, answer: unknown): Promise<string | undefined>;
}

/** How API answers are read. Checked in this order: missing scope, dead token, rate limit; then 403 → forbidden, 5xx → transient. */
export interface ApiSpec {
  /** The Authorization scheme. Default `Bearer` (GitHub: `token`). */
  scheme?: string;
  /** Headers every API call carries (Notion: `Notion-Version`). */
  headers?: Record<string, string>;
  /** A missing scope: forbidden (status `warning`), never a revocation. */
  missingScope?: Signal[];
  /** A dead token: revoked (after the 401 rules). Default: HTTP 401. */
  deadToken?: Signal[];
  /** A rate limit besides those of any provider (429; a 403 with no requests left, a Retry-After or "secondary rate limit"); status unchanged. */
  rateLimit?: Signal[];
  /** A dot path in the answer holding seconds to wait (Discord `retry_after`), besides the headers. */
  retryAfterPath?: string;
  /**
   * A claims challenge (Microsoft's continuous access evaluation): a 401 whose `WWW-Authenticate`
   * carries `error="<error>"` and `claims="<base64 of a JSON object>"`. Read before the dead-token
   * rules: the token is refused, and one refresh carrying those claims is the answer
   * (`challenged`, policy.ts); a 401 whose claims cannot be read is a dead token as any other.
   */
  claimsChallenge?: { error: string };
  /**
   * The headers that tell an account's remaining budget and its reset (docs/contract.md §5f), the
   * first pair present wins. A reset larger than the current epoch time is an epoch (seconds, or
   * milliseconds), else seconds from now. Default `BUDGET_HEADERS` (engine.ts): GitHub's
   * `x-ratelimit-*` and the IETF `ratelimit-*`.
   */
  budgetHeaders?: readonly BudgetHeaders[];
}

/** A pair of headers telling a rate-limit budget: what is left, and when it is reset. */
export interface BudgetHeaders {
  remaining: string;
  reset: string;
  /**
   * Learn from this pair only when the answer's `header` is absent or equals one of `equals`: a
   * provider that keeps budgets per resource (GitHub's `x-ratelimit-resource`: `core`, `search`,
   * `graphql`, …) spending a smaller one must not block the account's calls to the others.
   */
  resource?: { header: string; equals: readonly string[] };
}

/**
 * How the provider's list answers say there is a next page (docs/contract.md §5f): an RFC 8288
 * `Link: <…>; rel="next"` header (`link`); a cursor in the body at `from` (a dot path; a key that
 * itself holds dots is read whole first), sent back as the query parameter `param` — only while the
 * boolean at `while` is true, when given (Notion `has_more`); or a whole next URL in the body at
 * `from` (`next_url`: Microsoft `@odata.nextLink`). A next URL or link outside the API base is never shown.
 */
export type PaginationSpec = { type: 'link' } | { type: 'cursor'; from: string; param: string; while?: string } | { type: 'next_url'; from: string };

/** How a grant is revoked at the provider (best effort on delete). Absent: the provider has no revoke endpoint. */
export interface RevokeSpec {
  /** `{revokeUrl}` or a template (`{apiUrl}/applications/{clientId}/grant`). */
  url: string;
  method?: 'POST' | 'DELETE';
  /** Which token to send. Default `access`. */
  token?: 'access' | 'refresh';
  /** The parameter carrying it (`token`; GitHub `access_token`); none when the token goes as a bearer. */
  param?: string;
  /** `form` (RFC 7009, default) or `json`. */
  format?: 'form' | 'json';
  /** `basic` (HTTP Basic), `body` (client id and secret in the body), `bearer` (the token itself), or `none`. */
  auth?: 'basic' | 'body' | 'bearer' | 'none';
  /** Statuses that mean "revoked" (or already gone). Default 200 and 204. */
  okStatuses?: number[];
}

/**
 * A condition on a delivery of the provider's events: a header (`x-github-event`) or a dot path
 * of its JSON body (`event.type`) equals one of `equals`.
 */
export interface EventCondition {
  header?: string;
  path?: string;
  /** Strings, or numbers where the body holds numbers (Discord's `type`: 0 PING, 1 an event). */
  equals: string | number | readonly (string | number)[];
}

/**
 * How the provider signs a delivery: a hex signature sent as `<prefix><hex>` in `header`, over
 * `signed` — a template of `{timestamp}` (the value of `timestampHeader`) and `{body}` (the raw
 * body, byte for byte) — by `scheme`: `hmac-sha256` (the default), the HMAC under the events
 * secret; or `ed25519`, an Ed25519 signature checked with the events secret as the
 * application's public key (64 hex characters: Discord). A provider that signs a timestamp
 * (seconds since the epoch) has it checked against `toleranceSeconds`.
 */
export interface EventSignatureSpec {
  /** Tells it from a security event token (`SecurityEventTokenSpec`). */
  kind?: 'hmac';
  scheme?: 'hmac-sha256' | 'ed25519';
  header: string;
  prefix: string;
  /** Default `{body}`. */
  signed?: string;
  timestampHeader?: string;
  /**
   * A timestamp the signed body carries instead (Linear's `webhookTimestamp`, epoch
   * milliseconds): read once the signature holds, held to `toleranceSeconds` the same way; a body
   * without it is stale.
   */
  bodyTimestamp?: { path: string; format: 'seconds' | 'milliseconds' };
  /** Default 300 (five minutes). */
  toleranceSeconds?: number;
}

/**
 * Security event tokens (RFC 8417) pushed per RFC 8935 (Google's Cross-Account Protection): the
 * body is a JWT signed by one of the provider's own keys — the JWKS its configuration document's
 * `jwks_uri` names — so an app needs no events secret. Its `iss` must be the document's `issuer`,
 * its `aud` the client id of one of the route's apps (at the provider's route: any of the
 * provider's deployment apps), its `iat` within `maxAgeSeconds` (older is `stale`), and its `jti`
 * is the delivery id. Once verified, the body the rules read is the token's claims with its one
 * event lifted out: `event_type` (the event's URI) and `event` (its object) — URIs hold dots, which
 * dot paths cannot name. Answers follow RFC 8935: 202 with no body, 400 `{err, description}`.
 */
export interface SecurityEventTokenSpec {
  kind: 'security_event_token';
  /** The boolean provider setting that switches the events on (Google: `risc`, `INTEGRATION_OAUTH_GOOGLE_RISC`). */
  enabledBy: string;
  /** The provider setting naming the configuration document (`riscConfigUrl`), and the document used without it. */
  configuration: { setting: string; url: string };
  /** The only `alg` accepted. */
  alg: 'RS256';
  /** How old `iat` may be. */
  maxAgeSeconds: number;
  /** An unknown `kid` fetches the key set again at most once per this many seconds since the last fetch. */
  refetchSeconds: number;
}

/** A request that checks the URL (Slack's `url_verification`, Zoom's `endpoint.url_validation`, Discord's PING): answered (`EventsSpec.accepted`), changing nothing. */
export interface EventHandshakeSpec {
  when: readonly EventCondition[];
  /**
   * The answer's fields: a dot path of the body (it must hold a non-empty string), or `{ hmac:
   * path }` — the hex HMAC-SHA256 of that value under the events secret (Zoom's `encryptedToken`).
   */
  answer: Readonly<Record<string, string | { hmac: string }>>;
  /** A dot path of the body whose value is logged (Google's verification `state`: the value the receiver asked to see echoed). */
  log?: string;
}

/**
 * An event Tessera acts on (docs/contract.md §5b): the integrations it names become `invalid`
 * (policy.ts, point `event`), or — `effect: 'revalidate'` — are validated again live (GitHub's
 * `installation` `unsuspend`). A well-signed delivery matching no rule is answered 200 and
 * changes nothing.
 */
export interface EventRule {
  /** Its name in metrics, audit rows and log lines (`tokens_revoked`). */
  type: string;
  when: readonly EventCondition[];
  /**
   * Which of this provider's integrations it names, as templates of dot paths of the body: the
   * workspace id the integration keeps (`AccountSpec.workspaceId`), and its account ids — a
   * path ending in `[]` yields one id per item (`{team_id}:{event.tokens.oauth[]}`; an empty
   * list names no one). Both given, both must hold; a template the body cannot fill makes the
   * delivery a 400. `client`: a dot path of the body naming the app's client id (Linear's
   * `oauthClientId`); a delivery naming another client acts on nothing (`unmatched`) — each app
   * acts only on its own integrations (docs/contract.md §5e).
   */
  match: { workspace?: string; accounts?: string; client?: string };
  /** When the provider says the revocation happened: a dot path holding epoch seconds, epoch milliseconds or an ISO 8601 time. */
  occurredAt?: { path: string; format: 'seconds' | 'milliseconds' | 'iso' };
  /**
   * What it does to them: `revoke` (the default) makes them `invalid`; `revalidate` validates
   * each again with the provider after the delivery is recorded — the provider's word that
   * access is back is a reason to ask it, never proof (GitHub's `unsuspend`).
   */
  effect?: 'revoke' | 'revalidate';
}

/** The provider's revocation events (docs/contract.md §5b), as data read by src/integrations/events/. */
export interface EventsSpec {
  /** How a delivery proves it is the provider's: an HMAC under the app's events secret, or a security event token signed by the provider's own keys. */
  signature: EventSignatureSpec | SecurityEventTokenSpec;
  /**
   * The delivery's id, the same on the provider's retries: a header (`x-github-delivery`), a
   * body path (`event_id`), a digest of body paths (Zoom: `event_ts` and `payload`), or the
   * SHA-256 digest of a header's value (`headerDigest`: Discord sends no id; its signature,
   * over the timestamp and the body, is the same on a resend of the same delivery).
   */
  deliveryId: { header: string } | { path: string } | { digest: readonly string[] } | { headerDigest: string };
  handshakes?: readonly EventHandshakeSpec[];
  /**
   * How an accepted delivery is answered: 200 with `{"success": true}` (or a handshake's
   * fields; the default), or 204 with no body (Discord, its PING included).
   */
  accepted?: 200 | 204;
  rules: readonly EventRule[];
  /**
   * `live_check`: the signature covers no freshness — no timestamp, not the delivery id (GitHub)
   * — so a revocation body seen before (the same raw bytes, its SHA-256 digest kept) under a new
   * delivery id never acts alone: each integration it names is checked live first (the
   * lifecycle's one live check: the account call, or a mint) and only the provider's
   * confirmation makes it `invalid`. The first time a body is seen it acts at once. Such a
   * provider's delivery ids and digests are kept while integrations of it exist (retention).
   */
  replay?: 'live_check';
}

export interface ProviderSpec {
  /** Lower-case id, `^[a-z][a-z0-9]{1,31}$`; names the secrets (`<id>_access_token`…). */
  id: string;
  displayName: string;
  /**
   * How an integration of this provider is credentialed (docs/contract.md §5c), as data:
   * absent for the OAuth code flow (`oauth2`); else the fields a person enters, how requests
   * carry them, and how a token is minted. An entered-credentials mode leaves `authUrl` and
   * `tokenUrl` empty where it has none.
   */
  authMode?: AuthModeSpec;
  /** Endpoints; `{tenant}`-style placeholders are filled from settings, `{instanceUrl}`-style ones from the integration's metadata. */
  endpoints: { authUrl: string; tokenUrl: string; apiUrl: string; userInfoUrl?: string; revokeUrl?: string };
  /** Scopes requested when neither the request nor the configuration names any. */
  defaultScopes: string[];
  /** How scopes are joined in the authorize URL. Default ' '. */
  scopeSeparator?: ' ' | ',';
  /** The authorize parameter carrying the scopes. Default `scope` (Slack user tokens: `user_scope`). */
  scopeParam?: string;
  /** Extra authorize parameters (Google `access_type=offline`, Atlassian `audience`). */
  authorizeParams?: Record<string, string>;
  /** PKCE with S256. Default true. */
  pkce?: boolean;
  /** How the client authenticates at the token endpoint. Default `client_secret_post`. */
  clientAuth?: 'client_secret_post' | 'client_secret_basic';
  /** How token requests are encoded. Default `form` (Notion: `json`). */
  tokenFormat?: 'form' | 'json';
  /** Extra headers for token requests (GitHub answers form-encoded unless sent `Accept: application/json`). */
  tokenHeaders?: Record<string, string>;
  /**
   * Claims declared on every token request, as the `claims` parameter (JSON): Microsoft's `cp1`
   * client capability, without which Graph sends no claims challenge. A challenge's claims are
   * merged into them for the refresh that answers it.
   */
  tokenClaims?: Record<string, unknown>;
  token?: TokenAnswerSpec;
  /**
   * The account call: validates an OAuth token, or verifies entered api_key/basic credentials.
   * A minted mode (client_credentials, app_installation) may go without: it is validated by
   * minting, and its account read from the entered fields (`authMode.accountFromFields`).
   */
  account?: AccountSpec;
  api?: ApiSpec;
  revoke?: RevokeSpec;
  /** Placeholder values when neither the settings nor the metadata give one (Microsoft `tenant: common`; Zoom `apiUrl: https://api.zoom.us`). */
  defaults?: Record<string, string>;
  /**
   * Hosts a metadata-made URL may point at (Salesforce instances, Zoom API hosts): exact
   * names, or suffixes beginning with a dot. Checked before the URL is stored or used; loopback
   * is allowed in development, like every provider endpoint.
   */
  metadataHosts?: string[];
  /** The provider's revocation events, when it sends them (docs/contract.md §5b); its events route answers 404 without. */
  events?: EventsSpec;
  /** Code for metadata discovered with a call after the exchange (Atlassian's sites). */
  discover?(context: ProviderContext, accessToken: string): Promise<Record<string, unknown>>;
  /** How its list answers page (docs/contract.md §5f). Default: none — no `Tessera-Next-Page`. */
  pagination?: PaginationSpec;
  /** Code for which proxied calls write, when not the REST rule (Slack's read methods, Linear's GraphQL queries). */
  isWrite?(method: string, segments: readonly string[], body: unknown): boolean;
}
