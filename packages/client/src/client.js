// @ts-check
/** @import { Client } from 'openapi-fetch' */
/** @import { paths } from './generated/openapi.js' */
/** @import { GraphQLError, ProxyRequest, ProxyResponse, TesseraOptions } from './types.js' */
import createClient from 'openapi-fetch';
import { errorFromResponse, isErrorBody, networkError, TesseraError } from './errors.js';
import { pathSerializer } from './path-serializer.js';
import { ApiTokens, Apps, ConnectSessions, Integrations, Organizations, Providers, WebhookEndpoints } from './resources.js';

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

/**
 * The path and query of a `Tessera-Next-Page` (`user/repos?page=2`), as `proxy` takes them: the path's
 * segments decoded (`proxy` encodes each again), the query's repeated names kept as lists.
 * @param {string} next
 * @returns {{ path: string, query: Record<string, string | string[]> }}
 */
function nextRequest(next) {
  const at = next.indexOf('?');
  const path = (at === -1 ? next : next.slice(0, at)).split('/').map(decodeURIComponent).join('/');
  /** @type {Record<string, string | string[]>} */
  const query = {};
  for (const [name, value] of new URLSearchParams(at === -1 ? '' : next.slice(at + 1))) {
    const seen = query[name];
    query[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return { path, query };
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
    /** The deployment's webhook endpoints (a system administrator or a service token). */
    this.webhookEndpoints = new WebhookEndpoints(this);
    /** The organization's OAuth apps: the deployment's it may use, and its own. */
    this.apps = new Apps(this);
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
  async proxy(provider, { method = 'GET', path, query = {}, body, endUser, headers, maxWait }) {
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
      headers: maxWait === undefined ? headers : { ...headers, 'Tessera-Max-Wait': String(maxWait) },
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
   * The pages of a proxied list, one answer each, as the provider's definition pages them
   * (docs/contract.md §5f): the first is `request`, each next one the same request at the answer's
   * `Tessera-Next-Page`, until an answer has none. Stops after an answer that is not a 2xx (it is
   * yielded: the caller sees what the provider said); Tessera's own refusals reject as in `proxy`.
   * @param {string} provider
   * @param {ProxyRequest} request
   * @returns {AsyncGenerator<ProxyResponse, void, undefined>}
   */
  async *paginate(provider, request) {
    /** @type {ProxyRequest} */
    let current = request;
    for (;;) {
      const page = await this.proxy(provider, current);
      yield page;
      const next = page.headers['tessera-next-page'];
      if (!next || page.status < 200 || page.status >= 300) return;
      current = { ...request, ...nextRequest(next) };
    }
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
