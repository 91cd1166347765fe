/**
 * GraphQL for organizations, members and invitations (docs/contract.md §6): their object types,
 * queries and mutations. Resolvers call the same services as the REST routes, with the
 * request's unit of work.
 */
import type { Role } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import { isRole, requireUser } from '../identity/authorize.ts';
import { sessionBody, switchOrganization } from '../identity/sessions.ts';
import { findUserById, publicUser } from '../identity/users.ts';
import { acceptInvitation, declineInvitation, type Invitation, inviteMember, listInvitations, myInvitations, revokeInvitation } from '../organizations/invitations.ts';
import {
  checkExternalId,
  createOrganization,
  getOrganization,
  listMembers,
  type Member,
  organizationByExternalId,
  type OrganizationRef as OrganizationSummary,
  organizationsOf,
  removeMember,
  setMemberRole,
} from '../organizations/organizations.ts';
import { type Builder, type GraphQLContext, type MutationFields, principalOf, type QueryFields, txOf, workOf } from './context.ts';
import type { CredentialTypes } from './credentials.ts';

interface OrganizationShape {
  id: string;
  name: string;
  externalId: string | null;
  role: Role;
}

interface UserShape {
  id: string;
  email: string;
  name: string;
  systemAdmin: boolean;
}

/** A role argument (a plain string in the schema), or 400. */
function asRole(role: string): Role {
  if (!isRole(role)) {
    throw new AppError('INVALID_INPUT', { message: 'role must be one of owner, admin, member', details: [{ path: 'role', message: 'must be owner, admin or member' }] });
  }
  return role;
}

/** Registers User, Organization, Member and Invitation; schema.ts calls it where they belong in the SDL's order. */
export function organizationTypes(builder: Builder) {
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
      externalId: t.exposeString('externalId', { nullable: true, description: "The product's key for its customer: unique across the deployment, set only by a service token or a system administrator" }),
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

  const InvitationOrganizationRef = builder.objectRef<Pick<OrganizationSummary, 'id' | 'name'>>('InvitationOrganization').implement({
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

  return { UserRef, OrganizationRef, MemberRef, InvitationRef };
}

/** The refs `organizationTypes` registered. */
export type OrganizationTypes = ReturnType<typeof organizationTypes>;

async function currentOrganization(ctx: GraphQLContext): Promise<OrganizationShape> {
  const principal = principalOf(ctx);
  const organization = await getOrganization(await txOf(ctx), principal.organizationId);
  if (!organization) throw new AppError('NOT_FOUND');
  return { ...organization, role: principal.role };
}

/** Query fields: me, organization, organizations, members, invitations, myInvitations. */
export function organizationQueries(t: QueryFields, { UserRef, OrganizationRef, MemberRef, InvitationRef }: OrganizationTypes) {
  return {
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
    organizationByExternalId: t.field({
      type: OrganizationRef,
      nullable: true,
      description: 'The organization with that externalId (matched exactly) if the caller belongs to it (a token: if it is the organization the token acts in), else null',
      args: { externalId: t.arg.string({ required: true }) },
      resolve: async (_root, args, ctx) => {
        const principal = principalOf(ctx);
        const externalId = checkExternalId(args.externalId);
        // A signed-in user looks among all their organizations; a PAT or an API token only at the one it acts in.
        if (principal.kind === 'jwt' && principal.userId) return organizationByExternalId(await txOf(ctx), principal.userId, externalId);
        const current = await currentOrganization(ctx);
        return current.externalId === externalId ? current : null;
      },
    }),
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
  };
}

/** Mutation fields: createOrganization, switchOrganization and the member and invitation mutations. */
export function organizationMutations(t: MutationFields, { OrganizationRef, MemberRef, InvitationRef }: OrganizationTypes, { SessionRef }: CredentialTypes) {
  return {
    createOrganization: t.field({
      type: OrganizationRef,
      description: "Creates an organization the caller owns; externalId, the product's key (1–128 printable characters, unique across the deployment), only from a system administrator (not impersonating)",
      args: { name: t.arg.string({ required: true }), externalId: t.arg.string({ required: false }) },
      resolve: async (_root, args, ctx) => {
        const principal = requireUser(principalOf(ctx));
        const organization = await createOrganization(await workOf(ctx), {
          name: args.name,
          ownerUserId: principal.userId,
          externalId: args.externalId,
          quota: ctx.services.config.limits.organizationsPerUser,
        });
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
      description:
        'Invites an e-mail address (or renews its pending invitation, with a new token); the person becomes a member only by accepting with the token that organization.member_invited carries. API tokens invite members only',
      args: { email: t.arg.string({ required: true }), role: t.arg.string({ required: true }) },
      resolve: async (_root, args, ctx) =>
        inviteMember(await workOf(ctx), {
          organizationId: principalOf(ctx).organizationId,
          email: args.email,
          role: asRole(args.role),
          publicUrl: ctx.services.config.server.publicUrl,
        }),
    }),
    acceptInvitation: t.field({
      type: OrganizationRef,
      description:
        "Accepts one of myInvitations (a signed-in session of the invitee) with its token, the acceptToken of the organization.member_invited event: returns the organization joined",
      args: { id: t.arg.id({ required: true }), token: t.arg.string({ required: true }) },
      resolve: async (_root, args, ctx) => acceptInvitation(await workOf(ctx), { id: String(args.id), token: args.token }),
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
  };
}
