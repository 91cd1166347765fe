/**
 * `Tessera-Next-Page` (docs/contract.md §5f): the next page of a proxied list answer, read as the
 * provider's definition says its pages work (`PaginationSpec`: a `Link` header, a cursor in the body,
 * a next URL in the body), given as the part after `/v1/integrations/<p>/proxy/`. A next link
 * outside the API base — another origin, or a path not under the base at a segment boundary — is
 * never shown (decision 323).
 */
import { parseJson, valueAt } from './providers/json.ts';
import type { PaginationSpec } from './providers/spec.ts';
import type { ProviderAnswer } from './providers/transport.ts';

/** The largest body read for a cursor or next URL (1 MiB): list pages are far smaller. */
const MAX_PAGE_BODY = 1024 * 1024;

/**
 * The next page's `<path?query>` relative to the API base `base`, or null. `target` is the URL the
 * call was sent to, without the credentials a definition carries in the query: `hidden` names those
 * parameters, never shown even when the provider's next link repeats them.
 */
export function nextPage(pagination: PaginationSpec | null, answer: Pick<ProviderAnswer, 'status' | 'headers' | 'body'>, target: URL, base: string, hidden: readonly string[] = []): string | null {
  if (!pagination || answer.status < 200 || answer.status >= 300) return null;
  let next: URL | null = null;
  if (pagination.type === 'link') {
    const link = nextLink(answer.headers.get('link'));
    next = link === null ? null : parseUrl(link, target);
  } else {
    // Parsed only for this: an answer that says it is not JSON, or is larger than any page of a list, has no cursor worth a parse.
    const type = answer.headers.get('content-type');
    if ((type && !/json/i.test(type)) || answer.body.length > MAX_PAGE_BODY) return null;
    const body = parseJson(answer.body.toString('utf8'));
    if (pagination.type === 'next_url') {
      const url = read(body, pagination.from);
      next = typeof url === 'string' && url !== '' ? parseUrl(url, target) : null;
    } else {
      const cursor = read(body, pagination.from);
      const more = pagination.while === undefined || read(body, pagination.while) === true;
      if (more && ((typeof cursor === 'string' && cursor !== '') || (typeof cursor === 'number' && Number.isFinite(cursor)))) {
        next = new URL(target);
        next.searchParams.set(pagination.param, String(cursor));
      }
    }
  }
  return next === null ? null : underBase(next, base, hidden);
}

/** A dot path of the body; a key that itself holds dots (`@odata.nextLink`) is read whole first. */
function read(body: unknown, path: string): unknown {
  if (body !== null && typeof body === 'object' && !Array.isArray(body) && Object.hasOwn(body, path)) return (body as Record<string, unknown>)[path];
  return valueAt(body, path);
}

function parseUrl(value: string, against: URL): URL | null {
  try {
    return new URL(value, against);
  } catch {
    return null;
  }
}

/** The target of RFC 8288's `rel="next"` in a `Link` header (rel values are space-separated, case-insensitive; quoted parameters may hold commas). */
export function nextLink(header: string | null): string | null {
  if (!header) return null;
  let at = 0;
  while (at < header.length) {
    const open = header.indexOf('<', at);
    if (open === -1) return null;
    const close = header.indexOf('>', open);
    if (close === -1) return null;
    const target = header.slice(open + 1, close);
    // The link's parameters run to the next comma outside a quoted string.
    let end = close + 1;
    let quoted = false;
    for (; end < header.length; end++) {
      const char = header[end];
      if (char === '\\' && quoted) end++;
      else if (char === '"') quoted = !quoted;
      else if (char === ',' && !quoted) break;
    }
    const rel = /;\s*rel\s*=\s*(?:"([^"]*)"|([^;\s]+))/i.exec(header.slice(close + 1, end));
    if ((rel?.[1] ?? rel?.[2] ?? '').toLowerCase().split(/\s+/).includes('next')) return target;
    at = end + 1;
  }
  return null;
}

/** `next` as a path and query under `base`, or null when it leaves it (another origin, or a path not under the base at a segment boundary). */
function underBase(next: URL, base: string, hidden: readonly string[]): string | null {
  const baseUrl = new URL(base);
  const prefix = `${baseUrl.pathname.replace(/\/+$/, '')}/`;
  if (next.origin !== baseUrl.origin || next.username !== '' || next.password !== '' || !next.pathname.startsWith(prefix)) return null;
  // Only when present: deleting re-serializes the query, which would re-encode the provider's own parameters.
  for (const name of hidden) if (next.searchParams.has(name)) next.searchParams.delete(name);
  const path = next.pathname.slice(prefix.length);
  return `${path}${next.search}`;
}
