import { AsyncLocalStorage } from 'node:async_hooks';
import type { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { prettyStream } from './log-pretty.ts';

/** Field names whose values never reach a log line, whatever their shape. */
const SECRET_KEY = '[^"]*?(?:token|secret|password|passwd|authorization|cookie|api[_-]?key|code_verifier|client_assertion)[^"]*';
// Lazy (`[^"]*?`): the same matches, found without backtracking from each string's end.
const SECRET_FIELD = new RegExp(String.raw`"(${SECRET_KEY})"\s*:\s*(?:"(?:[^"\\]|\\.)*"|\{[^{}]*\}|\[[^\[\]]*\])`, 'gi');

/**
 * Every place a secret of ours rides in a URL — the one list the scrubber's URL rules are built
 * from (decision 235). Matched whatever the case of the letters, after every layer of
 * percent-encoding is undone (`scrubEncoded`).
 */
export const URL_SECRETS = {
  /**
   * Path segments after which a secret follows: the value of the next segment goes, whatever
   * its shape. `connect/`: `GET /connect/<secret>` (a connect session's link, src/web/connect-pages.ts)
   * and its start link `/v1/integrations/oauth/connect/<secret>/start` (src/http/form-guard.ts's
   * form route); `oauth/authorizations/`: `/v1/oauth/authorizations/<request>` (docs/contract.md §9a,
   * the consent handoff's request id, ≥ 32 random bytes).
   */
  pathPrefixes: ['connect', 'oauth/authorizations'],
  /**
   * Words that make a query or fragment parameter secret wherever its name contains one: OAuth's
   * `code` and `state` (callbacks, `/oauth/authorize`), `token`, `access_token`, `refresh_token`,
   * `subject_token` and the invitation link's `#token=` (§3), `code_verifier`, `client_assertion`,
   * keys, passwords, the handoff's `request=`.
   */
  parameterWords: ['token', 'secret', 'password', 'code', 'state', 'key', 'assertion', 'verifier', 'request'],
  /** Our own opaque tokens' prefixes (src/identity/credentials.ts; `tsr_`: §9a refresh tokens). */
  tokenPrefixes: ['tsp_', 'tsa_', 'tss_', 'tsc_', 'tsr_'],
  /** Any path segment this long of a secret's alphabet (base64url) is taken for one: `newSecret()` gives 43. */
  segmentLength: 32,
} as const;

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/**
 * A path separator as a browser reads one: `/`, or `\` — serialized in the line as `\\`, so
 * only a whole run of escaped backslashes counts (never the `\` of an escape such as `\n`).
 */
const SEP = String.raw`(?:/|(?<!\\)(?:\\\\)+)`;
/** A word matched in either case letter by letter: as fast as the word itself, where the `i` flag is not. */
const caseBlind = (word: string) => word.replace(/[a-z]/g, (letter) => `[${letter}${letter.toUpperCase()}]`);
const PATH_PREFIXES = URL_SECRETS.pathPrefixes.map((prefix) => caseBlind(escapeRegExp(prefix)).replaceAll('/', SEP)).join('|');
/**
 * A listed prefix and its next segment, or any segment of a secret's shape: one pattern, one pass.
 * Case-blind: `/CONNECT/<secret>` is the same secret (the router's case sensitivity aside).
 */
const SECRET_SEGMENT = new RegExp(String.raw`(${SEP}(?:(?:${PATH_PREFIXES})${SEP}(?=[^/\\?#\s"]{8})|(?=[A-Za-z0-9_-]{${URL_SECRETS.segmentLength}})))[^/\\?#\s"]+`, 'g');
const SECRET_PARAMETER = new RegExp(String.raw`([?&;#][^=&#\s"\\?]*(?:${URL_SECRETS.parameterWords.join('|')})[^=&#\s"\\?]*=)[^&#\s"\\]*`, 'gi');
const OUR_TOKEN = new RegExp(String.raw`\b(?:${URL_SECRETS.tokenPrefixes.map(escapeRegExp).join('|')})[A-Za-z0-9_-]{8,}`, 'gi');

/**
 * Values recognizable by shape: provider tokens, our own tokens, webhook secrets, JWTs; and the
 * URL rules above. Case-blind where a case-changed value could still be a secret (a path, a
 * parameter's name, our own prefixes); a provider's prefix in another case is no token of its.
 */
const SECRET_VALUES: [RegExp, string][] = [
  [/\bgh[opsur]_[A-Za-z0-9_]{8,}/g, 'gh*_[REDACTED]'],
  [/\bgithub_pat_[A-Za-z0-9_]{8,}/g, 'github_pat_[REDACTED]'],
  [/\bxox[a-z]-[A-Za-z0-9-]{6,}/g, 'xox*-[REDACTED]'],
  [/\bxoxe\.xox[a-z]-[A-Za-z0-9-]{6,}/g, 'xoxe-[REDACTED]'],
  [OUR_TOKEN, 'ts*_[REDACTED]'],
  [/\bwhsec_[A-Za-z0-9+/=]{8,}/g, 'whsec_[REDACTED]'],
  [/\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g, '[REDACTED-JWT]'],
  // RFC 6750's b64token: `_` included.
  [/\b(Bearer|Basic|token)\s+[\w.~+/=-]{8,}/gi, '$1 [REDACTED]'],
  // A connect session's link (and its start link) holds its secret in the path; so may others (URL_SECRETS).
  [SECRET_SEGMENT, '$1[REDACTED]'],
  // Query strings carry OAuth codes and states: keep only the path of logged URLs.
  [/(\bhttps?:\/\/[^\s"?#]*|"url"\s*:\s*"[^"?]*)\?(?:[^"\s\\]|\\.)*/g, '$1?[REDACTED]'],
  // A secret-named parameter wherever a query string (or a fragment) shows up without its URL.
  [SECRET_PARAMETER, '$1[REDACTED]'],
];

/** A JSON string literal of the serialized line. */
const JSON_STRING = /"(?:[^"\\]|\\.)*"/g;
const ESCAPES = /(?:%[0-9A-Fa-f]{2})+/g;
const HAS_ESCAPE = /%[0-9A-Fa-f]{2}/;
/** Layers of percent-encoding undone before a value is judged; one encoded deeper is redacted whole. */
const MAX_DECODE_ROUNDS = 8;

/** Percent-decodes until nothing changes, or null when still encoded after MAX_DECODE_ROUNDS. Invalid UTF-8 decodes to U+FFFD, as a browser's would. */
function decodedFully(text: string): string | null {
  let current = text;
  for (let round = 0; round < MAX_DECODE_ROUNDS && HAS_ESCAPE.test(current); round++) {
    current = current.replace(ESCAPES, (run) => Buffer.from(run.replaceAll('%', ''), 'hex').toString('utf8'));
  }
  return HAS_ESCAPE.test(current) ? null : current;
}

/** Scrubs by value shape; in a decoded value, a path's query string counts as one too. */
function scrubValues(text: string, decoded: boolean): string {
  let out = text;
  if (decoded) out = out.replace(/(^|\s)(\/[^\s?#]*)\?\S*/g, '$1$2?[REDACTED]');
  for (const [pattern, replacement] of SECRET_VALUES) out = out.replace(pattern, replacement);
  return out;
}

/**
 * Secrets percent-encoded (in part, in either hex case, once or several times) escape the
 * shapes above: each string of the line that holds escapes is judged decoded, and where that
 * finds a secret the whole string becomes its scrubbed decoded form, so neither the raw nor the
 * encoded secret stays.
 */
function scrubEncoded(line: string): string {
  if (!HAS_ESCAPE.test(line)) return line;
  return line.replace(JSON_STRING, (literal) => {
    if (!HAS_ESCAPE.test(literal)) return literal;
    let value: string;
    try {
      value = JSON.parse(literal) as string;
    } catch {
      // Not JSON after all (a line pino did not write): judge the text between the quotes.
      value = literal.slice(1, -1);
    }
    const decoded = decodedFully(value);
    if (decoded === null) return '"[REDACTED-ENCODED]"';
    const scrubbed = scrubValues(decoded, true);
    return scrubbed === decoded ? literal : JSON.stringify(scrubbed);
  });
}

/** Scrubs a serialized log line by field name and by value shape, the value shapes in decoded forms too. */
export function scrubLogLine(line: string): string {
  const out = line.replace(SECRET_FIELD, (_match, key: string) => `"${key}":"[REDACTED]"`);
  return scrubValues(scrubEncoded(out), false);
}

/** One text scrubbed by the rules of a log line (value shapes, decoded forms, query strings): for span attributes (telemetry/scrub.ts). */
export function scrubText(text: string): string {
  try {
    return JSON.parse(scrubLogLine(JSON.stringify(text))) as string;
  } catch {
    return '[REDACTED]';
  }
}

/** Strips the query string: codes and states must not reach the logs. */
export function pathOnly(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

export interface LoggerOptions {
  level: string;
  /** `json` (one JSON object a line) or `pretty` (one readable line); absent: pretty on a terminal, else JSON. */
  format?: 'json' | 'pretty' | undefined;
  /** Where lines go; stdout when absent. Tests pass a stream to inspect them. */
  stream?: Writable;
}

/**
 * The request a piece of work runs for, as far as logging cares: its id. Lines written through
 * a logger that is not the request's own (`services.logger` in a service, a refresh a request
 * leads) still carry it, because `createLogger`'s mixin reads it from here.
 */
export const requestScope = new AsyncLocalStorage<string>();

const { chindingsSym } = pino.symbols;

/** A line's `requestId` from the request scope, unless its logger is bound to one already (a request's own logger). */
function requestIdMixin(_merge: object, _level: number, logger: Logger): Record<string, string> {
  const requestId = requestScope.getStore();
  if (requestId === undefined || ((logger as unknown as Record<symbol, string>)[chindingsSym] ?? '').includes('"requestId":')) return {};
  return { requestId };
}

/**
 * The service's pino logger: redaction by path, then scrubbing by shape of the serialized
 * JSON line; `pretty` formats that already scrubbed line, so both formats hide the same.
 */
export function createLogger(options: LoggerOptions): Logger {
  const out = options.stream ?? process.stdout;
  const format = options.format ?? ((out as { isTTY?: boolean }).isTTY ? 'pretty' : 'json');
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
      mixin: requestIdMixin,
      hooks: { streamWrite: scrubLogLine },
      serializers: { err: serializeError },
    },
    format === 'pretty' ? prettyStream(out) : out,
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
