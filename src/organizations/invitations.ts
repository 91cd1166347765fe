/**
 * Membership by invitation (docs/contract.md §3): an owner or admin invites an e-mail address, and
 * only the person signed in with that account e-mail, holding the invitation's single-use
 * token, can accept. E-mail addresses are not verified, so the address alone proves nothing:
 * the token travels only in the `organization.member_invited` event, for the product to send
 * to that address. Inviting answers the same whether or not the address has an account, so it
 * can tell nobody who is registered.
 */
import { timingSafeEqual } from 'node:crypto';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { and, asc, desc, eq, gt, sql } from 'drizzle-orm';
import { recordAudit } from '../audit/audit.ts';
import { type Db, queryRows } from '../db/client.ts';
import { type InvitationStatus, invitations, organizations, users } from '../db/schema.ts';
import type { Role } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import type { UnitOfWork, Work } from '../ground/work.ts';
import { mayGive, requireGrantor, requireRole, requireSessionUser, requireUser } from '../identity/authorize.ts';
import { hashToken } from '../identity/credentials.ts';
import { newSecret, SECRET, newId as ulid } from '../lib/ids.ts';
import { addMembership, membershipOf, normalizeEmail, type OrganizationRef, type OrganizationWithRole } from './organizations.ts';

/** How long an invitation stays open: 7 days from its (last) sending. */
export const INVITATION_TTL_SECONDS = 7 * 24 * 60 * 60;

/** An invitee's list shows at most this many (newest first): nobody can flood it without bound. */
const MY_INVITATIONS_LIMIT = 100;

/** The same rule as registration's `format: email` (ajv-formats, full mode). */
const EMAIL = fullFormats.email as RegExp;

export interface Invitation {
  id: string;
  /** As the inviter wrote it. */
  email: string;
  role: Role;
  status: InvitationStatus;
  expiresAt: Date;
  organization: Pick<OrganizationRef, 'id' | 'name'>;
}

const invitationColumns = {
  id: invitations.id,
  email: invitations.email,
  role: invitations.role,
  status: invitations.status,
  expiresAt: invitations.expiresAt,
  organizationId: organizations.id,
  organizationName: organizations.name,
};

interface InvitationRow {
  id: string;
  email: string;
  role: Role;
  status: InvitationStatus;
  expiresAt: Date;
  organizationId: string;
  organizationName: string;
}

function invitationOf(row: InvitationRow): Invitation {
  return {
    id: row.id,
    email: row.email,
    role: row.role,
    status: row.status,
    expiresAt: row.expiresAt,
    organization: { id: row.organizationId, name: row.organizationName },
  };
}

function checkedEmail(email: string): string {
  const trimmed = email.trim();
  if (trimmed.length < 3 || trimmed.length > 254 || !EMAIL.test(trimmed)) {
    throw new AppError('INVALID_INPUT', { message: 'email must be an e-mail address', details: [{ path: 'email', message: 'must be an e-mail address' }] });
  }
  return trimmed;
}

/** The console page that accepts: the token in the fragment, so it reaches no server log and no `Referer`. */
function acceptUrl(publicUrl: string, id: string, token: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/invitations/${encodeURIComponent(id)}#token=${token}`;
}

/**
 * Invites `email` to the organization with `role`, or renews the pending invitation of that
 * address (same id, the new role, a fresh 7 days, a new token: the old one stops working),
 * and queues `organization.member_invited` — the only place the token ever appears, with
 * `acceptUrl`, the console page under `publicUrl` that takes it. Who may give which role is
 * `requireGrantor`'s rule. The answer and the statements run are the same whether or not the
 * address has an account.
 */
export async function inviteMember(work: UnitOfWork, input: { organizationId: string; email: string; role: Role; publicUrl: string }): Promise<Invitation> {
  const { organizationId, role } = input;
  const actor = requireGrantor(work.actor.principal, organizationId, role);
  const isOwner = mayGive(actor, 'owner');
  const address = checkedEmail(input.email);
  const normalized = normalizeEmail(address);
  const acceptToken = newSecret();

  // Members are already listed to whoever may invite (`members`): saying so reveals nothing new.
  const [member] = await queryRows<{ found: number }>(
    work.db,
    sql`SELECT 1 AS found FROM users u JOIN memberships m ON m.organization_id = ${organizationId} AND m.user_id = u.id WHERE u.email_normalized = ${normalized}`,
  );
  if (member) throw new AppError('CONFLICT', { message: 'That person is already a member of this organization' });

  // One statement creates or renews; `xmax = 0` tells a fresh row from an updated one (audit only).
  const [row] = await queryRows<{ id: string; email: string; role: Role; expires_at: Date | string; created: boolean; organization_name: string }>(
    work.db,
    sql`
      WITH invitation AS (
        INSERT INTO invitations AS i (organization_id, id, email, email_normalized, role, invited_by, accept_token_hash, expires_at)
        VALUES (${organizationId}, ${ulid()}, ${address}, ${normalized}, ${role}, ${actor.userId}, ${hashToken(acceptToken)}, now() + make_interval(secs => ${INVITATION_TTL_SECONDS}))
        ON CONFLICT (organization_id, email_normalized) WHERE status = 'pending'
        DO UPDATE SET email = excluded.email, role = excluded.role, invited_by = excluded.invited_by, accept_token_hash = excluded.accept_token_hash,
          expires_at = excluded.expires_at, updated_at = now()
          WHERE i.role <> 'owner' OR ${isOwner}
        RETURNING i.id, i.email, i.role, i.expires_at, (i.xmax = 0) AS created
      )
      SELECT invitation.*, o.name AS organization_name FROM invitation JOIN organizations o ON o.id = ${organizationId}`,
  );
  // Only an admin renewing an owner's invitation leaves no row (the update's WHERE refused it).
  if (!row) throw new AppError('FORBIDDEN', { message: 'Only owners can change an invitation to the owner role' });

  const invitation: Invitation = {
    id: row.id,
    email: row.email,
    role: row.role,
    status: 'pending',
    expiresAt: new Date(row.expires_at),
    organization: { id: organizationId, name: row.organization_name },
  };
  await work.outbox.emit(work.db, work.afterCommit, {
    organizationId,
    type: 'organization.member_invited',
    data: {
      invitationId: invitation.id,
      email: invitation.email,
      role: invitation.role,
      invitation: { id: invitation.id, email: invitation.email, role: invitation.role, expiresAt: invitation.expiresAt.toISOString() },
      organization: invitation.organization,
      invitedBy: actor.userId,
    },
    // Sealed in the outbox row, opened only to deliver: the token is stored nowhere readable.
    secretData: { acceptToken, acceptUrl: acceptUrl(input.publicUrl, invitation.id, acceptToken) },
  });
  await recordAudit(work.db, work.actor, {
    organizationId,
    action: row.created ? 'invitation.created' : 'invitation.renewed',
    targetType: 'invitation',
    targetId: invitation.id,
    detail: { email: invitation.email, role },
  });
  return invitation;
}

/** The organization's open invitations (pending, unexpired), oldest first; owners and admins. */
export async function listInvitations(work: Work, input: { organizationId: string }): Promise<Invitation[]> {
  const { organizationId } = input;
  requireRole(work.actor.principal, organizationId, 'admin');
  const rows = await work.db
    .select(invitationColumns)
    .from(invitations)
    .innerJoin(organizations, eq(organizations.id, invitations.organizationId))
    .where(and(eq(invitations.organizationId, organizationId), eq(invitations.status, 'pending'), gt(invitations.expiresAt, sql`now()`)))
    .orderBy(asc(invitations.createdAt), asc(invitations.id));
  return rows.map(invitationOf);
}

/**
 * The open invitations addressed to the caller's account e-mail (any letter case), newest
 * first, across organizations: the one lookup not scoped to an organization.
 */
export async function myInvitations(work: Work): Promise<Invitation[]> {
  const user = requireUser(work.actor.principal);
  const rows = await work.db
    .select(invitationColumns)
    .from(users)
    .innerJoin(invitations, eq(invitations.emailNormalized, users.emailNormalized))
    .innerJoin(organizations, eq(organizations.id, invitations.organizationId))
    .where(and(eq(users.id, user.userId), eq(invitations.status, 'pending'), gt(invitations.expiresAt, sql`now()`)))
    .orderBy(desc(invitations.updatedAt), desc(invitations.id))
    .limit(MY_INVITATIONS_LIMIT);
  return rows.map(invitationOf);
}

type InviteeRow = InvitationRow & { expired: boolean; acceptTokenHash: string | null };

/** Invitation `id` if it is addressed to `userId`'s account e-mail, locked for the answer; else null. */
async function inviteeInvitation(db: Db, userId: string, id: string): Promise<InviteeRow | null> {
  const [row] = await db
    .select({ ...invitationColumns, acceptTokenHash: invitations.acceptTokenHash, expired: sql<boolean>`${invitations.expiresAt} <= now()` })
    .from(users)
    .innerJoin(invitations, and(eq(invitations.emailNormalized, users.emailNormalized), eq(invitations.id, id)))
    .innerJoin(organizations, eq(organizations.id, invitations.organizationId))
    .where(eq(users.id, userId))
    .for('update', { of: invitations });
  return row ?? null;
}

/** Whether `token` is the one whose hash is `stored`, compared in constant time. */
function tokenMatches(token: string, stored: string | null): boolean {
  if (!SECRET.test(token) || stored === null) return false;
  const given = Buffer.from(hashToken(token), 'hex');
  const expected = Buffer.from(stored, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const ANSWERED: Record<Exclude<InvitationStatus, 'pending'>, string> = {
  accepted: 'This invitation was already accepted',
  declined: 'This invitation was declined',
  revoked: 'This invitation was revoked',
};

/**
 * The caller's own open invitation `id`: needs their signed-in session, and, to accept, its
 * token. Someone else's invitation and a token that does not match get the answer of an
 * unknown id, before anything about its state: without the token nobody learns it exists.
 */
async function openInvitationOfCaller(work: Work, id: string, token?: string): Promise<{ userId: string; row: InvitationRow }> {
  const user = requireSessionUser(work.actor.principal);
  const row = await inviteeInvitation(work.db, user.userId, id);
  if (token === undefined) {
    if (!row) throw new AppError('NOT_FOUND', { message: 'No such invitation' });
  } else if (!row || !tokenMatches(token, row.acceptTokenHash)) {
    throw new AppError('NOT_FOUND', { message: 'No such invitation, or its token does not match' });
  }
  if (row.status !== 'pending') throw new AppError('CONFLICT', { message: ANSWERED[row.status] });
  if (row.expired) throw new AppError('CONFLICT', { message: 'This invitation has expired; ask for a new one' });
  return { userId: user.userId, row };
}

async function markAnswered(db: Db, organizationId: string, id: string, status: Exclude<InvitationStatus, 'pending'>): Promise<void> {
  await db
    .update(invitations)
    .set({ status, respondedAt: sql`now()`, updatedAt: sql`now()` })
    .where(and(eq(invitations.organizationId, organizationId), eq(invitations.id, id)));
}

/** Accepts the caller's open invitation with its token: they become a member with its role. */
export async function acceptInvitation(work: Work, input: { id: string; token: string }): Promise<OrganizationWithRole> {
  const { userId, row } = await openInvitationOfCaller(work, input.id, input.token);
  if (!(await addMembership(work.db, row.organizationId, userId, row.role))) {
    throw new AppError('CONFLICT', { message: 'You are already a member of this organization' });
  }
  await markAnswered(work.db, row.organizationId, row.id, 'accepted');
  await recordAudit(work.db, work.actor, { organizationId: row.organizationId, action: 'invitation.accepted', targetType: 'invitation', targetId: row.id, detail: { role: row.role } });
  const joined = await membershipOf(work.db, row.organizationId, userId);
  if (!joined) throw new Error('membership just added is missing');
  return joined;
}

/** Declines the caller's open invitation; no token needed (decision 111): it grants nothing. */
export async function declineInvitation(work: Work, input: { id: string }): Promise<Invitation> {
  const { row } = await openInvitationOfCaller(work, input.id);
  await markAnswered(work.db, row.organizationId, row.id, 'declined');
  await recordAudit(work.db, work.actor, { organizationId: row.organizationId, action: 'invitation.declined', targetType: 'invitation', targetId: row.id, detail: { role: row.role } });
  return invitationOf({ ...row, status: 'declined' });
}

/** Revokes a pending invitation of the organization; owners and admins, and only owners revoke an owner invitation. */
export async function revokeInvitation(work: Work, input: { organizationId: string; id: string }): Promise<Invitation> {
  const { organizationId, id } = input;
  const actor = requireRole(work.actor.principal, organizationId, 'admin');
  const [row] = await work.db
    .select(invitationColumns)
    .from(invitations)
    .innerJoin(organizations, eq(organizations.id, invitations.organizationId))
    .where(and(eq(invitations.organizationId, organizationId), eq(invitations.id, id)))
    .for('update', { of: invitations });
  if (!row) throw new AppError('NOT_FOUND', { message: 'No such invitation' });
  if (row.status !== 'pending') throw new AppError('CONFLICT', { message: ANSWERED[row.status] });
  if (row.role === 'owner' && !mayGive(actor, 'owner')) throw new AppError('FORBIDDEN', { message: 'Only owners can revoke an owner invitation' });
  await markAnswered(work.db, organizationId, row.id, 'revoked');
  await recordAudit(work.db, work.actor, { organizationId, action: 'invitation.revoked', targetType: 'invitation', targetId: row.id, detail: { email: row.email, role: row.role } });
  return invitationOf({ ...row, status: 'revoked' });
}
