import type { FastifyRequest } from 'fastify';
import { AppError } from '../http/errors.ts';
import { PRODUCT_ID } from '../lib/ids.ts';
import type { Services } from '../services.ts';
import { providerCallSpan } from '../telemetry/tracing.ts';
import { readCapped } from './providers/registry.ts';
import { ProviderError } from './providers/types.ts';
import type { LoadedIntegration } from './tokens/loaded.ts';

/** Largest proxied answer, after decompression. */
export const PROXY_MAX_BYTES = 10 * 1024 * 1024;
/** Headers passed to the provider. Never our Authorization, cookies, CSRF, impersonation, organization or forwarding headers. */
const REQUEST_HEADERS = ['accept', 'accept-language', 'content-type', 'if-match', 'if-none-match', 'if-modified-since', 'x-github-api-version'];
/** Headers passed back. Never the provider's Set-Cookie or Location. */
export const RESPONSE_HEADERS = [
  'content-type',
  'content-language',
  'etag',
  'last-modified',
  'link',
  'retry-after',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'x-ratelimit-used',
  'x-ratelimit-resource',
  'x-oauth-scopes',
  'x-accepted-oauth-scopes',
  'x-github-request-id',
];

/**
 * Turns the raw path after `/proxy/` into validated segments: each is percent-decoded
 * once and must not be empty, `.`/`..`, or hold a slash, backslash or control
 * character (encoded or not), so `//host`, `\\host` and `..` cannot leave the API base.
 */
export function proxyPath(raw: string): string {
  return proxySegments(raw).map(encodeURIComponent).join('/');
}

/** The decoded segments of a proxy path, each checked as `proxyPath` says. */
export function proxySegments(raw: string): string[] {
  if (raw === '') return [];
  return raw.split('/').map((segment) => {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      throw invalidPath();
    }
    if (decoded === '' || decoded === '.' || decoded === '..' || /[/\\\x00-\x1f\x7f]/.test(decoded)) throw invalidPath();
    return decoded;
  });
}

/** 400 for a proxy path that could leave the API base. */
export function invalidPath(): AppError {
  return new AppError('INVALID_INPUT', { details: [{ path: 'path', message: 'must be plain path segments (no empty, ".", ".." or encoded slashes)' }] });
}

/**
 * Takes `endUser` out of a proxied call's raw query string (`?…` or ''): it selects our
 * integration (CONTRACT.md §5d) and is never forwarded, under any spelling of its name. The
 * other parameters pass byte for byte. Given twice, or not an end user's id → 400.
 */
export function takeEndUser(query: string): { endUserId: string | null; forwarded: string } {
  if (query === '' || query === '?') return { endUserId: null, forwarded: query };
  const kept: string[] = [];
  const found: string[] = [];
  for (const part of query.slice(1).split('&')) {
    const at = part.indexOf('=');
    const name = decodeQueryPart(at === -1 ? part : part.slice(0, at));
    if (name === 'endUser') found.push(decodeQueryPart(at === -1 ? '' : part.slice(at + 1)) ?? '');
    else kept.push(part);
  }
  if (found.length === 0) return { endUserId: null, forwarded: query };
  const [endUserId] = found;
  if (found.length > 1 || endUserId === undefined || !PRODUCT_ID.test(endUserId)) {
    throw new AppError('INVALID_INPUT', { details: [{ path: 'querystring.endUser', message: "must be one end user's id (1–128 printable characters)" }] });
  }
  return { endUserId, forwarded: kept.length > 0 ? `?${kept.join('&')}` : '' };
}

/** A query-string name or value as a form decoder reads it; null when it is not valid percent-encoding. */
function decodeQueryPart(raw: string): string | null {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return null;
  }
}

export interface ProxyAnswer {
  status: number;
  headers: Headers;
  body: Buffer;
}

/** An answer as a definition classifies it (a large body is not read for signals). */
export function toResponse(answer: ProxyAnswer) {
  return { status: answer.status, headers: answer.headers, body: answer.body.length > 65536 ? '' : answer.body.toString('utf8') };
}

/** One call to the provider: allowlisted headers, the stored token, a timeout, no redirects, a size cap. */
export async function callProvider(services: Services, current: LoadedIntegration, target: URL, request: FastifyRequest, body: string | undefined): Promise<ProxyAnswer> {
  const { definition } = current.provider;
  // The provider's own required headers (Notion-Version), unless the client sent its own value.
  const headers: Record<string, string> = { 'user-agent': 'Tessera', ...definition.apiHeaders, authorization: definition.authorization(current.secrets.access_token ?? '') };
  for (const name of REQUEST_HEADERS) {
    const value = request.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  let response: Response;
  const started = performance.now();
  const observe = (outcome: string) => services.metrics?.providerCall(current.provider.id, outcome, (performance.now() - started) / 1000);
  try {
    response = await providerCallSpan(current.provider.id, target, request.method, () =>
      fetch(target, {
        method: request.method,
        headers,
        ...(body !== undefined ? { body } : {}),
        redirect: 'manual',
        signal: AbortSignal.timeout(services.config.oauth.providerTimeout * 1000),
      }),
    );
    observe(String(response.status));
  } catch (error) {
    observe('transient');
    services.logger.warn({ provider: current.provider.id, integrationId: current.row.id, kind: 'transient' }, 'proxied call failed');
    throw new AppError('PROVIDER_ERROR', { cause: new ProviderError('transient', 'provider unreachable', { cause: error }) });
  }
  let answer: Buffer | null;
  try {
    answer = await readCapped(response, PROXY_MAX_BYTES);
  } catch (error) {
    throw new AppError('PROVIDER_ERROR', { cause: error });
  }
  if (!answer) throw new AppError('PROVIDER_ERROR', { message: 'The provider answer is larger than 10 MiB' });
  return { status: response.status, headers: response.headers, body: answer };
}
