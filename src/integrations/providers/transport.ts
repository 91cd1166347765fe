/**
 * The one way Tessera talks HTTP to a provider: token endpoints, account checks, the
 * definitions' hooks, revocations and proxied calls all go through `providerFetch`, so the
 * timeout, the refusal to follow redirects, the size cap, the metrics and the failure type
 * are the same for every call — and anything that must wrap every provider call (a trace
 * span) wraps this one function.
 */
import { ProviderError } from './types.ts';
import { type OutboundGuard, type OutboundOrigin, OutboundRefused } from '../../lib/outbound.ts';
import { providerCallSpan } from '../../telemetry/tracing.ts';

/** One request to a provider, as data. */
export interface ProviderRequest {
  /** The provider's id (metrics, and whoever observes calls). */
  provider: string;
  url: string | URL;
  method: string;
  headers: Record<string, string>;
  body?: string;
  /**
   * Set when the deployment's settings did not fix this URL: where it came from (§1's outbound
   * guard). `entered` — built from an entered value (§5c); later `client_metadata`, `webhook`,
   * `key_set`. Such a call goes through `TransportLimits.guard`.
   */
  outbound?: OutboundOrigin;
}

/** A provider's answer: its status, headers and the whole body (within the cap). */
export interface ProviderAnswer {
  status: number;
  headers: Headers;
  body: Buffer;
}

/** Limits of one call: milliseconds until it is abandoned, and the largest body read. */
export interface TransportLimits {
  timeoutMs: number;
  maxBytes: number;
  /** The outbound guard (lib/outbound.ts) for requests naming an `outbound` origin; without one such a request is refused. */
  guard?: OutboundGuard;
}

/** Reports each call: the provider, its outcome (the HTTP status, or `transient`) and its duration. */
export type ObserveCall = (provider: string, outcome: string, seconds: number) => void;

/**
 * One provider call: a timeout, no redirect followed (a 3xx comes back as it is), the body
 * read up to `maxBytes`. A network failure, a timeout, a body over the cap or one that cannot
 * be read is `ProviderError('transient')`; its cause is kept for debugging but never logged
 * raw (it can hold URLs with codes). Any status comes back: judging it is the caller's.
 */
export function providerFetch(request: ProviderRequest, limits: TransportLimits, observe?: ObserveCall): Promise<ProviderAnswer> {
  // With traces on, each provider call is a client span (provider, host, status); no traceparent goes to the provider.
  return providerCallSpan(request.provider, request.url, request.method, () => call(request, limits, observe));
}

async function call(request: ProviderRequest, limits: TransportLimits, observe?: ObserveCall): Promise<ProviderAnswer> {
  const started = performance.now();
  const report = (outcome: string) => observe?.(request.provider, outcome, (performance.now() - started) / 1000);
  let response: Response;
  const init = { method: request.method, headers: request.headers, ...(request.body !== undefined ? { body: request.body } : {}), signal: AbortSignal.timeout(limits.timeoutMs) };
  try {
    if (request.outbound !== undefined) {
      // A URL the settings did not fix: only through the guard, which checks the address it connects to.
      if (!limits.guard) throw new OutboundRefused(new URL(request.url).hostname, '', 'invalid');
      response = await limits.guard.fetch(request.url, init, request.outbound);
    } else {
      response = await fetch(request.url, { ...init, redirect: 'manual' });
    }
  } catch (error) {
    report('transient');
    if (error instanceof OutboundRefused) throw new ProviderError('transient', 'provider address refused by the outbound guard', { cause: error });
    const timedOut = error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
    throw new ProviderError('transient', timedOut ? 'provider timed out' : 'provider unreachable', { cause: error });
  }
  report(String(response.status));
  let body: Buffer | null;
  try {
    body = await readCapped(response, limits.maxBytes);
  } catch (error) {
    throw new ProviderError('transient', 'provider answer could not be read', { status: response.status, cause: error });
  }
  if (!body) {
    const size = limits.maxBytes >= 1024 * 1024 ? `${limits.maxBytes / (1024 * 1024)} MiB` : `${limits.maxBytes} bytes`;
    throw new ProviderError('transient', 'provider answer too large', { status: response.status, answer: `The provider answer is larger than ${size}` });
  }
  return { status: response.status, headers: response.headers, body };
}

/** The whole body, or null when it is larger than `limit` bytes (reading stops there); read errors throw. */
async function readCapped(response: Response, limit: number): Promise<Buffer | null> {
  const chunks: Uint8Array[] = [];
  if (!response.body) return Buffer.alloc(0);
  const reader = response.body.getReader();
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}
