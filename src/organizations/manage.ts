/**
 * Organizations managed as a whole (docs/contract.md §5d): listed, read, renamed and deleted —
 * by a product's service token across its customers, or by an organization's own people.
 * `listOrganizations` lists for a service token or a system administrator (the console lists with it too).
 */
import { and, desc, eq, lt, type SQL } from 'drizzle-orm';
import { recordAudit } from '../audit/audit.ts';
import { queryRows, sql } from '../db/client.ts';
import { organizations } from '../db/schema.ts';
import type { Principal, Role } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import type { UnitOfWork, Work } from '../ground/work.ts';
import { requireUser, roleAtLeast } from '../identity/authorize.ts';
import { actsForDeployment } from '../identity/credential-kinds.ts';
import { ULID } from '../lib/ids.ts';
import { assertSetsProductKeys, checkExternalId, lockExternalId, membershipOf, normalizeOrganizationName, type OrganizationRef, setsProductKeys } from './organizations.ts';

export interface OrganizationListed extends OrganizationRef {
  createdAt: Date;
}

/** How many of an organization's integrations are in each status (docs/contract.md §11). */
export interface Health {
  connected: number;
  warning: number;
  expired: number;
  invalid: number;
}

export interface OrganizationPage {
  organizations: (OrganizationListed & { health: Health })[];
  pageInfo: { endCursor: string | null; hasNextPage: boolean };
}

const listed = { id: organizations.id, name: organizations.name, externalId: organizations.externalId, createdAt: organizations.createdAt };

/** An integration past its expiry reads `expired` whatever its stored status says (integrations/status.ts effectiveStatus). */
const PAST_EXPIRY = sql`coalesce(i.token_expires_at <= now(), false)`;

/** The health counts of the organization `o`, one index range over its integrations. */
const HEALTH = sql`(SELECT json_build_object(
    'connected', count(*) FILTER (WHERE i.status = 'connected' AND NOT ${PAST_EXPIRY}),
    'warning', count(*) FILTER (WHERE i.status = 'warning' AND NOT ${PAST_EXPIRY}),
    'expired', count(*) FILTER (WHERE i.status = 'expired' OR (i.status IN ('connected', 'warning') AND ${PAST_EXPIRY})),
    'invalid', count(*) FILTER (WHERE i.status = 'invalid'))
  FROM integrations i WHERE i.organization_id = organizations.id)`;

/** `%`, `_` and `\` match themselves in a search. */
function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** The caller may list every organization: one acting for the deployment (a service token), or a system administrator as themselves (docs/contract.md §11). */
function assertLister(principal: Principal | null): void {
  if (actsForDeployment(principal)) return;
  if (principal?.systemAdmin && principal.userId && !principal.impersonatorId && !principal.entered) return;
  throw new AppError('FORBIDDEN', { message: 'Listing every organization needs a service token or a system administrator' });
}

/**
 * Organizations newest first, `first` at a time after the cursor `after` (an organization id,
 * the previous page's `endCursor`), optionally only those with `externalId`, or whose name or
 * external id contains `q` (any letter case); each with its integrations' health.
 */
export async function listOrganizations(work: Work, input: { first: number; after?: string; externalId?: string; q?: string }): Promise<OrganizationPage> {
  assertLister(work.actor.principal);
  if (input.after !== undefined && !ULID.test(input.after)) {
    throw new AppError('INVALID_INPUT', { details: [{ path: 'querystring.after', message: 'must be an endCursor from an earlier page' }] });
  }
  const where: SQL[] = [];
  if (input.externalId !== undefined) where.push(eq(organizations.externalId, input.externalId));
  if (input.q !== undefined && input.q.trim() !== '') {
    const pattern = likePattern(input.q.trim());
    where.push(sql`(${organizations.name} ILIKE ${pattern} OR ${organizations.externalId} ILIKE ${pattern})`);
  }
  if (input.after !== undefined) where.push(lt(organizations.id, input.after));
  const rows = await work.db
    .select({ ...listed, health: HEALTH.mapWith((value: unknown) => (typeof value === 'string' ? JSON.parse(value) : value) as Health) })
    .from(organizations)
    .where(and(...where))
    .orderBy(desc(organizations.id))
    .limit(input.first + 1);
  const page = rows.slice(0, input.first);
  return { organizations: page, pageInfo: { endCursor: page.at(-1)?.id ?? null, hasNextPage: rows.length > input.first } };
}

/**
 * The organization `id` if the caller may act on it with at least `minimum`: a service token
 * on any organization (as an admin there); a user where they act (the session's or the PAT's
 * organization) or, with a session, where they are a member. An organization that does not
 * exist or that the caller does not belong to is 404 alike; too low a role, 403. With `lock`,
 * the row is held for the rest of the transaction. With `systemAdmin`, a system administrator as
 * themselves (`setsProductKeys`) may act on any organization too.
 */
export async function organizationFor(work: Work, id: string, minimum: Role, options: { lock?: boolean; systemAdmin?: boolean } = {}): Promise<OrganizationListed & { principal: Principal }> {
  const principal = work.actor.principal;
  const notFound = new AppError('NOT_FOUND', { message: 'No such organization' });
  if (!ULID.test(id)) throw notFound;
  if (!actsForDeployment(principal) && !(options.systemAdmin && setsProductKeys(principal))) {
    const user = requireUser(principal);
    const role = user.organizationId === id ? user.role : user.kind === 'jwt' ? (await membershipOf(work.db, id, user.userId))?.role : undefined;
    if (role === undefined) throw notFound;
    if (!roleAtLeast(role, minimum)) throw new AppError('FORBIDDEN', { message: `This needs the ${minimum} role or higher in the organization` });
  }
  const query = work.db.select(listed).from(organizations).where(eq(organizations.id, id));
  const [row] = options.lock ? await query.for('update') : await query;
  if (!row || !principal) throw notFound;
  return { ...row, principal };
}

/**
 * Renames an organization and/or sets its `externalId` (docs/contract.md §5d): `name` by an owner,
 * a system administrator or a service token; `externalId` — a value, linking an organization a
 * person made to the product's key, or null to clear it — by a system administrator or a service
 * token only (403), unique across the deployment (409). Each change is audited.
 */
export async function updateOrganization(work: Work, input: { id: string; name?: string; externalId?: string | null }): Promise<OrganizationListed> {
  if (input.name === undefined && input.externalId === undefined) {
    throw new AppError('INVALID_INPUT', { details: [{ path: 'body', message: 'must give name, externalId or both' }] });
  }
  const name = input.name === undefined ? undefined : normalizeOrganizationName(input.name, 'body.name');
  const externalId = input.externalId == null ? input.externalId : checkExternalId(input.externalId, 'body.externalId');
  if (externalId !== undefined) assertSetsProductKeys(work.actor.principal);
  const { principal: _principal, ...organization } = await organizationFor(work, input.id, 'owner', { lock: true, systemAdmin: true });
  const changed = { ...organization };
  if (externalId !== undefined && externalId !== organization.externalId) {
    if (externalId !== null) {
      await lockExternalId(work.db, externalId);
      const [taken] = await work.db.select({ id: organizations.id }).from(organizations).where(eq(organizations.externalId, externalId));
      if (taken) throw new AppError('CONFLICT', { message: 'An organization with that externalId exists already' });
    }
    await work.db.update(organizations).set({ externalId, updatedAt: new Date() }).where(eq(organizations.id, organization.id));
    await recordAudit(work.db, work.actor, {
      organizationId: organization.id,
      action: 'organization.external_id_changed',
      targetType: 'organization',
      targetId: organization.id,
      detail: { from: organization.externalId, to: externalId },
    });
    changed.externalId = externalId;
  }
  if (name !== undefined && name !== organization.name) {
    await work.db.update(organizations).set({ name, updatedAt: new Date() }).where(eq(organizations.id, organization.id));
    await recordAudit(work.db, work.actor, { organizationId: organization.id, action: 'organization.renamed', targetType: 'organization', targetId: organization.id, detail: { from: organization.name, to: name } });
    changed.name = name;
  }
  return changed;
}

/**
 * Deletes an organization the caller has locked (`organizationFor` with `lock`), once its
 * integrations are gone: its members' default organization moves to another of theirs (or
 * none: their next sign-in makes them a new personal one), `organization.deleted` is queued
 * and audited, and the row goes with its memberships, invitations, API tokens and connect
 * sessions (foreign keys, on delete cascade). Audit rows and events have no foreign key: they stay.
 */
export async function deleteOrganization(work: UnitOfWork, organization: OrganizationRef, deleted: { integrations: number }): Promise<void> {
  const { id } = organization;
  await queryRows(
    work.db,
    sql`UPDATE users u SET updated_at = now(), default_organization_id = (
          SELECT m.organization_id FROM memberships m WHERE m.user_id = u.id AND m.organization_id <> ${id}
          ORDER BY m.created_at, m.organization_id LIMIT 1)
        WHERE u.id IN (SELECT user_id FROM memberships WHERE organization_id = ${id}) AND u.default_organization_id = ${id}
        RETURNING 1`,
  );
  // Written before the row goes: the event reads as the organization was.
  await work.outbox.emit(work.db, work.afterCommit, {
    organizationId: id,
    type: 'organization.deleted',
    data: { externalId: organization.externalId, organization: { id, name: organization.name, externalId: organization.externalId }, deleted },
  });
  await recordAudit(work.db, work.actor, { organizationId: id, action: 'organization.deleted', targetType: 'organization', targetId: id, detail: { name: organization.name, ...deleted } });
  await work.db.delete(organizations).where(eq(organizations.id, id));
}
