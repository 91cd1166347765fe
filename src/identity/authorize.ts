import type { Principal, Role } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import { kindGives } from './credential-kinds.ts';

const RANK: Record<Role, number> = { member: 1, admin: 2, owner: 3 };

/** Whether `value` names a role. */
export function isRole(value: string): value is Role {
  return Object.hasOwn(RANK, value);
}

/** Whether `role` is at least `minimum`. */
export function roleAtLeast(role: Role, minimum: Role): boolean {
  return RANK[role] >= RANK[minimum];
}

/**
 * The caller, if it acts in `organizationId` with at least `minimum` (API and service
 * tokens act as admin); otherwise 401 (no caller) or 403. Every later feature authorizes here.
 */
export function requireRole(principal: Principal | null, organizationId: string, minimum: Role): Principal {
  if (!principal) throw new AppError('UNAUTHENTICATED');
  // '' is no organization (a service token managing organizations): it holds no role anywhere.
  if (organizationId === '' || principal.organizationId !== organizationId || !roleAtLeast(principal.role, minimum)) {
    throw new AppError('FORBIDDEN', { message: `This needs the ${minimum} role or higher in the organization` });
  }
  return principal;
}

/**
 * Whether `actor` may give a person `role`, as its credential kind and its own role allow (the
 * kind's `gives`): a service token (the product's backend, §5d) any role; an API token `member`
 * only, so a leaked machine credential cannot make a lasting human admin; a person as their role
 * allows — only an owner gives `owner`.
 */
export function mayGive(actor: Principal, role: Role): boolean {
  const gives = kindGives(actor, role);
  return gives === 'by role' ? role !== 'owner' || actor.role === 'owner' : gives === 'yes';
}

/**
 * The caller, if it may give a person `role` in `organizationId` — by inviting or by changing a
 * member's role: owners and admins may, as `mayGive` says.
 */
export function requireGrantor(principal: Principal | null, organizationId: string, role: Role): Principal {
  const actor = requireRole(principal, organizationId, 'admin');
  if (mayGive(actor, role)) return actor;
  if (kindGives(actor, role) === 'no') {
    throw new AppError('FORBIDDEN', { message: 'An API token can give the member role only; an owner or admin gives the admin role' });
  }
  throw new AppError('FORBIDDEN', { message: 'Only owners can grant the owner role' });
}

/** The caller, if it is a user (not an API or service token). */
export function requireUser(principal: Principal | null): Principal & { userId: string } {
  if (!principal) throw new AppError('UNAUTHENTICATED');
  if (!principal.userId) throw new AppError('FORBIDDEN', { message: 'This needs a user; API and service tokens cannot do it' });
  return principal as Principal & { userId: string };
}

/** The caller, if it authenticated with a session JWT and is not being impersonated. */
export function requireSessionUser(principal: Principal | null): Principal & { userId: string } {
  const user = requireUser(principal);
  if (user.kind !== 'jwt') throw new AppError('FORBIDDEN', { message: 'This needs a signed-in session' });
  if (user.impersonatorId) throw new AppError('FORBIDDEN', { message: 'Not allowed while impersonating' });
  return user;
}

/**
 * The caller, if a system administrator acting as themselves (a session or PAT; not
 * impersonating, not entered into an organization): the deployment's own views.
 */
export function requireSystemAdmin(principal: Principal | null): Principal & { userId: string } {
  const user = requireUser(principal);
  if (user.impersonatorId || user.entered) throw new AppError('FORBIDDEN', { message: 'Not allowed while acting in another organization' });
  if (!user.systemAdmin) throw new AppError('FORBIDDEN', { message: 'Only system administrators may do this' });
  return user;
}
