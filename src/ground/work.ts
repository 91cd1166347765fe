/**
 * What a use case works with, in every room and from every consumer: `fn(work, input)`, where
 * `work` is the transaction to read and write with and who acts (for audit rows), plus, for writes
 * that queue events, the outbox and the queue that runs once that transaction has committed.
 * Consumers build it: a request from its transaction (http/unit-of-work.ts), start-up work and
 * jobs with `systemUnitOfWork`.
 */
import type { Db } from '../db/client.ts';
import type { Outbox } from '../events/outbox.ts';
import type { Principal } from './principal.ts';

/** Who acts, as its audit rows name it. */
export interface AuditActor {
  principal: Principal | null;
  requestId: string | null;
  /** The acting user when there is no principal yet (registration, login). */
  userId?: string;
  /** A provider acting through its signed events (docs/contract.md §5b): credential kind `provider`, its id the credential. */
  provider?: string;
  /** The deployment's operator at its command line, on the database (`tessera service-tokens`, docs/contract.md §10): credential kind `operator`. */
  operator?: true;
}

/** A transaction and who acts in it: what a service function that queues no event needs. */
export interface Work {
  db: Db;
  actor: AuditActor;
}

/** `Work` that may queue events: they are written with `db` and delivered once it commits (`afterCommit`). */
export interface UnitOfWork extends Work {
  outbox: Outbox;
  afterCommit: (fn: () => unknown) => void;
}

/**
 * Runs `fn` in a transaction of its own, outside any request (start-up work), acting as
 * `actor`; what it queued for after the commit runs once the transaction has committed.
 */
export async function systemUnitOfWork<T>(db: Db, outbox: Outbox, actor: AuditActor, fn: (work: UnitOfWork) => Promise<T>): Promise<T> {
  const queued: (() => unknown)[] = [];
  const result = await db.transaction((tx) => fn({ db: tx as unknown as Db, outbox, actor, afterCommit: (callback) => queued.push(callback) }));
  for (const callback of queued) await callback();
  return result;
}
