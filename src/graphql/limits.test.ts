import SchemaBuilder from '@pothos/core';
import { type GraphQLField, isInterfaceType, isIntrospectionType, isObjectType, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { DATABASE_FIELD_COST, documentCost, fieldWeight } from './limits.ts';
import { graphqlSchema } from './schema.ts';

const schema = graphqlSchema();
const cost = (query: string, variables?: Record<string, unknown>) => documentCost(schema, parse(query), variables, Number.POSITIVE_INFINITY);

describe('the cost of a document', () => {
  it('counts every alias of a field, and a root field as a database read', () => {
    expect(cost('{ me { id } }')).toBe(DATABASE_FIELD_COST + 1);
    expect(cost(`{ ${Array.from({ length: 2450 }, (_, i) => `a${i}: me { id }`).join(' ')} }`)).toBe(2450 * (DATABASE_FIELD_COST + 1));
    expect(cost('{ a: organization { name } b: organization { name } }')).toBe(2 * (DATABASE_FIELD_COST + 1));
    expect(cost('fragment F on User { id email } { a: me { ...F } b: me { ...F } }')).toBe(2 * (DATABASE_FIELD_COST + 2));
    // A list: one per item it yields, plus the read; its fields once per item.
    expect(cost('{ auditLogs(first: 50) { nodes { id action } } }')).toBe(DATABASE_FIELD_COST + 50 + 100);
    expect(cost('mutation { createOrganization(name: "x") { id } }')).toBe(DATABASE_FIELD_COST + 1);
  });

  it("keeps the console's own queries far under the default budget", () => {
    const invitation = 'id email role expiresAt organization { id name }';
    const pages = [
      `{ myInvitations { ${invitation} } invitations { ${invitation} } }`,
      '{ me { id email name systemAdmin } organization { id name externalId role } organizations { id name role } members { user { id email name } role } }',
      '{ integrations { id name kind provider description status statusDetail { provider connected status tokenValid tokenExpired lastValidated message actions lastError } scopes createdAt updatedAt } }',
      '{ auditLogs(first: 50) { nodes { id action actorUserId credentialKind targetType targetId detail createdAt } pageInfo { hasNextPage endCursor } } }',
      '{ personalAccessTokens { id name display expiresAt lastUsedAt revokedAt createdAt organizationIds } apiTokens { id name display expiresAt lastUsedAt createdAt } }',
    ];
    for (const page of pages) expect(cost(page), page).toBeLessThan(1000);
  });
});

describe('the weight of a field', () => {
  it('is a database read for every root field and for no field of a loaded object in the schema today', () => {
    for (const root of [schema.getQueryType(), schema.getMutationType()]) {
      for (const field of Object.values(root?.getFields() ?? {})) expect(fieldWeight(field as GraphQLField<unknown, unknown>, true), field.name).toBe(DATABASE_FIELD_COST);
    }
    for (const type of Object.values(schema.getTypeMap())) {
      if (type === schema.getQueryType() || type === schema.getMutationType() || isIntrospectionType(type) || !(isObjectType(type) || isInterfaceType(type))) continue;
      for (const field of Object.values(type.getFields())) expect(fieldWeight(field as GraphQLField<unknown, unknown>, false), `${type.name}.${field.name}`).toBe(1);
    }
  });

  it('is a database read for a new nested field whose resolver takes the context, unless it declares its cost', () => {
    const builder = new SchemaBuilder<{ Context: { load(): Promise<string> } }>({});
    const Thing = builder.objectRef<{ id: string }>('Thing').implement({
      fields: (t) => ({
        id: t.exposeID('id'),
        label: t.string({ resolve: (thing) => `#${thing.id}` }),
        owner: t.string({ resolve: (_thing, _args, ctx) => ctx.load() }),
        cached: t.string({ extensions: { cost: 2 }, resolve: (_thing, _args, ctx) => ctx.load() }),
      }),
    });
    builder.queryType({ fields: (t) => ({ thing: t.field({ type: Thing, resolve: () => ({ id: '1' }) }) }) });
    const fields = (builder.toSchema().getType('Thing') as unknown as { getFields(): Record<string, GraphQLField<unknown, unknown>> }).getFields();
    expect(fields.id && fieldWeight(fields.id, false)).toBe(1);
    expect(fields.label && fieldWeight(fields.label, false)).toBe(1);
    expect(fields.owner && fieldWeight(fields.owner, false)).toBe(DATABASE_FIELD_COST);
    expect(fields.cached && fieldWeight(fields.cached, false)).toBe(2);
  });
});
