/**
 * What makes the generated OpenAPI document one a client generator can trust (docs/contract.md §8),
 * applied once to the whole document rather than in every route file, so a route added later
 * is held to it too: operationIds, the proxy's named multi-segment parameter, response headers,
 * and shared shapes named in `components.schemas`.
 */
type Json = Record<string, unknown>;

/** The operation keys of a path item (OpenAPI 3.1). */
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** The name the proxy's wildcard gets in the document: `{*}` is no name a generator can use. */
export const WILDCARD_PARAMETER = 'path';

/** Headers documented once and referenced by every response that carries them. */
export const RESPONSE_HEADERS = {
  'X-Request-ID': {
    description: "This request's id: the caller's own X-Request-ID when it was 1–128 printable ASCII characters, else a new one. Every log line of the request carries it; quote it when reporting a problem.",
    schema: { type: 'string' },
  },
  'Retry-After': { description: 'Seconds to wait before trying again', schema: { type: 'integer', minimum: 0 } },
} as const;

/**
 * The cookies each operation sets (docs/contract.md §3, §5): named here because the route's schema
 * cannot say it. Test `openapi-contract` checks each against what the route really sends.
 */
const COOKIES: Readonly<Record<string, string>> = {
  'post /v1/login': 'Sets `session` (HttpOnly: the session token, for the console) and `csrf_token` (the value X-Csrf-Token must repeat).',
  'post /v1/account/switch': 'Sets `session` (HttpOnly) and `csrf_token` for the session bound to the new organization.',
  'post /v1/logout': 'Clears `session` and `csrf_token`.',
  'get /v1/csrf': 'Sets `csrf_token`.',
  'post /v1/integrations/oauth/start': 'Sets `oauth_tx` (HttpOnly, SameSite=Lax): binds the flow to this browser until the callback.',
};

/**
 * Shapes the document names in `components.schemas`, each taken from where a route declares
 * it (an operation's success body, or its request body, and a path into it). Every
 * structurally equal occurrence elsewhere becomes a `$ref`. A location that no longer exists
 * leaves its name out (test `openapi-contract` then fails).
 */
const NAMED_SHAPES: readonly { name: string; at: Location }[] = [
  // Every route answers 500 in the one error shape (schemas.ts): as the generator wrote it.
  { name: 'Error', at: { operationId: 'meta_getOpenApi', in: 'response', status: '500', path: '' } },
  { name: 'Session', at: { operationId: 'identity_login', in: 'response', path: '' } },
  { name: 'User', at: { operationId: 'identity_login', in: 'response', path: 'user' } },
  { name: 'Organization', at: { operationId: 'organizations_create', in: 'response', path: 'organization' } },
  { name: 'OrganizationWithRole', at: { operationId: 'identity_getAccountAccess', in: 'response', path: 'organization' } },
  { name: 'Provider', at: { operationId: 'integrations_listProviders', in: 'response', path: 'providers/items' } },
  { name: 'Integration', at: { operationId: 'integrations_list', in: 'response', path: 'integrations/items' } },
  { name: 'IntegrationStatus', at: { operationId: 'integrations_getStatus', in: 'response', path: 'status' } },
  { name: 'Token', at: { operationId: 'integrations_getToken', in: 'response', path: 'token' } },
  { name: 'ConnectSession', at: { operationId: 'connect_getSession', in: 'response', path: 'session' } },
  { name: 'NewConnectSession', at: { operationId: 'connect_createSession', in: 'response', path: 'session' } },
  { name: 'EndUser', at: { operationId: 'connect_createSession', in: 'body', path: 'endUser' } },
];

/**
 * What each tag groups, declared in the document's `tags` (a generator and `/docs` show them as
 * sections). A route tagged with a name missing here fails the document's test.
 */
export const TAGS: Readonly<Record<string, string>> = {
  identity: 'Signing in, the caller, personal and API tokens, service tokens',
  organizations: 'Organizations, their members and invitations',
  integrations: 'Providers, integrations, their tokens and status, and the proxy',
  connect: 'Connecting an account: the OAuth flow, connect sessions and the hosted page',
  apps: "OAuth apps: the deployment's, and an organization's own (its client, secret, scopes and default)",
  agents: 'Narrowed credentials for AI agents, and the MCP endpoint',
  webhooks: 'Webhook endpoints and deliveries, and provider events',
  graphql: 'The GraphQL endpoint',
  health: 'Liveness and readiness',
  meta: 'This document and the metrics',
};

/** Rewrites a route's wildcard (`/proxy/*`) as a named parameter, for the document only (the router keeps `*`). */
export function nameWildcard<S extends Json>(url: string, schema: S): { url: string; schema: S; renamed: boolean } {
  if (!url.endsWith('*')) return { url, schema, renamed: false };
  const params = schema.params as Json | undefined;
  // Without a params schema the generator would derive every parameter from the URL: do the same for the others.
  const fromUrl = Object.fromEntries([...url.matchAll(/:([A-Za-z0-9_]+)/g)].map((match) => [match[1], { type: 'string' }]));
  const properties = { ...(params ? {} : fromUrl), ...((params?.properties as Json | undefined) ?? {}) };
  const wildcard = properties['*'] as Json | undefined;
  delete properties['*'];
  properties[WILDCARD_PARAMETER] = {
    ...wildcard,
    type: 'string',
    minLength: 1,
    description: "The provider API's path, one or more segments separated by `/` (e.g. `user/repos`), written as is: the slashes must not be percent-encoded (`%2F` is refused).",
    examples: ['user/repos'],
  };
  const required = [...((params?.required as string[] | undefined) ?? Object.keys(fromUrl)).filter((name) => name !== '*'), WILDCARD_PARAMETER];
  return { url: `${url.slice(0, -1)}:${WILDCARD_PARAMETER}`, schema: { ...schema, params: { ...params, type: 'object', properties, required } }, renamed: true };
}

/** The finishing pass over the whole generated document (see the file's comment). */
export function finishDocument(document: Json, multiSegment: ReadonlySet<string>): Json {
  const paths = (document.paths ?? {}) as Record<string, Json>;
  for (const [path, item] of Object.entries(paths)) {
    const shared = new Map<unknown, string[]>();
    for (const method of METHODS) if (item[method]) shared.set(item[method], [...(shared.get(item[method]) ?? []), method]);
    for (const method of METHODS) {
      const original = item[method] as Json | undefined;
      if (!original) continue;
      // @fastify/swagger hands every method of one route the same object: each needs its own id.
      const methodsOfRoute = shared.get(original) ?? [method];
      const operation = methodsOfRoute.length > 1 ? structuredClone(original) : original;
      item[method] = operation;
      if (methodsOfRoute.length > 1 || typeof operation.operationId !== 'string') operation.operationId = operationIdFor(method, path, operation, methodsOfRoute.length > 1);
      documentHeaders(operation, COOKIES[`${method} ${path}`]);
      if (multiSegment.has(path)) markMultiSegment(operation);
    }
  }
  const components = ((document.components ??= {}) as Json) as Json & { schemas?: Json; headers?: Json };
  components.headers = { ...(components.headers as Json | undefined), ...structuredClone(RESPONSE_HEADERS) };
  components.schemas = { ...(components.schemas ?? {}), ...nameShapes(document) };
  document.tags = declaredTags([...Object.values(paths), ...Object.values((document.webhooks ?? {}) as Record<string, Json>)]);
  return document;
}

/** The tags the operations (of paths and webhooks) use, in the order of `TAGS`, each with its description (a tag `TAGS` lacks: a plain one, until it is added there). */
function declaredTags(items: Json[]): { name: string; description?: string }[] {
  const used = new Set<string>();
  for (const item of items) for (const method of METHODS) for (const tag of ((item[method] as Json | undefined)?.tags as string[] | undefined) ?? []) used.add(tag);
  const known = Object.keys(TAGS);
  const order = (tag: string) => (known.includes(tag) ? known.indexOf(tag) : known.length);
  return [...used].sort((a, b) => order(a) - order(b) || a.localeCompare(b)).map((name) => ({ name, description: TAGS[name] ?? `The ${name} routes` }));
}

/**
 * `<tag>_<verb><Object>` from the method, the path and the first tag: the tag's own leading
 * segment and the path parameters are dropped, the static segments left name the object. A
 * plural last segment is a collection (GET lists, POST creates; an item under it is got or
 * deleted in the singular); any other POST is the action its path names (`identity_login`,
 * `integrations_refresh`). A route serving several methods prefixes each with its method.
 * A route may declare its own `operationId` in its schema instead.
 */
export function operationIdFor(method: string, path: string, operation: Json, multiMethod = false): string {
  const tag = String((operation.tags as string[] | undefined)?.[0] ?? 'default');
  const segments = path.split('/').filter((segment) => segment !== '' && segment !== 'v1');
  if (segments[0] !== undefined && camel(segments[0]) === camel(tag)) segments.shift();
  const endsInParameter = /^\{.*\}$/.test(segments.at(-1) ?? '');
  const words = segments.filter((segment) => !segment.startsWith('{')).map(camel);
  const object = words.map(pascal).join('');
  const last = words.at(-1) ?? '';
  const collection = /[^su]s$/.test(last) || /[^s]ies$/.test(last);
  const item = endsInParameter && collection ? singular(object) : object;
  let name: string;
  if (multiMethod) name = `${method}${object}`;
  else if (method === 'get') name = words.length === 0 ? (endsInParameter ? 'get' : 'list') : !endsInParameter && collection ? `list${object}` : `get${item}`;
  else if (method === 'post') name = words.length === 0 ? 'create' : collection && !endsInParameter ? `create${singular(object)}` : uncapitalize(object);
  else if (method === 'delete') name = `delete${item}`;
  else if (method === 'put') name = `replace${item}`;
  else if (method === 'patch') name = `update${item}`;
  else name = `${method}${object}`;
  return `${camel(tag)}_${name}`;
}

/** `X-Request-ID` on every response, `Retry-After` on 429 and 503, `Set-Cookie` where the operation sets cookies. */
function documentHeaders(operation: Json, cookies: string | undefined): void {
  const ref = (name: keyof typeof RESPONSE_HEADERS) => ({ $ref: `#/components/headers/${name}` });
  for (const [status, response] of Object.entries((operation.responses ?? {}) as Record<string, Json>)) {
    // The generator's placeholder for a success schema without a description of its own.
    if (response.description === 'Default Response') response.description = status === '201' ? 'Created' : 'Success';
    const headers = { ...((response.headers as Json | undefined) ?? {}), 'X-Request-ID': ref('X-Request-ID') } as Json;
    if (status === '429' || status === '503') headers['Retry-After'] = ref('Retry-After');
    // Per operation: which cookies is the whole point of its description.
    if (cookies && /^2/.test(status)) headers['Set-Cookie'] = { description: cookies, schema: { type: 'string' } };
    response.headers = headers;
    // The response's own description already says it (the error codes of this status); the schema need not repeat it.
    for (const media of Object.values((response.content ?? {}) as Record<string, Json>)) {
      const schema = media.schema as Json | undefined;
      if (schema && schema.description === response.description) delete schema.description;
    }
  }
}

/** The proxy's path parameter: many segments, not one encoded (`x-ms-skip-url-encoding` is the generators' own hint for it). */
function markMultiSegment(operation: Json): void {
  for (const parameter of (operation.parameters ?? []) as Json[]) {
    if (parameter.in === 'path' && parameter.name === WILDCARD_PARAMETER) {
      parameter['x-ms-skip-url-encoding'] = true;
      parameter.example = 'user/repos';
    }
  }
}

/** The named shapes, read where they are declared; every equal occurrence in the paths and in each other becomes a `$ref`. */
function nameShapes(document: Json): Json {
  const named = new Map<string, Json>();
  for (const shape of NAMED_SHAPES) {
    const schema = locate(document, shape.at);
    if (schema) named.set(shape.name, withoutDescription(schema));
  }
  const byShape = new Map<string, string>();
  for (const [name, schema] of named) if (!byShape.has(canonical(schema))) byShape.set(canonical(schema), name);
  const replace = (node: unknown, self?: string): unknown => {
    if (Array.isArray(node)) return node.map((entry) => replace(entry));
    if (!node || typeof node !== 'object') return node;
    const object = node as Json;
    const name = byShape.get(canonical(withoutDescription(object)));
    if (name && name !== self) {
      const description = object.description;
      return typeof description === 'string' && description !== named.get(name)?.description ? { $ref: `#/components/schemas/${name}`, description } : { $ref: `#/components/schemas/${name}` };
    }
    return Object.fromEntries(Object.entries(object).map(([key, value]) => [key, replace(value)]));
  };
  for (const item of [...Object.values((document.paths ?? {}) as Record<string, Json>), ...Object.values((document.webhooks ?? {}) as Record<string, Json>)]) {
    for (const method of METHODS) {
      const operation = item[method] as Json | undefined;
      if (!operation) continue;
      for (const key of ['requestBody', 'responses', 'parameters'] as const) if (operation[key]) operation[key] = replace(operation[key]);
    }
  }
  return Object.fromEntries([...named].map(([name, schema]) => [name, replace(schema, name)]));
}

/** Where a named shape is declared: an operation's request body or response (its success unless `status` says), and a path into it. */
interface Location {
  operationId: string;
  in: 'response' | 'body';
  status?: string;
  path: string;
}

/** The schema at `at` in the document (a copy), if the operation and the path into its body exist. */
function locate(document: Json, at: Location): Json | undefined {
  for (const item of Object.values((document.paths ?? {}) as Record<string, Json>)) {
    for (const method of METHODS) {
      const operation = item[method] as Json | undefined;
      if (operation?.operationId !== at.operationId) continue;
      const responses = (operation.responses ?? {}) as Record<string, Json>;
      const container = at.in === 'body' ? (operation.requestBody as Json | undefined) : at.status ? responses[at.status] : successResponse(responses);
      let node = ((container?.content as Record<string, Json> | undefined)?.['application/json']?.schema ?? undefined) as Json | undefined;
      for (const step of at.path.split('/').filter(Boolean)) {
        node = (step === 'items' ? node?.items : (node?.properties as Json | undefined)?.[step]) as Json | undefined;
      }
      return node && typeof node === 'object' ? structuredClone(node) : undefined;
    }
  }
  return undefined;
}

function successResponse(responses: Record<string, Json>): Json | undefined {
  const status = Object.keys(responses).find((key) => /^2\d\d$/.test(key));
  return status ? responses[status] : undefined;
}

function withoutDescription(schema: Json): Json {
  const { description: _description, ...rest } = schema;
  return schema.description === undefined ? schema : rest;
}

/** A stable text of a schema: keys sorted at every level. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Json)[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

function camel(text: string): string {
  return text.replace(/[-_.]+(.)/g, (_match, next: string) => next.toUpperCase());
}

function pascal(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function uncapitalize(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}

function singular(text: string): string {
  if (text.endsWith('ies')) return `${text.slice(0, -3)}y`;
  return text.endsWith('s') ? text.slice(0, -1) : text;
}
