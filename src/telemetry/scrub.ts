import type { Attributes, AttributeValue } from '@opentelemetry/api';
import type { ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { pathOnly, scrubText } from '../http/logging.ts';

/** Attributes that never leave: query strings, captured headers (cookies, authorization) and bodies, whoever set them. */
const DROPPED = /^(?:url\.query$|http\.(?:request|response)\.(?:header\.|body))/;

function scrubValue(key: string, value: AttributeValue): AttributeValue {
  if (typeof value === 'string') return scrubText(key === 'url.full' ? pathOnly(value) : value);
  if (Array.isArray(value)) return value.map((item) => (typeof item === 'string' ? scrubText(item) : item)) as AttributeValue;
  return value;
}

function scrubAttributes(attributes: Attributes): Attributes {
  const out: Attributes = {};
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || DROPPED.test(key)) continue;
    out[key] = scrubValue(key, value);
  }
  return out;
}

/**
 * A span as it may leave the process: attributes without query strings, headers or bodies and
 * with secret-shaped values redacted as in log lines (decision 151); an exception event keeps
 * its type only and the status its code only (a message can quote a parameter value or a
 * provider's answer). The span itself is not changed: a view over it is exported.
 */
function scrubSpan(span: ReadableSpan): ReadableSpan {
  return Object.create(span, {
    attributes: { value: scrubAttributes(span.attributes) },
    status: { value: { code: span.status.code } },
    events: {
      value: span.events.map((event) => ({
        ...event,
        attributes: event.name === 'exception' ? { 'exception.type': String(event.attributes?.['exception.type'] ?? 'Error') } : event.attributes && scrubAttributes(event.attributes),
      })),
    },
  }) as ReadableSpan;
}

/** Wraps an exporter so that every span passes `scrubSpan` on its way out: the one boundary every attribute crosses. */
export function scrubbingExporter(exporter: SpanExporter): SpanExporter {
  return {
    export: (spans: ReadableSpan[], done: (result: ExportResult) => void) => exporter.export(spans.map(scrubSpan), done),
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  };
}
