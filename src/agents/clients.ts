/**
 * MCP clients (docs/contract.md §9a): who may ask for a grant. A client id is either the URL of a
 * client metadata document — fetched through the outbound guard (5 s, 64 KiB), cached as its HTTP
 * caching headers say and at most 24 hours — or an id Tessera issued at `POST /oauth/register`
 * (RFC 7591). Either way a client is public (no secret) and has exact redirect URIs.
 */
import { eq } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { oauthClients } from '../db/schema.ts';
import { newId, ULID } from '../lib/ids.ts';
import type { OutboundGuard } from '../lib/outbound.ts';

/** A client as the authorization endpoint uses it. */
export interface McpClient {
  id: string;
  name: string;
  redirectUris: string[];
}

/** What resolving a client needs. */
export interface ClientDeps {
  db: Db;
  outbound: OutboundGuard;
  /** Production: a metadata document's URL must be https (development also allows http on a loopback host, §1). */
  isProduction: boolean;
  /** Told why a document could not be used (logged; never shown with its body). */
  onDocumentRefused?(url: string, reason: string): void;
}

const DOCUMENT_TIMEOUT_MS = 5_000;
const DOCUMENT_MAX_BYTES = 64 * 1024;
const DOCUMENT_MAX_AGE_S = 24 * 3600;
const NAME_MAX = 100;
const REDIRECTS_MAX = 10;
/** A private-use URI scheme (RFC 8252 §7.1): a reversed domain name, so it holds a dot. */
const PRIVATE_USE_SCHEME = /^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+:$/;

/** `localhost`, `127.0.0.0/8` or `[::1]` (docs/contract.md §1). */
export function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/** How a redirect URI is shown on the consent page: its host, flagged when a loopback or private-use one. */
export function redirectKind(uri: string): 'web' | 'loopback' | 'private-use' {
  const url = new URL(uri);
  if (url.protocol === 'https:') return 'web';
  return url.protocol === 'http:' ? 'loopback' : 'private-use';
}

/** Why `uri` cannot be a redirect URI (docs/contract.md §9a: https, http on a loopback host, or a private-use scheme; never a fragment); null when it can. */
export function redirectUriProblem(uri: unknown): string | null {
  if (typeof uri !== 'string' || uri.length === 0 || uri.length > 2000) return 'must be a URI of at most 2000 characters';
  if (/[\x00-\x20\x7f-\x9f]/.test(uri)) return 'must not hold spaces or control characters';
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'must be an absolute URI';
  }
  if (uri.includes('#')) return 'must not carry a fragment';
  if (url.username || url.password) return 'must not carry userinfo';
  if (url.protocol === 'https:') return null;
  if (url.protocol === 'http:') return isLoopbackHost(url.hostname) ? null : 'http is allowed only on a loopback host (localhost, 127.0.0.1, [::1])';
  return PRIVATE_USE_SCHEME.test(url.protocol) ? null : 'must be https, http on a loopback host, or a private-use scheme such as com.example.app:/callback';
}

/** Whether `presented` is one of `registered`, exactly — the port of a loopback http URI aside (RFC 8252 §7.3). */
export function redirectRegistered(registered: readonly string[], presented: string): boolean {
  if (registered.includes(presented)) return true;
  let url: URL;
  try {
    url = new URL(presented);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' || !isLoopbackHost(url.hostname) || presented.includes('#')) return false;
  const portless = (value: URL) => `${value.protocol}//${value.hostname}${value.pathname}${value.search}`;
  return registered.some((uri) => {
    try {
      const candidate = new URL(uri);
      return candidate.protocol === 'http:' && portless(candidate) === portless(url);
    } catch {
      return false;
    }
  });
}

/** A refused registration (RFC 7591 §3.2.2): 400 `{error, error_description}`. */
export class RegistrationError extends Error {
  readonly error: 'invalid_redirect_uri' | 'invalid_client_metadata';
  constructor(error: 'invalid_redirect_uri' | 'invalid_client_metadata', description: string) {
    super(description);
    this.error = error;
  }
}

/** Client metadata as RFC 7591 answers it. */
export interface RegisteredClient {
  client_id: string;
  client_id_issued_at: number;
  client_name: string;
  redirect_uris: string[];
  grant_types: string[];
  response_types: string[];
  token_endpoint_auth_method: 'none';
}

/** The client name and redirect URIs of client metadata (a registration's body, a metadata document); what they hold beyond those is ignored (RFC 7591 §2). */
function readMetadata(body: Record<string, unknown>): { name: string; redirectUris: string[] } {
  const name = body.client_name;
  if (typeof name !== 'string' || name.trim() === '' || name.length > NAME_MAX || /\p{C}/u.test(name)) {
    throw new RegistrationError('invalid_client_metadata', `client_name is required: 1–${NAME_MAX} printable characters`);
  }
  const uris = body.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > REDIRECTS_MAX) throw new RegistrationError('invalid_redirect_uri', `redirect_uris is required: 1–${REDIRECTS_MAX} URIs`);
  for (const uri of uris) {
    const problem = redirectUriProblem(uri);
    if (problem) throw new RegistrationError('invalid_redirect_uri', `redirect_uris: ${String(uri).slice(0, 200)} ${problem}`);
  }
  return { name: name.trim(), redirectUris: [...new Set(uris as string[])] };
}

/**
 * `POST /oauth/register` (RFC 7591): a public client — `token_endpoint_auth_method` `none` only,
 * grant types within `authorization_code` and `refresh_token` — stored with a new id.
 */
export async function registerClient(db: Db, input: unknown): Promise<RegisteredClient> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new RegistrationError('invalid_client_metadata', 'The body must be a JSON object of client metadata');
  const body = input as Record<string, unknown>;
  const { name, redirectUris } = readMetadata(body);
  const method = body.token_endpoint_auth_method;
  if (method !== undefined && method !== 'none') throw new RegistrationError('invalid_client_metadata', 'token_endpoint_auth_method must be "none": clients are public, with PKCE');
  const grantTypes = body.grant_types === undefined ? ['authorization_code', 'refresh_token'] : body.grant_types;
  if (!Array.isArray(grantTypes) || grantTypes.length === 0 || !grantTypes.every((type) => type === 'authorization_code' || type === 'refresh_token')) {
    throw new RegistrationError('invalid_client_metadata', 'grant_types may hold authorization_code and refresh_token only');
  }
  const [row] = await db.insert(oauthClients).values({ id: newId(), kind: 'registered', name, redirectUris }).returning();
  if (!row) throw new Error('client not stored');
  return {
    client_id: row.id,
    client_id_issued_at: Math.floor(row.createdAt.getTime() / 1000),
    client_name: name,
    redirect_uris: redirectUris,
    grant_types: [...new Set(grantTypes as string[])],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
}

/** Whether `clientId` names a metadata document Tessera may fetch: https (in development also http on a loopback host), with a path, no fragment or userinfo. */
function documentUrl(clientId: string, isProduction: boolean): URL | null {
  let url: URL;
  try {
    url = new URL(clientId);
  } catch {
    return null;
  }
  if (url.href !== clientId || url.hash || url.username || url.password || url.pathname === '/') return null;
  if (url.protocol === 'https:') return url;
  return url.protocol === 'http:' && !isProduction && isLoopbackHost(url.hostname) ? url : null;
}

/** Seconds a fetched document may be used without fetching it again, from its caching headers (RFC 9111), at most 24 hours. */
function freshFor(headers: Headers): number {
  const control = (headers.get('cache-control') ?? '').toLowerCase();
  if (/(^|,)\s*(no-store|no-cache)\b/.test(control)) return 0;
  const maxAge = /(?:^|,)\s*max-age\s*=\s*"?(\d+)/.exec(control);
  if (maxAge?.[1]) return Math.min(Number(maxAge[1]), DOCUMENT_MAX_AGE_S);
  const expires = headers.get('expires');
  if (expires) {
    const at = Date.parse(expires);
    const now = Date.parse(headers.get('date') ?? '') || Date.now();
    return Number.isNaN(at) ? 0 : Math.max(0, Math.min(Math.floor((at - now) / 1000), DOCUMENT_MAX_AGE_S));
  }
  return 0;
}

/** The body of a document, refused past 64 KiB. */
async function boundedText(response: Response): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > DOCUMENT_MAX_BYTES) throw new Error('document too large');
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > DOCUMENT_MAX_BYTES) {
      await reader.cancel();
      throw new Error('document too large');
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Fetches and checks a client metadata document: JSON whose `client_id` is its own URL, with `client_name` and `redirect_uris`. */
async function fetchDocument(deps: ClientDeps, url: URL): Promise<{ name: string; redirectUris: string[]; freshFor: number }> {
  const response = await deps.outbound.fetch(url, { method: 'GET', headers: { accept: 'application/json' }, signal: AbortSignal.timeout(DOCUMENT_TIMEOUT_MS) }, 'client_metadata');
  if (response.status !== 200) {
    await response.body?.cancel().catch(() => {});
    throw new Error(`answered ${response.status}`);
  }
  const text = await boundedText(response);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new Error('not JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new Error('not a JSON object');
  const document = body as Record<string, unknown>;
  if (document.client_id !== url.href) throw new Error('its client_id is not its URL');
  const method = document.token_endpoint_auth_method;
  if (method !== undefined && method !== 'none') throw new Error('it is not a public client');
  try {
    return { ...readMetadata(document), freshFor: freshFor(response.headers) };
  } catch (error) {
    throw new Error(error instanceof RegistrationError ? error.message : 'invalid metadata');
  }
}

/**
 * The client `clientId` names, or null when there is none: an unknown registered id, a URL
 * that is no document Tessera may fetch, or a document that cannot be fetched or is not a
 * valid one (then `onDocumentRefused` hears why). A document is fetched when first seen and
 * again once its cached copy is stale.
 */
export async function resolveClient(deps: ClientDeps, clientId: string): Promise<McpClient | null> {
  if (ULID.test(clientId)) {
    const [row] = await deps.db.select().from(oauthClients).where(eq(oauthClients.id, clientId));
    return row?.kind === 'registered' ? { id: row.id, name: row.name, redirectUris: row.redirectUris } : null;
  }
  const url = documentUrl(clientId, deps.isProduction);
  if (!url) return null;
  const [cached] = await deps.db.select().from(oauthClients).where(eq(oauthClients.id, clientId));
  if (cached?.kind === 'document' && cached.freshUntil && cached.freshUntil > new Date()) return { id: cached.id, name: cached.name, redirectUris: cached.redirectUris };
  let fetched: Awaited<ReturnType<typeof fetchDocument>>;
  try {
    fetched = await fetchDocument(deps, url);
  } catch (error) {
    deps.onDocumentRefused?.(url.origin + url.pathname, error instanceof Error && error.name !== 'OutboundRefused' ? error.message.slice(0, 100) : 'outbound_refused');
    return null;
  }
  const freshUntil = new Date(Date.now() + fetched.freshFor * 1000);
  await deps.db
    .insert(oauthClients)
    .values({ id: clientId, kind: 'document', name: fetched.name, redirectUris: fetched.redirectUris, freshUntil })
    .onConflictDoUpdate({ target: oauthClients.id, set: { name: fetched.name, redirectUris: fetched.redirectUris, freshUntil } });
  return { id: clientId, name: fetched.name, redirectUris: fetched.redirectUris };
}

/**
 * The host a person is shown for a client: its document's (the party that chose its redirect
 * URIs), else — a registered client, whose name anyone may choose — the host of the redirect URI
 * this request sends the code to (a private-use scheme shows as itself), never another one of its URIs.
 */
export function clientHost(clientId: string, redirectUri: string): string {
  try {
    const url = new URL(ULID.test(clientId) ? redirectUri : clientId);
    return url.host || url.protocol;
  } catch {
    return '';
  }
}
