import type {} from '@fastify/cookie';
import type { FastifyRequest } from 'fastify';
import type {} from '../http/form-guard.ts';
import type { Config } from '../config/load.ts';
import { AppError } from '../ground/errors.ts';
import type { SessionTokens } from './credentials.ts';

/** The cookie holding the CSRF token bound to the session (readable by the page, which echoes it). */
export const CSRF_COOKIE = 'csrf_token';

/** Methods CSRF never checks: they must not change anything. */
export const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The CSRF part of step 9 (docs/contract.md §4). Unsafe requests authenticated by the
 * `session` cookie must be JSON, come from an allowed `Origin` when one is sent, and echo
 * the session's CSRF token in `X-Csrf-Token`; public unsafe requests (login, register, the
 * POST callback) only get the `Origin` check (login CSRF). Header credentials are exempt; so are
 * the pages' form routes, which the form guard checks instead.
 */
export function csrfCheck(config: Config, sessionTokens: SessionTokens): (request: FastifyRequest) => void {
  const allowedOrigins = new Set([config.server.publicOrigin, ...config.oauth.redirectOrigins, ...config.server.corsOrigins]);
  return function csrf(request) {
    if (!config.csrf.enabled || SAFE_METHODS.has(request.method)) return;
    // A page's form route has its own, stricter check (src/http/form-guard.ts), which answers with the page.
    if (request.routeOptions.config.formGuard) return;
    const principal = request.ctx.principal;
    // Header credentials are exempt: a browser never attaches them by itself.
    if (principal && !principal.viaCookie) return;
    const origin = request.headers.origin;
    if (origin !== undefined && !allowedOrigins.has(origin)) throw new AppError('CSRF_INVALID', { message: 'Origin not allowed' });
    if (!principal) return;
    const contentType = request.headers['content-type'] ?? '';
    if (!/^application\/json\s*(;|$)/i.test(contentType)) throw new AppError('CSRF_INVALID', { message: 'Cookie-authenticated requests must be application/json' });
    const header = request.headers['x-csrf-token'];
    const cookie = request.cookies[CSRF_COOKIE];
    const sessionId = principal.kind === 'jwt' ? principal.credentialId : '';
    if (typeof header !== 'string' || !header || header !== cookie || !sessionTokens.csrfMatches(`session:${sessionId}`, header)) {
      throw new AppError('CSRF_INVALID');
    }
  };
}
