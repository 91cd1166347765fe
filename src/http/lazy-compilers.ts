import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyValidationResult } from 'fastify/types/schema.js';

/**
 * Compilers that compile a route's schema when the route first uses it, not when the server starts
 * (decision 342). Fastify compiles every route's validators and response serializers at `ready`:
 * ~1.4 s of a start's ~5.6 s of CPU, for some 200 routes of which a process serves a few — a CLI
 * command's server, a test's app, an instance that just scaled out. The schemas are the same; a
 * route's first request pays its own compile (milliseconds) and every later one the compiled code.
 */

/** A validator (Fastify calls it as `validate(data)` and reads its `errors` after a `false`), compiled at its first call. */
export function lazyValidator(compile: () => FastifyValidationResult): FastifyValidationResult {
  let compiled: FastifyValidationResult | undefined;
  const validate = ((data: unknown) => {
    compiled ??= compile();
    const valid = compiled(data);
    validate.errors = compiled.errors;
    return valid;
  }) as FastifyValidationResult;
  return validate;
}

type SerializerFactory = ReturnType<typeof SerializerSelector>;

/** fast-json-stringify's serializers (Fastify's default compiler), each compiled at its first reply. */
export const lazySerializers: SerializerFactory = (externalSchemas, options) => {
  const compile = SerializerSelector()(externalSchemas, options);
  return (route) => {
    let serialize: ((data: unknown) => string) | undefined;
    return (data: unknown) => {
      serialize ??= compile(route) as (data: unknown) => string;
      return serialize(data);
    };
  };
};
