/**
 * Whether a provider endpoint's host answers HTTP from here (docs/contract.md §10 `doctor`): any
 * status at all passes — an endpoint refuses a bare GET in its own way — and only a DNS,
 * connection or TLS failure or a timeout fails. No credential is ever sent.
 */

export type ProbeFailure = 'dns' | 'connection' | 'tls' | 'timeout';

export type ProbeResult = { ok: true; status: number; ms: number } | { ok: false; failure: ProbeFailure; reason: string };

const DNS = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_FAIL', 'EAI_NODATA']);
const TIMEOUT = new Set(['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT']);
const TLS = /^(CERT_|ERR_TLS_|ERR_SSL_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|HOSTNAME_MISMATCH$|ERR_OSSL_)/;

/** The innermost cause's code and message: undici keeps the system's error (or its own reason, e.g. "bad port") there. */
function rootCause(error: unknown): { code: string; message: string } {
  let current = error as { code?: unknown; message?: unknown; cause?: unknown } | undefined;
  let found = { code: '', message: String((error as Error)?.message ?? error) };
  for (let depth = 0; current && depth < 5; depth++) {
    if (typeof current.code === 'string') found = { ...found, code: current.code };
    if (typeof current.message === 'string' && current.message) found = { ...found, message: current.message };
    current = current.cause as typeof current;
  }
  return found;
}

/** GETs `url` (redirects not followed, body not read) and classifies what happened. */
export async function probe(url: string, timeoutMs: number): Promise<ProbeResult> {
  const started = performance.now();
  try {
    const response = await fetch(url, { method: 'GET', redirect: 'manual', signal: AbortSignal.timeout(timeoutMs), headers: { 'user-agent': 'tessera-doctor' } });
    await response.body?.cancel().catch(() => {});
    return { ok: true, status: response.status, ms: Math.round(performance.now() - started) };
  } catch (error) {
    const name = (error as Error)?.name;
    if (name === 'TimeoutError' || name === 'AbortError') return { ok: false, failure: 'timeout', reason: `no answer within ${timeoutMs / 1000} s` };
    const cause = rootCause(error);
    const { code } = cause;
    if (DNS.has(code)) return { ok: false, failure: 'dns', reason: `host name not found (${code})` };
    if (TIMEOUT.has(code)) return { ok: false, failure: 'timeout', reason: `no answer in time (${code})` };
    if (TLS.test(code) || /\b(certificate|SSL|TLS)\b/i.test(cause.message)) return { ok: false, failure: 'tls', reason: `TLS failed (${code || cause.message.slice(0, 80)})` };
    return { ok: false, failure: 'connection', reason: `connection failed (${code || cause.message.slice(0, 80)})` };
  }
}
