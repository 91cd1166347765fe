/**
 * What service functions of organizations and identity work with, built in one place:
 * `fn(work, input)`, where `work` is the transaction to read and write with and who acts
 * (for audit rows), plus, for writes that queue events, the outbox and the queue that
 * runs once that transaction has committed.
 */
import type { FastifyRequest } from 'fastify';
import type { AuditActor } from '../audit/audit.ts';
import type { Db } from '../db/client.ts';
import type { Outbox } from '../events/outbox.ts';

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

/** The request's caller as the actor of its audit rows. */
export function requestActor(request: FastifyRequest): AuditActor {
  return { principal: request.ctx.principal, requestId: request.id };
}

/**
 * The request's unit of work: its transaction (opened now, committed by the pipeline),
 * the outbox, its after-commit queue, and its caller as actor — or, where the request
 * has no caller yet (registration, login), `asUser` as the acting user.
 */
export async function unitOfWork(request: FastifyRequest, services: { outbox: Outbox }, asUser?: string): Promise<UnitOfWork> {
  return {
    db: await request.ctx.tx(),
    outbox: services.outbox,
    afterCommit: (fn) => request.ctx.afterCommit(fn),
    actor: asUser === undefined ? requestActor(request) : { principal: null, requestId: request.id, userId: asUser },
  };
}

/**
 * Opens the request's unit of work acting as the `actor` given, not the request's caller:
 * for a flow that learns who acts only part-way (an OAuth callback acts for the user who
 * started it). Opened when called, so a service can finish its provider calls first.
 */
export function unitOfWorkAs(request: FastifyRequest, services: { outbox: Outbox }): (actor: AuditActor) => Promise<UnitOfWork> {
  return async (actor) => ({ ...(await unitOfWork(request, services)), actor });
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
