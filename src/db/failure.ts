import type { Config } from '../config/load.ts';

/** What a failure to reach or use PostgreSQL means, by the driver's or the server's code. */
const MEANING: Record<string, string> = {
  ECONNREFUSED: 'connection refused (is PostgreSQL running, on that host and port?)',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed (DNS)',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'connection timed out',
  ECONNRESET: 'connection reset by the server',
  EPIPE: 'connection closed by the server',
  '28P01': 'password authentication failed',
  '28000': 'the server refused this user or address (pg_hba.conf)',
  '3D000': 'the database does not exist',
  '53300': 'too many connections',
  '57P03': 'the server is starting up or shutting down',
};

/**
 * A start-up failure to reach or use the database as one line naming `DATABASE_URL` and where it
 * points — host and port only, never the user's password — or null when `error` is not about
 * reaching PostgreSQL (it is then reported as it is).
 */
export function databaseFailure(error: unknown, config: Config): Error | null {
  if (!config.db.url || !(error instanceof Error)) return null;
  const code = (error as { code?: unknown }).code;
  const timedOut = /timeout/i.test(error.message) && /connect|connection/i.test(`${error.message} ${String(code ?? '')}`);
  const meaning = typeof code === 'string' ? MEANING[code] : timedOut ? `no answer within DB_CONNECT_TIMEOUT (${config.db.connectTimeout} s)` : undefined;
  const sslProblem = /\bSSL\b|certificate/i.test(error.message);
  if (!meaning && !sslProblem) return null;
  const url = URL.parse(config.db.url);
  const where = url ? `${url.hostname}:${url.port || '5432'}` : 'an unparsable URL';
  // The user and the database name are not secrets; they say which of them the server refused.
  const detail = code === '28P01' && url?.username ? ` for user "${decodeURIComponent(url.username)}"` : code === '3D000' && url ? ` ("${decodeURIComponent(url.pathname.slice(1))}")` : '';
  const verb = typeof code === 'string' && !code.startsWith('E') ? 'cannot use' : 'cannot reach';
  return new Error(`${verb} the database at DATABASE_URL (${where}): ${meaning ?? 'TLS failed (check sslmode and the server certificate)'}${detail}`, { cause: error });
}

/** Node's socket codes for a server that cannot be reached or went away. */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED']);
/**
 * PostgreSQL's SQLSTATEs of a server that is going away, not yet back, or out of connection
 * slots: class 08 (connection exception), 53300 too_many_connections, 57P01 admin_shutdown,
 * 57P02 crash_shutdown, 57P03 cannot_connect_now, 57P05 idle_session_timeout.
 */
const UNAVAILABLE_SQLSTATES = new Set(['53300', '57P01', '57P02', '57P03', '57P05']);
/** What `pg`, `pg-pool` and PGlite say, without a code, when the connection is gone, the pool's wait ran out, or the pool/database was closed (shutdown). */
const UNAVAILABLE_MESSAGES = [
  /^Connection terminated/,
  /^timeout exceeded when trying to connect$/,
  /^Client has encountered a connection error and is not queryable$/,
  /^Client was closed and is not queryable$/,
  /^Cannot use a pool after calling end on the pool$/,
  /^Query read timeout$/,
  /^PGlite is closed$/,
  /^sorry, too many clients already/,
  /^the database system is (starting up|shutting down|in recovery mode)/,
];

/**
 * The one classification of database failures (issue 35): true when `error`, or any error in
 * its `cause` chain (Drizzle wraps the driver's error as "Failed query…"), says the database
 * is unreachable, restarting, out of connection slots, past the pool's wait, or closed because
 * the instance is shutting down — a condition to retry, answered 503 (docs/contract.md §2),
 * never a bug. A query's own failure (a constraint, a syntax error, a statement timeout on a
 * server that answers) is not one.
 */
export function databaseUnavailable(error: unknown): boolean {
  const seen = new Set<unknown>();
  for (let current = error; current instanceof Error && !seen.has(current); current = current.cause) {
    seen.add(current);
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && (UNREACHABLE_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code))) return true;
    if (UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(current.message))) return true;
    // An AggregateError (a host name with several addresses, each refused).
    if (current instanceof AggregateError && current.errors.some((inner) => databaseUnavailable(inner))) return true;
  }
  return false;
}

/** Seconds a client is told to wait (`Retry-After`) while the database is unavailable (decision 250). */
export const DATABASE_RETRY_AFTER_SECONDS = 2;
