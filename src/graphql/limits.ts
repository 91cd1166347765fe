import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  GraphQLError,
  type GraphQLNamedType,
  type GraphQLSchema,
  getNamedType,
  type OperationDefinitionNode,
  getNullableType,
  isInterfaceType,
  isIntrospectionType,
  isListType,
  isObjectType,
  Kind,
  type SelectionSetNode,
  type ValidationRule,
  valueFromASTUntyped,
} from 'graphql';

/** A list field without a `first` argument counts as this many items. */
const DEFAULT_LIST_SIZE = 10;
/** A connection (a field taking `first`) without one counts as this many items: its resolvers' default page (auditLogs), and the most it serves. */
export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;
/** Lists under a connection that hold one item per page entry. */
const PAGE_LISTS = new Set(['nodes', 'edges']);
/** What resolving a field that reads the database costs, against 1 for one that reads what its parent already loaded. */
export const DATABASE_FIELD_COST = 10;

/** A field's own weight, when it declares one: `extensions: { cost: n }` in its Pothos options. */
interface CostExtensions {
  cost?: number;
}

/**
 * What resolving a field once costs: its declared `cost`, else DATABASE_FIELD_COST for a root
 * field (every query and mutation reads or writes) and for any field whose resolver takes the
 * context (the only way to the database), else 1. A new field that reads the database is
 * therefore priced as one without anyone remembering to say so.
 */
export function fieldWeight(field: GraphQLField<unknown, unknown>, root: boolean): number {
  const declared = (field.extensions as CostExtensions | undefined)?.cost;
  if (typeof declared === 'number' && declared >= 1) return declared;
  if (root) return DATABASE_FIELD_COST;
  // An exposed field has no resolver (graphql's default reads the property).
  return field.resolve && field.resolve.length >= 3 ? DATABASE_FIELD_COST : 1;
}

/** The error of a request over its budget: nothing of it runs. */
export function tooExpensive(maxCost: number): GraphQLError {
  return new GraphQLError(`Query is too expensive: its cost exceeds the limit of ${maxCost}`, { extensions: { code: 'INVALID_INPUT' } });
}

/**
 * The cost of every operation in a document: every field, multiplied by the size of each
 * list it sits in (`first` when given, literal or variable), where a connection's `first`
 * (else the default page size) sizes the `nodes` and `edges` under it, and a field that
 * reads the database weighs DATABASE_FIELD_COST each time it resolves (fieldWeight).
 * Fragments are expanded and every alias is counted, so an abusive query cannot hide its
 * size behind spreads or aliases. Counting stops past `budget` (the answer is then only
 * known to exceed it).
 */
export function documentCost(schema: GraphQLSchema, document: DocumentNode, variables: Record<string, unknown> | null | undefined, budget: number): number {
  let total = 0;
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    const root = schema.getRootType(definition.operation);
    if (!root) continue;
    total += selectionCost({ schema, document, variables: operationVariables(definition, variables ?? {}), root }, definition.selectionSet, root, 1, undefined, 0, budget - total);
    if (total > budget) break;
  }
  return total;
}

/** The values an operation's variables take when it runs: those sent, else the defaults the operation declares. */
function operationVariables(operation: OperationDefinitionNode, sent: Record<string, unknown>): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value;
    if (Object.hasOwn(sent, name)) values[name] = sent[name];
    else if (definition.defaultValue) values[name] = valueFromASTUntyped(definition.defaultValue);
  }
  return values;
}

interface CostContext {
  schema: GraphQLSchema;
  document: DocumentNode;
  variables: Record<string, unknown>;
  /** The operation's root type: its fields are the root fields. */
  root: GraphQLNamedType;
}

/** A field's `first`: a literal, a variable's value, or the argument's declared default; undefined when it takes none. */
function firstOf(context: CostContext, selection: FieldNode, field: GraphQLField<unknown, unknown>): number | undefined {
  const declared = field.args.find((arg) => arg.name === 'first');
  if (!declared) return undefined;
  const given = selection.arguments?.find((arg) => arg.name.value === 'first')?.value;
  const value = given?.kind === Kind.INT ? Number(given.value) : given?.kind === Kind.VARIABLE ? context.variables[given.name.value] : declared.defaultValue;
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function selectionCost(
  context: CostContext,
  selectionSet: SelectionSetNode,
  parentType: GraphQLNamedType,
  multiplier: number,
  pageSize: number | undefined,
  depth: number,
  budget: number,
): number {
  if (depth > 50) return Number.POSITIVE_INFINITY;
  let total = 0;
  for (const selection of selectionSet.selections) {
    if (total > budget) return total;
    if (selection.kind === Kind.FIELD) {
      const fields = isObjectType(parentType) || isInterfaceType(parentType) ? parentType.getFields() : undefined;
      const field = fields?.[selection.name.value];
      if (!field) {
        total += multiplier;
        continue;
      }
      const first = firstOf(context, selection, field);
      const isList = isListType(getNullableType(field.type));
      const listSize = first ?? (pageSize !== undefined && PAGE_LISTS.has(field.name) ? pageSize : DEFAULT_LIST_SIZE);
      const fieldMultiplier = isList ? multiplier * Math.max(1, listSize) : multiplier;
      // A connection: the lists under it hold one item per entry of its page.
      const childPageSize = !isList && field.args.some((arg) => arg.name === 'first') ? Math.max(1, first ?? DEFAULT_PAGE_SIZE) : undefined;
      // One per item it yields, plus its weight beyond 1 each time it resolves (introspection reads the schema, not the database).
      const weight = isIntrospectionType(parentType) ? 1 : fieldWeight(field, parentType === context.root);
      total += fieldMultiplier + multiplier * (weight - 1);
      if (selection.selectionSet) {
        total += selectionCost(context, selection.selectionSet, getNamedType(field.type), fieldMultiplier, childPageSize, depth + 1, budget - total);
      }
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      const type = selection.typeCondition ? context.schema.getType(selection.typeCondition.name.value) : parentType;
      total += selectionCost(context, selection.selectionSet, type ?? parentType, multiplier, pageSize, depth + 1, budget - total);
    } else {
      const fragment = context.document.definitions.find(
        (definition): definition is FragmentDefinitionNode => definition.kind === Kind.FRAGMENT_DEFINITION && definition.name.value === selection.name.value,
      );
      if (!fragment) continue;
      const type = context.schema.getType(fragment.typeCondition.name.value) ?? parentType;
      total += selectionCost(context, fragment.selectionSet, type, multiplier, pageSize, depth + 1, budget - total);
    }
  }
  return total;
}

/**
 * The deepest bracket nesting (`{`, `[`, `(`) a GraphQL document may have, from its depth limit
 * (decision 237): each field level opens a selection set, and its arguments may hold lists and
 * input objects, so twice the depth limit, plus 64 for values and for introspection (exempt from
 * the depth limit, ~13 deep); never over 500, well inside what graphql-js's recursive parser
 * survives on Node's default stack (it overflows between 1,000 and 2,000).
 */
export function maxNesting(maxDepth: number): number {
  return Math.min(2 * maxDepth + 64, 500);
}

/**
 * Refuses a document nested deeper than `limit` before graphql-js parses it (its parser
 * recurses once per level, and a list 10,000 deep overflowed the stack): one linear scan
 * counting open brackets outside strings, block strings and comments. A bracket inside them
 * is text; an unbalanced document is left for the parser to refuse.
 */
export function nestingError(document: string, limit: number): GraphQLError | null {
  let depth = 0;
  const length = document.length;
  for (let i = 0; i < length; i++) {
    const code = document.charCodeAt(i);
    if (code === 0x7b || code === 0x5b || code === 0x28) {
      // { [ (
      if (++depth > limit) return new GraphQLError(`Document is nested deeper than ${limit} brackets`, { extensions: { code: 'INVALID_INPUT' } });
    } else if (code === 0x7d || code === 0x5d || code === 0x29) {
      // } ] )
      if (depth > 0) depth--;
    } else if (code === 0x23) {
      // # comment: to the end of the line.
      while (i + 1 < length && document.charCodeAt(i + 1) !== 0x0a && document.charCodeAt(i + 1) !== 0x0d) i++;
    } else if (code === 0x22) {
      if (document.startsWith('"""', i)) {
        // Block string: to the next unescaped `"""` (`\"""` is an escaped one).
        i += 3;
        while (i < length && !(document.startsWith('"""', i) && document.charCodeAt(i - 1) !== 0x5c)) i++;
        i += 2;
      } else {
        // String: to the next unescaped `"`, or the end of the line (where the parser refuses it).
        i++;
        while (i < length) {
          const c = document.charCodeAt(i);
          if (c === 0x5c) i += 2;
          else if (c === 0x22 || c === 0x0a || c === 0x0d) break;
          else i++;
        }
      }
    }
  }
  return null;
}

/** Root fields that read the schema itself (introspection), not data. */
const INTROSPECTION_ROOTS = new Set(['__schema', '__type']);

/**
 * The depth limit (`GRAPHQL_MAX_DEPTH`) as a validation rule: the deepest field of an operation,
 * fragments expanded (a spread or an inline fragment adds no level of its own). Introspection
 * (`__schema`, `__type`) does not count: it reads the schema, not the database, so its cost is
 * already 1 (documentCost), and graphql-js's own MaxIntrospectionDepthRule (one of the specified
 * rules every document passes) bounds its only unbounded shape, the `fields { type { fields … } }`
 * cycle. The standard introspection query (depth ~13) therefore works wherever introspection is on.
 */
export function maxDepthRule(maxDepth: number): ValidationRule {
  return (context) => ({
    OperationDefinition(operation) {
      const fragments = new Map(context.getDocument().definitions.filter((definition): definition is FragmentDefinitionNode => definition.kind === Kind.FRAGMENT_DEFINITION).map((fragment) => [fragment.name.value, fragment]));
      const depth = selectionDepth(operation.selectionSet, fragments, new Map(), true);
      if (depth > maxDepth) {
        context.reportError(
          new GraphQLError(`${operation.name?.value ?? 'The'} query exceeds the query depth limit of ${maxDepth} (its depth is ${depth}; introspection does not count)`, {
            nodes: [operation],
            extensions: { code: 'INVALID_INPUT' },
          }),
        );
      }
    },
  });
}

/**
 * How many field levels deep a selection set goes. Each fragment's depth is computed once per
 * position (at the root or below), so fragments spread many times cost no more than once; a
 * fragment in a cycle (invalid, refused by validation) adds nothing.
 */
function selectionDepth(selectionSet: SelectionSetNode, fragments: ReadonlyMap<string, FragmentDefinitionNode>, memo: Map<string, number>, root: boolean): number {
  let deepest = 0;
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) {
      if (root && INTROSPECTION_ROOTS.has(selection.name.value)) continue;
      deepest = Math.max(deepest, 1 + (selection.selectionSet ? selectionDepth(selection.selectionSet, fragments, memo, false) : 0));
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      deepest = Math.max(deepest, selectionDepth(selection.selectionSet, fragments, memo, root));
    } else {
      const key = `${root ? 'root:' : ''}${selection.name.value}`;
      const fragment = fragments.get(selection.name.value);
      if (!fragment) continue;
      let depth = memo.get(key);
      if (depth === undefined) {
        memo.set(key, 0);
        depth = selectionDepth(fragment.selectionSet, fragments, memo, root);
        memo.set(key, depth);
      }
      deepest = Math.max(deepest, depth);
    }
  }
  return deepest;
}
