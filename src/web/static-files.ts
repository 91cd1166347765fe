import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { TypedFastify } from '../http/typed.ts';

/**
 * The pages' policy: their own scripts and styles only (nothing inline, so an injected
 * `<script>` or `style=` does nothing), calls to this origin only, never framed; forms post
 * to this origin, and a form's answer may redirect only to `formTargets` (origins) besides —
 * browsers hold the redirect after a form post to `form-action` too.
 */
export function contentSecurityPolicy(formTargets: readonly string[] = []): string {
  return (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    `frame-ancestors 'none'; base-uri 'none'; form-action ${["'self'", ...formTargets].join(' ')}`
  );
}

export const CONTENT_SECURITY_POLICY = contentSecurityPolicy();

/** Headers every HTML page of ours carries, whatever its caching. */
export const HTML_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
};

export interface StaticFile {
  url: string;
  /** A file of src/web/static/, or a file elsewhere (a package's own assets). */
  file: string | URL;
  type: string;
}

/** Serves each file, read once here, with `headers`, revalidated by its ETag (a 304 when unchanged). */
export function staticFileRoutes(app: TypedFastify, files: readonly StaticFile[], headers: Readonly<Record<string, string>>): void {
  for (const { url, file, type } of files) {
    const body = readFileSync(file instanceof URL ? file : new URL(`./static/${file}`, import.meta.url));
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    app.get(url, { config: { auth: 'unauthenticated', errors: [] }, schema: { hide: true } }, async (request, reply) => {
      reply.headers(headers).header('etag', etag).type(type);
      if (request.headers['if-none-match'] === etag) {
        reply.code(304);
        return '';
      }
      return body;
    });
  }
}
