import type { FastifyBaseLogger } from 'fastify';
import { type DocumentNode, GraphQLError, type GraphQLSchema, NoSchemaIntrospectionCustomRule, parse, type ValidationRule, visit } from 'graphql';
import mercurius from 'mercurius';
import { type Static, Type } from 'typebox';
import type { FastifyRequest } from 'fastify';
import { databaseUnavailable } from '../db/failure.ts';
import { databaseUnavailableError } from '../http/error-handler.ts';
import { AppError, type ErrorDetail } from '../ground/errors.ts';
import { ErrorResponse } from '../http/schemas.ts';
import type { TypedFastify } from '../http/typed.ts';
import type { Services } from '../services.ts';
import { documentCost, maxDepthRule, maxNesting, nestingError, tooExpensive } from './limits.ts';
import { type GraphQLContext, graphqlContext } from './context.ts';
import { inputDetails, inputMessage } from './input-errors.ts';
import { graphqlSchema } from './schema.ts';

/**
 * A request whose resolvers met the database unavailable (or were refused 503): what they met. The
 * whole request then answers 503 in the REST shape (docs/contract.md §6, decision 252), never a 200
 * with `INTERNAL` errors in it.
 */
const unavailable = new WeakMap<FastifyRequest, unknown>();

function noteUnavailable(request: FastifyRequest | undefined, errors: readonly GraphQLError[] | undefined): void {
  if (!request || unavailable.has(request)) return;
  for (const error of errors ?? []) {
    const original = error.originalError;
    if ((original instanceof AppError && original.code === 'SERVICE_UNAVAILABLE') || (original && !(original instanceof AppError) && databaseUnavailable(original))) {
      unavailable.set(request, original);
      return;
    }
  }
}

interface FormattedError {
  message: string;
  locations?: readonly { line: number; column: number }[];
  path?: readonly (string | number)[];
  extensions: { code: string; details?: ErrorDetail[] };
}

const OperationSchema = Type.Object(
  {
    query: Type.String({ minLength: 1, maxLength: 100_000 }),
    variables: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
    operationName: Type.Optional(Type.Union([Type.String({ maxLength: 200 }), Type.Null()])),
    extensions: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: false },
);

/**
 * `POST /query` inside the request pipeline (authenticated class, one transaction),
 * executed by mercurius with its own routes off (no `GET /query`, no
 * `application/graphql` parser). If any operation of the request fails, the request's
 * writes roll back.
 */
export async function graphqlRoutes(app: TypedFastify, services: Services): Promise<void> {
  const { config } = services;
  const schema = graphqlSchema();
  const format = (error: GraphQLError, log: Pick<FastifyBaseLogger, 'error'>) => formatError(error, log, config.graphql.introspection);
  await registerExecutor(app, services, schema, format);

  app.get(
    '/query',
    {
      config: { auth: 'unauthenticated', errors: ['METHOD_NOT_ALLOWED'] },
      schema: { summary: 'GraphQL is POST only', tags: ['graphql'], response: { 405: { ...ErrorResponse, description: 'METHOD_NOT_ALLOWED' } } },
    },
    async () => {
      throw new AppError('METHOD_NOT_ALLOWED', { message: 'GraphQL queries and mutations are sent with POST /query' });
    },
  );

  app.post(
    '/query',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: 'The GraphQL endpoint for user-facing business APIs (schema: docs/schema.graphql)',
        tags: ['graphql'],
        body: Type.Union([OperationSchema, Type.Array(OperationSchema, { minItems: 1 })]),
        response: {
          200: { description: 'GraphQL result(s): `{data, errors?}`, or an array for a batch' },
          400: { description: 'A document that does not parse or validate (GraphQL error shape), or a REST-shaped input error' },
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const batch = Array.isArray(body);
      const operations = batch ? body : [body];
      if (operations.length > config.graphql.maxBatch) {
        throw new AppError('INVALID_INPUT', { message: `At most ${config.graphql.maxBatch} operations per batch`, details: [{ path: 'body', message: 'too many operations' }] });
      }
      // Every document is read first: the cost budget is the whole request's, and nothing runs when it is over.
      const nesting = maxNesting(config.graphql.maxDepth);
      const documents = operations.map((operation) => readDocument(operation, nesting));
      let cost = 0;
      for (const [index, document] of documents.entries()) {
        if (!(document instanceof GraphQLError)) cost += documentCost(schema, document, operations[index]?.variables, config.graphql.maxCost - cost);
      }
      if (cost > config.graphql.maxCost) {
        reply.code(400);
        const rejected = operations.map(() => ({ errors: [format(tooExpensive(config.graphql.maxCost), request.log)] }));
        return batch ? rejected : rejected[0];
      }
      const context = graphqlContext(request, services);
      const { results, failed, refused } = await runOperations(app, context, operations, documents, (error) => format(error, request.log));
      if (refused) reply.code(400);
      // Mutations of one request commit together or not at all.
      if (failed) await request.ctx.rollback();
      if (unavailable.has(request)) {
        const cause = unavailable.get(request);
        throw cause instanceof AppError ? cause : databaseUnavailableError(cause);
      }
      return batch ? results : results[0];
    },
  );
}

/** mercurius, as the executor only: its own routes and `application/graphql` parser off, errors in the contract's codes. */
async function registerExecutor(app: TypedFastify, services: Services, schema: GraphQLSchema, format: (error: GraphQLError, log: Pick<FastifyBaseLogger, 'error'>) => FormattedError): Promise<void> {
  const { config } = services;
  // The depth limit is ours, not mercurius's `queryDepth`: introspection is exempt from it (limits.ts says why).
  const rules: ValidationRule[] = [maxDepthRule(config.graphql.maxDepth)];
  if (!config.graphql.introspection) rules.push(NoSchemaIntrospectionCustomRule);
  await app.register(mercurius, {
    schema,
    routes: false,
    graphiql: false,
    validationRules: rules,
    errorFormatter: (execution, context) => {
      noteUnavailable((context as unknown as Partial<GraphQLContext>).request, execution.errors);
      return {
      statusCode: 200,
      response: {
        data: execution.data ?? null,
        errors: (execution.errors ?? []).map((error) => format(error, (context as unknown as Partial<GraphQLContext>).request?.log ?? services.logger)) as unknown as GraphQLError[],
      },
    };
    },
  });
}

type Operation = Static<typeof OperationSchema>;

/** An operation's document, or the GraphQLError that refuses it (syntax, unstorable strings). */
function readDocument(operation: Operation, nesting: number): DocumentNode | GraphQLError {
  // Bounded before it is parsed: graphql-js's parser recurses once per level of nesting.
  const tooDeep = nestingError(operation.query, nesting);
  if (tooDeep) return tooDeep;
  try {
    // Only GraphQL text: mercurius would otherwise try the string as a JSON-encoded AST.
    const document = parse(operation.query, { maxTokens: 20_000 });
    rejectUnstorableStrings(document);
    return document;
  } catch (error) {
    if (error instanceof GraphQLError) return error;
    throw error;
  }
}

/**
 * Runs the operations in order. `failed` when any ended in an error (the request's writes
 * then roll back); `refused` when a document did not parse or validate, which nothing ran
 * of (the answer is a 400).
 */
async function runOperations(
  app: TypedFastify,
  context: GraphQLContext,
  operations: Operation[],
  documents: (DocumentNode | GraphQLError)[],
  format: (error: GraphQLError) => FormattedError,
): Promise<{ results: { data?: unknown; errors?: FormattedError[] }[]; failed: boolean; refused: boolean }> {
  const results: { data?: unknown; errors?: FormattedError[] }[] = [];
  let failed = false;
  let refused = false;
  for (const [index, operation] of operations.entries()) {
    const document = documents[index];
    try {
      if (document instanceof GraphQLError) throw document;
      const result = await app.graphql(operation.query, context as never, operation.variables ?? undefined, operation.operationName ?? undefined);
      if (result.errors?.length) failed = true;
      results.push(result as { data?: unknown; errors?: FormattedError[] });
    } catch (error) {
      // Documents that do not parse or validate (depth, cost, introspection): nothing ran.
      const errors = error instanceof GraphQLError ? [error] : (error as { errors?: GraphQLError[] }).errors;
      if (!errors) throw error;
      failed = true;
      refused = true;
      results.push({ errors: errors.map(format) });
    }
  }
  return { results, failed, refused };
}

/** String literals PostgreSQL cannot store (NUL, unpaired surrogates) are input errors, not resolver failures. */
function rejectUnstorableStrings(document: DocumentNode): void {
  visit(document, {
    StringValue(node) {
      if (node.value.includes('\u0000') || !node.value.isWellFormed()) {
        throw new GraphQLError('String values must not contain NUL characters or unpaired surrogates', { nodes: [node], extensions: { code: 'INVALID_INPUT' } });
      }
    },
  });
}

/** Messages of graphql-js and mercurius that name nothing of the schema. */
const SCHEMA_FREE = /^(.*exceeds the query depth limit|Syntax Error:)/;

/**
 * GraphQL errors with `extensions.code` from the contract's table; nothing internal leaks.
 * With introspection off, validation and coercion messages would name or suggest schema
 * fields ("Did you mean …?"): they become one message that names nothing, with locations.
 */
function formatError(error: GraphQLError, log: Pick<FastifyBaseLogger, 'error'>, introspection: boolean): FormattedError {
  const base = {
    ...(error.locations ? { locations: error.locations } : {}),
    ...(error.path ? { path: error.path } : {}),
  };
  const original = error.originalError;
  // Input errors name the argument or variable that failed (input-errors.ts).
  const details = inputDetails(error, introspection);
  const withDetails = (code: string) => (details ? { code, details } : { code });
  if (original instanceof AppError) return { message: inputMessage(original, details), ...base, extensions: withDetails(original.code) };
  if (!original || original instanceof GraphQLError) {
    const ours = typeof error.extensions?.code === 'string' && /^[A-Z_]+$/.test(error.extensions.code);
    const code = ours ? (error.extensions.code as string) : 'INVALID_INPUT';
    const message =
      ours || introspection || SCHEMA_FREE.test(error.message)
        ? error.message
        : error.message.startsWith('GraphQL introspection has been disabled')
          ? 'GraphQL introspection is disabled'
          : 'The document does not match the schema';
    return { message, ...base, extensions: withDetails(code) };
  }
  // The request answers 503 (noteUnavailable): not a resolver's bug.
  if (databaseUnavailable(original)) return { message: 'The database is unavailable; retry shortly', ...base, extensions: { code: 'SERVICE_UNAVAILABLE' } };
  // The request's logger: the line carries the request id.
  log.error({ err: original, path: error.path }, 'GraphQL resolver failed');
  return { message: 'Internal server error', ...base, extensions: { code: 'INTERNAL' } };
}
