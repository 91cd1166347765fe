/**
 * OpenTelemetry traces over OTLP/HTTP (docs/contract.md §10), configured by the standard `OTEL_*`
 * variables only. Loaded by main.ts — before the HTTP server and the database drivers, so the
 * instrumentations see them — and only when `tracesWanted()` says so: otherwise none of this
 * code, nor the SDK, is ever imported (decisions 150–152).
 */
import { context, propagation, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { getRPCMetadata, RPCType, W3CTraceContextPropagator } from '@opentelemetry/core';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, type Sampler, type SpanExporter, TraceIdRatioBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import type { Logger } from 'pino';
import { scrubbingExporter } from './scrub.ts';
import { installTraceHooks, type SpanAttributes } from './tracing.ts';

export interface Tracing {
  /** Exports what is still buffered, then stops (on shutdown, so the last requests' spans are not lost). */
  shutdown(): Promise<void>;
}

const SCOPE = 'tessera';

/** Starts the SDK, the instrumentations and Tessera's own span hooks. */
export async function startTracing(env: NodeJS.ProcessEnv, logger: Logger): Promise<Tracing> {
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf').trim();
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    logger.warn({ protocol }, `OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported (traces go over OTLP/HTTP): using http/protobuf`);
  }
  // Each exporter reads its endpoint, headers, timeout, compression and certificates from the OTEL_EXPORTER_OTLP_* variables itself.
  const exporter: SpanExporter =
    protocol === 'http/json'
      ? new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter()
      : new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'tessera' }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new TracerProvider({
    resource,
    sampler: samplerFrom(env),
    spanProcessors: [new BatchSpanProcessor({ exporter: scrubbingExporter(exporter), ...batchOptions(env) })],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      // Server spans only: our outgoing calls use fetch, and their spans are our own (providers must not get a traceparent).
      new HttpInstrumentation({ disableOutgoingRequestInstrumentation: true }),
      // Statements only: a pool checkout per statement doubled the spans of a token read.
      new PgInstrumentation({ enhancedDatabaseReporting: false, requireParentSpan: true, ignoreConnectSpans: true }),
    ],
  });
  const tracer = provider.getTracer(SCOPE);
  installTraceHooks({
    span: (name, kind, attributes, fn) =>
      tracer.startActiveSpan(name, { kind: kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL, attributes: defined(attributes) }, async (span: Span) => {
        try {
          return await fn(span);
        } catch (error) {
          // The type only: messages can quote what a provider or the database said.
          span.setStatus({ code: SpanStatusCode.ERROR });
          span.setAttribute('error.type', errorType(error));
          throw error;
        } finally {
          span.end();
        }
      }),
    headers: () => {
      const carrier: Record<string, string> = {};
      propagation.inject(context.active(), carrier);
      return carrier;
    },
    inTrace: () => trace.getSpan(context.active()) !== undefined,
    route: (route) => {
      const metadata = getRPCMetadata(context.active());
      if (metadata?.type === RPCType.HTTP) metadata.route = route;
    },
  });
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT || '';
  logger.info({ protocol: protocol === 'http/json' ? protocol : 'http/protobuf', endpoint: URL.parse(endpoint)?.origin ?? 'unparsable' }, 'traces are exported over OTLP/HTTP');
  return { shutdown: () => provider.shutdown() };
}

function defined(attributes: SpanAttributes): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [key, value] of Object.entries(attributes)) if (value !== undefined) out[key] = value;
  return out;
}

function errorType(error: unknown): string {
  const kind = (error as { kind?: unknown; code?: unknown }).kind ?? (error as { code?: unknown }).code;
  if (typeof kind === 'string' && /^[A-Za-z_]{1,40}$/.test(kind)) return kind;
  return error instanceof Error ? error.name : 'Error';
}

/** `OTEL_TRACES_SAMPLER` / `_ARG` as the specification names them (default: parent-based, always on). */
function samplerFrom(env: NodeJS.ProcessEnv): Sampler {
  const ratio = Number(env.OTEL_TRACES_SAMPLER_ARG ?? '1');
  const byRatio = () => new TraceIdRatioBasedSampler(Number.isFinite(ratio) && ratio >= 0 && ratio <= 1 ? ratio : 1);
  switch (env.OTEL_TRACES_SAMPLER?.trim()) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return byRatio();
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: byRatio() });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** `OTEL_BSP_*`: the batch processor's delay, timeout and sizes, where set to a positive integer. */
function batchOptions(env: NodeJS.ProcessEnv) {
  const read = (name: string) => {
    const value = Number(env[name]);
    return Number.isInteger(value) && value > 0 ? value : undefined;
  };
  const options = {
    scheduledDelayMillis: read('OTEL_BSP_SCHEDULE_DELAY'),
    exportTimeoutMillis: read('OTEL_BSP_EXPORT_TIMEOUT'),
    maxQueueSize: read('OTEL_BSP_MAX_QUEUE_SIZE'),
    maxExportBatchSize: read('OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
  };
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<typeof options>;
}
