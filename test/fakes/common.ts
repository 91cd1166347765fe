import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { URL, URLSearchParams } from 'node:url';
import { consentPage, errorPage } from './consent-page.ts';
import { type AuthorizeRequest, Grants } from './grants.ts';

export type { AuthorizeRequest } from './grants.ts';

/** How the token endpoint behaves. */
export type FakeTokenMode = 'ok' | 'down' | 'garbage' | 'hang';
/** How the API behaves. */
/** `missing-scope`: the provider's answer to a token that lacks the scope a call needs. */
export type FakeApiMode = FakeTokenMode | 'rate-limited' | 'secondary-rate-limit' | 'forbidden' | 'missing-scope';

/** A user to create at a fake provider. */
export interface FakeUserInput {
  login: string;
  email?: string | null;
  name?: string;
  /** GitHub only: whether `GET /user` shows the e-mail (default true); it is always listed by `/user/emails`. */
  publicEmail?: boolean;
}

/** A user of a fake provider; `id` is the provider's id (GitHub: a number; Slack: `U…`). */
export interface FakeUser {
  readonly login: string;
  readonly email: string | null;
  readonly name: string;
  readonly id: number | string;
}

/** One request the fake received. */
export interface FakeRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  /** The query string as it arrived (`?…` or ''): repeated and bracketed parameters as sent. */
  search: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** Counters of what the fake was asked to do. */
export interface FakeStats {
  /** Token requests with an authorization code, whatever their outcome. */
  codeExchanges: number;
  /** Token requests with grant_type=refresh_token, whatever their outcome. */
  refreshes: number;
  /** Refresh requests with a refresh token that a rotation had already replaced. */
  reusedRefreshTokens: number;
  /** Requests under `apiUrl` (the token endpoint excluded), whatever their outcome. */
  apiCalls: number;
  /** Successful revocations through the provider's API. */
  revocations: number;
  /** Slack only: messages posted with `chat.postMessage`. */
  messagesPosted?: number;
}

/** A client registration (an app) at the provider. */
export interface FakeClient {
  clientId: string;
  clientSecret: string;
}

/** Which endpoint a call with client credentials (or a client id) reached. */
export type FakeClientEndpoint = 'authorize' | 'token' | 'refresh' | 'revoke';

/**
 * One call that named a client, in order: an authorization answered (approved or denied), a code
 * exchange, a refresh (whatever their outcome), and, where the fake's provider names the client in
 * a revocation (GitHub's `DELETE /applications/{client_id}/grant`), a revocation.
 */
export interface FakeClientCall {
  endpoint: FakeClientEndpoint;
  /** The client id the call presented (undefined: none). */
  clientId: string | undefined;
}

/** The values a browser is redirected back with after "Approve". */
export interface FakeAuthorization {
  code: string;
  state: string;
  redirectUri: string;
  location: string;
}

/** A fake OAuth provider on loopback. */
export interface FakeProvider<U extends FakeUser = FakeUser> {
  readonly id: string;
  /** Base URL, e.g. `http://127.0.0.1:PORT` (no trailing slash, like the other URLs). */
  readonly url: string;
  readonly authUrl: string;
  readonly tokenUrl: string;
  readonly apiUrl: string;
  readonly clientId: string;
  /** The app's client secret as the provider knows it now (see `rotateClientSecret`). */
  readonly clientSecret: string;
  /**
   * Replaces the app's client secret at the provider, as its owner does on the app's settings
   * page: from then on the token endpoint (and any other client-authenticated call) refuses
   * the previous one, the way this provider refuses bad client credentials. Returns the new one.
   */
  rotateClientSecret(secret?: string, clientId?: string): string;
  /**
   * Registers another client (app) at the provider, as a second OAuth app of the same account;
   * fakes that tell apps apart (GitHub) accept it everywhere the first is accepted. Returns it.
   */
  registerClient(client?: Partial<FakeClient>): FakeClient;
  /** Every registered client, the first (`clientId`) first, with its current secret. */
  readonly clients: FakeClient[];
  /** Which client each authorize, token, refresh and revoke call used, in order. */
  readonly clientCalls: FakeClientCall[];
  /** Creates a user; throws if the login exists. */
  addUser(user: FakeUserInput): U;
  /** What a person clicking "Approve" at `authorizeUrl` produces; throws where the provider would show an error page. */
  authorize(authorizeUrl: string, login: string, options?: { grantedScopes?: string[] }): FakeAuthorization;
  /** Same for "Deny": location = redirect_uri?error=access_denied&state=... */
  deny(authorizeUrl: string): { state: string; location: string };
  /** Revokes every token of that user (the API rejects them afterwards). */
  revokeUser(login: string): void;
  /** Failure modes, settable at any time. */
  mode: { token: FakeTokenMode; api: FakeApiMode };
  /** Milliseconds added before each response (default 0). */
  latencyMs: number;
  /**
   * A scripted API (docs/contract.md §5f tests: rate-limit headers, 429s, 503s, pages): consulted for
   * each API request while the mode is `ok`, before the provider's own handling; its reply is sent
   * as it is, null lets the provider answer. `null` (default): no script.
   */
  script: ((ctx: FakeContext) => FakeReply | null) | null;
  readonly stats: FakeStats;
  /** Every request seen, in order. */
  readonly requests: FakeRequest[];
  /** Every access and refresh token the fake ever issued, whoever holds it now (for secrets scans). */
  issuedTokens(): string[];
  /** The currently valid tokens of a user (one entry per code exchange not yet revoked or expired). */
  tokensOf(login: string): { accessToken: string; refreshToken?: string }[];
  /** Stops the server and ends every open or hanging response. */
  close(): Promise<void>;
}

/** Options every fake accepts. */
export interface FakeProviderOptions {
  /** Port on 127.0.0.1 (default 0: any free port). */
  port?: number;
  clientId?: string;
  clientSecret?: string;
  /** Registered callback URLs (the first is the default); redirect_uri must be one or below one. Default: any http(s) URL. */
  redirectUris?: string[];
  /** More client registrations the provider knows besides `clientId` (see `registerClient`). */
  extraClients?: FakeClient[];
  /** Application name on the consent page (default `Tessera`). */
  appName?: string;
  /** Clock in epoch milliseconds for code and token expiry (default `Date.now`). */
  now?: () => number;
}

/** A request being handled. */
export interface FakeContext {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  /** Path without the query. */
  path: string;
  query: URLSearchParams;
  body: string;
}

/** A response, as data: JSON (`json`), text (`text`, with its content-type header), or the 11 MiB stream (`big`). */
export interface FakeReply {
  status: number;
  headers?: Record<string, string>;
  json?: unknown;
  text?: string;
  big?: true;
}

/** Thrown where the provider shows an error page instead of redirecting back. */
export class FakeAuthorizeError extends Error {
  readonly status: number;
  constructor(message: string, status = 400) {
    super(message);
    this.name = 'FakeAuthorizeError';
    this.status = status;
  }
}

/** What a provider file gets from the shared server. */
export interface FakeCore<U extends FakeUser> {
  readonly clientId: string;
  readonly clientSecret: string;
  /** The base URL (known once listening). */
  readonly url: string;
  readonly stats: FakeStats;
  readonly grants: Grants;
  /** The current secret of a registered client; undefined for an unknown (or absent) client id. */
  clientSecretOf(clientId: string | undefined): string | undefined;
  /** Records a call that named a client (the core records authorize, token and refresh itself). */
  recordClientCall(endpoint: FakeClientEndpoint, clientId: string | undefined): void;
  now(): number;
  user(login: string): U | undefined;
  users(): U[];
  /** The redirect URI to use for a given redirect_uri (null when absent), or null if the provider must refuse it. */
  checkRedirectUri(given: string | null): string | null;
}

/** One provider's quirks, as data and small functions over the shared core. */
export interface FakeDefinition<U extends FakeUser> {
  id: string;
  displayName: string;
  authorizePath: string;
  tokenPath: string;
  /** Prefix of the API; apiUrl = url + apiPath. */
  apiPath: string;
  /** Whether the token endpoint reads JSON bodies besides forms. */
  tokenAcceptsJson: boolean;
  newCode(): string;
  makeUser(input: FakeUserInput, sequence: number): U;
  /** Validates an authorize URL's query like the provider; throws FakeAuthorizeError where it shows an error page. */
  parseAuthorize(query: URLSearchParams): AuthorizeRequest;
  handleToken(ctx: FakeContext, params: Record<string, string>): FakeReply;
  handleApi(ctx: FakeContext): FakeReply;
  apiFailure(mode: 'rate-limited' | 'secondary-rate-limit' | 'forbidden' | 'missing-scope'): FakeReply;
  /** Paths outside authorize, token and the API prefix (a revoke endpoint, a user-info host); null when unknown. */
  handleOther?(ctx: FakeContext): FakeReply | null;
}

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Random characters from an alphabet (default: letters and digits). */
export function randomString(length: number, alphabet = ALPHANUMERIC): string {
  let out = '';
  for (const byte of randomBytes(length)) out += alphabet.charAt(byte % alphabet.length);
  return out;
}

/** The PKCE S256 challenge of a verifier. */
export function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

/** A JSON reply. */
export function json(status: number, value: unknown, headers: Record<string, string> = {}): FakeReply {
  return { status, headers, json: value };
}

/** An HTML reply. */
export function html(status: number, page: string): FakeReply {
  return { status, headers: { 'content-type': 'text/html; charset=utf-8' }, text: page };
}

/** A reply without a body (204, 302, 405…). */
export function empty(status: number, headers: Record<string, string> = {}): FakeReply {
  return { status, headers };
}

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: string): void {
  if (res.destroyed) return;
  const payload = Buffer.from(body);
  res.writeHead(status, { ...headers, 'content-length': String(payload.length) });
  res.end(payload);
}

async function sendReply(res: ServerResponse, reply: FakeReply): Promise<void> {
  const headers = reply.headers ?? {};
  if (reply.big) await streamBig(res, headers);
  else if (reply.text !== undefined) send(res, reply.status, headers, reply.text);
  else if (reply.json !== undefined) {
    send(res, reply.status, { 'content-type': 'application/json; charset=utf-8', ...headers }, JSON.stringify(reply.json));
  } else send(res, reply.status, headers, '');
}

/** Request parameters from a form body, or a JSON object body when allowed. */
export function readParams(ctx: FakeContext, acceptJson: boolean): Record<string, string> {
  const type = ctx.req.headers['content-type'] ?? '';
  if (acceptJson && /^application\/json\b/i.test(type)) {
    try {
      const value: unknown = JSON.parse(ctx.body);
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return {};
      const params: Record<string, string> = {};
      for (const [key, item] of Object.entries(value)) {
        if (typeof item === 'string' || typeof item === 'number' || typeof item === 'boolean') params[key] = String(item);
      }
      return params;
    } catch {
      return {};
    }
  }
  return Object.fromEntries(new URLSearchParams(ctx.body));
}

/** client_id and client_secret from HTTP Basic, if present and well-formed. */
export function basicCredentials(req: IncomingMessage): { id: string; secret: string } | null {
  const match = /^Basic\s+(\S+)$/i.exec(req.headers.authorization ?? '');
  if (!match?.[1]) return null;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  try {
    // RFC 6749 §2.3.1: both parts are form-encoded before Base64.
    return {
      id: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' ')),
      secret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' ')),
    };
  } catch {
    return null;
  }
}

/** Client credentials from the body, else from HTTP Basic. */
export function clientCredentials(
  ctx: FakeContext,
  params: Record<string, string>,
): { id: string | undefined; secret: string | undefined } {
  const basic = basicCredentials(ctx.req);
  return { id: params.client_id ?? basic?.id, secret: params.client_secret ?? basic?.secret };
}

/** A redirect URI with parameters added, keeping its own. */
export function withParams(uri: string, params: Record<string, string | null>): string {
  const url = new URL(uri);
  for (const [key, value] of Object.entries(params)) if (value !== null) url.searchParams.set(key, value);
  return url.href;
}

const BIG_SIZE = 11 * 1024 * 1024;
const BIG_CHUNK = Buffer.from(`"${'x'.repeat(65_530)}",\n`);

/**
 * Endpoints for proxy tests, served under the API prefix by every fake after its own token check:
 * `/echo/*` (the request as seen), `/redirect` (302 elsewhere), `/big` (11 MiB streamed); null for other paths.
 */
export function testEndpoint(ctx: FakeContext, subPath: string, headers: Record<string, string>): FakeReply | null {
  if (subPath === '/echo' || subPath.startsWith('/echo/')) {
    const { method, path, body } = ctx;
    return json(200, { method, path, query: Object.fromEntries(ctx.query), headers: ctx.req.headers, body }, headers);
  }
  if (subPath === '/redirect') return empty(302, { ...headers, location: 'http://127.0.0.2:1/elsewhere' });
  if (subPath === '/big') return { status: 200, headers, big: true };
  return null;
}

async function streamBig(response: ServerResponse, headers: Record<string, string>): Promise<void> {
  if (response.destroyed) return;
  response.writeHead(200, { ...headers, 'content-type': 'application/json; charset=utf-8' });
  response.write('[');
  for (let written = 1; written < BIG_SIZE; written += BIG_CHUNK.length) {
    if (response.destroyed) return;
    if (!response.write(BIG_CHUNK)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          response.off('drain', done);
          response.off('close', done);
          resolve();
        };
        response.on('drain', done);
        response.on('close', done);
      });
    }
  }
  response.end('"end"]');
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

type Route = 'authorize' | 'token' | 'api' | 'none';

const DOWN_PAGE = '<html><body><h1>503 Service Unavailable</h1><p>unavailable</p></body></html>';

/** Starts the loopback server shared by every fake, with one provider's definition plugged in. */
export async function startFakeProvider<U extends FakeUser>(
  options: FakeProviderOptions,
  defaults: { clientId: string; clientSecret: string },
  define: (core: FakeCore<U>) => FakeDefinition<U>,
): Promise<FakeProvider<U>> {
  const clientId = options.clientId ?? defaults.clientId;
  let clientSecret = options.clientSecret ?? defaults.clientSecret;
  // The other registrations, by client id (the first one's secret is `clientSecret`).
  const extraClients = new Map<string, string>();
  const clientCalls: FakeClientCall[] = [];
  const addClient = (client: Partial<FakeClient> = {}): FakeClient => {
    const added = { clientId: client.clientId ?? `Ov23li${randomString(14)}`, clientSecret: client.clientSecret ?? randomString(40, '0123456789abcdef') };
    if (added.clientId === clientId || extraClients.has(added.clientId)) throw new Error(`fake provider: client ${added.clientId} is already registered`);
    extraClients.set(added.clientId, added.clientSecret);
    return added;
  };
  for (const client of options.extraClients ?? []) addClient(client);
  const secretOf = (id: string | undefined): string | undefined => (id === undefined ? undefined : id === clientId ? clientSecret : extraClients.get(id));
  const appName = options.appName ?? 'Tessera';
  const registered = (options.redirectUris ?? []).map((uri) => new URL(uri));
  const now = options.now ?? Date.now;
  const users = new Map<string, U>();
  const grants = new Grants(now);
  const stats: FakeStats = { codeExchanges: 0, refreshes: 0, reusedRefreshTokens: 0, apiCalls: 0, revocations: 0 };
  const requests: FakeRequest[] = [];
  const control: { mode: FakeProvider['mode']; latencyMs: number; script: FakeProvider['script'] } = { mode: { token: 'ok', api: 'ok' }, latencyMs: 0, script: null };
  const timers = new Set<ReturnType<typeof setTimeout>>();
  let baseUrl = '';
  let closed = false;

  const core: FakeCore<U> = {
    clientId,
    get clientSecret() {
      return clientSecret;
    },
    get url() {
      return baseUrl;
    },
    stats,
    grants,
    clientSecretOf: secretOf,
    recordClientCall: (endpoint, id) => {
      clientCalls.push({ endpoint, clientId: id });
    },
    now,
    user: (login) => users.get(login),
    users: () => [...users.values()],
    checkRedirectUri(given) {
      if (given === null) return registered[0]?.href ?? null;
      let url: URL;
      try {
        url = new URL(given);
      } catch {
        return null;
      }
      if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hash) return null;
      if (registered.length === 0) return given;
      const under = (base: URL) =>
        url.origin === base.origin &&
        (url.pathname === base.pathname || url.pathname.startsWith(base.pathname.replace(/\/?$/, '/')));
      return registered.some(under) ? given : null;
    },
  };
  const def = define(core);

  function approve(request: AuthorizeRequest, login: string, grantedScopes?: string[]): FakeAuthorization {
    clientCalls.push({ endpoint: 'authorize', clientId: request.clientId });
    const code = def.newCode();
    grants.issueCode(code, login, request, grantedScopes ?? request.scopes);
    const location = withParams(request.redirectUri, { code, state: request.state });
    return { code, state: request.state ?? '', redirectUri: request.redirectUri, location };
  }

  function refuse(request: AuthorizeRequest): { state: string; location: string } {
    clientCalls.push({ endpoint: 'authorize', clientId: request.clientId });
    const location = withParams(request.redirectUri, { error: 'access_denied', state: request.state });
    return { state: request.state ?? '', location };
  }

  function parseAuthorizeUrl(authorizeUrl: string): AuthorizeRequest {
    const url = new URL(authorizeUrl);
    const expected = baseUrl + def.authorizePath;
    if (url.origin + url.pathname !== expected) {
      throw new Error(`${def.displayName} fake: expected an authorize URL at ${expected}, got ${url.origin}${url.pathname}`);
    }
    return def.parseAuthorize(url.searchParams);
  }

  function authorizePage(ctx: FakeContext): FakeReply {
    let request: AuthorizeRequest;
    try {
      request = def.parseAuthorize(ctx.query);
    } catch (error) {
      if (!(error instanceof FakeAuthorizeError)) throw error;
      return html(error.status, errorPage(def.displayName, error.message));
    }
    if (ctx.method === 'GET' || ctx.method === 'HEAD') {
      const action = `${def.authorizePath}?${ctx.query.toString()}`;
      const logins = [...users.keys()];
      return html(200, consentPage({ providerName: def.displayName, appName, action, request, logins }));
    }
    if (ctx.method !== 'POST') return empty(405, { allow: 'GET, POST' });
    const form = new URLSearchParams(ctx.body);
    if (form.get('decision') === 'deny') return redirect(refuse(request).location);
    const login = form.get('login') ?? '';
    if (form.get('decision') !== 'approve' || !users.has(login)) {
      return html(400, errorPage(def.displayName, 'Pick an existing account, then Approve or Deny.'));
    }
    return redirect(approve(request, login).location);
  }

  function redirect(location: string): FakeReply {
    return empty(302, { location, 'cache-control': 'no-store' });
  }

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        timers.delete(timer);
        resolve();
      }, ms);
      timers.add(timer);
    });
  }

  async function handle(req: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake.invalid');
    const body = await readBody(req);
    const method = req.method ?? 'GET';
    const ctx: FakeContext = { req, res: response, method, path: url.pathname, query: url.searchParams, body };
    requests.push({ method, path: url.pathname, query: Object.fromEntries(url.searchParams), search: url.search, headers: { ...req.headers }, body });

    const path = url.pathname;
    const route: Route =
      path === def.authorizePath
        ? 'authorize'
        : path === def.tokenPath
          ? 'token'
          : path === def.apiPath || path.startsWith(`${def.apiPath}/`)
            ? 'api'
            : 'none';
    let params: Record<string, string> = {};
    if (route === 'token') {
      params = readParams(ctx, def.tokenAcceptsJson);
      const presented = clientCredentials(ctx, params).id;
      if (params.grant_type === 'refresh_token') {
        stats.refreshes++;
        clientCalls.push({ endpoint: 'refresh', clientId: presented });
      } else if (params.code !== undefined || params.grant_type === 'authorization_code') {
        stats.codeExchanges++;
        clientCalls.push({ endpoint: 'token', clientId: presented });
      }
    }
    if (route === 'api') stats.apiCalls++;

    if (control.latencyMs > 0) await sleep(control.latencyMs);
    if (closed) return;

    const mode = route === 'token' ? control.mode.token : route === 'api' ? control.mode.api : 'ok';
    if (mode === 'hang') return; // never answered; close() destroys the socket
    await sendReply(response, respond(ctx, route, mode, params));
  }

  function respond(ctx: FakeContext, route: Route, mode: Exclude<FakeApiMode, 'hang'>, params: Record<string, string>): FakeReply {
    if (mode === 'down') return html(503, DOWN_PAGE);
    if (mode === 'garbage') return html(200, '<html>oops');
    if (mode !== 'ok') return def.apiFailure(mode);
    if (route === 'authorize') return authorizePage(ctx);
    if (route === 'token') return ctx.method === 'POST' ? def.handleToken(ctx, params) : json(404, { error: 'Not Found' });
    if (route === 'api') return control.script?.(ctx) ?? def.handleApi(ctx);
    return def.handleOther?.(ctx) ?? { status: 404, headers: { 'content-type': 'text/plain; charset=utf-8' }, text: 'Not Found' };
  }

  const server = createServer((req, response) => {
    handle(req, response).catch((error: unknown) => {
      if (response.headersSent) response.destroy();
      else send(response, 500, { 'content-type': 'text/plain; charset=utf-8' }, `fake ${def.id} failed: ${String(error)}`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('fake provider: no TCP address');
  baseUrl = `http://127.0.0.1:${address.port}`;

  let sequence = 0;
  return {
    id: def.id,
    url: baseUrl,
    authUrl: baseUrl + def.authorizePath,
    tokenUrl: baseUrl + def.tokenPath,
    apiUrl: baseUrl + def.apiPath,
    clientId,
    get clientSecret() {
      return clientSecret;
    },
    rotateClientSecret(secret = `rotated${randomString(32)}`, id = clientId) {
      if (id === clientId) clientSecret = secret;
      else if (extraClients.has(id)) extraClients.set(id, secret);
      else throw new Error(`fake provider: no client ${id}`);
      return secret;
    },
    registerClient: addClient,
    get clients() {
      return [{ clientId, clientSecret }, ...[...extraClients].map(([id, secret]) => ({ clientId: id, clientSecret: secret }))];
    },
    clientCalls,
    addUser(input) {
      if (users.has(input.login)) throw new Error(`${def.displayName} fake: user ${input.login} exists`);
      const user = def.makeUser(input, ++sequence);
      users.set(user.login, user);
      return user;
    },
    authorize(authorizeUrl, login, authorizeOptions) {
      const request = parseAuthorizeUrl(authorizeUrl);
      if (!users.has(login)) throw new Error(`${def.displayName} fake: no user ${login}; call addUser() first`);
      return approve(request, login, authorizeOptions?.grantedScopes);
    },
    deny(authorizeUrl) {
      return refuse(parseAuthorizeUrl(authorizeUrl));
    },
    revokeUser(login) {
      grants.revokeUser(login);
    },
    get mode() {
      return control.mode;
    },
    set mode(value) {
      control.mode = value;
    },
    get latencyMs() {
      return control.latencyMs;
    },
    set latencyMs(value) {
      control.latencyMs = value;
    },
    get script() {
      return control.script;
    },
    set script(value) {
      control.script = value;
    },
    stats,
    requests,
    issuedTokens: () => [...grants.issued()],
    tokensOf(login) {
      return grants
        .live(login)
        .filter((family) => family.kind === 'user')
        .map((family) =>
          family.refreshToken === null
            ? { accessToken: family.accessToken }
            : { accessToken: family.accessToken, refreshToken: family.refreshToken },
        );
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

/** Env that points Tessera's provider at a fake (the same variables a real deployment sets). */
export function providerEnv(fake: FakeProvider): Record<string, string> {
  const prefix = `INTEGRATION_OAUTH_${fake.id.toUpperCase()}`;
  return {
    [`${prefix}_CLIENT_ID`]: fake.clientId,
    [`${prefix}_CLIENT_SECRET`]: fake.clientSecret,
    [`${prefix}_AUTH_URL`]: fake.authUrl,
    [`${prefix}_TOKEN_URL`]: fake.tokenUrl,
    [`${prefix}_API_URL`]: fake.apiUrl,
  };
}
