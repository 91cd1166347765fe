import { and, asc, eq, sql } from 'drizzle-orm';
import { monotonicIds, PRODUCT_ID } from '../lib/ids.ts';
import { recordAudit } from '../audit/audit.ts';
import { type Db, queryRows } from '../db/client.ts';
import { memberships, organizations, users } from '../db/schema.ts';
import type { Principal, Role } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import { checkName } from '../ground/names.ts';
import type { UnitOfWork, Work } from '../ground/work.ts';
import { requireGrantor, requireRole, requireUser } from '../identity/authorize.ts';
import { actsForDeployment, CREDENTIAL_KINDS } from '../identity/credential-kinds.ts';

export interface OrganizationRef {
  id: string;
  name: string;
  /** The product's key for its customer (docs/contract.md §5d): unique across the deployment; null when it has none. */
  externalId: string | null;
}

export interface OrganizationWithRole extends OrganizationRef {
  role: Role;
}

/** Trims and checks an organization name: 1–100 characters after trimming, a name others read (http/names.ts). */
export function normalizeOrganizationName(name: string, path = 'name'): string {
  return checkName(name, path, { max: 100 });
}

/**
 * Whether the caller may set an organization's `externalId`, the product's key for its customer
 * (docs/contract.md §5d): a service token, or a system administrator as themselves — their session
 * or PAT, never while impersonating or having entered an organization to read it.
 */
export function setsProductKeys(principal: Principal | null): boolean {
  if (actsForDeployment(principal)) return true;
  return Boolean(principal?.systemAdmin && principal.userId && CREDENTIAL_KINDS[principal.kind].personal && !principal.impersonatorId && !principal.entered);
}

/** 403 unless the caller may set an `externalId` (`setsProductKeys`). */
export function assertSetsProductKeys(principal: Principal | null): void {
  if (!setsProductKeys(principal)) {
    throw new AppError('FORBIDDEN', { message: "externalId is the product's key for its customer: only a service token or a system administrator sets it" });
  }
}

/**
 * Serializes, until commit, every writer of one `externalId` (creating, linking): the second one's
 * check then sees the first one's row and answers 409, instead of running into the unique index.
 */
export async function lockExternalId(db: Db, externalId: string): Promise<void> {
  await queryRows(db, sql`SELECT 1 FROM (SELECT pg_advisory_xact_lock(hashtext(${`organizations.external_id:${externalId}`}))) AS locked`);
}

/**
 * Checks an external id: 1–128 characters, none of them a control, format or unassigned
 * character (so it prints, and prints as what it is), kept exactly as given.
 */
export function checkExternalId(externalId: string, path = 'externalId'): string {
  if (!PRODUCT_ID.test(externalId)) {
    throw new AppError('INVALID_INPUT', { details: [{ path, message: 'must be 1–128 printable characters' }] });
  }
  return externalId;
}

/** Organization ids keep increasing within a millisecond too: listings are newest first by id (manage.ts). */
const nextOrganizationId = monotonicIds();

/**
 * Refuses an organization beyond the `quota` its creator may hold (LIMIT_ORGANIZATIONS_PER_USER):
 * the user's row is locked for the count, so concurrent creations count each other.
 */
async function assertOrganizationQuota(db: Db, userId: string, quota: number): Promise<void> {
  await queryRows(db, sql`SELECT 1 FROM users WHERE id = ${userId} FOR UPDATE`);
  // Counted by a statement of its own, whose snapshot follows the lock: it sees what the previous holder committed.
  // One carrying a product's key is the product's customer, not the person's own: it does not count (docs/contract.md §5d).
  const [row] = await queryRows<{ created: number }>(db, sql`SELECT count(*)::int AS created FROM organizations WHERE created_by_user_id = ${userId} AND external_id IS NULL`);
  if ((row?.created ?? 0) >= quota) {
    throw new AppError('CONFLICT', { message: `You have reached the limit of ${quota} organizations per user (LIMIT_ORGANIZATIONS_PER_USER)` });
  }
}

/** Who creates an organization: a user, who becomes its owner, or a service token (no member until someone is invited). */
export type OrganizationCreator = { ownerUserId: string } | { serviceTokenId: string };

/** The caller as an organization's creator: a credential acting for the deployment (a service token), else a user (403 for any other). */
export function creatorOf(principal: Principal | null): OrganizationCreator {
  if (principal && actsForDeployment(principal)) return { serviceTokenId: principal.credentialId };
  return { ownerUserId: requireUser(principal).userId };
}

/**
 * Creates an organization, queues `organization.created` and audits it. A user creating it
 * becomes its owner; with a `quota` (a person asking, not start-up or a first sign-in) not more
 * organizations than that (409). One created by a service token has no member. An `externalId`
 * is the product's key (docs/contract.md §5d): only a service token or a system administrator
 * gives one (403), it is unique across the deployment (409), and an organization carrying one
 * does not count against its creator's quota.
 */
export async function createOrganization(work: UnitOfWork, input: OrganizationCreator & { name: string; externalId?: string | null; quota?: number }): Promise<OrganizationRef> {
  const externalId = input.externalId == null ? null : checkExternalId(input.externalId);
  if (externalId !== null) assertSetsProductKeys(work.actor.principal);
  const name = normalizeOrganizationName(input.name);
  const ownerUserId = 'ownerUserId' in input ? input.ownerUserId : null;
  if (ownerUserId !== null && input.quota !== undefined && externalId === null) await assertOrganizationQuota(work.db, ownerUserId, input.quota);
  if (externalId !== null) await lockExternalId(work.db, externalId);
  const id = nextOrganizationId();
  // The unique index on external_id decides, a concurrent twin included: no row inserted means a conflict.
  const inserted = await work.db
    .insert(organizations)
    .values({ id, name, externalId, createdByUserId: ownerUserId, createdByServiceTokenId: 'serviceTokenId' in input ? input.serviceTokenId : null })
    .onConflictDoNothing()
    .returning({ id: organizations.id });
  if (inserted.length === 0) throw new AppError('CONFLICT', { message: 'An organization with that externalId exists already' });
  if (ownerUserId !== null) await work.db.insert(memberships).values({ organizationId: id, userId: ownerUserId, role: 'owner' });
  await work.outbox.emit(work.db, work.afterCommit, {
    organizationId: id,
    type: 'organization.created',
    data: { organization: { id, name, ...(externalId === null ? {} : { externalId }) }, createdBy: ownerUserId },
  });
  await recordAudit(work.db, work.actor, { organizationId: id, action: 'organization.created', targetType: 'organization', targetId: id });
  return { id, name, externalId };
}

/** The organization with `externalId` (unique across the deployment) if `userId` belongs to it, else null. */
export async function organizationByExternalId(db: Db, userId: string, externalId: string): Promise<OrganizationWithRole | null> {
  const [row] = await db
    .select(withRole)
    .from(memberships)
    .innerJoin(organizations, eq(organizations.id, memberships.organizationId))
    .where(and(eq(memberships.userId, userId), eq(organizations.externalId, externalId)))
    .limit(1);
  return row ?? null;
}

const withRole = { id: organizations.id, name: organizations.name, externalId: organizations.externalId, role: memberships.role };

/** The organization, with the role `userId` holds there, or null when not a member. */
export async function membershipOf(db: Db, organizationId: string, userId: string): Promise<OrganizationWithRole | null> {
  const [row] = await db
    .select(withRole)
    .from(memberships)
    .innerJoin(organizations, eq(organizations.id, memberships.organizationId))
    .where(and(eq(memberships.organizationId, organizationId), eq(memberships.userId, userId)));
  return row ?? null;
}

/** Every organization `userId` belongs to, oldest membership first. */
export async function organizationsOf(db: Db, userId: string): Promise<OrganizationWithRole[]> {
  return db
    .select(withRole)
    .from(memberships)
    .innerJoin(organizations, eq(organizations.id, memberships.organizationId))
    .where(eq(memberships.userId, userId))
    .orderBy(asc(memberships.createdAt), asc(organizations.id));
}

/** The organization `organizationId`, or null. */
export async function getOrganization(db: Db, organizationId: string): Promise<OrganizationRef | null> {
  const [row] = await db.select({ id: organizations.id, name: organizations.name, externalId: organizations.externalId }).from(organizations).where(eq(organizations.id, organizationId));
  return row ?? null;
}

export interface Member {
  user: { id: string; email: string; name: string };
  role: Role;
}

/** The members of the caller's organization (any member may list them). */
export async function listMembers(work: Work, input: { organizationId: string }): Promise<Member[]> {
  const { organizationId } = input;
  requireRole(work.actor.principal, organizationId, 'member');
  const rows = await work.db
    .select({ id: users.id, email: users.email, name: users.name, role: memberships.role })
    .from(memberships)
    .innerJoin(users, eq(users.id, memberships.userId))
    .where(eq(memberships.organizationId, organizationId))
    .orderBy(asc(memberships.createdAt), asc(users.id));
  return rows.map(({ role, ...user }) => ({ user, role }));
}

/**
 * Makes `userId` a member with `role` at once, without asking them: for accepting an
 * invitation (their consent) and for tests. No API operation reaches it with a user the
 * caller chose — inviting is `inviteMember` (src/organizations/invitations.ts).
 * Returns false when they already are a member (nothing changes).
 */
export async function addMembership(db: Db, organizationId: string, userId: string, role: Role): Promise<boolean> {
  const added = await db.insert(memberships).values({ organizationId, userId, role }).onConflictDoNothing().returning({ userId: memberships.userId });
  return added.length > 0;
}

/** Changes a member's role; owners only touch owners, API tokens give no role above member, and the last owner stays an owner. */
export async function setMemberRole(work: Work, input: { organizationId: string; email: string; role: Role }): Promise<Member> {
  const { organizationId, role } = input;
  const actor = requireGrantor(work.actor.principal, organizationId, role);
  const current = await memberByEmail(work.db, organizationId, input.email);
  const user = current.user;
  if (current.role === 'owner' && actor.role !== 'owner') throw new AppError('FORBIDDEN', { message: 'Only owners can grant or change the owner role' });
  if (current.role === 'owner' && role !== 'owner') await assertNotLastOwner(work.db, organizationId);
  await work.db
    .update(memberships)
    .set({ role })
    .where(and(eq(memberships.organizationId, organizationId), eq(memberships.userId, user.id)));
  await recordAudit(work.db, work.actor, {
    organizationId,
    action: 'member.role_changed',
    targetType: 'user',
    targetId: user.id,
    detail: { from: current.role, to: role },
  });
  return { user, role };
}

/** Removes a member; access ends at once (roles are re-read on every request). */
export async function removeMember(work: Work, input: { organizationId: string; email: string }): Promise<void> {
  const { organizationId } = input;
  const actor = requireRole(work.actor.principal, organizationId, 'admin');
  const current = await memberByEmail(work.db, organizationId, input.email);
  const user = current.user;
  if (current.role === 'owner') {
    if (actor.role !== 'owner') throw new AppError('FORBIDDEN', { message: 'Only owners can remove an owner' });
    await assertNotLastOwner(work.db, organizationId);
  }
  await work.db.delete(memberships).where(and(eq(memberships.organizationId, organizationId), eq(memberships.userId, user.id)));
  await recordAudit(work.db, work.actor, { organizationId, action: 'member.removed', targetType: 'user', targetId: user.id });
}

async function assertNotLastOwner(db: Db, organizationId: string): Promise<void> {
  // Lock the organization's owner rows so two concurrent demotions cannot both pass.
  const owners = await db
    .select({ userId: memberships.userId })
    .from(memberships)
    .where(and(eq(memberships.organizationId, organizationId), eq(memberships.role, 'owner')))
    .for('update');
  if (owners.length <= 1) throw new AppError('CONFLICT', { message: 'The last owner cannot be removed or demoted' });
}

/**
 * The organization's member with that e-mail. An address without an account and one of
 * a non-member get the same 404: nobody learns here who is registered.
 */
async function memberByEmail(db: Db, organizationId: string, email: string): Promise<Member> {
  const [row] = await db
    .select({ id: users.id, email: users.email, name: users.name, role: memberships.role })
    .from(users)
    .innerJoin(memberships, and(eq(memberships.organizationId, organizationId), eq(memberships.userId, users.id)))
    .where(eq(users.emailNormalized, normalizeEmail(email)));
  if (!row) throw new AppError('NOT_FOUND', { message: 'No member with that e-mail' });
  const { role, ...user } = row;
  return { user, role };
}

/** E-mails compare case-insensitively. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}
