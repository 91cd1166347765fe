// The client's own types, named from the generated ones (./generated/openapi.d.ts): nothing here
// restates a shape the OpenAPI document already gives.
import type { components, operations } from './generated/openapi.js';

export type { components, operations, paths, webhooks } from './generated/openapi.js';

type Schemas = components['schemas'];
export type Provider = Schemas['Provider'];
export type Integration = Schemas['Integration'];
export type IntegrationStatus = Schemas['IntegrationStatus'];
export type Token = Schemas['Token'];
export type EndUser = Schemas['EndUser'];
export type ConnectSession = Schemas['ConnectSession'];
export type NewConnectSession = Schemas['NewConnectSession'];
export type Organization = Schemas['Organization'];
/** Tessera's error body (docs/contract.md §2). */
export type ErrorBody = Schemas['Error'];

type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : never;

/** The JSON body an operation answers with on success (its 200 or 201), by operationId. */
export type SuccessBody<Id extends keyof operations> = operations[Id]['responses'] extends infer R
  ? R extends { 200: infer Ok }
    ? JsonOf<Ok>
    : R extends { 201: infer Created }
      ? JsonOf<Created>
      : never
  : never;

/** The JSON body an operation takes, by operationId. */
export type RequestBody<Id extends keyof operations> = JsonOf<NonNullable<operations[Id]['requestBody']>>;

/** The query parameters an operation takes, by operationId (each may be given as `undefined`: left out). */
export type QueryOf<Id extends keyof operations> = Loose<NonNullable<operations[Id]['parameters']['query']>>;

/** Optional fields that also take `undefined` (for callers with `exactOptionalPropertyTypes`). */
export type Loose<T> = { [K in keyof T]?: T[K] | undefined };

interface Common {
  /** Tessera's URL, e.g. `https://tessera.example.com` (no `/v1`). */
  baseUrl: string;
  /** A `fetch` to use instead of the global one (tests, proxies, instrumentation). */
  fetch?: typeof fetch | undefined;
  /** Headers sent with every request (e.g. `X-Request-ID`); credentials are set from the options below. */
  headers?: Record<string, string> | undefined;
}

/**
 * How to reach Tessera, and as whom: an organization's API token (`tsa_…`), a service token
 * (`tss_…`, with the organization to act in, docs/contract.md §5d), or any other bearer credential
 * (a personal access token `tsp_…` or a session's access token).
 */
export type TesseraOptions = Common &
  (
    | { apiToken: string; serviceToken?: never; token?: never; organizationId?: never }
    | {
        serviceToken: string;
        /** The organization a service token acts in (`X-Organization-ID`): needed by every organization-scoped call; not by `organizations.*`. */
        organizationId?: string | undefined;
        apiToken?: never;
        token?: never;
      }
    | {
        token: string;
        /** For a personal access token valid in several organizations: which one (`X-Organization-ID`). */
        organizationId?: string | undefined;
        apiToken?: never;
        serviceToken?: never;
      }
  );

/** Which end user's integration (docs/contract.md §5d); without it, the organization's own. */
export interface EndUserOption {
  endUser?: string | undefined;
}

/** A call to a provider's API through Tessera's proxy (docs/contract.md §5). */
export interface ProxyRequest {
  /** Default `GET`. */
  method?: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | undefined;
  /** The provider API's path, one or more segments: `user/repos`, `chat.postMessage`. Its slashes are sent as they are. */
  path: string;
  /** Passed to the provider as sent. */
  query?: Record<string, string | number | boolean | readonly (string | number | boolean)[] | undefined> | undefined;
  /** Sent as JSON (not with GET or HEAD). */
  body?: unknown;
  /** Whose integration to use (docs/contract.md §5d); Tessera consumes it and never forwards it. */
  endUser?: string | undefined;
  /** Extra request headers; Tessera passes only its allowlist on to the provider. */
  headers?: Record<string, string> | undefined;
  /**
   * Seconds (0–60) Tessera may wait for the provider's rate limit to reset, and retry an idempotent
   * call that failed on the way, before answering (`Tessera-Max-Wait`, docs/contract.md §5f). Default 0.
   */
  maxWait?: number | undefined;
}

/** The provider's answer, passed through. */
export interface ProxyResponse {
  status: number;
  /** The headers that passed Tessera's allowlist, lower-case names. */
  headers: Record<string, string>;
  /** Parsed JSON for a JSON answer, else the text; `null` when empty. */
  body: unknown;
}

/** A new API token (GraphQL `createAPIToken`): `token` is shown this once. */
export interface CreatedApiToken {
  id: string;
  name: string;
  /** Prefix and last four characters, for lists. */
  display: string;
  expiresAt: string | null;
  createdAt: string;
  token: string;
}

/** One GraphQL error as Tessera sends it. */
export interface GraphQLError {
  message: string;
  path?: (string | number)[];
  extensions?: { code?: string; details?: { path: string; message: string }[] } & Record<string, unknown>;
}
