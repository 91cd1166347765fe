/**
 * The points where Tessera's own code makes spans (docs/contract.md §10 "Traces"): provider calls,
 * refreshes, validation passes, webhook deliveries, PGlite statements, and the route of a request.
 * This file imports no OpenTelemetry code at all: `otel.ts` (loaded only when an OTLP endpoint is
 * configured) installs the hooks, and until it does every function here is a plain call — no
 * span object, no context lookup, no allocation beyond the call itself (decision 152).
 */

/** Attribute values as OpenTelemetry takes them. */
export type SpanAttributes = Record<string, string | number | boolean | undefined>;

/** The little of a span the hooks' callers touch: attributes known only at the end (a status code). */
export interface SpanHandle {
  setAttribute(key: string, value: string | number | boolean): void;
}

/** What `otel.ts` installs when traces are on. */
export interface TraceHooks {
  /** Runs `fn` in a new active span (child of the active one) and ends it; a throw marks it failed, with no message. */
  span<T>(name: string, kind: 'internal' | 'client', attributes: SpanAttributes, fn: (span: SpanHandle) => Promise<T>): Promise<T>;
  /** The active span's `traceparent` (and `tracestate`), to send with a request we want traced across. */
  headers(): Record<string, string>;
  /** Names the active server span's route (`http.route`) once Fastify has matched it. */
  route(route: string): void;
  /** True inside a span: statements outside any (background polls) make no span of their own, as with instrumentation-pg's `requireParentSpan`. */
  inTrace(): boolean;
}

let hooks: TraceHooks | null = null;

/** Called once by `otel.ts` when the SDK has started. */
export function installTraceHooks(installed: TraceHooks): void {
  hooks = installed;
}

/** True when the standard variables ask for traces (an OTLP endpoint set, the SDK not disabled). */
export function tracesWanted(env: NodeJS.ProcessEnv): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true' || env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

const NO_SPAN: SpanHandle = { setAttribute() {} };

/** `fn` inside an internal span named `name` (refresh, validation pass…), or just `fn` when traces are off. */
export function inSpan<T>(name: string, attributes: SpanAttributes, fn: (span: SpanHandle) => Promise<T>): Promise<T> {
  return hooks ? hooks.span(name, 'internal', attributes, fn) : fn(NO_SPAN);
}

/**
 * A call to a provider: a client span with `tessera.provider`, the host (`server.address`) and
 * method, and the answer's `http.response.status_code`. Never the URL (its query may hold a code
 * or a token) and no `traceparent` to the provider: nothing here adds a header.
 */
export function providerCallSpan<T extends { status: number }>(provider: string, url: string | URL, method: string, fn: () => Promise<T>): Promise<T> {
  if (!hooks) return fn();
  const host = typeof url === 'string' ? URL.parse(url)?.hostname : url.hostname;
  return hooks.span(`${method} ${provider}`, 'client', { 'tessera.provider': provider, 'server.address': host, 'http.request.method': method }, async (span) => {
    const response = await fn();
    span.setAttribute('http.response.status_code', response.status);
    return response;
  });
}

/** A webhook delivery: a client span (the receiver's host, never its URL: it may carry a path token) and the headers that continue the trace there. */
export function webhookSpan<T>(url: string, attributes: SpanAttributes, fn: (span: SpanHandle, traceHeaders: Record<string, string>) => Promise<T>): Promise<T> {
  const traceHooks = hooks;
  if (!traceHooks) return fn(NO_SPAN, {});
  const host = URL.parse(url)?.hostname;
  return traceHooks.span('webhook delivery', 'client', { ...attributes, 'server.address': host, 'http.request.method': 'POST' }, (span) => fn(span, traceHooks.headers()));
}

/** A function that names the active server span's route, or null when traces are off (then no hook is installed at all). */
export function routeTracer(): ((route: string | undefined) => void) | null {
  const traceHooks = hooks;
  return traceHooks ? (route) => route !== undefined && traceHooks.route(route) : null;
}

type Query = (...args: unknown[]) => Promise<unknown>;
/** What of PGlite (or one of its transactions) is wrapped. */
interface Queryable {
  query: Query;
  queryNamed?: Query;
}

/** The statement's first keyword (SELECT, INSERT, WITH…): the span's name, as instrumentation-pg names its own. */
function operation(text: unknown): string {
  return typeof text === 'string' ? (/^\s*([A-Za-z]+)/.exec(text)?.[1]?.toUpperCase() ?? 'SQL') : 'SQL';
}

/**
 * The embedded database's statements as spans (PostgreSQL's come from instrumentation-pg): the
 * statement text with its placeholders, never its parameter values. Returns `client` itself,
 * untouched, when traces are off.
 */
export function tracePglite<C extends object>(client: C): C {
  const traceHooks = hooks;
  if (!traceHooks) return client;
  const traced =
    (run: Query, textAt: number): Query =>
    (...args) => {
      const text = args[textAt];
      return !traceHooks.inTrace()
        ? run(...args)
        : traceHooks.span(`pglite.query:${operation(text)}`, 'client', { 'db.system.name': 'postgresql', 'db.operation.name': operation(text), 'db.query.text': typeof text === 'string' ? text : undefined }, () =>
            run(...args),
          );
    };
  const wrapQuery = (target: Queryable) => {
    target.query = traced(target.query.bind(target), 0);
    // Hot statements run by name (db/pglite-named.ts): `queryNamed(name, text, params, options)`.
    if (target.queryNamed) target.queryNamed = traced(target.queryNamed.bind(target), 1);
  };
  const target = client as unknown as Queryable & { transaction(fn: (tx: Queryable) => Promise<unknown>): Promise<unknown> };
  wrapQuery(target);
  const transaction = target.transaction.bind(target);
  target.transaction = (fn) =>
    transaction((tx) => {
      wrapQuery(tx);
      return fn(tx);
    });
  return client;
}
