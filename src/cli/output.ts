/**
 * How the command line speaks: aligned tables and `key  value` lists for people, one JSON
 * document for scripts (`--json`), and failures on stderr with their code. Every value from a
 * server or a setting is printed through `clean()`: a name with terminal escapes in it must not
 * be able to rewrite what a person sees.
 */

/** A failure the command line reports as one line: its code (docs/contract.md §2, or the client's own), the message, and what to do. */
export class CliFailure extends Error {
  readonly code: string | undefined;
  readonly fix: string | undefined;
  readonly requestId: string | undefined;
  readonly details: { path: string; message: string }[];
  constructor(
    message: string,
    options: { code?: string | undefined; fix?: string | undefined; requestId?: string | undefined; details?: { path: string; message: string }[]; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CliFailure';
    this.code = options.code;
    this.fix = options.fix;
    this.requestId = options.requestId;
    this.details = options.details ?? [];
  }
}

/** Text made safe for a terminal: control characters (escape sequences, carriage returns) become spaces. */
export function clean(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value);
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');
}

/** Writes one line to stdout. */
export function line(text = ''): void {
  process.stdout.write(`${text}\n`);
}

/** Writes one JSON document to stdout (scripts read it whole). */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** A table with a header row, columns aligned; an empty list says so in words. */
export function printTable(columns: readonly string[], rows: readonly (readonly unknown[])[], empty = 'none'): void {
  if (rows.length === 0) {
    line(`(${empty})`);
    return;
  }
  const cells = [columns.map((column) => column.toUpperCase()), ...rows.map((row) => row.map(clean))];
  const widths = columns.map((_, index) => Math.max(...cells.map((row) => (row[index] ?? '').length)));
  for (const row of cells) {
    line(
      row
        .map((cell, index) => (index === row.length - 1 ? cell : cell.padEnd(widths[index] ?? 0)))
        .join('  ')
        .trimEnd(),
    );
  }
}

/** `label  value` lines, labels aligned (one record for people). Undefined values are left out. */
export function printFields(fields: Record<string, unknown>): void {
  const entries = Object.entries(fields).filter(([, value]) => value !== undefined);
  const width = Math.max(...entries.map(([label]) => label.length));
  for (const [label, value] of entries) line(`${label.padEnd(width)}  ${clean(Array.isArray(value) ? value.join(', ') : value)}`);
}

/** A date-time as people read it in a table (UTC, to the second); empty for none. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? clean(iso) : `${date.toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

/**
 * Reports a failure on stderr — `error CODE: message` with the fix and the request id for
 * people, Tessera's error shape (§2) as JSON for scripts — and returns the exit code.
 */
export function reportFailure(error: unknown, json: boolean): number {
  const failure = error instanceof CliFailure ? error : new CliFailure((error as Error)?.message ?? String(error));
  if (json) {
    const body = {
      success: false,
      error: failure.message,
      ...(failure.code ? { code: failure.code } : {}),
      ...(failure.requestId ? { requestId: failure.requestId } : {}),
      ...(failure.details.length > 0 ? { details: failure.details } : {}),
      ...(failure.fix ? { fix: failure.fix } : {}),
    };
    process.stderr.write(`${JSON.stringify(body)}\n`);
    return 1;
  }
  process.stderr.write(`error${failure.code ? ` ${failure.code}` : ''}: ${clean(failure.message)}\n`);
  for (const detail of failure.details) process.stderr.write(`  ${clean(detail.path)}: ${clean(detail.message)}\n`);
  if (failure.fix) process.stderr.write(`fix: ${clean(failure.fix)}\n`);
  if (failure.requestId) process.stderr.write(`request id: ${clean(failure.requestId)}\n`);
  return 1;
}
