import type { FastifyRequest } from 'fastify';
import type { GraphQLFieldResolver, GraphQLSchema } from 'graphql';
import type { AuditActor } from '../ground/work.ts';
import type { Db } from '../db/client.ts';
import type { Principal } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import { requestActor, unitOfWork } from '../http/unit-of-work.ts';
import type { UnitOfWork } from '../ground/work.ts';
import type { Services } from '../services.ts';

/** What every resolver gets: the request (its pipeline context) and the services. */
export interface GraphQLContext {
  request: FastifyRequest;
  services: Services;
  /** The request's answers to root query fields, by field and arguments (resolvedOncePerRequest). */
  answers: Map<string, Promise<unknown>>;
}

/** A fresh context for one HTTP request (all the operations of a batch share it). */
export function graphqlContext(request: FastifyRequest, services: Services): GraphQLContext {
  return { request, services, answers: new Map() };
}

/**
 * Makes every root query field resolve once per request for the same arguments: its answer
 * (`me`, `organization`, a list…) is the same for the whole request, so a thousand aliases of
 * it read the database once. Any mutation drops what was read before it, so a read after a
 * write in the same request sees the write. Applied to the built schema, so a new root field
 * is covered without anyone remembering to.
 */
export function resolvedOncePerRequest(schema: GraphQLSchema): GraphQLSchema {
  for (const field of Object.values(schema.getQueryType()?.getFields() ?? {})) {
    const resolve = field.resolve as GraphQLFieldResolver<unknown, GraphQLContext> | undefined;
    if (!resolve) continue;
    field.resolve = (root, args, ctx: GraphQLContext, info) => {
      // graphql-js builds args in the field's declared order, so equal arguments serialize alike.
      const key = `${field.name}(${JSON.stringify(args)})`;
      let answer = ctx.answers.get(key);
      if (!answer) {
        answer = Promise.resolve().then(() => resolve(root, args, ctx, info));
        ctx.answers.set(key, answer);
      }
      return answer;
    };
  }
  for (const field of Object.values(schema.getMutationType()?.getFields() ?? {})) {
    const resolve = field.resolve as GraphQLFieldResolver<unknown, GraphQLContext> | undefined;
    if (!resolve) continue;
    field.resolve = (root, args, ctx: GraphQLContext, info) => {
      ctx.answers.clear();
      return resolve(root, args, ctx, info);
    };
  }
  return schema;
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
