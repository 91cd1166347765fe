import { eq } from 'drizzle-orm';
import { recordAudit } from '../audit/audit.ts';
import { sessions } from '../db/schema.ts';
import { AppError } from '../ground/errors.ts';
import type { Work } from '../ground/work.ts';
import { membershipOf } from '../organizations/organizations.ts';
import { requireSessionUser } from './authorize.ts';
import type { SessionTokens } from './credentials.ts';
import { findUserById, type PublicUser, publicUser, setDefaultOrganization, type UserRow } from './users.ts';

/** A session's grant to act in an organization: what a session token is issued for. */
export interface SessionGrant {
  user: UserRow;
  organizationId: string;
  sessionId: string;
  expiresAt: Date;
}

/** The body of login and of an organization switch (docs/contract.md §3). */
export interface SessionBody {
  success: true;
  accessToken: string;
  tokenType: 'Bearer';
  expiresAt: string;
  user: PublicUser;
  organizationId: string;
  /** For the cookie: the session the token belongs to. */
  sessionId: string;
  sessionExpiresAt: Date;
}

/** A token of the grant's session, bound to its organization, expiring with the session. */
export function sessionBody(sessionTokens: SessionTokens, grant: SessionGrant): SessionBody {
  const { user, organizationId, sessionId, expiresAt } = grant;
  const accessToken = sessionTokens.issue({ sub: user.id, org: organizationId, sid: sessionId, exp: Math.floor(expiresAt.getTime() / 1000) });
  return {
    success: true,
    accessToken,
    tokenType: 'Bearer',
    expiresAt: expiresAt.toISOString(),
    user: publicUser(user),
    organizationId,
    sessionId,
    sessionExpiresAt: expiresAt,
  };
}

/**
 * The caller's session, granted another organization they belong to (signed-in users
 * only, not while impersonating), which becomes their default; the caller issues the
 * token (`sessionBody`). Tokens issued before stay valid and bound to their organization.
 */
export async function switchOrganization(work: Work, input: { organizationId: string }): Promise<SessionGrant> {
  const { db, actor } = work;
  const principal = requireSessionUser(actor.principal);
  const membership = await membershipOf(db, input.organizationId, principal.userId);
  if (!membership) throw new AppError('FORBIDDEN', { message: 'You are not a member of that organization' });
  const [session] = await db.select().from(sessions).where(eq(sessions.id, principal.credentialId));
  const user = await findUserById(db, principal.userId);
  if (!session || !user) throw new AppError('UNAUTHENTICATED');
  await setDefaultOrganization(db, user.id, input.organizationId);
  await recordAudit(db, actor, { organizationId: input.organizationId, action: 'organization.switched', targetType: 'organization', targetId: input.organizationId });
  return { user, organizationId: input.organizationId, sessionId: session.id, expiresAt: session.expiresAt };
}
