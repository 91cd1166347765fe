/**
 * Query parameters are plain values (docs/contract.md §5d, decision 231). Fastify's query-string
 * parser turns `a=1&a=2` into an array and keeps `a[]=1` / `a[k]=1` as parameters named with
 * brackets: a route's schema then either refuses the array by accident or never sees the bracketed
 * name at all, and the route reads as if the parameter were absent (`?endUser[]=x` read the
 * organization's own token). Every route that reads a query string refuses both shapes here, before
 * validation, whatever its schema says; a route whose query string belongs to someone else (the proxy's, forwarded to the
 * provider as sent) says so with `config.query: 'forwarded'` and checks its own parameters.
 */
import type { FastifyInstance } from 'fastify';
import { AppError } from '../ground/errors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `forwarded`: the query string is passed on as sent; the route checks the parameters it reads itself. */
    query?: 'forwarded';
  }
}

const BRACKETS = /[[\]]/;

/** 400 for the first parameter given more than once or named with brackets; nothing for plain values. */
export function assertPlainQuery(query: unknown): void {
  if (query === null || typeof query !== 'object') return;
  for (const [name, value] of Object.entries(query)) {
    if (BRACKETS.test(name)) {
      const base = name.slice(0, name.search(BRACKETS)) || name;
      throw new AppError('INVALID_INPUT', { message: `Query parameter ${base} must be one plain value`, details: [{ path: `querystring.${base}`, message: 'must be one plain value (no [] or [key] form)' }] });
    }
    if (Array.isArray(value)) {
      throw new AppError('INVALID_INPUT', { message: `Query parameter ${name} must be one plain value`, details: [{ path: `querystring.${name}`, message: 'must be given once, as one plain value' }] });
    }
  }
}

/**
 * Installs the check on every route that reads a query string (one with a `querystring` schema): a
 * `preValidation` step, after authentication, before the schema's. A route that reads none (`/livez`,
 * `/query`) ignores a query string as it always did; the forwarded one (the proxy) checks its own.
 */
export function installQueryShapes(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    if (!route.schema?.querystring || route.config?.query === 'forwarded') return;
    const check = (request: { query: unknown }, _reply: unknown, done: (error?: Error) => void) => {
      try {
        assertPlainQuery(request.query);
      } catch (error) {
        done(error as Error);
        return;
      }
      done();
    };
    route.preValidation = route.preValidation === undefined ? [check] : [check, ...(Array.isArray(route.preValidation) ? route.preValidation : [route.preValidation])];
  });
}
