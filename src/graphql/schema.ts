import SchemaBuilder from '@pothos/core';
import type { FastifyRequest } from 'fastify';
import type { GraphQLSchema } from 'graphql';
import { type AuditActor, type AuditRow, listAudit } from '../audit/audit.ts';
import type { Db } from '../db/client.ts';
import type { Principal, Role } from '../http/context.ts';
import { AppError } from '../http/errors.ts';
import { requestActor, type UnitOfWork, unitOfWork } from '../http/unit-of-work.ts';
import {
  createApiToken,
  createPersonalAccessToken,
  listApiTokens,
  listPersonalAccessTokens,
  type PersonalAccessTokenInfo,
  revokeApiToken,
  revokePersonalAccessToken,
  type TokenInfo,
} from '../identity/access-tokens.ts';
import { requireRole, requireSessionUser, requireUser } from '../identity/authorize.ts';
import { sessionBody, switchOrganization } from '../identity/sessions.ts';
import { findUserById, publicUser } from '../identity/users.ts';
import { findIntegrationById, type IntegrationRow, listIntegrations } from '../integrations/integrations.ts';
import { deleteIntegrationWithEvents } from '../integrations/routes.ts';
import { type StatusObject, statusObject } from '../integrations/status.ts';
import {
  acceptInvitation,
  declineInvitation,
  type Invitation,
  inviteMember,
  listInvitations,
  myInvitations,
  revokeInvitation,
} from '../organizations/invitations.ts';
import {
  createOrganization,
  getOrganization,
  listMembers,
  type Member,
  type OrganizationRef as OrganizationSummary,
  organizationsOf,
  removeMember,
  setMemberRole,
} from '../organizations/organizations.ts';
import type { Services } from '../services.ts';

/** What every resolver gets: the request (its pipeline context) and the services. */
export interface GraphQLContext {
  request: FastifyRequest;
  services: Services;
}

interface OrganizationShape {
  id: string;
  name: string;
  role: Role;
}

interface UserShape {
  id: string;
  email: string;
  name: string;
  systemAdmin: boolean;
}

interface IntegrationShape {
  row: IntegrationRow;
  displayName: string;
}

const ROLES = ['owner', 'admin', 'member'] as const;

const builder = new SchemaBuilder<{ Context: GraphQLContext; DefaultFieldNullability: false }>({ defaultFieldNullability: false });

function principalOf(ctx: GraphQLContext): Principal {
  const principal = ctx.request.ctx.principal;
  if (!principal) throw new AppError('UNAUTHENTICATED');
  return principal;
}

function actorOf(ctx: GraphQLContext): AuditActor {
  return requestActor(ctx.request);
}

/** The request's transaction: one per request, committed by the pipeline when the document succeeded. */
function txOf(ctx: GraphQLContext): Promise<Db> {
  return ctx.request.ctx.tx();
}

/** The request's unit of work (its transaction, committed by the pipeline when the document succeeded). */
function workOf(ctx: GraphQLContext): Promise<UnitOfWork> {
  return unitOfWork(ctx.request, ctx.services);
}

function asRole(role: string): Role {
  if (!(ROLES as readonly string[]).includes(role)) {
    throw new AppError('INVALID_INPUT', { message: 'role must be one of owner, admin, member', details: [{ path: 'role', message: 'must be owner, admin or member' }] });
  }
  return role as Role;
}

function parseDate(value: string | null | undefined, path: string): Date | null {
  if (value === null || value === undefined) return null;
  const date = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/.test(value) ? new Date(value) : new Date(Number.NaN);
  if (Number.isNaN(date.getTime()) || date.getUTCFullYear() > 9999) {
    throw new AppError('INVALID_INPUT', { message: `${path} must be an ISO 8601 date-time`, details: [{ path, message: 'must be an ISO 8601 date-time such as 2030-01-31T00:00:00Z' }] });
  }
  return date;
}

const iso = (date: Date | null | undefined) => date?.toISOString() ?? null;

const UserRef = builder.objectRef<UserShape>('User').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    email: t.exposeString('email'),
    name: t.exposeString('name'),
    systemAdmin: t.exposeBoolean('systemAdmin'),
  }),
});

const OrganizationRef = builder.objectRef<OrganizationShape>('Organization').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    role: t.exposeString('role', { description: "The caller's role there: owner, admin or member" }),
  }),
});

const MemberUserRef = builder.objectRef<Member['user']>('MemberUser').implement({
  fields: (t) => ({ id: t.exposeID('id'), email: t.exposeString('email'), name: t.exposeString('name') }),
});

const MemberRef = builder.objectRef<Member>('Member').implement({
  fields: (t) => ({
    user: t.field({ type: MemberUserRef, resolve: (member) => member.user }),
    role: t.exposeString('role'),
  }),
});

const InvitationOrganizationRef = builder.objectRef<OrganizationSummary>('InvitationOrganization').implement({
  description: 'The organization an invitation is to',
  fields: (t) => ({ id: t.exposeID('id'), name: t.exposeString('name') }),
});

const InvitationRef = builder.objectRef<Invitation>('Invitation').implement({
  description: 'An invitation to join an organization; the invitee accepts or declines it (valid 7 days)',
  fields: (t) => ({
    id: t.exposeID('id'),
    email: t.exposeString('email'),
    role: t.exposeString('role', { description: 'The role on acceptance: owner, admin or member' }),
    status: t.exposeString('status', { description: 'pending, accepted, declined or revoked' }),
    expiresAt: t.string({ resolve: (invitation) => invitation.expiresAt.toISOString() }),
    organization: t.field({ type: InvitationOrganizationRef, resolve: (invitation) => invitation.organization }),
  }),
});

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

const IntegrationRef = builder.objectRef<IntegrationShape>('Integration').implement({
  description: 'A connection to a provider account. Its tokens are never readable here.',
  fields: (t) => ({
    id: t.id({ resolve: (i) => i.row.id }),
    name: t.string({ resolve: (i) => i.row.name }),
    kind: t.string({ resolve: (i) => i.row.provider }),
    provider: t.string({ resolve: (i) => i.row.provider }),
    description: t.string({ resolve: (i) => i.row.description }),
    status: t.string({ resolve: (i) => statusObject(i.row, i.displayName).status }),
    statusDetail: t.field({ type: StatusRef, resolve: (i) => statusObject(i.row, i.displayName) }),
    scopes: t.stringList({ resolve: (i) => i.row.scopes }),
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

const TokenInterface = builder.interfaceRef<TokenInfo>('Token').implement({
  description: 'A credential as listed: never its value',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    display: t.exposeString('display', { description: 'Prefix and last four characters' }),
    expiresAt: t.string({ nullable: true, resolve: (token) => iso(token.expiresAt) }),
    lastUsedAt: t.string({ nullable: true, resolve: (token) => iso(token.lastUsedAt) }),
    revokedAt: t.string({ nullable: true, resolve: (token) => iso(token.revokedAt) }),
    createdAt: t.string({ resolve: (token) => token.createdAt.toISOString() }),
  }),
});

const PatRef = builder.objectRef<PersonalAccessTokenInfo>('PersonalAccessToken').implement({
  interfaces: [TokenInterface],
  fields: (t) => ({ organizationIds: t.stringList({ resolve: (token) => token.organizationIds }) }),
});

const CreatedPatRef = builder.objectRef<PersonalAccessTokenInfo & { token: string }>('CreatedPersonalAccessToken').implement({
  description: 'A new personal access token: `token` is its value, readable this once only',
  interfaces: [TokenInterface],
  fields: (t) => ({ token: t.exposeString('token'), organizationIds: t.stringList({ resolve: (token) => token.organizationIds }) }),
});

const ApiTokenRef = builder.objectRef<TokenInfo>('APIToken').implement({ interfaces: [TokenInterface], fields: () => ({}) });

const CreatedApiTokenRef = builder.objectRef<TokenInfo & { token: string }>('CreatedAPIToken').implement({
  description: 'A new API token: `token` is its value, readable this once only',
  interfaces: [TokenInterface],
  fields: (t) => ({ token: t.exposeString('token') }),
});

interface SessionShape {
  accessToken: string;
  tokenType: string;
  expiresAt: string;
  organizationId: string;
}

const SessionRef = builder.objectRef<SessionShape>('Session').implement({
  description: 'A session token of the same session, bound to the organization switched to',
  fields: (t) => ({
    accessToken: t.exposeString('accessToken'),
    tokenType: t.exposeString('tokenType'),
    expiresAt: t.exposeString('expiresAt'),
    organizationId: t.exposeString('organizationId'),
  }),
});

function integrationShape(ctx: GraphQLContext, row: IntegrationRow): IntegrationShape {
  return { row, displayName: ctx.services.providers.get(row.provider)?.displayName ?? row.provider };
}

async function currentOrganization(ctx: GraphQLContext): Promise<OrganizationShape> {
  const principal = principalOf(ctx);
  const organization = await getOrganization(await txOf(ctx), principal.organizationId);
  if (!organization) throw new AppError('NOT_FOUND');
  return { ...organization, role: principal.role };
}

builder.queryType({
  fields: (t) => ({
    me: t.field({
      type: UserRef,
      nullable: true,
      description: 'The effective user; null for an API token',
      resolve: async (_root, _args, ctx) => {
        const principal = principalOf(ctx);
        if (!principal.userId) return null;
        const user = await findUserById(await txOf(ctx), principal.userId);
        return user ? { ...publicUser(user), systemAdmin: user.systemAdmin } : null;
      },
    }),
    organization: t.field({ type: OrganizationRef, resolve: (_root, _args, ctx) => currentOrganization(ctx) }),
    organizations: t.field({
      type: [OrganizationRef],
      resolve: async (_root, _args, ctx) => {
        const principal = principalOf(ctx);
        if (!principal.userId) return [await currentOrganization(ctx)];
        return organizationsOf(await txOf(ctx), principal.userId);
      },
    }),
    members: t.field({
      type: [MemberRef],
      resolve: async (_root, _args, ctx) => listMembers(await workOf(ctx), { organizationId: principalOf(ctx).organizationId }),
    }),
    invitations: t.field({
      type: [InvitationRef],
      description: "The caller's organization's open invitations (owner/admin)",
      resolve: async (_root, _args, ctx) => listInvitations(await workOf(ctx), { organizationId: principalOf(ctx).organizationId }),
    }),
    myInvitations: t.field({
      type: [InvitationRef],
      description: "Open invitations to the signed-in user's e-mail, from any organization",
      resolve: async (_root, _args, ctx) => myInvitations(await workOf(ctx)),
    }),
    integrations: t.field({
      type: [IntegrationRef],
      resolve: async (_root, _args, ctx) => {
        const principal = requireRole(principalOf(ctx), principalOf(ctx).organizationId, 'member');
        const rows = await listIntegrations(await txOf(ctx), principal.organizationId);
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
      description: "The organization's audit log, newest first (owner/admin)",
      args: { first: t.arg.int({ required: false }), after: t.arg.string({ required: false }) },
      resolve: async (_root, args, ctx) => {
        const principal = requireRole(principalOf(ctx), principalOf(ctx).organizationId, 'admin');
        const first = args.first ?? 20;
        if (first < 1 || first > 100) throw new AppError('INVALID_INPUT', { details: [{ path: 'first', message: 'must be 1–100' }] });
        const rows = await listAudit(await txOf(ctx), principal.organizationId, { first: first + 1, ...(args.after ? { after: args.after } : {}) });
        return { nodes: rows.slice(0, first), hasNextPage: rows.length > first };
      },
    }),
    personalAccessTokens: t.field({
      type: [PatRef],
      resolve: async (_root, _args, ctx) => listPersonalAccessTokens(await workOf(ctx)),
    }),
    apiTokens: t.field({
      type: [ApiTokenRef],
      resolve: async (_root, _args, ctx) => listApiTokens(await workOf(ctx), { organizationId: principalOf(ctx).organizationId }),
    }),
  }),
});

builder.mutationType({
  fields: (t) => ({
    createOrganization: t.field({
      type: OrganizationRef,
      args: { name: t.arg.string({ required: true }) },
      resolve: async (_root, args, ctx) => {
        const principal = requireUser(principalOf(ctx));
        const organization = await createOrganization(await workOf(ctx), { name: args.name, ownerUserId: principal.userId });
        return { ...organization, role: 'owner' as const };
      },
    }),
    switchOrganization: t.field({
      type: SessionRef,
      args: { organizationId: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => {
        const grant = await switchOrganization(await workOf(ctx), { organizationId: String(args.organizationId) });
        const session = sessionBody(ctx.services.sessionTokens, grant);
        return { accessToken: session.accessToken, tokenType: session.tokenType, expiresAt: session.expiresAt, organizationId: session.organizationId };
      },
    }),
    addMember: t.field({
      type: InvitationRef,
      description: 'Invites an e-mail address (or renews its pending invitation); the person becomes a member only by accepting',
      args: { email: t.arg.string({ required: true }), role: t.arg.string({ required: true }) },
      resolve: async (_root, args, ctx) => inviteMember(await workOf(ctx), { organizationId: principalOf(ctx).organizationId, email: args.email, role: asRole(args.role) }),
    }),
    acceptInvitation: t.field({
      type: OrganizationRef,
      description: "Accepts one of myInvitations (a signed-in session of the invitee): returns the organization joined",
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => acceptInvitation(await workOf(ctx), { id: String(args.id) }),
    }),
    declineInvitation: t.field({
      type: InvitationRef,
      description: 'Declines one of myInvitations (a signed-in session of the invitee)',
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => declineInvitation(await workOf(ctx), { id: String(args.id) }),
    }),
    revokeInvitation: t.field({
      type: InvitationRef,
      description: "Withdraws a pending invitation of the caller's organization (owner/admin)",
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => revokeInvitation(await workOf(ctx), { organizationId: principalOf(ctx).organizationId, id: String(args.id) }),
    }),
    setMemberRole: t.field({
      type: MemberRef,
      args: { email: t.arg.string({ required: true }), role: t.arg.string({ required: true }) },
      resolve: async (_root, args, ctx) =>
        setMemberRole(await workOf(ctx), { organizationId: principalOf(ctx).organizationId, email: args.email, role: asRole(args.role) }),
    }),
    removeMember: t.boolean({
      args: { email: t.arg.string({ required: true }) },
      resolve: async (_root, args, ctx) => {
        await removeMember(await workOf(ctx), { organizationId: principalOf(ctx).organizationId, email: args.email });
        return true;
      },
    }),
    deleteIntegration: t.boolean({
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => {
        await deleteIntegrationWithEvents(ctx.services, ctx.request, String(args.id));
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
        const row = await findIntegrationById(ctx.services.db, principal.organizationId, String(args.id));
        if (!row) throw new AppError('INTEGRATION_NOT_FOUND');
        const current = await ctx.services.lifecycle.reload(principal.organizationId, row.id);
        const refreshed = await ctx.services.lifecycle.refresh(current, actorOf(ctx));
        return integrationShape(ctx, refreshed.row);
      },
    }),
    createPersonalAccessToken: t.field({
      type: CreatedPatRef,
      args: {
        name: t.arg.string({ required: true }),
        expiresAt: t.arg.string({ required: false }),
        organizationIds: t.arg.idList({ required: false }),
      },
      resolve: async (_root, args, ctx) => {
        requireSessionUser(principalOf(ctx));
        return createPersonalAccessToken(
          await workOf(ctx),
          { name: args.name, expiresAt: parseDate(args.expiresAt, 'expiresAt'), ...(args.organizationIds ? { organizationIds: args.organizationIds.map(String) } : {}) },
        );
      },
    }),
    revokePersonalAccessToken: t.field({
      type: PatRef,
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => revokePersonalAccessToken(await workOf(ctx), { id: String(args.id) }),
    }),
    createAPIToken: t.field({
      type: CreatedApiTokenRef,
      args: { name: t.arg.string({ required: true }), expiresAt: t.arg.string({ required: false }) },
      resolve: async (_root, args, ctx) =>
        createApiToken(await workOf(ctx), { name: args.name, expiresAt: parseDate(args.expiresAt, 'expiresAt') }),
    }),
    revokeAPIToken: t.field({
      type: ApiTokenRef,
      args: { id: t.arg.id({ required: true }) },
      resolve: async (_root, args, ctx) => revokeApiToken(await workOf(ctx), { organizationId: principalOf(ctx).organizationId, id: String(args.id) }),
    }),
  }),
});

let schema: GraphQLSchema | undefined;

/** The GraphQL schema (CONTRACT.md §6), built once. */
export function graphqlSchema(): GraphQLSchema {
  schema ??= builder.toSchema({ sortSchema: false });
  return schema;
}
