import {
  type DocumentNode,
  type FragmentDefinitionNode,
  GraphQLError,
  type GraphQLNamedType,
  type GraphQLSchema,
  getNamedType,
  getNullableType,
  isInterfaceType,
  isListType,
  isObjectType,
  Kind,
  type SelectionSetNode,
  type ValidationRule,
} from 'graphql';

/** A list field without a `first` argument counts as this many items. */
const DEFAULT_LIST_SIZE = 10;

/**
 * Rejects operations whose cost — every field, multiplied by the sizes of the lists
 * it sits in (`first` when given) — exceeds `maxCost`. Fragments are expanded, so an
 * abusive query cannot hide its size behind spreads or aliases.
 */
export function costLimitRule(maxCost: number): ValidationRule {
  return (context) => ({
    OperationDefinition(node) {
      const schema = context.getSchema();
      const root = schema.getRootType(node.operation);
      if (!root) return;
      const cost = selectionCost(schema, context.getDocument(), node.selectionSet, root, 1, 0, maxCost);
      if (cost > maxCost) {
        context.reportError(new GraphQLError(`Query is too expensive: its cost exceeds the limit of ${maxCost}`, { nodes: [node], extensions: { code: 'INVALID_INPUT' } }));
      }
    },
  });
}

function selectionCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  selectionSet: SelectionSetNode,
  parentType: GraphQLNamedType,
  multiplier: number,
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
      const first = selection.arguments?.find((arg) => arg.name.value === 'first');
      const size = first?.value.kind === Kind.INT ? Number(first.value.value) : DEFAULT_LIST_SIZE;
      const fieldMultiplier = isListType(getNullableType(field.type)) ? multiplier * Math.max(1, size) : multiplier;
      total += fieldMultiplier;
      if (selection.selectionSet) {
        total += selectionCost(schema, document, selection.selectionSet, getNamedType(field.type), fieldMultiplier, depth + 1, budget - total);
      }
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      const type = selection.typeCondition ? schema.getType(selection.typeCondition.name.value) : parentType;
      total += selectionCost(schema, document, selection.selectionSet, type ?? parentType, multiplier, depth + 1, budget - total);
    } else {
      const fragment = document.definitions.find(
        (definition): definition is FragmentDefinitionNode => definition.kind === Kind.FRAGMENT_DEFINITION && definition.name.value === selection.name.value,
      );
      if (!fragment) continue;
      const type = schema.getType(fragment.typeCondition.name.value) ?? parentType;
      total += selectionCost(schema, document, fragment.selectionSet, type, multiplier, depth + 1, budget - total);
    }
  }
  return total;
}
