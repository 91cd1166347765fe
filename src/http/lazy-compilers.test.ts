import { Ajv } from 'ajv';
import { describe, expect, it, vi } from 'vitest';
import { lazySerializers, lazyValidator, SchemaCompiles } from './lazy-compilers.ts';

// Decision 342: a route's schema is compiled at its first use, once, and then behaves as compiled;
// `compileAll` compiles whatever is left, and a schema that does not compile fails the same way each time.
describe('lazy schema compilers', () => {
  const schema = { type: 'object', properties: { name: { type: 'string', minLength: 2 } }, required: ['name'], additionalProperties: false };

  it('compile a validator at its first call, once, and hand Fastify its errors after each call', () => {
    const ajv = new Ajv({ allErrors: false, strict: false });
    const compile = vi.fn(() => ajv.compile(schema));
    const validate = lazyValidator(new SchemaCompiles(), 'POST /v1/things (its body)', compile);
    expect(compile).not.toHaveBeenCalled();
    // Fastify passes the parent (Ajv may replace a root value) only to a validator with a schemaEnv.
    expect((validate as unknown as { schemaEnv: unknown }).schemaEnv).toBeTruthy();

    expect(validate({ name: 'x' })).toBe(false);
    expect(validate.errors).toEqual([expect.objectContaining({ instancePath: '/name', keyword: 'minLength' })]);
    expect(validate({ name: 'xy' })).toBe(true);
    expect(validate.errors).toBeNull();
    expect(validate({})).toBe(false);
    expect(validate.errors).toEqual([expect.objectContaining({ keyword: 'required' })]);
    expect(compile).toHaveBeenCalledTimes(1);
  });

  it('lets Ajv replace a root value through the parent Fastify passes', () => {
    const ajv = new Ajv({ coerceTypes: 'array', strict: false });
    const validate = lazyValidator(new SchemaCompiles(), 'GET /v1/things (its querystring)', () => ajv.compile({ type: 'array', items: { type: 'string' } }));
    const request: Record<string, unknown> = { query: 'one' };
    expect((validate as unknown as (data: unknown, parent: unknown) => boolean)(request.query, { parentData: request, parentDataProperty: 'query' })).toBe(true);
    expect(request.query).toEqual(['one']);
  });

  it('compile a response serializer at its first reply, once per route, from the same schema', () => {
    const compileRoute = lazySerializers(new SchemaCompiles())(undefined, {});
    const route = { method: 'GET', url: '/v1/things', httpStatus: '200', schema };
    const serialize = compileRoute(route);
    const other = compileRoute({ ...route, httpStatus: '201' });
    // Nothing compiled yet: a schema fast-json-stringify refuses would throw here otherwise.
    const broken = compileRoute({ ...route, schema: { type: 'object', properties: { a: { $ref: '#/nowhere' } } } });
    expect(serialize({ name: 'ok', secret: 'dropped' })).toBe('{"name":"ok"}');
    expect(serialize({ name: 'again' })).toBe('{"name":"again"}');
    expect(other({ name: 'b' })).toBe('{"name":"b"}');
    expect(() => broken({ a: 1 })).toThrow(/compiling the schema of GET \/v1\/things \(its 200 answer\)/);
  });

  it('compileAll compiles what no request did yet, keeps a failure, and says where it was', () => {
    const compiles = new SchemaCompiles();
    const ajv = new Ajv({ strict: true });
    let attempts = 0;
    const good = vi.fn(() => ajv.compile(schema));
    lazyValidator(compiles, 'POST /v1/good (its body)', good);
    const bad = lazyValidator(compiles, 'POST /v1/bad (its body)', () => {
      attempts++;
      return ajv.compile({ type: 'object', properties: { a: { type: 'nonsense' } } });
    });
    expect(() => compiles.compileAll()).toThrow(/compiling the schema of POST \/v1\/bad \(its body\)/);
    expect(good).toHaveBeenCalledTimes(1);
    expect(() => bad({})).toThrow(/POST \/v1\/bad/);
    expect(attempts).toBe(1);
    expect(compiles.compileAll()).toBe(0);
  });
});
