/**
 * GitHub Apps (docs/contract.md §5c `app_installation`): an organization or a person installs the
 * app; Tessera keeps the installation and mints its short-lived tokens with the app's own JWT.
 * The install page replaces the authorize endpoint; the callback's code only proves, through the
 * user's own view (`GET /user/installations`), that the person may connect the installation the
 * browser named. Everything here is what data cannot say: the app JWT, the proof, the mint and
 * the uninstall.
 */
import { defineProvider } from './engine.ts';
import { parseJson } from './json.ts';
import {
  type AcceptedInstallation,
  type Metadata,
  type MintedToken,
  type ProviderAccount,
  type ProviderContext,
  type ProviderDefinition,
  ProviderError,
  type ProviderResponse,
} from './types.ts';

const API_HEADERS = { accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28' };
/** `GET /user/installations` pages read at most (100 each): a person seeing more installations of one app is not a real case. */
const MAX_PAGES = 10;
/** GitHub's installation ids are integers; anything else in a URL is refused before it reaches a path. */
const INSTALLATION_ID = /^[1-9][0-9]{0,15}$/;

/**
 * The app JWT's claims as GitHub requires them: `iss` the app's client id (GitHub accepts it in
 * place of the app id), `iat` 60 seconds in the past against clock drift, `exp` 10 minutes on —
 * GitHub's maximum (docs/contract.md §5c).
 */
export function appJwtClaims(clientId: string, now = Date.now()): { iat: number; exp: number; iss: string } {
  const seconds = Math.floor(now / 1000);
  return { iat: seconds - 60, exp: seconds + 600, iss: clientId };
}

/** `Bearer <app JWT>`, signed by the registry with the configured private key. */
function appAuthorization(context: ProviderContext): string {
  if (!context.signAppJwt) throw new ProviderError('misconfigured', 'GitHub App private key is not configured', { providerCode: 'no_private_key' });
  return `Bearer ${context.signAppJwt(appJwtClaims(context.clientId))}`;
}

/** The installation id an integration keeps (or a callback carries), as GitHub's integer. */
export function installationIdOf(value: unknown): number | undefined {
  const text = typeof value === 'number' ? String(value) : value;
  return typeof text === 'string' && INSTALLATION_ID.test(text) ? Number(text) : undefined;
}

const base = defineProvider({
  id: 'githubapp',
  displayName: 'GitHub App',
  // Nothing is entered; the definition's `mint` below mints installation tokens (the lifecycle renews with it).
  authMode: { mode: 'app_installation', credentials: [] },
  endpoints: {
    // The install page stands where an authorize endpoint would (`…_INSTALL_URL` overrides it).
    authUrl: 'https://github.com/apps/{slug}/installations/new',
    tokenUrl: 'https://github.com/login/oauth/access_token',
    apiUrl: 'https://api.github.com',
  },
  // Permissions are set on the app, not requested per flow.
  defaultScopes: [],
  // The install page takes no code_challenge: the callback's code comes without one.
  pkce: false,
  tokenHeaders: { accept: 'application/json' },
  token: { errors: 'body', clientErrors: ['incorrect_client_credentials', 'invalid_client', 'unauthorized_client'] },
  // No account call: an installation token has no user to read. The lifecycle validates a minted mode by minting
  // (a mint refused → `invalid`), and the account is the installation's, read once at connect.
  api: {
    scheme: 'token',
    headers: API_HEADERS,
    // A suspended installation's token is refused with 403 "This installation has been suspended": as dead as a 401 —
    // the proxy mints again once, and that mint's refusal makes the integration `invalid`.
    deadToken: [{ status: 401 }, { status: 403, text: 'installation has been suspended' }],
  },
  // The app's webhook (docs/contract.md §5b), signed as GitHub signs every webhook: the delivery id stops a
  // redelivery, and a body seen before under a new id acts only once a mint is refused (`replay`).
  // An installation is kept as the integration's workspace id (acceptInstallation), which is how `installation` names it.
  events: {
    signature: { header: 'x-hub-signature-256', prefix: 'sha256=' },
    deliveryId: { header: 'x-github-delivery' },
    replay: 'live_check',
    rules: [
      {
        type: 'installation',
        when: [{ header: 'x-github-event', equals: 'installation' }, { path: 'action', equals: ['deleted', 'suspend'] }],
        match: { workspace: '{installation.id}' },
      },
      {
        // Back from a suspension: validated again (by minting), `connected` only if GitHub mints.
        type: 'installation_unsuspend',
        when: [{ header: 'x-github-event', equals: 'installation' }, { path: 'action', equals: 'unsuspend' }],
        match: { workspace: '{installation.id}' },
        effect: 'revalidate',
      },
    ],
  },
});

/** A failure of a call made with the app JWT: 401 is the app's own credentials refused, never a revocation. */
function appCallFailure(response: ProviderResponse, what: string): ProviderError | null {
  const { status } = response;
  if (status === 401) return new ProviderError('misconfigured', `GitHub refused the app JWT (${what})`, { status, providerCode: 'app_jwt_rejected' });
  if (status === 404) return new ProviderError('revoked', `GitHub App installation not found (${what})`, { status, providerCode: 'installation_not_found' });
  if (status === 403 && /suspended/i.test(response.body)) {
    return new ProviderError('revoked', `GitHub App installation suspended (${what})`, { status, providerCode: 'installation_suspended' });
  }
  return base.classify(response);
}

/** Mints an installation access token: `POST /app/installations/{id}/access_tokens` with the app JWT → `{token, expires_at}`. */
async function mint(context: ProviderContext, stored: { metadata: Metadata }): Promise<MintedToken & { expiresAt: Date }> {
  const id = installationIdOf(stored.metadata.installationId);
  if (id === undefined) throw new ProviderError('revoked', 'integration keeps no GitHub App installation id', { providerCode: 'no_installation' });
  const response = await context.request(`${context.endpoints.apiUrl}/app/installations/${id}/access_tokens`, {
    method: 'POST',
    headers: { ...API_HEADERS, authorization: appAuthorization(context) },
  });
  const failure = appCallFailure(response, 'mint');
  if (failure) throw failure;
  const body = parseJson(response.body) as { token?: unknown; expires_at?: unknown; permissions?: unknown } | undefined;
  const expiresAt = typeof body?.expires_at === 'string' ? new Date(body.expires_at) : undefined;
  if (response.status !== 201 && response.status !== 200) throw new ProviderError('transient', 'GitHub answered the mint unexpectedly', { status: response.status });
  if (typeof body?.token !== 'string' || !body.token || !expiresAt || Number.isNaN(expiresAt.getTime())) {
    throw new ProviderError('transient', 'GitHub mint answer carries no token or expiry', { status: response.status });
  }
  return { accessToken: body.token, expiresAt, scopes: permissionScopes(body.permissions), tokenType: 'token' };
}

/** An installation token's permissions as scopes: `{contents: "read"}` → `contents:read`. */
function permissionScopes(permissions: unknown): string[] {
  if (!permissions || typeof permissions !== 'object') return [];
  return Object.entries(permissions as Record<string, unknown>)
    .filter((entry): entry is [string, string] => typeof entry[1] === 'string')
    .map(([name, level]) => `${name}:${level}`)
    .sort();
}

interface ListedInstallation {
  id?: unknown;
  account?: { login?: unknown; slug?: unknown; id?: unknown; type?: unknown } | null;
  repository_selection?: unknown;
}

/**
 * The installation `installationId` as the user token's owner sees it (`GET /user/installations`,
 * paged): a user who can see it installed the app or administers its account. Not listed → a
 * ProviderError `revoked` (the callback refuses it, nothing stored).
 */
async function findUserInstallation(context: ProviderContext, userToken: string, installationId: number): Promise<ListedInstallation> {
  let seen = 0;
  for (let page = 1; page <= MAX_PAGES; page++) {
    const response = await context.request(`${context.endpoints.apiUrl}/user/installations?per_page=100&page=${page}`, {
      method: 'GET',
      headers: { ...API_HEADERS, authorization: `Bearer ${userToken}` },
    });
    const failure = base.classify(response);
    if (failure) throw failure;
    const body = parseJson(response.body) as { total_count?: unknown; installations?: unknown } | undefined;
    if (response.status !== 200 || !Array.isArray(body?.installations)) throw new ProviderError('transient', 'GitHub answered the installations list badly', { status: response.status });
    const listed = body.installations as ListedInstallation[];
    const found = listed.find((item) => installationIdOf(item?.id) === installationId);
    if (found) return found;
    seen += listed.length;
    const total = typeof body.total_count === 'number' ? body.total_count : seen;
    if (listed.length === 0 || seen >= total) break;
  }
  throw new ProviderError('revoked', 'GitHub does not list that installation for this user', { providerCode: 'installation_not_listed' });
}

/** The connect callback's proof and first mint (ProviderDefinition.acceptInstallation). */
async function acceptInstallation(context: ProviderContext, userToken: string, installationIdText: string): Promise<AcceptedInstallation> {
  const installationId = installationIdOf(installationIdText);
  if (installationId === undefined) throw new ProviderError('revoked', 'not a GitHub App installation id', { providerCode: 'installation_not_listed' });
  const listed = await findUserInstallation(context, userToken, installationId);
  const login = typeof listed.account?.login === 'string' ? listed.account.login : typeof listed.account?.slug === 'string' ? listed.account.slug : undefined;
  const accountId = typeof listed.account?.id === 'number' || typeof listed.account?.id === 'string' ? listed.account.id : undefined;
  if (login === undefined || accountId === undefined) throw new ProviderError('transient', 'GitHub listed the installation without its account');
  const metadata: Metadata = {
    installationId,
    account: { login, id: accountId, type: typeof listed.account?.type === 'string' ? listed.account.type : 'User' },
    ...(typeof listed.repository_selection === 'string' ? { repositorySelection: listed.repository_selection } : {}),
  };
  const minted = await mint(context, { metadata });
  // The installation id is the workspace the integration belongs to: GitHub's `installation` events name it.
  const account: ProviderAccount = { id: String(accountId), username: login, workspaceId: String(installationId) };
  const expiresIn = Math.max(1, Math.floor((minted.expiresAt.getTime() - Date.now()) / 1000));
  return { tokens: { accessToken: minted.accessToken, expiresIn, scopes: minted.scopes ?? [], tokenType: 'token' }, account, metadata };
}

function safeResolve(context: ProviderContext, template: string): string | undefined {
  try {
    return context.resolve(template);
  } catch {
    return undefined;
  }
}

/** Deleting the integration uninstalls the app (`DELETE /app/installations/{id}`); an installation already gone counts as done. */
async function uninstall(context: ProviderContext): Promise<void> {
  const id = installationIdOf(safeResolve(context, '{installationId}'));
  if (id === undefined) return;
  const response = await context.request(`${context.endpoints.apiUrl}/app/installations/${id}`, {
    method: 'DELETE',
    headers: { ...API_HEADERS, authorization: appAuthorization(context) },
  });
  if (response.status === 204 || response.status === 404) return;
  throw appCallFailure(response, 'uninstall') ?? new ProviderError('forbidden', 'GitHub did not uninstall the app', { status: response.status });
}

/** GitHub Apps: installations, minted installation tokens, uninstall on delete. */
export const githubapp: ProviderDefinition = { ...base, acceptInstallation, mint, revoke: uninstall };
