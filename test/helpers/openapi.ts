import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';

/** The parts of an OpenAPI 3.1 document this checker reads. */
export interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, OpenApiOperation>>;
  components?: Record<string, unknown>;
}

export interface OpenApiOperation {
  parameters?: { in: string; name: string; required?: boolean; schema?: Record<string, unknown>; 'x-ms-skip-url-encoding'?: boolean }[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: Record<string, unknown> }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: Record<string, unknown> }> }>;
  security?: Record<string, string[]>[];
}

/** One documented (method, path template) pair. */
export interface Route {
  method: string;
  /** The template as documented, e.g. `/v1/integrations/{provider}/token`. */
  path: string;
  operation: OpenApiOperation;
  /** Names of the path parameters, in order (the proxy's multi-segment one is `path`). */
  params: string[];
}

/** A response as `fastify.inject` returns it (only what the checker reads). */
export interface CheckedResponse {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

export interface CheckOptions {
  /** Passthrough answers (the proxy's provider responses): the status must be documented, the body is not checked. */
  passthrough?: boolean;
}

const METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'] as const;

/**
 * Checks real responses against the service's own OpenAPI document: for each
 * (path, method, status) the documented response schema is compiled once with ajv
 * (draft 2020-12, formats on) and a response must (a) have a documented status —
 * explicit, an `NXX` range or `default` — and (b) unless exempt (passthrough, 3xx,
 * HEAD, documented without content) carry a JSON body that validates.
 */
export class OpenApiChecker {
  readonly document: OpenApiDocument;
  readonly routes: Route[];
  private readonly ajv: Ajv2020;
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly matchers: { route: Route; regex: RegExp; staticSegments: number }[];

  constructor(document: OpenApiDocument) {
    this.document = document;
    this.ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
    addFormats.default(this.ajv);
    this.routes = [];
    for (const [path, item] of Object.entries(document.paths)) {
      for (const method of METHODS) {
        const operation = item[method];
        if (!operation) continue;
        const params = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] as string);
        this.routes.push({ method: method.toUpperCase(), path, operation, params });
      }
    }
    this.matchers = this.routes.map((route) => {
      const segments = route.path.split('/');
      // A parameter generators must not encode (the proxy's `{path}`) spans segments.
      const multiSegment = new Set((route.operation.parameters ?? []).filter((p) => p.in === 'path' && p['x-ms-skip-url-encoding'] === true).map((p) => `{${p.name}}`));
      const pattern = segments
        .map((segment) => (segment === '{*}' || multiSegment.has(segment) ? '.*' : /^\{[^}]+\}$/.test(segment) ? '[^/]+' : escapeRegex(segment)))
        .join('/');
      return { route, regex: new RegExp(`^${pattern}$`), staticSegments: segments.filter((s) => !s.startsWith('{')).length };
    });
  }

  /** Fetches `GET /api-docs` from the app and builds a checker. */
  static async fromApp(app: FastifyInstance): Promise<OpenApiChecker> {
    const res = await app.inject({ method: 'GET', url: '/api-docs' });
    if (res.statusCode !== 200) throw new Error(`GET /api-docs answered ${res.statusCode}`);
    return new OpenApiChecker(res.json() as OpenApiDocument);
  }

  /** The documented route a concrete method and URL land on (static segments win, like the router), if any. HEAD falls back to GET. */
  route(method: string, url: string): Route | null {
    const path = pathOf(url);
    const upper = method.toUpperCase();
    const candidates = (m: string) =>
      this.matchers
        .filter((matcher) => matcher.route.method === m && matcher.regex.test(path))
        .sort((a, b) => b.staticSegments - a.staticSegments || a.route.params.length - b.route.params.length);
    const found = candidates(upper)[0] ?? (upper === 'HEAD' ? candidates('GET')[0] : undefined);
    return found?.route ?? null;
  }

  /** The JSON request-body schema of a route, if documented. */
  requestSchema(route: Route): Record<string, unknown> | null {
    return route.operation.requestBody?.content?.['application/json']?.schema ?? null;
  }

  /**
   * The problems of one response to `method url` (empty when it conforms). A URL that
   * lands on no documented route has nothing to check against: no problems.
   */
  check(method: string, url: string, res: CheckedResponse, options: CheckOptions = {}): string[] {
    const route = this.route(method, url);
    if (!route) return [];
    const where = `${method.toUpperCase()} ${route.path} → ${res.statusCode}`;
    const responses = route.operation.responses ?? {};
    const status = String(res.statusCode);
    const key = status in responses ? status : `${status[0]}XX` in responses ? `${status[0]}XX` : 'default' in responses ? 'default' : null;
    if (key === null) return [`${where}: status not documented (documented: ${Object.keys(responses).join(', ')})`];
    if (options.passthrough || res.statusCode === 304 || (res.statusCode >= 300 && res.statusCode < 400) || method.toUpperCase() === 'HEAD') return [];
    const documented = responses[key];
    const schema = documented?.content?.['application/json']?.schema;
    if (!documented?.content) {
      return res.body.length === 0 ? [] : [`${where}: documented without a body, but one came back`];
    }
    if (!schema) return [`${where}: documented content is not application/json`];
    const type = String(res.headers['content-type'] ?? '');
    if (!/^application\/json\b/i.test(type)) return [`${where}: content-type ${type || '(none)'} instead of application/json`];
    let value: unknown;
    try {
      value = JSON.parse(res.body);
    } catch {
      return [`${where}: body is not JSON: ${res.body.slice(0, 200)}`];
    }
    const validate = this.validator(route, key, schema);
    if (validate(value)) return [];
    const errors = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
    return [`${where}: body does not match the documented schema: ${errors.join('; ')} — body ${res.body.slice(0, 300)}`];
  }

  private validator(route: Route, key: string, schema: Record<string, unknown>): ValidateFunction {
    const id = `${route.method} ${route.path} ${key}`;
    let validate = this.validators.get(id);
    if (!validate) {
      // References (`#/components/...`) resolve against the root: carry the components along.
      validate = this.ajv.compile({ components: this.document.components ?? {}, allOf: [schema] });
      this.validators.set(id, validate);
    }
    return validate;
  }
}

function pathOf(url: string): string {
  let path = url;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(path)) path = path.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, '');
  const cut = path.search(/[?#]/);
  return cut === -1 ? path : path.slice(0, cut);
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
