/**
 * Named prepared statements on PGlite (decision 330). PGlite's `query` parses, describes and
 * plans its text on every call, in six calls into the WebAssembly module; a hot statement
 * (`HotStatement`) is parsed once per database under its name and then costs one call: bind,
 * describe, execute and sync in one message. The statement's plan is PostgreSQL's to keep or
 * redo, as on a server connection.
 */
import type { PGlite, QueryOptions, Results, Transaction } from '@electric-sql/pglite';

type Protocol = typeof import('@electric-sql/pglite').protocol;
type ParseResults = typeof import('@electric-sql/pglite').parse.parseResults;

/** What PGlite keeps internal and this module relies on (0.5.x): the transaction lock, taken by `query` outside a transaction. */
interface PgliteInternals {
  /** Throws "PGlite is closing" / "PGlite is closed" (which db/failure.ts reads as the database unavailable), or waits until ready. */
  _checkReady(): Promise<void>;
  _runExclusiveTransaction<T>(fn: () => Promise<T>): Promise<T>;
}

/** A client (the database or one transaction's handle) that runs hot statements by name. */
export interface NamedQueries {
  queryNamed<T>(name: string, text: string, params: unknown[], options: QueryOptions): Promise<Results<T>>;
}

/** SQLSTATE of a named statement the session no longer has. */
const NO_SUCH_STATEMENT = '26000';

/**
 * Gives `client` and every transaction handle it opens a `queryNamed`. Install it before
 * anything wraps `transaction` (tracing), so the handles the wrappers see have it.
 */
export function installNamedQueries(client: PGlite, protocol: Protocol, parseResults: ParseResults): void {
  const { serialize } = protocol;
  /** The parameter types of each statement this database has parsed, by name. */
  const parsed = new Map<string, number[]>();
  const send = (parts: Uint8Array[]) => client.execProtocolStream(concat(parts), { syncToFs: false });

  async function prepare(name: string, text: string): Promise<number[]> {
    const known = parsed.get(name);
    if (known) return known;
    const messages = await send([serialize.parse({ name, text }), serialize.describe({ type: 'S', name }), serialize.sync()]);
    const types = (messages.find((message) => message.name === 'parameterDescription') as { dataTypeIDs?: number[] } | undefined)?.dataTypeIDs ?? [];
    parsed.set(name, types);
    return types;
  }

  async function run<T>(name: string, text: string, params: unknown[], options: QueryOptions, inTransaction: boolean): Promise<Results<T>> {
    return client.runExclusive(async () => {
      for (let attempt = 0; ; attempt++) {
        const types = await prepare(name, text);
        const values = params.map((value, index) => {
          if (value === null || value === undefined) return null;
          const type = types[index] as number;
          const serializer = options.serializers?.[type] ?? client.serializers[type];
          return serializer ? serializer(value) : String(value);
        });
        try {
          const messages = await send([serialize.bind({ statement: name, values }), serialize.describe({ type: 'P' }), serialize.execute({}), serialize.sync()]);
          if (!inTransaction) await client.syncToFs();
          return parseResults(messages, client.parsers, options)[0] as Results<T>;
        } catch (error) {
          // A statement the session lost (never expected: PGlite is one session for its lifetime) is parsed again, once.
          if (attempt > 0 || (error as { code?: string }).code !== NO_SUCH_STATEMENT) throw error;
          parsed.delete(name);
        }
      }
    });
  }

  const internals = client as unknown as PgliteInternals;
  Object.assign(client, {
    queryNamed: async <T>(name: string, text: string, params: unknown[], options: QueryOptions) => {
      // As `query` does: a closed database says so, in the words db/failure.ts knows.
      await internals._checkReady();
      return internals._runExclusiveTransaction(() => run<T>(name, text, params, options, false));
    },
  } satisfies NamedQueries);
  const transaction = client.transaction.bind(client);
  client.transaction = <T>(fn: (tx: Transaction) => Promise<T>) =>
    transaction((tx) => {
      Object.assign(tx, { queryNamed: <R>(name: string, text: string, params: unknown[], options: QueryOptions) => run<R>(name, text, params, options, true) } satisfies NamedQueries);
      return fn(tx);
    });
}

/** The client's `queryNamed` when it has one (PGlite's, through `installNamedQueries`). */
export function namedQueries(client: unknown): NamedQueries | null {
  return typeof (client as Partial<NamedQueries> | null)?.queryNamed === 'function' ? (client as NamedQueries) : null;
}

function concat(parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
