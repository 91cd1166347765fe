/**
 * A request's unit of work (ground/work.ts), built in one place: the request's transaction,
 * its after-commit queue, and its caller as actor.
 */
import type { FastifyRequest } from 'fastify';
import type { AuditActor, UnitOfWork } from '../ground/work.ts';
import type { Outbox } from '../events/outbox.ts';

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
