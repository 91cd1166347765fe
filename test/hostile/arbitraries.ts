/**
 * The hostile tests' generators: request bodies shaped by the documented schemas (now and then
 * off by one, or just wrong), raw bodies a JSON parser has to survive, hostile headers and path
 * segments, credentials of every kind, and GraphQL documents derived from the schema.
 */
import fc from 'fast-check';
import {
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLOutputType,
  getNamedType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
} from 'graphql';
import { graphqlSchema } from '../../src/graphql/schema.ts';
import type { Route } from '../helpers/openapi.ts';
import { REDIRECT_URI } from '../helpers/providers.ts';
import { attacker, checker, ONE_MIB, PUBLIC_ORIGIN, world } from './world.ts';

/** `arbitrary` in about `percent` % of the values, else null. */
export function sometimes<T>(arbitrary: fc.Arbitrary<T>, percent: number): fc.Arbitrary<T | null> {
  return fc.oneof({ weight: 100 - percent, arbitrary: fc.constant(null) }, { weight: percent, arbitrary });
}

/** Now and then a string gets a character databases, parsers and loggers trip over. */
export function tainted(arbitrary: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const poison = fc.constantFrom('\u0000', '\ud800', '\u202e', '\n', '\r\n', '\u0085', '\u2028', '\\', '"', "'", '%00', '\u00ff', '😀');
  return fc.oneof(
    { weight: 7, arbitrary },
    { weight: 1, arbitrary: fc.tuple(arbitrary, poison, fc.nat()).map(([text, bad, at]) => text.slice(0, at % (text.length + 1)) + bad + text.slice(at % (text.length + 1))) },
  );
}

/** Characters a real HTTP client can put in a header value. */
const headerChar = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.constant('\t') },
);
export const headerValue = fc.string({ unit: headerChar, maxLength: 80 });

export const nasty = [
  '',
  ' ',
  '0',
  '-1',
  'null',
  'undefined',
  'true',
  '[]',
  '{}',
  '__proto__',
  'constructor',
  'prototype',
  "' OR '1'='1",
  "'; DROP TABLE users; --",
  '$1',
  '%s%n',
  ['$', '{7*7}'].join(''),
  '{{7*7}}',
  '<script>alert(1)</script>',
  'javascript:alert(1)',
  '../../etc/passwd',
  '\u0000',
  '\u202eevil',
  '\ud800',
  '😀',
  'Ω≈ç√',
  'a'.repeat(5000),
  'http://169.254.169.254/latest/meta-data/',
];

export function interestingStrings(): string[] {
  return [
    ...nasty,
    'github',
    'slack',
    'gitlab',
    'GitHub',
    world.owner.organizationId,
    world.outsider.organizationId,
    world.owner.userId,
    world.admin.userId,
    world.owner.email,
    world.integrations.github,
    world.integrations.slack,
    world.integrations.github.toLowerCase(),
    '01ARZ3NDEKTSV4RRFFQ69G5FAV',
    world.pendingState,
    REDIRECT_URI,
    `${PUBLIC_ORIGIN}/app`,
    `http://${attacker.host}/`,
    'https://evil.example/cb',
    'http://user:pass@127.0.0.1:8080/app',
    `${REDIRECT_URI}#frag`,
  ];
}

/** Date-time strings, from plain to the edges of what JavaScript and PostgreSQL accept. */
export const DATES = ['2099-01-01T00:00:00Z', '2099-01-01', '1970-01-01T00:00:00Z', 'yesterday', '9999-12-31T23:59:59Z', '10000-01-01T00:00:00Z', '+010000-01-01T00:00:00Z', '+275760-09-13T00:00:00.000Z', '-000001-01-01T00:00:00Z', '2099-02-30T00:00:00Z', '2099-01-01T00:00:00+99:00', '0'];

export const stringArb = () => fc.oneof({ weight: 3, arbitrary: fc.string({ maxLength: 40 }) }, { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) }, { weight: 3, arbitrary: fc.constantFrom(...interestingStrings()) });

/** Plausible values for body fields by name, so generated bodies get past validation into the handlers. */
function fieldHints(): Record<string, fc.Arbitrary<unknown>> {
  return {
    provider: fc.constantFrom('github', 'slack'),
    redirectUri: fc.constantFrom(REDIRECT_URI, `${PUBLIC_ORIGIN}/elsewhere`, 'https://evil.example/cb', `http://${attacker.host}/`, `${REDIRECT_URI}#x`, 'http://user:pw@127.0.0.1:8080/app', 'javascript:alert(1)', '/relative'),
    organizationId: tainted(fc.constantFrom(world.owner.organizationId, world.outsider.organizationId, '01ARZ3NDEKTSV4RRFFQ69G5FAV')),
    email: tainted(fc.oneof(fc.emailAddress(), fc.constantFrom(world.owner.email, world.owner.email.toUpperCase(), ` ${world.owner.email} `))),
    password: tainted(fc.string({ minLength: 12, maxLength: 40 })),
    name: tainted(fc.string({ maxLength: 30 })),
    state: fc.oneof(fc.constant(null).map(() => world.pendingState), fc.base64String({ minLength: 44, maxLength: 44 }).map((b) => b.replace(/\+/g, '-').replace(/\//g, '_').replace(/=/g, ''))),
    code: tainted(fc.string({ minLength: 1, maxLength: 40 })),
    scopes: fc.subarray(['read:user', 'user:email', 'repo', 'gist', 'admin:org', 'channels:read', 'chat:write', 'users:read']),
  };
}

/** Values shaped by a JSON schema (the documented request bodies), now and then off by one or just wrong. */
function fromSchema(schema: Record<string, unknown> | undefined, depth = 0): fc.Arbitrary<unknown> {
  const wrong = fc.oneof(fc.jsonValue({ maxDepth: 2 }), stringArb());
  if (!schema || depth > 4) return wrong;
  const valid = validFromSchema(schema, depth);
  return fc.oneof({ weight: 9, arbitrary: valid }, { weight: 1, arbitrary: wrong });
}

function validFromSchema(schema: Record<string, unknown>, depth: number): fc.Arbitrary<unknown> {
  const anyOf = (schema.anyOf ?? schema.oneOf) as Record<string, unknown>[] | undefined;
  if (anyOf?.length) return fc.oneof(...anyOf.map((s) => fromSchema(s, depth + 1)));
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  if ('const' in schema) return fc.constant(schema.const);
  switch (schema.type) {
    case 'string': {
      const min = Number(schema.minLength ?? 0);
      const max = Math.min(Number(schema.maxLength ?? 60), 300);
      const sized = tainted(fc.string({ minLength: min, maxLength: Math.max(min, max) }));
      const boundary = fc.constantFrom('x'.repeat(Math.max(0, min - 1)), 'x'.repeat(Number(schema.maxLength ?? 300) + 1));
      const format = schema.format === 'email' ? [fc.emailAddress()] : schema.format === 'date-time' ? [fc.date({ noInvalidDate: true }).map((d) => d.toISOString())] : [];
      return fc.oneof({ weight: 4, arbitrary: sized }, { weight: 1, arbitrary: stringArb() }, { weight: 1, arbitrary: boundary }, ...format.map((arbitrary) => ({ weight: 4, arbitrary })));
    }
    case 'integer':
      return fc.oneof(fc.integer(), fc.constantFrom(0, -1, 2 ** 31, Number.MAX_SAFE_INTEGER + 2));
    case 'number':
      return fc.oneof(fc.double(), fc.integer());
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const items = fromSchema(schema.items as Record<string, unknown> | undefined, depth + 1);
      return fc.oneof({ weight: 5, arbitrary: fc.array(items, { maxLength: 4 }) }, { weight: 1, arbitrary: fc.array(items, { minLength: 101, maxLength: 102 }) });
    }
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, Record<string, unknown>>;
      const required = (schema.required ?? []) as string[];
      const shape: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, property] of Object.entries(properties)) {
        const hint = fieldHints()[name];
        shape[name] = hint ? fc.oneof({ weight: 4, arbitrary: hint }, { weight: 1, arbitrary: fromSchema(property, depth + 1) }) : fromSchema(property, depth + 1);
      }
      const record = fc.record(shape, { requiredKeys: required.filter((k) => k in shape) });
      return fc.tuple(record, sometimes(fc.tuple(fc.constantFrom('extra', '__proto__', 'constructor', 'isAdmin', 'systemAdmin', 'role'), fc.jsonValue({ maxDepth: 1 })), 10)).map(([value, extra]) => {
        const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
        if (extra) Object.defineProperty(out, extra[0], { value: extra[1], enumerable: true, configurable: true, writable: true });
        return out;
      });
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** Raw bodies a JSON parser has to survive. */
export const rawBodies = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '{',
    '{"a":',
    '[1,2',
    'null',
    'true',
    '"str"',
    '[]',
    '{"__proto__":{"isAdmin":true}}',
    '{"constructor":{"prototype":{"isAdmin":true}}}',
    '{"email":"a@b.c","email":"x@y.z","password":"correct horse battery"}',
    '\ufeff{}',
    '{"a":"\\ud800"}',
    '{"a":1e999999}',
    `${'['.repeat(5000)}${']'.repeat(5000)}`,
    `${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}`,
    `${'['.repeat(100_000)}${']'.repeat(100_000)}`,
    'query { me { id } }',
    'email=a%40b.c&password=x',
    '\u0000\u0001\u0002',
  ),
  fc.string({ maxLength: 200 }),
  fc.string({ unit: 'binary', maxLength: 100 }),
);

export type Body = { kind: 'none' } | { kind: 'json'; value: unknown } | { kind: 'raw'; text: string } | { kind: 'huge' };

export function bodyFor(route: Route): fc.Arbitrary<Body> {
  const schema = checker.requestSchema(route) ?? undefined;
  return fc.oneof(
    { weight: 8, arbitrary: fromSchema(schema).map((value): Body => ({ kind: 'json', value })) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((value): Body => ({ kind: 'json', value })) },
    { weight: 1, arbitrary: fc.constant<Body>({ kind: 'none' }) },
    { weight: 1, arbitrary: rawBodies.map((text): Body => ({ kind: 'raw', text })) },
    { weight: 1, arbitrary: fc.constant<Body>({ kind: 'huge' }) },
  );
}

export function payloadOf(body: Body): { payload?: string; describe: string } {
  switch (body.kind) {
    case 'none':
      return { describe: '(none)' };
    case 'json': {
      const payload = JSON.stringify(body.value) ?? 'null';
      return { payload, describe: payload };
    }
    case 'raw':
      return { payload: body.text, describe: JSON.stringify(body.text) };
    case 'huge':
      return { payload: JSON.stringify({ name: 'x'.repeat(ONE_MIB + 16) }), describe: '(a JSON body over 1 MiB)' };
  }
}

/** A path segment: a plausible value, an encoded random string, or a classic trick. */
function segmentArb(name: string): fc.Arbitrary<string> {
  const plausible =
    name === 'provider'
      ? fc.constantFrom('github', 'github', 'slack', 'slack', 'gitlab', 'GitHub', 'g', '%67ithub')
      : name === 'id'
        ? fc.constantFrom(world.integrations.github, world.integrations.slack, world.integrations.github.toLowerCase(), '01ARZ3NDEKTSV4RRFFQ69G5FAV', '0'.repeat(26), 'oauth')
        : fc.constantFrom('user', 'user/repos', 'echo', 'echo/a/b', 'auth.test', 'users.info', 'x');
  const tricks = fc.constantFrom('..', '.', '%2e%2e', '%2F', '%5C', '%00', '%ZZ', '%', '%E0%A4%A', '%C0%AE', '%20', '~', "'", '"', '<x>', '%u002e', 'é', '．．', 'a'.repeat(201), 'a'.repeat(64), 'a'.repeat(65), '__proto__', 'constructor');
  const encoded = fc.string({ minLength: 1, maxLength: 30 }).map(encodeURIComponent);
  return fc.oneof({ weight: 7, arbitrary: plausible }, { weight: 2, arbitrary: tricks }, { weight: 1, arbitrary: encoded });
}

const queryArb = fc.oneof(
  fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 30 }), { maxKeys: 4 }).map((o) => new URLSearchParams(o).toString()),
  fc.constantFrom('code=x&state=y', 'error=access_denied&state=y', 'state=', 'state=%ZZ', '%ZZ', 'state=1&state=2', 'state[]=1', 'state[a]=b', '__proto__[x]=1', 'constructor[prototype][x]=1', 'a=%00', '&&&', '=', 'query={me{id}}'),
  fc.constant(null).map(() => `state=${encodeURIComponent(world.pendingState)}&code=abc`),
  fc.constant(null).map(() => `state=${encodeURIComponent(world.pendingState)}&error=access_denied`),
);

export type Cred = 'none' | 'owner' | 'ownerCookie' | 'pat' | 'apiToken' | 'member' | 'impersonator';
export const credArb = fc.constantFrom<Cred>('none', 'none', 'owner', 'owner', 'owner', 'ownerCookie', 'pat', 'apiToken', 'member', 'impersonator');

/** Hostile values per header name. */
const headerEntries = (): Record<string, fc.Arbitrary<string>> => ({
  authorization: fc.oneof(
    headerValue,
    headerValue.map((v) => `Bearer ${v}`),
    fc.constantFrom('Bearer', 'Bearer ', 'bearer  x', 'Basic Zm9vOmJhcg==', 'Bearer tsp_', 'Bearer tsa_', 'Bearer tsp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'Bearer a.b.c', 'Bearer eyJ.eyJ.', 'Token x', 'Bearer x y'),
    fc.constantFrom(...world.forged).map((v) => `Bearer ${v}`),
  ),
  cookie: fc.oneof(
    headerValue,
    fc.constantFrom('session=', 'session=garbage', 'session=a; session=b', '=;;=', 'csrf_token=x', 'oauth_tx=garbage', '$Version=1; session="x"', 'session=%ZZ'),
    fc.constantFrom(...world.forged).map((v) => `session=${v}`),
  ),
  'x-request-id': fc.oneof(headerValue, fc.string({ minLength: 127, maxLength: 130 }), fc.constantFrom('', ' ', 'é', 'a'.repeat(129), 'a'.repeat(128), '../../x', '<script>')),
  'x-organization-id': fc.oneof(headerValue, fc.constant(null).map(() => world.owner.organizationId), fc.constant(null).map(() => world.outsider.organizationId), fc.constantFrom('', ' ', 'a'.repeat(64), 'a'.repeat(65), "'; DROP TABLE memberships;--")),
  'x-impersonate-user': fc.oneof(headerValue, fc.constant(null).map(() => world.owner.userId), fc.constant(null).map(() => world.admin.userId), fc.constant(null).map(() => world.member.userId), fc.constantFrom('', 'a'.repeat(65))),
  'content-type': fc.oneof(
    headerValue,
    fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'application/json;charset=latin1',
      'application/jsonx',
      'application/json, text/plain',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/graphql',
      '',
    ),
  ),
  origin: fc.oneof(headerValue, fc.constantFrom('null', PUBLIC_ORIGIN, 'https://evil.example', `${PUBLIC_ORIGIN}.evil.example`, 'http://127.0.0.1:8080/')),
  'x-csrf-token': headerValue,
  'x-forwarded-for': fc.constantFrom('127.0.0.1', '10.0.0.1, 127.0.0.1', 'garbage', ''),
  accept: fc.constantFrom('application/json', '*/*', 'text/html', 'application/xml', ''),
});

/** Mostly none or one hostile header (so requests get past the pipeline), sometimes all of them at once. */
export const hostileHeaders = (): fc.Arbitrary<Record<string, string>> => {
  const entries = headerEntries();
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant({}) },
    { weight: 4, arbitrary: fc.constantFrom(...Object.keys(entries)).chain((name) => (entries[name] as fc.Arbitrary<string>).map((value) => ({ [name]: value }))) },
    { weight: 2, arbitrary: fc.record(entries, { requiredKeys: [] }) as fc.Arbitrary<Record<string, string>> },
  );
};

/** Applies a credential mode on top of hostile headers (the mode's own headers win). */
export function withCredentials(cred: Cred, headers: Record<string, string>, goodCsrf: boolean): Record<string, string> {
  const out = { ...headers };
  const set = (token: string) => {
    out.authorization = `Bearer ${token}`;
  };
  switch (cred) {
    case 'none':
      break;
    case 'owner':
      set(world.owner.token);
      break;
    case 'pat':
      set(world.pat);
      break;
    case 'apiToken':
      set(world.apiToken);
      break;
    case 'member':
      set(world.member.token);
      break;
    case 'impersonator':
      set(world.admin.token);
      out['x-impersonate-user'] ??= world.owner.userId;
      break;
    case 'ownerCookie':
      delete out.authorization;
      out.cookie = `session=${world.owner.cookies.session}; csrf_token=${world.owner.cookies.csrf_token}`;
      if (goodCsrf) {
        out['x-csrf-token'] = world.owner.cookies.csrf_token ?? '';
        out.origin = PUBLIC_ORIGIN;
      }
      break;
  }
  return out;
}

export function urlFor(route: Route, segments: string[], query: string | null): string {
  let i = 0;
  const path = route.path.replace(/\{[^}]+\}/g, () => segments[i++] ?? 'x');
  return query === null ? path : `${path}?${query}`;
}

/** One hostile REST request against a documented route (sometimes with another method). */
export function restCase() {
  const byKey = new Map(checker.routes.map((route) => [`${route.method} ${route.path}`, route]));
  return fc.constantFrom(...byKey.keys()).chain((key) => {
    const route = byKey.get(key) as Route;
    return fc.record({
      route: fc.constant(key),
      method: fc.oneof({ weight: 9, arbitrary: fc.constant(route.method) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS') }),
      segments: fc.tuple(...route.params.map((name) => segmentArb(name))),
      query: sometimes(queryArb, 30),
      headers: hostileHeaders(),
      cred: credArb,
      goodCsrf: fc.boolean(),
      body: bodyFor(route),
    });
  });
}

const schema = graphqlSchema();

function literalFor(type: GraphQLInputType, depth = 0): fc.Arbitrary<string> {
  const wrong = fc.constantFrom('null', '1', '"x"', 'true', '[1]', '{a: 1}', '$undefined', '1.5', 'ENUM');
  if (isNonNullType(type)) return fc.oneof({ weight: 9, arbitrary: literalFor(type.ofType, depth) }, { weight: 1, arbitrary: wrong });
  if (isListType(type)) return fc.array(literalFor(type.ofType, depth + 1), { maxLength: 3 }).map((items) => `[${items.join(', ')}]`);
  if (isEnumType(type)) return fc.constantFrom(...type.getValues().map((v) => v.name));
  if (isInputObjectType(type) && depth < 3) {
    const fields = Object.values(type.getFields());
    return fc.tuple(...fields.map((f) => literalFor(f.type, depth + 1).map((v) => `${f.name}: ${v}`))).map((parts) => `{${parts.join(', ')}}`);
  }
  const named = getNamedType(type).name;
  const valid =
    named === 'Int'
      ? fc.oneof(fc.integer({ min: -5, max: 200 }), fc.constantFrom(2 ** 31, -(2 ** 31) - 1)).map(String)
      : named === 'Float'
        ? fc.double({ noNaN: true, noDefaultInfinity: true }).map(String)
        : named === 'Boolean'
          ? fc.boolean().map(String)
          : tainted(fc.oneof(stringArb(), fc.constantFrom('owner', 'admin', 'member', world.owner.email, world.integrations.github, world.owner.organizationId), fc.constantFrom(...DATES))).map((s) => JSON.stringify(s));
  return fc.oneof({ weight: 9, arbitrary: valid }, { weight: 1, arbitrary: wrong });
}

function argumentsFor(args: readonly GraphQLArgument[]): fc.Arbitrary<string> {
  if (args.length === 0) return fc.constant('');
  return fc
    .tuple(...args.map((arg) => sometimes(literalFor(arg.type).map((v) => `${arg.name}: ${v}`), isNonNullType(arg.type) ? 95 : 50)))
    .map((parts) => {
      const present = parts.filter((p): p is string => p !== null);
      return present.length ? `(${present.join(', ')})` : '';
    });
}

function selectionFor(type: GraphQLOutputType, depth: number): fc.Arbitrary<string> {
  const named = getNamedType(type);
  if (isLeafType(named)) return fc.oneof({ weight: 19, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.constant('{ id }') });
  if (!isObjectType(named) && !isInterfaceType(named)) return fc.constant('{ __typename }');
  let fields = Object.values(named.getFields()) as GraphQLField<unknown, unknown>[];
  if (depth >= 3) fields = fields.filter((f) => isLeafType(getNamedType(f.type)));
  if (fields.length === 0) return fc.constant('{ __typename }');
  return fc
    .subarray(fields, { minLength: 1, maxLength: Math.min(4, fields.length) })
    .chain((picked) => fc.tuple(...picked.map((f) => fieldText(f, depth + 1))))
    .map((parts) => `{ ${parts.join(' ')} }`);
}

function fieldText(field: GraphQLField<unknown, unknown>, depth: number): fc.Arbitrary<string> {
  return fc
    .tuple(sometimes(fc.constantFrom('a', 'b', '__typename', 'x1'), 15), argumentsFor(field.args), selectionFor(field.type, depth), sometimes(fc.constantFrom('@skip(if: true)', '@include(if: false)', '@deprecated', '@nope'), 10))
    .map(([alias, args, selection, directive]) => `${alias ? `${alias}: ` : ''}${field.name}${args}${directive ? ` ${directive}` : ''} ${selection}`);
}

function operationArb(): fc.Arbitrary<string> {
  const query = schema.getQueryType();
  const mutation = schema.getMutationType();
  const roots = [query, mutation].filter((r) => r !== null && r !== undefined);
  return fc.constantFrom(...roots).chain((root) =>
    fc
      .subarray(Object.values(root.getFields()) as GraphQLField<unknown, unknown>[], { minLength: 1, maxLength: Math.min(3, Object.keys(root.getFields()).length) })
      .chain((fields) => fc.tuple(fc.constantFrom('query ', ''), ...fields.map((f) => fieldText(f, 1))))
      .map(([keyword, ...parts]) => `${root === mutation ? 'mutation ' : keyword}{ ${parts.join(' ')} }`),
  );
}

const weirdDocuments = fc.oneof(
  fc.string({ maxLength: 100 }),
  fc.constantFrom(
    '{',
    '}',
    '{ me }',
    '{ me { id } ',
    '{ __schema { types { name fields { name } } } }',
    '{ __type(name: "Query") { name } }',
    'query A { me { id } } query B { me { id } }',
    'fragment F on Query { ...F } { ...F }',
    'subscription { me { id } }',
    '{ me { id @skip(if: $x) } }',
    'query ($id: ID!) { integration(id: $id) { id } }',
    'query ($n: Int) { auditLogs(first: $n) { nodes { id } } }',
    `{ ${Array.from({ length: 500 }, (_, i) => `a${i}: me { id }`).join(' ')} }`,
    `{ ${'organization { '.repeat(50)}id${' }'.repeat(50)} }`,
    `{ ${'a { '.repeat(200)}b${' }'.repeat(200)} }`,
    `{ auditLogs(first: 100000) { nodes { id detail } edges { node { id } } } }`,
    `{ integrations { statusDetail { lastError } } integration(id: "${'x'.repeat(300)}") { id } }`,
    '"""unterminated',
    // mercurius falls back to JSON.parse(query) as a ready-made AST when the text does not parse
    '0',
    '"x"',
    'null',
    '[]',
    '{}',
    '{"kind":"Document","definitions":[{}]}',
    '{"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","selectionSet":{"kind":"SelectionSet","selections":[]}}]}',
    '{ me { id } } # comment \u0000',
  ),
  fc.constant(null).map(() => `mutation { ${Array.from({ length: 50 }, (_, i) => `o${i}: createOrganization(name: "n${i}") { id }`).join(' ')} }`),
  fc.constant(null).map(() => 'x'.repeat(100_001)),
);

export const graphqlBody = () =>
  fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record({ query: fc.oneof({ weight: 4, arbitrary: operationArb() }, { weight: 2, arbitrary: weirdDocuments }), variables: sometimes(fc.oneof(fc.dictionary(fc.constantFrom('id', 'n', 'x', 'name'), fc.jsonValue({ maxDepth: 2 })), fc.jsonValue({ maxDepth: 1 })), 30), operationName: sometimes(fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom('A', 'B', null)), 20) }, { requiredKeys: ['query'] })
      .map((op): Body => ({ kind: 'json', value: op })),
  },
  { weight: 1, arbitrary: fc.array(fc.record({ query: operationArb() }), { minLength: 1, maxLength: 6 }).map((ops): Body => ({ kind: 'json', value: ops })) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((value): Body => ({ kind: 'json', value })) },
  { weight: 1, arbitrary: rawBodies.map((text): Body => ({ kind: 'raw', text })) },
);
