// @ts-check
/** @import { Client } from 'openapi-fetch' */
/** @import { paths } from './generated/openapi.js' */
/** @import { CreatedApiToken, EndUserOption, GraphQLError, ProxyRequest, ProxyResponse, QueryOf, RequestBody, SuccessBody, TesseraOptions } from './types.js' */
import createClient from 'openapi-fetch';
import { errorFromResponse, isErrorBody, networkError, TesseraError } from './errors.js';
import { pathSerializer } from './path-serializer.js';

const PROXY = '/v1/integrations/{provider}/proxy/{path}';

/**
 * The generated client (openapi-fetch over the document's `paths`) for these options.
 * @param {string} baseUrl
 * @param {Record<string, string>} headers
 * @param {typeof fetch | undefined} fetchImpl
 * @returns {Client<paths>}
 */
function generatedClient(baseUrl, headers, fetchImpl) {
  return createClient({ baseUrl, headers, pathSerializer, ...(fetchImpl ? { fetch: fetchImpl } : {}) });
}

/**
 * Awaits a generated call and returns its success body, or throws its TesseraError.
 * @template T
 * @param {string} baseUrl
 * @param {Promise<{ data?: T, error?: unknown, response: Response }>} pending
 * @returns {Promise<T>}
 */
async function settle(baseUrl, pending) {
  let result;
  try {
    result = await pending;
  } catch (cause) {
    // openapi-fetch parses a 2xx as JSON: a 2xx that is not JSON is not Tessera answering.
    if (cause instanceof SyntaxError) throw new TesseraError({ status: 200, code: 'UNEXPECTED_RESPONSE', message: `Tessera at ${baseUrl} answered with something that is not JSON`, cause });
    throw networkError(baseUrl, cause);
  }
  if (!result.response.ok) throw errorFromResponse(result.response, result.error);
  return /** @type {T} */ (result.data);
}

/** A response's body as the proxy returns it: JSON parsed, other text as is, `null` when empty. @param {Response} response */
async function bodyOf(response) {
  const text = await response.text();
  if (text === '') return null;
  if (!/[/+]json\b/i.test(response.headers.get('content-type') ?? '')) return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** `providers.*`: what this Tessera is configured for. */
class Providers {
  #t;
  /** @param {Tessera} tessera */
  constructor(tessera) {
    this.#t = tessera;
  }
  /** The configured providers: id, display name, default scopes (`GET /v1/providers`). @returns {Promise<SuccessBody<'integrations_listProviders'>>} */
  list() {
    return this.#t.settle(this.#t.raw.GET('/v1/providers'));
  }
}

/** `integrations.*`: connections, their tokens and status (CONTRACT.md §5, §5d). */
class Integrations {
  #t;
  /** @param {Tessera} tessera */
  constructor(tessera) {
    this.#t = tessera;
  }
  /**
   * The organization's integrations — its own and every end user's — or those of one provider or end user (`GET /v1/integrations`).
   * @param {QueryOf<'integrations_list'>} [filter]
   * @returns {Promise<SuccessBody<'integrations_list'>>}
   */
  list(filter = {}) {
    return this.#t.settle(this.#t.raw.GET('/v1/integrations', { params: { query: filter } }));
  }
  /**
   * The access token, refreshed first when it is about to expire (`GET /v1/integrations/{provider}/token`).
   * @param {string} provider
   * @param {EndUserOption} [options]
   * @returns {Promise<SuccessBody<'integrations_getToken'>>}
   */
  token(provider, options = {}) {
    return this.#t.settle(this.#t.raw.GET('/v1/integrations/{provider}/token', { params: { path: { provider }, query: { endUser: options.endUser } } }));
  }
  /**
   * The status object, validated live when the last check is old (`GET /v1/integrations/{provider}/status`).
   * @param {string} provider
   * @param {EndUserOption} [options]
   * @returns {Promise<SuccessBody<'integrations_getStatus'>>}
   */
  status(provider, options = {}) {
    return this.#t.settle(this.#t.raw.GET('/v1/integrations/{provider}/status', { params: { path: { provider }, query: { endUser: options.endUser } } }));
  }
  /**
   * Refreshes the token now (`POST /v1/integrations/{provider}/refresh`).
   * @param {string} provider
   * @param {EndUserOption} [options]
   * @returns {Promise<SuccessBody<'integrations_refresh'>>}
   */
  refresh(provider, options = {}) {
    return this.#t.settle(this.#t.raw.POST('/v1/integrations/{provider}/refresh', { params: { path: { provider }, query: { endUser: options.endUser } } }));
  }
  /**
   * Deletes an integration by id and revokes its grant at the provider (`DELETE /v1/integrations/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'integrations_delete'>>}
   */
  delete(id) {
    return this.#t.settle(this.#t.raw.DELETE('/v1/integrations/{id}', { params: { path: { id } } }));
  }
  /**
   * Deletes every integration of one end user (`DELETE /v1/integrations?endUser=`).
   * @param {string} endUser
   * @returns {Promise<SuccessBody<'integrations_deleteForEndUser'>>}
   */
  deleteForEndUser(endUser) {
    return this.#t.settle(this.#t.raw.DELETE('/v1/integrations', { params: { query: { endUser } } }));
  }
}

/** `connectSessions.*`: links through which a product's end users connect (CONTRACT.md §5a). */
class ConnectSessions {
  #t;
  /** @param {Tessera} tessera */
  constructor(tessera) {
    this.#t = tessera;
  }
  /**
   * Mints a session; its `url` (shown only here) is what the end user's browser opens (`POST /v1/connect/sessions`).
   * @param {RequestBody<'connect_createSession'>} session
   * @returns {Promise<SuccessBody<'connect_createSession'>>}
   */
  create(session) {
    return this.#t.settle(this.#t.raw.POST('/v1/connect/sessions', { body: session }));
  }
  /**
   * A session's state: pending, completed (with `integrationId`), expired or revoked (`GET /v1/connect/sessions/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'connect_getSession'>>}
   */
  get(id) {
    return this.#t.settle(this.#t.raw.GET('/v1/connect/sessions/{id}', { params: { path: { id } } }));
  }
  /**
   * Revokes a pending session (`DELETE /v1/connect/sessions/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'connect_deleteSession'>>}
   */
  revoke(id) {
    return this.#t.settle(this.#t.raw.DELETE('/v1/connect/sessions/{id}', { params: { path: { id } } }));
  }
}

/** `organizations.*`: one per customer, managed by a service token (CONTRACT.md §3, §5d). */
class Organizations {
  #t;
  /** @param {Tessera} tessera */
  constructor(tessera) {
    this.#t = tessera;
  }
  /**
   * Creates an organization, optionally with the product's own id for the customer (`POST /v1/organizations`).
   * @param {RequestBody<'organizations_create'>} organization
   * @returns {Promise<SuccessBody<'organizations_create'>>}
   */
  create(organization) {
    return this.#t.settle(this.#t.raw.POST('/v1/organizations', { body: organization }));
  }
  /**
   * The organizations a service token created, newest first, paged; `externalId` finds one (`GET /v1/organizations`).
   * @param {QueryOf<'organizations_list'>} [query]
   * @returns {Promise<SuccessBody<'organizations_list'>>}
   */
  list(query = {}) {
    return this.#t.settle(this.#t.raw.GET('/v1/organizations', { params: { query } }));
  }
  /**
   * One organization (`GET /v1/organizations/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'organizations_get'>>}
   */
  get(id) {
    return this.#t.settle(this.#t.raw.GET('/v1/organizations/{id}', { params: { path: { id } } }));
  }
  /**
   * Renames an organization (`PATCH /v1/organizations/{id}`).
   * @param {string} id
   * @param {RequestBody<'organizations_update'>} changes
   * @returns {Promise<SuccessBody<'organizations_update'>>}
   */
  update(id, changes) {
    return this.#t.settle(this.#t.raw.PATCH('/v1/organizations/{id}', { params: { path: { id } }, body: changes }));
  }
  /**
   * Deletes an organization with its integrations, revoking every grant (`DELETE /v1/organizations/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'organizations_delete'>>}
   */
  delete(id) {
    return this.#t.settle(this.#t.raw.DELETE('/v1/organizations/{id}', { params: { path: { id } } }));
  }
}

/** `apiTokens.*`: an organization's own credentials (GraphQL; CONTRACT.md §3). */
class ApiTokens {
  #t;
  /** @param {Tessera} tessera */
  constructor(tessera) {
    this.#t = tessera;
  }
  /**
   * Creates an API token (`createAPIToken`); its `token` is shown this once. By default in the
   * organization the credentials act in (a service token's `organizationId`).
   * @param {{ name: string, expiresAt?: string | undefined, organizationId?: string | undefined }} token
   * @returns {Promise<CreatedApiToken>}
   */
  async create({ name, expiresAt, organizationId }) {
    const query = 'mutation ($name: String!, $expiresAt: String, $org: ID) { createAPIToken(name: $name, expiresAt: $expiresAt, organizationId: $org) { id name display expiresAt createdAt token } }';
    const data = /** @type {{ createAPIToken: CreatedApiToken }} */ (await this.#t.graphql(query, { name, expiresAt, org: organizationId }));
    return data.createAPIToken;
  }
}

/**
 * Tessera's REST API, typed from its OpenAPI document. Every method resolves to the route's
 * success body and rejects with a `TesseraError`.
 */
export class Tessera {
  /** @type {TesseraOptions} */
  #options;
  #baseUrl;
  /** @type {typeof fetch} */
  #fetch;

  /** @param {TesseraOptions} options */
  constructor(options) {
    const token = options?.apiToken ?? options?.serviceToken ?? options?.token;
    if (typeof options?.baseUrl !== 'string' || options.baseUrl === '') throw new TypeError('Tessera: `baseUrl` is required (e.g. https://tessera.example.com)');
    if (typeof token !== 'string' || token === '') throw new TypeError('Tessera: one of `apiToken`, `serviceToken` or `token` is required');
    this.#options = options;
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    /** @type {Record<string, string>} */
    const headers = { ...options.headers, authorization: `Bearer ${token}` };
    if (options.organizationId) headers['x-organization-id'] = options.organizationId;
    /** The generated typed client for every route (openapi-fetch), with these credentials: `raw.GET('/v1/…', {params})` → `{data, error, response}`. */
    this.raw = generatedClient(this.#baseUrl, headers, options.fetch);
    /** Configured providers. */
    this.providers = new Providers(this);
    /** Integrations, their tokens and status. */
    this.integrations = new Integrations(this);
    /** Connect sessions for end users. */
    this.connectSessions = new ConnectSessions(this);
    /** Organizations (a service token's customers). */
    this.organizations = new Organizations(this);
    /** API tokens. */
    this.apiTokens = new ApiTokens(this);
  }

  /**
   * Signs in with a person's e-mail and password and returns a client acting as them (`POST /v1/login`).
   * @param {{ baseUrl: string, email: string, password: string, fetch?: typeof fetch | undefined }} options
   * @returns {Promise<Tessera>}
   */
  static async login({ baseUrl, email, password, fetch: fetchImpl }) {
    const base = baseUrl.replace(/\/+$/, '');
    const session = await settle(base, generatedClient(base, {}, fetchImpl).POST('/v1/login', { body: { email, password } }));
    return new Tessera({ baseUrl: base, token: session.accessToken, ...(fetchImpl ? { fetch: fetchImpl } : {}) });
  }

  /**
   * The same credentials acting in another organization (`X-Organization-ID`): a service token's customer.
   * @param {string} organizationId
   * @returns {Tessera}
   */
  forOrganization(organizationId) {
    if (this.#options.apiToken) throw new TypeError('Tessera: an API token acts in its own organization only');
    return new Tessera(/** @type {TesseraOptions} */ ({ ...this.#options, organizationId }));
  }

  /**
   * Awaits a call of `raw` and returns its success body, or throws its TesseraError.
   * @template T
   * @param {Promise<{ data?: T, error?: unknown, response: Response }>} pending
   * @returns {Promise<T>}
   */
  settle(pending) {
    return settle(this.#baseUrl, pending);
  }

  /**
   * Calls the provider's API with the stored token (`ANY /v1/integrations/{provider}/proxy/{path}`).
   * Resolves to the provider's answer whatever its status; rejects with a TesseraError only
   * when Tessera itself refused or failed (credentials, INTEGRATION_NOT_FOUND,
   * TOKEN_VALIDATION_FAILED, PROVIDER_RATE_LIMITED, PROVIDER_ERROR…).
   * @param {string} provider
   * @param {ProxyRequest} request
   * @returns {Promise<ProxyResponse>}
   */
  async proxy(provider, { method = 'GET', path, query = {}, body, endUser, headers }) {
    /** @type {Response | undefined} */
    let answer;
    const fetchImpl = this.#fetch;
    // openapi-fetch reads the answer its own way (an error body as JSON or text); the proxy's
    // caller gets the provider's bytes as they came, so it reads a clone and we the original.
    /** @type {typeof fetch} */
    const capture = async (input, init) => {
      answer = await fetchImpl(input, init);
      return answer.clone();
    };
    const hasBody = body !== undefined && method !== 'GET' && method !== 'HEAD';
    // The document declares no request body for the proxy: the provider's API decides what it takes.
    const init = /** @type {any} */ ({
      params: { path: { provider, path: path.replace(/^\/+/, '') }, query: { ...query, endUser } },
      ...(hasBody ? { body } : {}),
      headers,
      parseAs: 'stream',
      redirect: 'manual',
      fetch: capture,
    });
    let result;
    try {
      result = await this.raw.request(/** @type {'get' | 'head' | 'post' | 'put' | 'patch' | 'delete'} */ (method.toLowerCase()), PROXY, init);
    } catch (cause) {
      throw networkError(this.#baseUrl, cause);
    }
    // A 2xx's clone was handed back unread: let it go (not awaited: a tee branch's cancel
    // settles only once the other branch, ours, is done too).
    if (result.data instanceof ReadableStream) result.data.cancel().catch(() => {});
    if (!answer) throw networkError(this.#baseUrl, undefined);
    const parsed = method === 'HEAD' ? null : await bodyOf(answer);
    // Tessera's own refusal, not the provider's answer: its error shape with this request's own id
    // (a provider's body passed through never carries the id Tessera gave this request).
    if (!answer.ok && isErrorBody(parsed) && parsed.requestId === answer.headers.get('x-request-id')) throw errorFromResponse(answer, parsed);
    return { status: answer.status, headers: Object.fromEntries(answer.headers), body: parsed };
  }

  /**
   * Runs a GraphQL operation (`POST /query`) and returns its `data`; the first error, if any, is thrown as a TesseraError.
   * @param {string} query
   * @param {Record<string, unknown>} [variables]
   * @returns {Promise<Record<string, unknown>>}
   */
  async graphql(query, variables = {}) {
    let result;
    try {
      result = await this.raw.POST('/query', { body: { query, variables } });
    } catch (cause) {
      throw networkError(this.#baseUrl, cause);
    }
    const { response } = result;
    const answer = /** @type {{ data?: Record<string, unknown> | null, errors?: GraphQLError[] } | undefined} */ (response.ok ? result.data : result.error);
    const first = Array.isArray(answer?.errors) ? answer.errors[0] : undefined;
    if (first) {
      const code = first.extensions?.code;
      throw new TesseraError({
        status: response.status,
        code: /** @type {import('./errors.js').TesseraErrorCode} */ (typeof code === 'string' ? code : 'GRAPHQL_ERROR'),
        message: first.message,
        requestId: response.headers.get('x-request-id') ?? undefined,
        details: first.extensions?.details,
      });
    }
    if (!response.ok) throw errorFromResponse(response, result.error);
    return answer?.data ?? {};
  }
}
