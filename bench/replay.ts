/**
 * Same-work baselines by record and replay: a census records the statements one request of a
 * case runs (text and values, through Drizzle's logger on the app's own handle), and a bare
 * route replays them through the same pool — so the ratio of the route to its replay is what
 * Tessera adds beyond its database work, and a new case needs no hand-written baseline. Values
 * that differ between two recorded requests (audit ids, request ids, nonces, timestamps) are
 * made fresh on every replay, so the replay's inserts do not collide.
 */
import { createRequire } from 'node:module';
import { HotStatement } from '../src/db/client.ts';
import type { Database } from '../src/db/client.ts';

/** One statement as a request ran it. */
export interface Recorded {
  text: string;
  params: unknown[];
  /** The prepared statement's name when the app runs it as a HotStatement (prepared per connection on PostgreSQL). */
  name: string | null;
}

/** Hot statements' names by text, learnt as the app runs them (HotStatement keeps them private). */
const hotNames = new Map<string, string>();
const originalRows = HotStatement.prototype.rows;
HotStatement.prototype.rows = function rows(this: HotStatement<unknown>, db, values) {
  // biome-ignore lint/suspicious/noExplicitAny: reading HotStatement's private text and name, bench-only
  const self = this as any;
  if (!hotNames.has(self.query.sql)) hotNames.set(self.query.sql, self.name);
  return originalRows.call(this, db, values);
} as typeof originalRows;

/** Records the statements Drizzle runs on `database` while a recording is open; costs one branch per statement otherwise. */
export class Recorder {
  private current: Recorded[] | null = null;

  constructor(database: Database) {
    const logger = { logQuery: (text: string, params: unknown[]) => this.current?.push({ text, params: [...params], name: null }) };
    // biome-ignore lint/suspicious/noExplicitAny: Drizzle's session keeps its logger in two places (its own, and the options transactions copy)
    const session = (database.db as any)._.session;
    session.logger = logger;
    session.options = { ...session.options, logger };
  }

  /**
   * Waits until no statement has run for `quietMs` (requests a load generator left in flight
   * finish after it returns), so a recording holds one request's statements only.
   */
  async quiesce(quietMs = 150, maxMs = 10_000): Promise<void> {
    const until = Date.now() + maxMs;
    while (Date.now() < until) {
      const seen = await this.record(() => new Promise((resolve) => setTimeout(resolve, quietMs)));
      if (seen.length === 0) return;
    }
    throw new Error(`the database did not go quiet within ${maxMs} ms`);
  }

  /** The statements `fn` ran (nothing else may use the database meanwhile: see quiesce). */
  async record(fn: () => Promise<void>): Promise<Recorded[]> {
    const seen: Recorded[] = [];
    this.current = seen;
    try {
      await fn();
    } finally {
      this.current = null;
    }
    return seen.map((statement) => ({ ...statement, name: hotNames.get(statement.text) ?? null }));
  }
}

/** Two recordings of the same request → a statement list that replays with fresh values where they differed. */
export function replayable(first: Recorded[], second: Recorded[]): { statements: Recorded[]; fresh: (boolean | null)[][]; problem: string | null } {
  const shape = (list: Recorded[]) => list.map((s) => s.text).join('\n;\n');
  if (shape(first) !== shape(second)) return { statements: first, fresh: [], problem: 'two identical requests ran different statements' };
  const fresh = first.map((statement, i) => statement.params.map((value, j) => freshKind(value, (second[i] as Recorded).params[j])));
  const kept = fresh.flat().filter((f) => f === null).length;
  return { statements: first, fresh, problem: kept ? `${kept} value(s) differ between requests in a way the replay cannot renew` : null };
}

/** false: the same in both; true: renewable; null: differs but cannot be renewed. */
function freshKind(a: unknown, b: unknown): boolean | null {
  if (a instanceof Date || b instanceof Date) return true;
  if (a === b) return false;
  if (typeof a === 'string' && typeof b === 'string' && a.length === b.length) return true;
  return JSON.stringify(a) === JSON.stringify(b) ? false : null;
}

let counter = 0;

/**
 * `template` with every word (a run of letters, digits, `_` and `-`) that differs from `other`
 * ending in a new counter: digits are valid in ULIDs, hex, base64url and decimal alike, and
 * the counter keeps each replay's ids unique.
 */
function renew(template: string, other: string): string {
  const stamp = String(++counter).padStart(10, '0');
  return template.replace(/[A-Za-z0-9_-]+/g, (word, offset: number) => {
    if (other.slice(offset, offset + word.length) === word) return word;
    const n = Math.min(word.length, stamp.length);
    return word.slice(0, word.length - n) + stamp.slice(stamp.length - n);
  });
}

/** The values of one replay of `statements`, renewed where `fresh` says so. */
function valuesFor(statement: Recorded, fresh: (boolean | null)[] | undefined, other: Recorded | undefined): unknown[] {
  return statement.params.map((value, j) => {
    if (fresh?.[j] !== true) return value;
    if (value instanceof Date) return new Date();
    return renew(String(value), String(other?.params[j] ?? ''));
  });
}

interface Queryable {
  query(config: { name?: string; text: string; values: unknown[]; rowMode?: 'array'; types?: unknown } | string, values?: unknown[]): Promise<unknown>;
}

/** Dates and intervals as the text PostgreSQL sent, as Drizzle's pg session reads them (it parses them itself, later). */
const RAW_TEXT = new Set([1082, 1114, 1184, 1186, 1115, 1182, 1185, 1187, 1231]);
let pgTypes: { getTypeParser(id: number, format?: string): unknown } | null = null;
const textTypes = {
  getTypeParser: (id: number, format?: string) => (RAW_TEXT.has(id) ? (value: string) => value : pgTypes?.getTypeParser(id, format)),
};

/**
 * Runs a replay through the app's own pool: statement by statement, or — when the request
 * opened a transaction — all on one connection (on PGlite inside its `transaction`, which
 * keeps other requests' statements out of it).
 */
export function replayer(database: Database, first: Recorded[], second: Recorded[], fresh: (boolean | null)[][]): () => Promise<number> {
  // biome-ignore lint/suspicious/noExplicitAny: the driver's own client, under Drizzle (a pg Pool or a PGlite)
  const client = (database.db as any).$client;
  if (database.kind === 'pg') pgTypes ??= createRequire(import.meta.url)('pg').types;
  const inTransaction = first.some((s) => /^begin\b/i.test(s.text.trim()));
  const run = async (on: Queryable, skipBeginCommit: boolean) => {
    for (let i = 0; i < first.length; i++) {
      const statement = first[i] as Recorded;
      if (skipBeginCommit && /^(begin|commit)\b/i.test(statement.text.trim())) continue;
      const values = valuesFor(statement, fresh[i], second[i]);
      // The driver's cheapest reading of the same rows (arrays, dates left as text): the stricter baseline.
      if (database.kind === 'pg') await on.query({ ...(statement.name ? { name: statement.name } : {}), text: statement.text, values, rowMode: 'array', types: textTypes });
      else await on.query(statement.text, values);
    }
    return first.length;
  };
  if (!inTransaction) return () => run(client, false);
  if (database.kind === 'pglite') return () => client.transaction((tx: Queryable) => run(tx, true));
  return async () => {
    const connection = await client.connect();
    try {
      return await run(connection, false);
    } catch (error) {
      await connection.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      connection.release();
    }
  };
}

/** A statement's first words, for the census line: what kind of work it is. */
export function summary(statements: Recorded[]): string {
  return statements.map((s) => `${s.name ? 'prepared ' : ''}${s.text.trim().replace(/\s+/g, ' ').slice(0, 60)}`).join(' | ');
}
