import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyValidationResult } from 'fastify/types/schema.js';

/**
 * Compilers that compile a route's schema when the route first uses it, not when the server starts
 * (decision 342). Fastify compiles every route's validators and response serializers at `ready`:
 * ~1.4 s of a start's ~5.6 s of CPU, for some 200 routes of which a process serves a few — a CLI
 * command's server, a test's app, an instance that just scaled out. The schemas are the same; a
 * route's first request pays its own compile (milliseconds) and every later one the compiled code.
 * Each app's compiles are kept in a `SchemaCompiles`, which `compileAll` runs at once: a test does,
 * so a schema the compilers refuse fails the suite, not a route's first request.
 */
export class SchemaCompiles {
  private readonly pending = new Set<() => unknown>();

  /** `compile` run once, at the first `get()` or at `compileAll()`; its result, or its error, kept. */
  once<T>(what: string, compile: () => T): () => T {
    let outcome: { value: T } | { error: unknown } | undefined;
    const get = (): T => {
      if (!outcome) {
        this.pending.delete(get);
        try {
          outcome = { value: compile() };
        } catch (error) {
          outcome = { error: new Error(`compiling the schema of ${what}: ${(error as Error).message}`, { cause: error }) };
        }
      }
      if ('error' in outcome) throw outcome.error;
      return outcome.value;
    };
    this.pending.add(get);
    return get;
  }

  /** Compiles everything not compiled yet; throws the first schema that does not compile. Returns how many it compiled. */
  compileAll(): number {
    const all = [...this.pending];
    for (const get of all) get();
    return all.length;
  }
}

/**
 * A validator compiled at its first call. Fastify calls it as `validate(data, parent)` (the parent
 * lets Ajv replace a root value, `schemaEnv` says it may) and reads its `errors` after a `false`.
 */
export function lazyValidator(compiles: SchemaCompiles, what: string, compile: () => FastifyValidationResult): FastifyValidationResult {
  const compiled = compiles.once(what, compile);
  const validate = ((data: unknown, parent?: unknown) => {
    const run = compiled() as (data: unknown, parent?: unknown) => ReturnType<FastifyValidationResult>;
    const valid = run(data, parent);
    validate.errors = compiled().errors;
    return valid;
  }) as FastifyValidationResult & { schemaEnv: boolean };
  validate.schemaEnv = true;
  return validate;
}

type SerializerFactory = ReturnType<typeof SerializerSelector>;

/** fast-json-stringify's serializers (Fastify's default compiler), each compiled at its first reply. */
export function lazySerializers(compiles: SchemaCompiles): SerializerFactory {
  return (externalSchemas, options) => {
    const compile = SerializerSelector()(externalSchemas, options);
    return (route) => {
      const serialize = compiles.once(`${route.method} ${route.url} (its ${route.httpStatus} answer)`, () => compile(route) as (data: unknown) => string);
      return (data: unknown) => serialize()(data);
    };
  };
}

const compilesOf = new WeakMap<object, SchemaCompiles>();

/** The compiles of the Fastify instance `app` (createFastify records them). */
export function recordCompiles(app: object, compiles: SchemaCompiles): void {
  compilesOf.set(app, compiles);
}

/** Compiles every schema of `app` not compiled yet (tests); throws the first that does not compile. */
export function compileAllSchemas(app: object): number {
  const compiles = compilesOf.get(app);
  if (!compiles) throw new Error('not an app made by createFastify');
  return compiles.compileAll();
}
