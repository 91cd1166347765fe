/**
 * One signed POST of an event to a webhook (Standard Webhooks), and what the delivery log
 * records of it: when, the receiver's status, our words for a failure, how long it took.
 */
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import { OutboundRefused } from '../lib/outbound.ts';
import { webhookSpan } from '../telemetry/tracing.ts';

/**
 * A webhook: where to send, and the keys that sign — one, or during a rotation's overlap the new
 * and the old (docs/contract.md §7), each giving one `v1,` signature, the newest first.
 */
export interface Webhook {
  url: string;
  keys: readonly KeyObject[];
}

/** An event as it is delivered. */
export interface OutgoingEvent {
  id: string;
  type: string;
  occurredAt: string;
  data: Record<string, unknown>;
}

/** One attempt as the delivery log keeps it. */
export interface Attempt {
  delivered: boolean;
  at: Date;
  /** The receiver's HTTP status; null when none arrived. */
  responseStatus: number | null;
  /** Our words for why it failed (never the receiver's body); null when it was delivered. */
  error: string | null;
  durationMs: number;
}

export interface SendOptions {
  timeoutMs: number;
  fetch: typeof fetch;
  /** Milliseconds since the epoch, for `webhook-timestamp` (tests move it). */
  clock: () => number;
}

/** The HMAC key: the base64 after `whsec_`, per Standard Webhooks. */
export function signingKey(secret: string): KeyObject {
  return createSecretKey(Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64'));
}

/** A webhook's URL as the delivery log shows it: no userinfo, no query, no fragment (either may carry the receiver's credential). */
export function publicEndpoint(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    return '';
  }
}

/** An attempt that never reached the receiver (the event could not be prepared). */
export function notSent(error: string): Attempt {
  return { delivered: false, at: new Date(), responseStatus: null, error, durationMs: 0 };
}

/**
 * POSTs the event, signed anew (the `webhook-id` is the event id on every attempt): 2xx is
 * delivered, anything else (a redirect included) is not.
 */
export function send(event: OutgoingEvent, hook: Webhook, options: SendOptions & { spanAttributes?: Record<string, string | number> }): Promise<Attempt> {
  // With traces on, a span of its own whose `traceparent` goes along to the receiver.
  return webhookSpan(hook.url, { 'tessera.event.type': event.type, ...options.spanAttributes }, async (span, traceHeaders) => {
    const attempt = await post(event, hook, options, traceHeaders);
    if (attempt.responseStatus !== null) span.setAttribute('http.response.status_code', attempt.responseStatus);
    if (!attempt.delivered) span.setAttribute('error.type', attemptError(attempt));
    return attempt;
  });
}

async function post(event: OutgoingEvent, hook: Webhook, options: SendOptions, traceHeaders: Record<string, string>): Promise<Attempt> {
  const body = JSON.stringify({ id: event.id, type: event.type, occurredAt: event.occurredAt, data: event.data });
  const timestamp = Math.floor(options.clock() / 1000).toString();
  const signed = `${event.id}.${timestamp}.${body}`;
  const signature = hook.keys.map((key) => `v1,${createHmac('sha256', key).update(signed).digest('base64')}`).join(' ');
  const at = new Date();
  const started = performance.now();
  const took = () => Math.round(performance.now() - started);
  try {
    const response = await options.fetch(hook.url, {
      method: 'POST',
      headers: { ...traceHeaders, 'content-type': 'application/json', 'webhook-id': event.id, 'webhook-timestamp': timestamp, 'webhook-signature': signature },
      body,
      // A redirect could send a signed event elsewhere; a 3xx is a failure, like any non-2xx.
      redirect: 'manual',
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    // The body is never read (it may echo anything); cancelling frees the connection.
    await response.body?.cancel().catch(() => {});
    const status = response.status || null;
    if (status !== null && status >= 200 && status < 300) return { delivered: true, at, responseStatus: status, error: null, durationMs: took() };
    return { delivered: false, at, responseStatus: status, error: status === null ? 'redirect' : null, durationMs: took() };
  } catch (error) {
    return { delivered: false, at, responseStatus: null, error: describeFetchError(error), durationMs: took() };
  }
}

/** A short, body-free description: fetch errors can carry URLs with credentials and provider text. */
function describeFetchError(error: unknown): string {
  // The outbound guard refused the address the endpoint's host resolved to (docs/contract.md §1).
  if (error instanceof OutboundRefused || (error as { cause?: unknown } | undefined)?.cause instanceof OutboundRefused) return 'outbound_refused';
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) return 'timeout';
  const code = (error as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,40}$/.test(code) ? `network error (${code})` : 'network error';
}

/** The words the delivery's `last_error` and the log line keep for a failed attempt. */
export function attemptError(attempt: Attempt): string {
  return attempt.error ?? `HTTP ${attempt.responseStatus ?? 'redirect'}`;
}
