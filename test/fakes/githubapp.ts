/**
 * A loopback fake of a GitHub App, written from GitHub's documentation ("Authenticating as a
 * GitHub App" — the JWT; "Generating an installation access token for a GitHub App";
 * "Generating a user access token for a GitHub App"; the REST pages "List app installations
 * accessible to the user access token", "Create an installation access token for an app",
 * "Delete an installation for the authenticated app", "Suspend an app installation"), not from
 * Tessera's definitions:
 * - the install page `GET /apps/<slug>/installations/new?state=…` (and `install()`, what a person
 *   clicking "Install" produces): with "Request user authorization (OAuth) during installation"
 *   on, the browser returns to the app's callback URL with `code`, `installation_id`,
 *   `setup_action=install` and the `state` it was given;
 * - `POST /login/oauth/access_token`: the code for a user token (`ghu_`, 8 hours, with `ghr_`),
 *   refusals as HTTP 200 `{error}` like GitHub's OAuth endpoint;
 * - the REST API under `/api`: `GET /user/installations` (user token; paged `{total_count,
 *   installations}`), `POST /app/installations/{id}/access_tokens` (app JWT → 201 `{token,
 *   expires_at, permissions, repository_selection}`; 404 unknown; 403 "This installation has been
 *   suspended"; when GitHub limits the app, 429 with `Retry-After` and `x-ratelimit-remaining: 0`
 *   — "Rate limits for the REST API"), `DELETE /app/installations/{id}` (app JWT → 204), `PUT`/`DELETE
 *   /app/installations/{id}/suspended`, `GET /installation/repositories` (installation token).
 * The app JWT is checked as GitHub does: RS256 under the app's public key, `iss` the client id or
 * the app id, `iat` not in the future, `exp` in the future and at most 10 minutes from now.
 */
import { createPublicKey, createVerify, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomString } from './common.ts';

export interface FakeAppUser {
  login: string;
  id: number;
}

export interface FakeInstallation {
  id: number;
  account: { login: string; id: number; type: 'User' | 'Organization' };
  repositorySelection: 'all' | 'selected';
  /** Logins that `GET /user/installations` shows it to: the installer and the account's admins. */
  visibleTo: Set<string>;
  suspendedAt: string | null;
  deleted: boolean;
}

/** What the fake checked of one app JWT, and its verdict. */
export interface JwtCheck {
  path: string;
  ok: boolean;
  reason?: string;
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
}

export interface FakeGitHubAppOptions {
  clientId?: string;
  clientSecret?: string;
  appId?: number;
  slug?: string;
  /** The app's callback URL (its settings page): where the install returns the browser. */
  callbackUrl: string;
  /** Seconds an installation token lives (GitHub: one hour). */
  installationTokenTtl?: number;
  now?: () => number;
}

const DOCS = 'https://docs.github.com/rest';
const PERMISSIONS = { contents: 'read', metadata: 'read', issues: 'write' };

export async function startFakeGitHubApp(options: FakeGitHubAppOptions) {
  const clientId = options.clientId ?? 'Iv23liFakeGitHubApp001';
  const clientSecret = options.clientSecret ?? 'fake0githubapp0client0secret00000000000001';
  const appId = options.appId ?? 424242;
  const slug = options.slug ?? 'tessera-test';
  const now = options.now ?? Date.now;
  // GitHub generates the key pair; the app's owner downloads the private key (PKCS#1 PEM).
  const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const privateKeyPem = pair.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const publicKey: KeyObject = createPublicKey(pair.privateKey);

  const users = new Map<string, FakeAppUser>();
  const installations = new Map<number, FakeInstallation>();
  const codes = new Map<string, { login: string; expiresAt: number }>();
  const userTokens = new Map<string, { login: string; expiresAt: number }>();
  const installationTokens = new Map<string, { installationId: number; expiresAt: number }>();
  const jwtChecks: JwtCheck[] = [];
  const uninstalled: number[] = [];
  const requests: { method: string; path: string; query: Record<string, string>; authorization?: string }[] = [];
  const stats = { codeExchanges: 0, mints: 0, installationLists: 0 };
  /** Every installation token issued, in order (what a test compares the token reads with). */
  const minted: { installationId: number; token: string }[] = [];
  /**
   * Test controls: the life of the next installation tokens (GitHub's is one hour), a delay before each mint answers,
   * and a mint GitHub cannot answer: `rate-limited` (429, as GitHub documents it) or `unreachable` (the connection dropped).
   */
  const control: { tokenTtlSeconds: number; mintDelayMs: number; mintFailure: null | 'rate-limited' | 'unreachable' } = {
    tokenTtlSeconds: options.installationTokenTtl ?? 3600,
    mintDelayMs: 0,
    mintFailure: null,
  };
  let sequence = 0;
  let baseUrl = '';

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    const text = body === undefined ? '' : JSON.stringify(body);
    res.writeHead(status, { ...(text ? { 'content-type': 'application/json; charset=utf-8' } : {}), ...headers });
    res.end(text);
  };

  /** GitHub's checks of an app JWT; the reason is GitHub's message where its documentation gives one. */
  function checkJwt(req: IncomingMessage, path: string): boolean {
    const token = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '';
    const [h = '', p = '', s = ''] = token.split('.');
    const record = (ok: boolean, reason?: string, header?: Record<string, unknown>, claims?: Record<string, unknown>) => {
      jwtChecks.push({ path, ok, ...(reason ? { reason } : {}), ...(header ? { header } : {}), ...(claims ? { claims } : {}) });
      return ok;
    };
    let header: Record<string, unknown>;
    let claims: Record<string, unknown>;
    try {
      header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8'));
      claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8'));
    } catch {
      return record(false, 'A JSON web token could not be decoded');
    }
    if (header.alg !== 'RS256') return record(false, 'A JSON web token could not be decoded', header, claims);
    const signed = createVerify('RSA-SHA256').update(`${h}.${p}`).verify(publicKey, Buffer.from(s, 'base64url'));
    if (!signed) return record(false, 'A JSON web token could not be decoded', header, claims);
    const seconds = Math.floor(now() / 1000);
    if (claims.iss !== clientId && claims.iss !== String(appId) && claims.iss !== appId) return record(false, 'Integration not found', header, claims);
    if (!Number.isInteger(claims.iat) || (claims.iat as number) > seconds + 60) {
      return record(false, "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued", header, claims);
    }
    if (!Number.isInteger(claims.exp) || (claims.exp as number) <= seconds) return record(false, "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires", header, claims);
    if ((claims.exp as number) - seconds > 600) return record(false, "'Expiration time' claim ('exp') is too far in the future", header, claims);
    return record(true, undefined, header, claims);
  }

  function refuseJwt(res: ServerResponse) {
    json(res, 401, { message: jwtChecks.at(-1)?.reason ?? 'Bad credentials', documentation_url: DOCS });
  }

  function installationJson(item: FakeInstallation) {
    return {
      id: item.id,
      account: { login: item.account.login, id: item.account.id, type: item.account.type },
      repository_selection: item.repositorySelection,
      app_id: appId,
      app_slug: slug,
      client_id: clientId,
      target_id: item.account.id,
      target_type: item.account.type,
      permissions: PERMISSIONS,
      events: ['installation_repositories'],
      suspended_at: item.suspendedAt,
    };
  }

  function userOf(req: IncomingMessage): string | undefined {
    const token = /^(?:Bearer|token)\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '';
    const found = userTokens.get(token);
    return found && found.expiresAt > now() ? found.login : undefined;
  }

  function handleApi(req: IncomingMessage, res: ServerResponse, method: string, path: string, query: URLSearchParams) {
    if (method === 'GET' && path === '/user/installations') {
      const login = userOf(req);
      if (!login) return json(res, 401, { message: 'Bad credentials', documentation_url: DOCS });
      stats.installationLists++;
      const perPage = Math.min(100, Math.max(1, Number(query.get('per_page') ?? 30) || 30));
      const page = Math.max(1, Number(query.get('page') ?? 1) || 1);
      const visible = [...installations.values()].filter((item) => !item.deleted && item.visibleTo.has(login));
      const slice = visible.slice((page - 1) * perPage, page * perPage);
      const last = Math.max(1, Math.ceil(visible.length / perPage));
      const link: Record<string, string> = page < last ? { link: `<${baseUrl}/api/user/installations?per_page=${perPage}&page=${page + 1}>; rel="next"` } : {};
      return json(res, 200, { total_count: visible.length, installations: slice.map(installationJson) }, link);
    }
    const app = /^\/app\/installations\/(\d+)(\/access_tokens|\/suspended)?$/.exec(path);
    if (app) {
      if (!checkJwt(req, path)) return refuseJwt(res);
      const item = installations.get(Number(app[1]));
      if (!item || item.deleted) return json(res, 404, { message: 'Not Found', documentation_url: DOCS });
      if (app[2] === '/access_tokens' && method === 'POST') {
        stats.mints++;
        if (control.mintFailure === 'unreachable') return void res.socket?.destroy();
        if (control.mintFailure === 'rate-limited') {
          const reset = String(Math.floor(now() / 1000) + 60);
          const headers = { 'retry-after': '60', 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset };
          return json(res, 429, { message: 'API rate limit exceeded for installation.', documentation_url: `${DOCS}/using-the-rest-api/rate-limits-for-the-rest-api` }, headers);
        }
        if (item.suspendedAt) return json(res, 403, { message: 'This installation has been suspended', documentation_url: `${DOCS}/apps/apps#create-an-installation-access-token-for-an-app` });
        const token = `ghs_${randomString(36)}`;
        const expiresAt = now() + control.tokenTtlSeconds * 1000;
        installationTokens.set(token, { installationId: item.id, expiresAt });
        minted.push({ installationId: item.id, token });
        const answer = () => json(res, 201, { token, expires_at: new Date(expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z'), permissions: PERMISSIONS, repository_selection: item.repositorySelection });
        if (control.mintDelayMs > 0) setTimeout(answer, control.mintDelayMs);
        else answer();
        return;
      }
      if (app[2] === '/suspended' && (method === 'PUT' || method === 'DELETE')) {
        item.suspendedAt = method === 'PUT' ? new Date(now()).toISOString() : null;
        return json(res, 204, undefined);
      }
      if (app[2] === undefined && method === 'DELETE') {
        item.deleted = true;
        uninstalled.push(item.id);
        for (const [token, held] of installationTokens) if (held.installationId === item.id) installationTokens.delete(token);
        return json(res, 204, undefined);
      }
      return json(res, 404, { message: 'Not Found', documentation_url: DOCS });
    }
    // Calls made with an installation token.
    const token = /^(?:Bearer|token)\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '';
    const held = installationTokens.get(token);
    const item = held ? installations.get(held.installationId) : undefined;
    if (!held || !item || held.expiresAt <= now() || item.deleted) return json(res, 401, { message: 'Bad credentials', documentation_url: DOCS });
    if (item.suspendedAt) return json(res, 403, { message: 'This installation has been suspended', documentation_url: DOCS });
    if (method === 'GET' && path === '/installation/repositories') {
      const repository = { id: item.account.id * 10, name: 'hello-world', full_name: `${item.account.login}/hello-world`, private: false };
      return json(res, 200, { total_count: 1, repository_selection: item.repositorySelection, repositories: [repository] });
    }
    if (path.startsWith('/echo')) return json(res, 200, { method, path, headers: req.headers });
    return json(res, 404, { message: 'Not Found', documentation_url: DOCS });
  }

  function handleToken(res: ServerResponse, params: URLSearchParams) {
    stats.codeExchanges++;
    if (params.get('client_id') !== clientId || params.get('client_secret') !== clientSecret) {
      return json(res, 200, { error: 'incorrect_client_credentials', error_description: 'The client_id and/or client_secret passed are incorrect.' });
    }
    const redirect = params.get('redirect_uri');
    if (redirect !== null && redirect !== options.callbackUrl) {
      return json(res, 200, { error: 'redirect_uri_mismatch', error_description: 'The redirect_uri MUST match the registered callback URL for this application.' });
    }
    const code = codes.get(params.get('code') ?? '');
    codes.delete(params.get('code') ?? '');
    if (!code || code.expiresAt <= now()) return json(res, 200, { error: 'bad_verification_code', error_description: 'The code passed is incorrect or expired.' });
    const accessToken = `ghu_${randomString(36)}`;
    userTokens.set(accessToken, { login: code.login, expiresAt: now() + 28_800_000 });
    return json(res, 200, { access_token: accessToken, expires_in: 28800, refresh_token: `ghr_${randomString(76)}`, refresh_token_expires_in: 15_897_600, scope: '', token_type: 'bearer' });
  }

  /** A person clicking "Install" (and authorizing): the installation, and the browser's way back. */
  function install(installUrl: string, login: string, choice: { account?: string; type?: 'User' | 'Organization'; admins?: string[]; repositorySelection?: 'all' | 'selected' } = {}) {
    const url = new URL(installUrl);
    if (url.origin !== baseUrl || url.pathname !== `/apps/${slug}/installations/new`) throw new Error(`GitHub App fake: not this app's install URL: ${url.origin}${url.pathname}`);
    const user = users.get(login);
    if (!user) throw new Error(`GitHub App fake: no user ${login}`);
    const accountLogin = choice.account ?? login;
    const existing = [...installations.values()].find((item) => !item.deleted && item.account.login === accountLogin);
    const item: FakeInstallation = existing ?? {
      id: 50_000_000 + ++sequence,
      account: { login: accountLogin, id: accountLogin === login ? user.id : 9_000_000 + sequence, type: choice.type ?? (accountLogin === login ? 'User' : 'Organization') },
      repositorySelection: choice.repositorySelection ?? 'selected',
      visibleTo: new Set([login, ...(choice.admins ?? [])]),
      suspendedAt: null,
      deleted: false,
    };
    installations.set(item.id, item);
    const code = randomString(20, '0123456789abcdef');
    codes.set(code, { login, expiresAt: now() + 600_000 });
    const back = new URL(options.callbackUrl);
    back.searchParams.set('code', code);
    back.searchParams.set('installation_id', String(item.id));
    back.searchParams.set('setup_action', existing ? 'update' : 'install');
    const state = url.searchParams.get('state');
    if (state !== null) back.searchParams.set('state', state);
    return { installation: item, code, state, location: back.href };
  }

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://fake.invalid');
      const method = req.method ?? 'GET';
      requests.push({ method, path: url.pathname, query: Object.fromEntries(url.searchParams), ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) });
      const body = Buffer.concat(chunks).toString('utf8');
      if (url.pathname === `/apps/${slug}/installations/new` && method === 'GET') {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        return res.end(`<!doctype html><title>Install ${slug}</title><h1>Install ${slug}</h1>`);
      }
      if (url.pathname === '/login/oauth/access_token' && method === 'POST') {
        const type = req.headers['content-type'] ?? '';
        const params = /json/.test(type) ? new URLSearchParams(JSON.parse(body || '{}') as Record<string, string>) : new URLSearchParams(body);
        return handleToken(res, params);
      }
      if (url.pathname.startsWith('/api/')) return handleApi(req, res, method, url.pathname.slice(4), url.searchParams);
      json(res, 404, { message: 'Not Found', documentation_url: DOCS });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('GitHub App fake: no address');
  baseUrl = `http://127.0.0.1:${address.port}`;

  return {
    id: 'githubapp',
    url: baseUrl,
    clientId,
    clientSecret,
    appId,
    slug,
    privateKeyPem,
    installUrl: `${baseUrl}/apps/${slug}/installations/new`,
    tokenUrl: `${baseUrl}/login/oauth/access_token`,
    apiUrl: `${baseUrl}/api`,
    jwtChecks,
    uninstalled,
    requests,
    stats,
    installations,
    addUser(login: string): FakeAppUser {
      const user = { login, id: 7_000_000 + ++sequence };
      users.set(login, user);
      return user;
    },
    install,
    /** An owner suspending the installation (GitHub's settings page, or `PUT …/suspended`). */
    suspend(id: number) {
      const item = installations.get(id);
      if (item) item.suspendedAt = new Date(now()).toISOString();
    },
    /** An owner lifting the suspension. */
    unsuspend(id: number) {
      const item = installations.get(id);
      if (item) item.suspendedAt = null;
    },
    /** The installation tokens issued for installation `id`, in order. */
    mintedFor: (id: number) => minted.filter((entry) => entry.installationId === id).map((entry) => entry.token),
    minted,
    control,
    /** An owner uninstalling from GitHub's side. */
    remove(id: number) {
      const item = installations.get(id);
      if (item) item.deleted = true;
    },
    /** The environment a deployment sets for this app. */
    env(): Record<string, string> {
      return {
        INTEGRATION_OAUTH_GITHUBAPP_APP_ID: String(appId),
        INTEGRATION_OAUTH_GITHUBAPP_CLIENT_ID: clientId,
        INTEGRATION_OAUTH_GITHUBAPP_CLIENT_SECRET: clientSecret,
        INTEGRATION_OAUTH_GITHUBAPP_PRIVATE_KEY: privateKeyPem,
        INTEGRATION_OAUTH_GITHUBAPP_SLUG: slug,
        INTEGRATION_OAUTH_GITHUBAPP_INSTALL_URL: `${baseUrl}/apps/${slug}/installations/new`,
        INTEGRATION_OAUTH_GITHUBAPP_TOKEN_URL: `${baseUrl}/login/oauth/access_token`,
        INTEGRATION_OAUTH_GITHUBAPP_API_URL: `${baseUrl}/api`,
      };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export type FakeGitHubApp = Awaited<ReturnType<typeof startFakeGitHubApp>>;
