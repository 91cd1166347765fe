import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { TypedFastify } from '../http/typed.ts';

/**
 * The page's policy: its own scripts and styles only (nothing inline, so an injected
 * `<script>` or `style=` does nothing), calls to this origin only, never framed.
 */
export const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/** Headers of the page and its assets. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'cross-origin-opener-policy': 'same-origin',
  // Revalidated on every load (the ETag makes that a 304): a new version is never hidden by a cache.
  'cache-control': 'no-cache',
};

const STATIC_FILES = [
  { url: '/', file: 'index.html', type: 'text/html; charset=utf-8' },
  { url: '/assets/app.js', file: 'app.js', type: 'text/javascript; charset=utf-8' },
  { url: '/assets/style.css', file: 'style.css', type: 'text/css; charset=utf-8' },
] as const;

const REGISTERED = 'tesseraWebRoutes';

/**
 * Serves the integrations page at `/` and its assets under `/assets/` (files read once,
 * here). Unauthenticated: the page signs in through the JSON API. Calling it twice on
 * one instance registers the routes once.
 */
export function webRoutes(app: TypedFastify): void {
  if (app.hasDecorator(REGISTERED)) return;
  app.decorate(REGISTERED, true);
  for (const { url, file, type } of STATIC_FILES) {
    const body = readFileSync(new URL(`./static/${file}`, import.meta.url));
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    app.get(url, { config: { auth: 'unauthenticated', errors: [] }, schema: { hide: true } }, async (request, reply) => {
      reply.headers(PAGE_HEADERS).header('etag', etag).type(type);
      if (request.headers['if-none-match'] === etag) {
        reply.code(304);
        return '';
      }
      return body;
    });
  }
}
