import { appRef } from '../integrations/apps/catalog.ts';
import type { AppRef } from '../integrations/providers/registry.ts';
import SchemaBuilder from '@pothos/core';
import { defaultFieldResolver, type GraphQLSchema } from 'graphql';
import { type AuditRow, listAudit } from '../audit/audit.ts';
import type { ConnectedVia, EndUser } from '../db/schema.ts';
import { AppError } from '../ground/errors.ts';
import { NO_ORGANIZATION } from '../events/endpoints.ts';
import { requireRole, requireSystemAdmin } from '../identity/authorize.ts';
import { CREDENTIAL_KINDS, fieldOpenToAll, mayUseField } from '../identity/credential-kinds.ts';
import { findIntegrationById, type IntegrationRow, listIntegrations } from '../integrations/integrations.ts';
import { deleteIntegration } from '../integrations/delete.ts';
import { configuredRow } from '../integrations/tokens/loaded.ts';
import { toAnswer } from '../integrations/tokens/policy.ts';
import { type StatusObject, statusObject } from '../integrations/status.ts';
import { actorOf, type Builder, type GraphQLContext, principalOf, resolvedOncePerRequest, txOf, workOf } from './context.ts';
import { appMutations, appQueries, appTypes } from './apps.ts';
import { credentialMutations, credentialQueries, credentialTypes } from './credentials.ts';
import { organizationMutations, organizationQueries, organizationTypes } from './organizations.ts';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './limits.ts';
import { PRODUCT_ID } from '../lib/ids.ts';

interface IntegrationShape {
  row: IntegrationRow;
  displayName: string;
}

const builder: Builder = new SchemaBuilder<{ Context: GraphQLContext; DefaultFieldNullability: false }>({ defaultFieldNullability: false });

// Types register in call order, which is their order in the SDL (docs/schema.graphql).
const organization = organizationTypes(builder);

const StatusRef = builder.objectRef<StatusObject>('IntegrationStatus').implement({
  description: 'What the user interface shows: status, message, and the actions that fix it',
  fields: (t) => ({
    provider: t.exposeString('provider'),
    connected: t.exposeBoolean('connected'),
    status: t.exposeString('status'),
    tokenValid: t.exposeBoolean('tokenValid'),
    tokenExpired: t.exposeBoolean('tokenExpired'),
    lastValidated: t.string({ nullable: true, resolve: (s) => s.lastValidated }),
    message: t.exposeString('message'),
    actions: t.stringList({ resolve: (s) => s.actions }),
    lastError: t.string({ nullable: true, resolve: (s) => s.lastError ?? null }),
    detectedAt: t.string({ nullable: true, resolve: (s) => s.detectedAt ?? null }),
  }),
});

const EndUserRef = builder.objectRef<EndUser>('EndUser').implement({
  description: "The product's end user a connect session was for",
  fields: (t) => ({
    id: t.exposeString('id'),
    email: t.string({ nullable: true, resolve: (user) => user.email ?? null }),
    displayName: t.string({ nullable: true, resolve: (user) => user.displayName ?? null }),
  }),
});

const ConnectedViaRef = builder.objectRef<ConnectedVia>('ConnectedVia').implement({
  fields: (t) => ({
    sessionId: t.exposeID('sessionId'),
    endUser: t.field({ type: EndUserRef, nullable: true, resolve: (via) => via.endUser ?? null }),
  }),
});

const AppRefRef = builder.objectRef<AppRef>('AppRef').implement({
  description: 'The app that made a grant (docs/contract.md §5e): a deployment app, or one of the organization\'s own',
  fields: (t) => ({
    id: t.exposeID('id'),
    owner: t.exposeString('owner', { description: '"deployment" or "organization"' }),
  }),
});

const app = appTypes(builder);

const IntegrationRef = builder.objectRef<IntegrationShape>('Integration').implement({
  description: 'A connection to a provider account. Its tokens are never readable here.',
  fields: (t) => ({
    id: t.id({ resolve: (i) => i.row.id }),
    name: t.string({ resolve: (i) => i.row.name }),
    kind: t.string({ resolve: (i) => i.row.provider }),
    provider: t.string({ resolve: (i) => i.row.provider }),
    app: t.field({ type: AppRefRef, description: 'The app that made its grant: refresh, validation and revocation use its credentials', resolve: (i) => appRef(i.row.appId) }),
    description: t.string({ resolve: (i) => i.row.description }),
    status: t.string({ resolve: (i) => statusObject(i.row, i.displayName).status }),
    statusDetail: t.field({ type: StatusRef, resolve: (i) => statusObject(i.row, i.displayName) }),
    scopes: t.stringList({ resolve: (i) => i.row.scopes }),
    metadata: t.string({ description: 'JSON: provider-defined, non-secret values a client needs (instanceUrl, sites…; docs/providers.md)', resolve: (i) => JSON.stringify(i.row.metadata ?? {}) }),
    connectedVia: t.field({ type: ConnectedViaRef, nullable: true, description: 'The connect session (and end user) it was connected through; null when an owner or admin connected it', resolve: (i) => i.row.connectedVia ?? null }),
    endUser: t.field({ type: EndUserRef, nullable: true, description: "The end user it belongs to; null for the organization's own integration", resolve: (i) => i.row.endUser ?? null }),
    createdAt: t.string({ resolve: (i) => i.row.createdAt.toISOString() }),
    updatedAt: t.string({ resolve: (i) => i.row.updatedAt.toISOString() }),
  }),
});

const AuditEntryRef = builder.objectRef<AuditRow>('AuditLogEntry').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    action: t.exposeString('action'),
    actorUserId: t.string({ nullable: true, resolve: (a) => a.actorUserId }),
    impersonatorUserId: t.string({ nullable: true, resolve: (a) => a.impersonatorUserId }),
    credentialKind: t.string({ nullable: true, resolve: (a) => a.credentialKind }),
    credentialId: t.string({ nullable: true, description: 'The session, token or capability that acted (its id, never its value)', resolve: (a) => a.credentialId }),
    targetType: t.string({ nullable: true, resolve: (a) => a.targetType }),
    targetId: t.string({ nullable: true, resolve: (a) => a.targetId }),
    requestId: t.string({ nullable: true, resolve: (a) => a.requestId }),
    detail: t.string({ description: 'JSON', resolve: (a) => JSON.stringify(a.detail) }),
    createdAt: t.string({ resolve: (a) => a.createdAt.toISOString() }),
  }),
});

interface AuditPage {
  nodes: AuditRow[];
  hasNextPage: boolean;
}

const PageInfoRef = builder.objectRef<AuditPage>('PageInfo').implement({
  fields: (t) => ({
    hasNextPage: t.exposeBoolean('hasNextPage'),
    endCursor: t.string({ nullable: true, resolve: (page) => page.nodes.at(-1)?.id ?? null }),
  }),
});

const AuditEdgeRef = builder.objectRef<AuditRow>('AuditLogEdge').implement({
  fields: (t) => ({
    cursor: t.string({ resolve: (row) => row.id }),
    node: t.field({ type: AuditEntryRef, resolve: (row) => row }),
  }),
});

const AuditConnectionRef = builder.objectRef<AuditPage>('AuditLogConnection').implement({
  fields: (t) => ({
    nodes: t.field({ type: [AuditEntryRef], resolve: (page) => page.nodes }),
    edges: t.field({ type: [AuditEdgeRef], resolve: (page) => page.nodes }),
    pageInfo: t.field({ type: PageInfoRef, resolve: (page) => page }),
  }),
});

const credential = credentialTypes(builder);

/** An end user's id as an argument: 1–128 printable characters, like everywhere else (docs/contract.md §5a). */
function endUserIdArg(value: string): string {
  if (!PRODUCT_ID.test(value)) throw new AppError('INVALID_INPUT', { details: [{ path: 'endUser', message: "must be an end user's id (1–128 printable characters)" }] });
  return value;
}

function integrationShape(ctx: GraphQLContext, row: IntegrationRow): IntegrationShape {
  return { row, displayName: ctx.services.providers.get(row.provider)?.displayName ?? row.provider };
}

builder.queryType({
  fields: (t) => ({
    ...organizationQueries(t, organization),
    integrations: t.field({
      type: [IntegrationRef],
      description: "The organization's integrations: its own and every end user's, or only one provider's or one end user's",
      args: { provider: t.arg.string({ required: false }), endUser: t.arg.string({ required: false, description: "An end user's id" }) },
      resolve: async (_root, args, ctx) => {
        const principal = requireRole(principalOf(ctx), principalOf(ctx).organizationId, 'member');
        const filter = { ...(args.provider != null ? { provider: args.provider } : {}), ...(args.endUser != null ? { endUserId: endUserIdArg(args.endUser) } : {}) };
        const rows = await listIntegrations(await txOf(ctx), principal.organizationId, filter);
        return rows.map((row) => integrationShape(ctx, row));
      },
    }),
    integration: t.field({
      type: IntegrationRef,
      nullable: true,
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => {
        const principal = requireRole(principalOf(ctx), principalOf(ctx).organizationId, 'member');
        const row = await findIntegrationById(await txOf(ctx), principal.organizationId, String(args.id));
        if (!row) throw new AppError('INTEGRATION_NOT_FOUND');
        return integrationShape(ctx, row);
      },
    }),
    auditLogs: t.field({
      type: AuditConnectionRef,
      description: "The organization's audit log, newest first, optionally only one integration's, one action's or one actor's (owner/admin, or a system administrator who entered it)",
      args: {
        first: t.arg.int({ required: false }),
        after: t.arg.string({ required: false }),
        integrationId: t.arg.string({ required: false }),
        action: t.arg.string({ required: false }),
        actorUserId: t.arg.string({ required: false }),
        targetType: t.arg.string({
          required: false,
          description: 'Only rows about this type of target; "webhook_endpoint": the deployment\'s webhook endpoints (system administrators, docs/contract.md §7)',
        }),
      },
      resolve: async (_root, args, ctx) => {
        const caller = principalOf(ctx);
        const first = args.first ?? DEFAULT_PAGE_SIZE;
        if (first < 1 || first > MAX_PAGE_SIZE) throw new AppError('INVALID_INPUT', { details: [{ path: 'first', message: `must be 1–${MAX_PAGE_SIZE}` }] });
        const filter = { integrationId: args.integrationId ?? undefined, action: args.action ?? undefined, actorUserId: args.actorUserId ?? undefined, targetType: args.targetType ?? undefined };
        // Webhook endpoints are the deployment's: their rows have no organization, and system administrators read them.
        const deployment = args.targetType === 'webhook_endpoint';
        // Entering an organization is for reading it, its audit log included (docs/contract.md §11).
        if (deployment) requireSystemAdmin(caller);
        const organizationId = deployment ? NO_ORGANIZATION : requireRole(caller, caller.organizationId, caller.entered ? 'member' : 'admin').organizationId;
        const rows = await listAudit(await txOf(ctx), organizationId, { first: first + 1, ...(args.after ? { after: args.after } : {}), ...filter });
        return { nodes: rows.slice(0, first), hasNextPage: rows.length > first };
      },
    }),
    ...credentialQueries(t, credential),
    ...appQueries(t, app),
  }),
});

builder.mutationType({
  fields: (t) => ({
    ...organizationMutations(t, organization, credential),
    deleteIntegration: t.boolean({
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => {
        await deleteIntegration(ctx.services, await workOf(ctx), String(args.id));
        return true;
      },
    }),
    refreshIntegration: t.field({
      type: IntegrationRef,
      description: 'Refreshes the token now; returns the integration, never the token',
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => {
        const principal = requireRole(principalOf(ctx), principalOf(ctx).organizationId, 'admin');
        // A provider call cannot run inside the document's open transaction (PGlite has one connection).
        if (ctx.request.ctx.inTransaction) {
          throw new AppError('INVALID_INPUT', { message: 'refreshIntegration must come before any other write in the document' });
        }
        const row = configuredRow(ctx.services, await findIntegrationById(ctx.services.db, principal.organizationId, String(args.id)));
        // The GraphQL edge: a provider failure becomes the code its verdict names (extensions.code).
        const refreshed = await ctx.services.lifecycle.refresh(row, actorOf(ctx)).catch((error: unknown) => {
          throw toAnswer(error);
        });
        return integrationShape(ctx, refreshed.row);
      },
    }),
    ...credentialMutations(t, credential),
    ...appMutations(t, app),
  }),
});

let schema: GraphQLSchema | undefined;

/**
 * Refuses a service token every root field not on its list (identity/service-token-rights.ts):
 * a field added later is refused to it until the list names it. A system administrator who
 * entered an organization only reads there (docs/contract.md §11): every mutation is refused to them.
 */
function guardRootFields(built: GraphQLSchema): GraphQLSchema {
  const mutations = built.getMutationType();
  for (const type of [built.getQueryType(), mutations]) {
    for (const field of Object.values(type?.getFields() ?? {})) {
      const open = fieldOpenToAll(field.name);
      const write = type === mutations;
      if (open && !write) continue;
      const resolve = field.resolve ?? defaultFieldResolver;
      field.resolve = (root, args, ctx: GraphQLContext, info) => {
        const principal = ctx.request.ctx.principal;
        if (principal && !mayUseField(principal.kind, field.name)) throw new AppError('FORBIDDEN', { message: CREDENTIAL_KINDS[principal.kind].refused ?? 'Forbidden' });
        if (write && principal?.entered) throw new AppError('FORBIDDEN', { message: 'A system administrator who entered an organization only reads there' });
        return resolve(root, args, ctx, info);
      };
    }
  }
  return built;
}

/** The GraphQL schema (docs/contract.md §6), built once. */
export function graphqlSchema(): GraphQLSchema {
  schema ??= guardRootFields(resolvedOncePerRequest(builder.toSchema({ sortSchema: false })));
  return schema;
}
