import { isUtf8 } from 'node:buffer';
import { AppError } from '../ground/errors.ts';

/** Deepest JSON nesting accepted in a body. */
export const MAX_JSON_DEPTH = 64;

/**
 * What PostgreSQL or our own code cannot take even though JSON allows it: NUL
 * characters (PostgreSQL text refuses U+0000), unpaired UTF-16 surrogates (its json
 * refuses them) and nesting deep enough to exhaust the stack. Returns the problem, or null.
 */
export function unacceptableJson(value: unknown): string | null {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop() as [unknown, number];
    if (typeof node === 'string') {
      if (node.includes('\u0000')) return 'must not contain NUL characters';
      if (!node.isWellFormed()) return 'must not contain unpaired surrogates';
    } else if (node !== null && typeof node === 'object') {
      if (depth >= MAX_JSON_DEPTH) return `is nested deeper than ${MAX_JSON_DEPTH} levels`;
      for (const [key, child] of Object.entries(node)) {
        if (key.includes('\u0000') || !key.isWellFormed()) return 'has an unacceptable property name';
        stack.push([child, depth + 1]);
      }
    }
  }
  return null;
}

/** A run of percent-escapes: the bytes one decoded value is made of. */
const ESCAPE_RUN = /(?:%[0-9A-Fa-f]{2})+/g;

/**
 * A request body's text, or an `INVALID_INPUT` when its bytes are not UTF-8 (decision 236):
 * decoding them would replace each bad byte with U+FFFD silently, and store what the client
 * never sent. `percentEncoded` (a form body): the bytes its `%XX` escapes stand for must be
 * UTF-8 too, which `URLSearchParams` would replace the same way.
 */
export function utf8Body(body: Buffer, percentEncoded = false): string {
  if (!isUtf8(body)) throw invalidUtf8();
  const text = body.toString('utf8');
  if (percentEncoded && text.includes('%')) {
    for (const [run] of text.matchAll(ESCAPE_RUN)) if (!isUtf8(Buffer.from(run.replaceAll('%', ''), 'hex'))) throw invalidUtf8();
  }
  return text;
}

function invalidUtf8(): AppError {
  return new AppError('INVALID_INPUT', { message: 'Request body is not valid UTF-8', details: [{ path: 'body', message: 'must be valid UTF-8' }] });
}
