import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { lazyValidator, type SchemaCompiles } from './lazy-compilers.ts';

/**
 * Validators: bodies are never coerced and never silently lose unknown fields;
 * path and query parameters arrive as strings, so those are coerced. Each is compiled at its
 * route's first request (decision 342).
 */
export function installValidation(app: FastifyInstance, compiles: SchemaCompiles): void {
  const common = { removeAdditional: false, useDefaults: true, allErrors: false, strict: false } as const;
  const bodyAjv = new Ajv({ ...common, coerceTypes: false });
  const paramsAjv = new Ajv({ ...common, coerceTypes: 'array' });
  for (const ajv of [bodyAjv, paramsAjv]) addFormats.default(ajv);
  app.setValidatorCompiler(({ schema, httpPart, method, url }) =>
    lazyValidator(compiles, `${method} ${url} (its ${httpPart})`, () => (httpPart === 'body' ? bodyAjv : paramsAjv).compile(schema)),
  );
}
