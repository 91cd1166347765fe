import { createRequire } from 'node:module';
import type { Writable } from 'node:stream';
import type { PrettyOptions } from 'pino-pretty';

type Line = Record<string, unknown>;

/** Keys the line's head already shows (time, level, request id, message) or that say nothing on a terminal. */
const SHOWN = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service', 'requestId', 'err']);

/** A field as `key=value`: bare when the value is one word, JSON otherwise. */
function field(key: string, value: unknown): string {
  return `${key}=${typeof value === 'string' && /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)}`;
}

/** `[requestId] message key=value…`, then an error's type, message and stack (indented lines of the same entry). */
function messageFormat(line: Line, messageKey: string): string {
  const fields = Object.entries(line)
    .filter(([key, value]) => !SHOWN.has(key) && value !== undefined)
    .map(([key, value]) => field(key, value));
  const head = `${typeof line.requestId === 'string' ? `[${line.requestId}] ` : ''}${String(line[messageKey] ?? '')}${fields.length > 0 ? ` ${fields.join(' ')}` : ''}`;
  const err = line.err as { type?: string; message?: string; stack?: string } | undefined;
  if (!err) return head;
  const stack = typeof err.stack === 'string' ? `\n    ${err.stack.split('\n').slice(1).join('\n    ').trim()}` : '';
  return `${head} — ${err.type ?? 'Error'}: ${err.message ?? ''}${stack}`;
}

/**
 * A destination that prints each JSON line pino writes (already scrubbed by its `streamWrite`
 * hook) as one readable line, through pino-pretty's formatter: synchronously, in this thread,
 * so a line written just before the process exits is not lost. pino-pretty is loaded only here,
 * when a pretty format is asked for.
 */
export function prettyStream(out: Writable): { write(line: string): void } {
  const { prettyFactory } = createRequire(import.meta.url)('pino-pretty') as typeof import('pino-pretty');
  const options: PrettyOptions = {
    colorize: (out as { isTTY?: boolean }).isTTY === true && !process.env.NO_COLOR,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,service',
    hideObject: true,
    messageFormat,
  };
  const pretty = prettyFactory(options);
  return { write: (line: string) => out.write(pretty(line)) };
}
