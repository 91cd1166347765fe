import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import type { TypedFastify } from '../http/typed.ts';
import { HTML_HEADERS } from '../http/html.ts';
import { staticFileRoutes } from './static-files.ts';

/** Swagger UI's standalone files, from its npm package (no CDN: the page loads nothing from elsewhere). */
function swaggerUiFile(name: string): URL {
  return pathToFileURL(createRequire(import.meta.url).resolve(`swagger-ui-dist/${name}`));
}

/**
 * The reference page's policy: the page's own scripts, styles and API calls only, nothing
 * inline, never framed. Swagger UI needs no 'unsafe-eval' and no inline script; it styles
 * through the CSSOM (which style-src does not govern) and its stylesheet's icons are
 * `data:` images. Decision 145.
 */
export const DOCS_CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

const DOCS_HEADERS: Readonly<Record<string, string>> = {
  ...HTML_HEADERS,
  'content-security-policy': DOCS_CONTENT_SECURITY_POLICY,
  // Revalidated on every load (the ETag makes that a 304), so an upgrade shows at once.
  'cache-control': 'no-cache',
};

/** `GET /docs` (docs/contract.md §8): the OpenAPI document rendered for people, unauthenticated like `/api-docs`. */
export function docsPageRoutes(app: TypedFastify): void {
  staticFileRoutes(
    app,
    [
      { url: '/docs', file: 'docs.html', type: 'text/html; charset=utf-8' },
      { url: '/docs/docs.js', file: 'docs.js', type: 'text/javascript; charset=utf-8' },
      { url: '/docs/docs.css', file: 'docs.css', type: 'text/css; charset=utf-8' },
      { url: '/docs/swagger-ui-bundle.js', file: swaggerUiFile('swagger-ui-bundle.js'), type: 'text/javascript; charset=utf-8' },
      { url: '/docs/swagger-ui.css', file: swaggerUiFile('swagger-ui.css'), type: 'text/css; charset=utf-8' },
    ],
    DOCS_HEADERS,
  );
  // The page's links are relative to `/docs`: `/docs/` is sent there (relatively, so a path prefix is kept).
  app.get('/docs/', { config: { auth: 'unauthenticated', errors: [] }, schema: { hide: true } }, async (_request, reply) => reply.code(301).header('location', '../docs').send());
}
