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
