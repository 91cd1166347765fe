import { Ajv } from 'ajv';
import { describe, expect, it, vi } from 'vitest';
import { lazySerializers, lazyValidator } from './lazy-compilers.ts';

// Decision 342: a route's schema is compiled at its first use, once, and then behaves as compiled.
describe('lazy schema compilers', () => {
  const schema = { type: 'object', properties: { name: { type: 'string', minLength: 2 } }, required: ['name'], additionalProperties: false };

  it('compile a validator at its first call, once, and hand Fastify its errors after each call', () => {
    const ajv = new Ajv({ allErrors: false, strict: false });
    const compile = vi.fn(() => ajv.compile(schema));
    const validate = lazyValidator(compile);
    expect(compile).not.toHaveBeenCalled();

    expect(validate({ name: 'x' })).toBe(false);
    expect(validate.errors).toEqual([expect.objectContaining({ instancePath: '/name', keyword: 'minLength' })]);
    expect(validate({ name: 'xy' })).toBe(true);
    expect(validate.errors).toBeNull();
    expect(validate({})).toBe(false);
    expect(validate.errors).toEqual([expect.objectContaining({ keyword: 'required' })]);
    expect(compile).toHaveBeenCalledTimes(1);
  });

  it('compile a response serializer at its first reply, once per route, from the same schema', () => {
    const compileRoute = lazySerializers(undefined, {});
    const route = { method: 'GET', url: '/v1/things', httpStatus: '200', schema };
    const serialize = compileRoute(route);
    const other = compileRoute({ ...route, httpStatus: '201' });
    // Nothing compiled yet: a schema fast-json-stringify refuses would throw here otherwise.
    const broken = compileRoute({ ...route, schema: { type: 'object', properties: { a: { $ref: '#/nowhere' } } } });
    expect(serialize({ name: 'ok', secret: 'dropped' })).toBe('{"name":"ok"}');
    expect(serialize({ name: 'again' })).toBe('{"name":"again"}');
    expect(other({ name: 'b' })).toBe('{"name":"b"}');
    expect(() => broken({ a: 1 })).toThrow();
  });
});
