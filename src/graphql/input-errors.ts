import { type ASTNode, type GraphQLError, Kind, parse, visit } from 'graphql';
import { AppError, type ErrorDetail } from '../ground/errors.ts';

/**
 * Which argument or variable an input error is about, as `details` (docs/contract.md §2's
 * `[{path, message}]`) for `extensions.details`: a service's refusal names the argument it
 * checked (`name`, `first`); graphql-js's refusal of a literal names `<field>.<argument>` (and the
 * input fields below it), of a variable `variables.<name>`. Only with introspection on for the
 * latter: with it off, telling an ill-typed argument from an unknown one would map the schema.
 */
export function inputDetails(error: GraphQLError, introspection: boolean): ErrorDetail[] | undefined {
  const original = error.originalError;
  if (original instanceof AppError) {
    if (!original.details?.length) return undefined;
    // Services name REST body fields (`body.name`); in GraphQL the same value is the argument `name`.
    return original.details.map((detail) => ({ path: detail.path.replace(/^body\./, ''), message: detail.message }));
  }
  if (!introspection || (original && !isGraphQLError(original))) return undefined;
  const path = variablePath(error.message) ?? requiredArgumentPath(error.message) ?? argumentPath(error);
  return path ? [{ path, message: error.message }] : undefined;
}

/** The message an AppError carries, made to name what failed when it only says "Invalid input". */
export function inputMessage(error: AppError, details: ErrorDetail[] | undefined): string {
  if (!details?.length || error.message !== new AppError(error.code).message) return error.message;
  return `${error.message}: ${details.map((detail) => `${detail.path} ${detail.message}`).join('; ')}`;
}

function isGraphQLError(error: Error): boolean {
  return error.name === 'GraphQLError';
}

/** `Variable "$first" got invalid value "x" at "input.name"; …` → `variables.first.input.name`-like paths. */
function variablePath(message: string): string | undefined {
  const match = /^Variable "\$([^"]+)" (?:got invalid value .*?(?: at "[^."]+\.?([^"]*)")?;|of required type .* was not provided|of non-null type .* must not be null)/s.exec(message);
  if (!match) return undefined;
  return match[2] ? `variables.${match[1]}.${match[2]}` : `variables.${match[1]}`;
}

/** `Field "addMember" argument "role" of type "String!" is required, but it was not provided.` → `addMember.role`. */
function requiredArgumentPath(message: string): string | undefined {
  const match = /^Field "([^"]+)" argument "([^"]+)" of type .* is required/.exec(message);
  return match ? `${match[1]}.${match[2]}` : undefined;
}

/** The argument (and input fields) whose value the error points at, from its position in the document. */
function argumentPath(error: GraphQLError): string | undefined {
  const position = error.positions?.[0];
  const body = error.source?.body;
  if (position === undefined || body === undefined) return undefined;
  let document: ASTNode;
  try {
    document = parse(body, { maxTokens: 20_000 });
  } catch {
    return undefined;
  }
  let found: string | undefined;
  visit(document, {
    Argument: {
      enter(node, _key, _parent, _path, ancestors) {
        if (!node.loc || position < node.loc.start || position >= node.loc.end) return false;
        const field = [...ancestors].reverse().find((ancestor): ancestor is ASTNode & { kind: Kind.FIELD; name: { value: string } } => !Array.isArray(ancestor) && (ancestor as ASTNode).kind === Kind.FIELD);
        found = [field?.name.value, node.name.value, ...objectFieldsAt(node.value, position)].filter(Boolean).join('.');
        return false;
      },
    },
  });
  return found;
}

/** The input-object fields, outermost first, whose values contain `position`. */
function objectFieldsAt(value: ASTNode, position: number): string[] {
  if (value.kind === Kind.OBJECT) {
    for (const field of value.fields) {
      if (field.loc && position >= field.loc.start && position < field.loc.end) return [field.name.value, ...objectFieldsAt(field.value, position)];
    }
  }
  if (value.kind === Kind.LIST) {
    for (const item of value.values) if (item.loc && position >= item.loc.start && position < item.loc.end) return objectFieldsAt(item, position);
  }
  return [];
}
