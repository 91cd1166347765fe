import type { FastifyRequest } from 'fastify';
import type { AuditActor } from '../audit/audit.ts';
import type { Db } from '../db/client.ts';
import type { Principal } from '../http/context.ts';
import { AppError } from '../http/errors.ts';
import { requestActor, type UnitOfWork, unitOfWork } from '../http/unit-of-work.ts';
import type { Services } from '../services.ts';

/** What every resolver gets: the request (its pipeline context) and the services. */
export interface GraphQLContext {
  request: FastifyRequest;
  services: Services;
}

/** The schema builder's types: every field non-null unless it says otherwise. */
export type SchemaTypes = PothosSchemaTypes.ExtendDefaultTypes<{ Context: GraphQLContext; DefaultFieldNullability: false }>;

/** The schema builder (schema.ts makes the one instance; feature modules register on it when schema.ts calls them). */
export type Builder = PothosSchemaTypes.SchemaBuilder<SchemaTypes>;

/** What a `queryType` field map is built with. */
export type QueryFields = PothosSchemaTypes.QueryFieldBuilder<SchemaTypes, SchemaTypes['Root']>;

/** What a `mutationType` field map is built with. */
export type MutationFields = PothosSchemaTypes.MutationFieldBuilder<SchemaTypes, SchemaTypes['Root']>;

/** The caller (the pipeline has authenticated it: `/query` is an authenticated route). */
export function principalOf(ctx: GraphQLContext): Principal {
  const principal = ctx.request.ctx.principal;
  if (!principal) throw new AppError('UNAUTHENTICATED');
  return principal;
}

/** The caller as the actor of audit rows. */
export function actorOf(ctx: GraphQLContext): AuditActor {
  return requestActor(ctx.request);
}

/** The request's transaction: one per request, committed by the pipeline when the document succeeded. */
export function txOf(ctx: GraphQLContext): Promise<Db> {
  return ctx.request.ctx.tx();
}

/** The request's unit of work (its transaction, committed by the pipeline when the document succeeded). */
export function workOf(ctx: GraphQLContext): Promise<UnitOfWork> {
  return unitOfWork(ctx.request, ctx.services);
}
