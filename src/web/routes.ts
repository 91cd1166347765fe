import type { TypedFastify } from '../http/typed.ts';
import { docsPageRoutes } from './docs-page.ts';
import { HTML_HEADERS } from '../http/html.ts';
import { staticFileRoutes } from './static-files.ts';


/** Headers of the page and its assets. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  ...HTML_HEADERS,
  'cross-origin-opener-policy': 'same-origin',
  // Revalidated on every load (the ETag makes that a 304): a new version is never hidden by a cache.
  'cache-control': 'no-cache',
};

/** The console's section modules (src/web/static/sections/<name>.js). */
export const CONSOLE_SECTIONS = ['integrations', 'apps', 'members', 'api-tokens', 'service-tokens', 'sessions', 'grants', 'audit', 'organizations', 'deliveries'] as const;

const STATIC_FILES = [
  { url: '/', file: 'index.html', type: 'text/html; charset=utf-8' },
  // An invitation's link (docs/contract.md §3): the same page for every id, which the page reads from its address.
  { url: '/invitations/:id', file: 'invitation.html', type: 'text/html; charset=utf-8' },
  { url: '/assets/app.js', file: 'app.js', type: 'text/javascript; charset=utf-8' },
  { url: '/assets/api.js', file: 'api.js', type: 'text/javascript; charset=utf-8' },
  { url: '/assets/ui.js', file: 'ui.js', type: 'text/javascript; charset=utf-8' },
  { url: '/assets/account.js', file: 'account.js', type: 'text/javascript; charset=utf-8' },
  { url: '/assets/outcome.js', file: 'outcome.js', type: 'text/javascript; charset=utf-8' },
  // The words per error code of every page (the console, the invitation page; the hosted form reads it on the server).
  { url: '/assets/error-words.js', file: 'error-words.js', type: 'text/javascript; charset=utf-8' },
  // The console's sections: one module each (app.js imports them).
  ...CONSOLE_SECTIONS.map((name) => ({ url: `/assets/sections/${name}.js`, file: `sections/${name}.js`, type: 'text/javascript; charset=utf-8' })),
  { url: '/assets/invitation.js', file: 'invitation.js', type: 'text/javascript; charset=utf-8' },
  { url: '/assets/style.css', file: 'style.css', type: 'text/css; charset=utf-8' },
];

const REGISTERED = 'tesseraWebRoutes';

/**
 * Serves the console at `/`, the invitation page at `/invitations/<id>`, their assets under
 * `/assets/` (files read once, here), and the API reference at `/docs`. Unauthenticated: the
 * pages sign in through the JSON API. Calling it twice on one instance registers the routes once.
 */
export function webRoutes(app: TypedFastify): void {
  if (app.hasDecorator(REGISTERED)) return;
  app.decorate(REGISTERED, true);
  staticFileRoutes(app, STATIC_FILES, PAGE_HEADERS);
  docsPageRoutes(app);
}
