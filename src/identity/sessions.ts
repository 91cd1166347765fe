import { eq } from 'drizzle-orm';
import { type AuditActor, recordAudit } from '../audit/audit.ts';
import type { Db } from '../db/client.ts';
import { sessions } from '../db/schema.ts';
import { AppError } from '../http/errors.ts';
import { membershipOf } from '../organizations/organizations.ts';
import type { Services } from '../services.ts';
import { requireSessionUser } from './authorize.ts';
import { findUserById, publicUser, setDefaultOrganization, type PublicUser, type UserRow } from './users.ts';

/** The body of login and of an organization switch (CONTRACT.md §3). */
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

/** A token of session `sessionId`, bound to `organizationId`, expiring with the session. */
export function sessionBody(services: Services, user: UserRow, organizationId: string, sessionId: string, expiresAt: Date): SessionBody {
  const accessToken = services.sessionTokens.issue({ sub: user.id, org: organizationId, sid: sessionId, exp: Math.floor(expiresAt.getTime() / 1000) });
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
 * A new token of the caller's session bound to another organization they belong to
 * (signed-in users only, not while impersonating); it becomes their default. The old
 * token stays valid and bound to its organization.
 */
export async function switchOrganization(services: Services, tx: Db, actor: AuditActor, organizationId: string): Promise<SessionBody> {
  const principal = requireSessionUser(actor.principal);
  const membership = await membershipOf(tx, organizationId, principal.userId);
  if (!membership) throw new AppError('FORBIDDEN', { message: 'You are not a member of that organization' });
  const [session] = await tx.select().from(sessions).where(eq(sessions.id, principal.credentialId));
  const user = await findUserById(tx, principal.userId);
  if (!session || !user) throw new AppError('UNAUTHENTICATED');
  await setDefaultOrganization(tx, user.id, organizationId);
  await recordAudit(tx, actor, { organizationId, action: 'organization.switched', targetType: 'organization', targetId: organizationId });
  return sessionBody(services, user, organizationId, session.id, session.expiresAt);
}
