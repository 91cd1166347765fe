import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { TypedFastify } from '../http/typed.ts';

// The headers live with the HTML helpers every room's pages share.

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
