import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../db/client.ts';
import { databaseUnavailable } from '../db/failure.ts';

import type { Principal } from '../ground/principal.ts';

const ROLLBACK = Symbol('rollback');

interface Segment {
  tx: Db;
  finish(commit: boolean): Promise<void>;
}

/**
 * Opens a transaction whose end is decided later. Drizzle only offers callback
 * transactions; holding the callback open lets the pipeline commit after the
 * handler returns and before the response is sent, on both backends.
 */
function openSegment(db: Db): Promise<Segment> {
  return new Promise((resolveOpen, rejectOpen) => {
    let decide: (commit: boolean) => void = () => {};
    const decision = new Promise<boolean>((resolve) => {
      decide = resolve;
    });
    let opened = false;
    const done = db.transaction(async (tx) => {
      opened = true;
      resolveOpen({ tx: tx as unknown as Db, finish });
      if (!(await decision)) throw ROLLBACK;
    });
    async function finish(commit: boolean): Promise<void> {
      decide(commit);
      try {
        await done;
      } catch (error) {
        if (error !== ROLLBACK) throw error;
      }
    }
    done.catch((error: unknown) => {
      if (!opened) rejectOpen(error);
    });
  });
}

/**
 * Per-request state: request id, logger, the lazily opened request transaction,
 * after-commit callbacks, the caller, and a trace of the pipeline steps it passed.
 */
export class RequestContext {
  readonly requestId: string;
  readonly log: FastifyBaseLogger;
  /** Names of the pipeline steps that ran, in order, recorded by the pipeline's runner as it ran them. */
  readonly trace: string[] = [];
  principal: Principal | null = null;
  /** User id asked for by `X-Impersonate-User`, decided once the caller is known. */
  impersonateUserId: string | null = null;
  private root: Db | null = null;
  private segment: Promise<Segment> | null = null;
  private afterCommitQueue: (() => unknown)[] = [];

  constructor(requestId: string, log: FastifyBaseLogger) {
    this.requestId = requestId;
    this.log = log;
  }

  /** The root database, for system operations that commit on their own; there from the transaction step on. */
  get database(): Db {
    if (!this.root) throw new Error("the request has no database before the pipeline's transaction step");
    return this.root;
  }

  /** The transaction step: from here on the request's transaction can open on `database` (lazily, on first `tx()`). */
  useDatabase(database: Db): void {
    this.root = database;
  }

  /** The request's transaction, opened on first use; requests that touch no table pay nothing. */
  async tx(): Promise<Db> {
    this.segment ??= openSegment(this.database);
    return (await this.segment).tx;
  }

  /** Whether a request transaction is open now. */
  get inTransaction(): boolean {
    return this.segment !== null;
  }

  /** Runs `fn` after the request's writes commit; never after a rollback. */
  afterCommit(fn: () => unknown): void {
    this.afterCommitQueue.push(fn);
  }

  /**
   * Commits what the request wrote so far and runs its after-commit callbacks.
   * Routes that call a provider use it so that no transaction spans the call;
   * a later `tx()` opens a new transaction. A failed commit throws.
   */
  async commit(): Promise<void> {
    const segment = this.segment;
    this.segment = null;
    if (segment) await (await segment).finish(true);
    const queue = this.afterCommitQueue;
    this.afterCommitQueue = [];
    for (const fn of queue) {
      try {
        const result = fn();
        if (result instanceof Promise) result.catch((error: unknown) => this.log.error({ err: error }, 'after-commit callback failed'));
      } catch (error) {
        this.log.error({ err: error }, 'after-commit callback failed');
      }
    }
  }

  /** Rolls back the open transaction, if any, and drops pending after-commit callbacks. */
  async rollback(): Promise<void> {
    const segment = this.segment;
    this.segment = null;
    this.afterCommitQueue = [];
    if (!segment) return;
    try {
      await (await segment).finish(false);
    } catch (error) {
      // A connection that is gone took its transaction with it: the server rolled it back, nothing to report.
      if (!databaseUnavailable(error)) this.log.error({ err: error }, 'rollback failed');
    }
  }

  /** Runs `fn` in its own short transaction that commits on return (a system operation). */
  async system<T>(fn: (tx: Db) => Promise<T>): Promise<T> {
    if (this.segment) throw new Error('system transaction requested while the request transaction is open; commit() first');
    return this.database.transaction((tx) => fn(tx as unknown as Db));
  }
}
