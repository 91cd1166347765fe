import type { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

/** Field names whose values never reach a log line, whatever their shape. */
const SECRET_KEY = '[^"]*(?:token|secret|password|passwd|authorization|cookie|api[_-]?key|code_verifier|client_assertion)[^"]*';
const SECRET_FIELD = new RegExp(String.raw`"(${SECRET_KEY})"\s*:\s*(?:"(?:[^"\\]|\\.)*"|\{[^{}]*\}|\[[^\[\]]*\])`, 'gi');

/** Values recognizable by shape: provider tokens, our own tokens, webhook secrets, JWTs. */
const SECRET_VALUES: [RegExp, string][] = [
  [/\bgh[opsur]_[A-Za-z0-9_]{8,}/g, 'gh*_[REDACTED]'],
  [/\bgithub_pat_[A-Za-z0-9_]{8,}/g, 'github_pat_[REDACTED]'],
  [/\bxox[a-z]-[A-Za-z0-9-]{6,}/g, 'xox*-[REDACTED]'],
  [/\bxoxe\.xox[a-z]-[A-Za-z0-9-]{6,}/g, 'xoxe-[REDACTED]'],
  [/\bts[pa]_[A-Za-z0-9_-]{8,}/g, 'ts*_[REDACTED]'],
  [/\bwhsec_[A-Za-z0-9+/=]{8,}/g, 'whsec_[REDACTED]'],
  [/\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g, '[REDACTED-JWT]'],
  [/\b(Bearer|Basic|token)\s+[A-Za-z0-9._~+/=-]{8,}/gi, '$1 [REDACTED]'],
  // A connect session's link holds its secret in the path.
  [/\/connect\/[A-Za-z0-9_-]{32,}/g, '/connect/[REDACTED]'],
  // Query strings carry OAuth codes and states: keep only the path of logged URLs.
  [/(\bhttps?:\/\/[^\s"?#]*|"url"\s*:\s*"[^"?]*)\?(?:[^"\s\\]|\\.)*/g, '$1?[REDACTED]'],
];

/** Scrubs a serialized log line by field name and by value shape. */
export function scrubLogLine(line: string): string {
  let out = line.replace(SECRET_FIELD, (_match, key: string) => `"${key}":"[REDACTED]"`);
  for (const [pattern, replacement] of SECRET_VALUES) out = out.replace(pattern, replacement);
  return out;
}

/** Strips the query string: codes and states must not reach the logs. */
export function pathOnly(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

export interface LoggerOptions {
  level: string;
  /** Where lines go; stdout when absent. Tests pass a stream to inspect them. */
  stream?: Writable;
}

/** The service's pino logger: JSON lines, redaction by path, then scrubbing by shape. */
export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level,
      base: { service: 'tessera' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          'res.headers["set-cookie"]',
          'headers.authorization',
          'headers.cookie',
          'headers["set-cookie"]',
          '*.password',
          '*.token',
          '*.secret',
        ],
        censor: '[REDACTED]',
      },
      hooks: { streamWrite: scrubLogLine },
      serializers: { err: serializeError },
    },
    options.stream ?? process.stdout,
  );
}

/**
 * Errors as logged: Drizzle's query errors carry the statement's parameters
 * (ciphertexts, hashes, e-mails) in their message and stack, so those are rebuilt
 * from the driver's own error, which names no values.
 */
export function serializeError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { message: String(error) };
  const isQueryError = error.name === 'DrizzleQueryError' || ('params' in error && 'query' in error);
  const source = isQueryError && error.cause instanceof Error ? error.cause : error;
  const out: Record<string, unknown> = {
    type: isQueryError ? 'DrizzleQueryError' : error.name,
    message: source.message,
    stack: source.stack,
  };
  const code = (source as { code?: unknown }).code;
  if (typeof code === 'string') out.code = code;
  if (!isQueryError && error.cause !== undefined) out.cause = serializeError(error.cause);
  return out;
}
