import { and, desc, eq, inArray, isNull } from 'drizzle-orm';
import { newId as ulid } from '../lib/ids.ts';
import { recordAudit } from '../audit/audit.ts';
import { type Db, queryRows, sql } from '../db/client.ts';
import { apiTokens, connectSessions, memberships, personalAccessTokens } from '../db/schema.ts';
import { AppError } from '../ground/errors.ts';
import { checkName } from '../ground/names.ts';
import type { Work } from '../ground/work.ts';
import { getOrganization, membershipOf } from '../organizations/organizations.ts';
import { requireRole, requireSessionUser, roleAtLeast } from './authorize.ts';
import { actsForDeployment } from './credential-kinds.ts';
import { API_TOKEN_PREFIX, hashToken, newOpaqueToken, PAT_PREFIX } from './credentials.ts';

/** A token as listed: never its value. */
export interface TokenInfo {
  id: string;
  name: string;
  /** Prefix and last four characters, e.g. `tsp_…a1b2`. */
  display: string;
  expiresAt: Date | null;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
  createdAt: Date;
}

export interface PersonalAccessTokenInfo extends TokenInfo {
  organizationIds: string[];
}

/** A token just created: `token` is its value, shown this once. */
export type Created<T> = T & { token: string };

/** 400 unless `expiresAt` (when given) is in the future. */
export function assertFuture(expiresAt: Date | null | undefined): void {
  if (expiresAt && expiresAt.getTime() <= Date.now()) {
    throw new AppError('INVALID_INPUT', { details: [{ path: 'expiresAt', message: 'must be in the future' }] });
  }
}

/** A token's name, trimmed: 1–100 characters, a name others read (http/names.ts), else 400. */
export function assertName(name: string): string {
  return checkName(name, 'name', { max: 100 });
}

/**
 * Creates a PAT for the signed-in user (not while impersonating), valid in the listed
 * organizations (default: the current one), each of which the user must belong to.
 */
export async function createPersonalAccessToken(
  work: Work,
  input: { name: string; expiresAt?: Date | null; organizationIds?: string[] },
): Promise<Created<PersonalAccessTokenInfo>> {
  const user = requireSessionUser(work.actor.principal);
  const name = assertName(input.name);
  assertFuture(input.expiresAt);
  const organizationIds = [...new Set(input.organizationIds?.length ? input.organizationIds : [user.organizationId])];
  const member = await work.db
    .select({ organizationId: memberships.organizationId })
    .from(memberships)
    .where(eq(memberships.userId, user.userId));
  const memberOf = new Set(member.map((row) => row.organizationId));
  if (!organizationIds.every((id) => memberOf.has(id))) {
    throw new AppError('FORBIDDEN', { message: 'A token can only list organizations you belong to' });
  }
  const token = newOpaqueToken(PAT_PREFIX);
  const [row] = await work.db
    .insert(personalAccessTokens)
    .values({
      id: ulid(),
      userId: user.userId,
      name,
      tokenHash: hashToken(token),
      lastFour: token.slice(-4),
      organizationIds,
      expiresAt: input.expiresAt ?? null,
    })
    .returning();
  if (!row) throw new Error('insert returned no row');
  for (const organizationId of organizationIds) {
    await recordAudit(work.db, work.actor, { organizationId, action: 'personal_access_token.created', targetType: 'personal_access_token', targetId: row.id });
  }
  return { ...patInfo(row), token };
}

/** The caller's own PATs, newest first, without values. */
export async function listPersonalAccessTokens(work: Work): Promise<PersonalAccessTokenInfo[]> {
  const principal = work.actor.principal;
  if (!principal?.userId) return [];
  const rows = await work.db
    .select()
    .from(personalAccessTokens)
    .where(eq(personalAccessTokens.userId, principal.userId))
    .orderBy(desc(personalAccessTokens.id));
  return rows.map(patInfo);
}

/** Revokes one of the caller's PATs; another user's id is "not found". */
export async function revokePersonalAccessToken(work: Work, input: { id: string }): Promise<PersonalAccessTokenInfo> {
  const { id } = input;
  const principal = work.actor.principal;
  if (!principal?.userId) throw new AppError('FORBIDDEN', { message: 'This needs a user' });
  const [row] = await work.db
    .update(personalAccessTokens)
    .set({ revokedAt: new Date() })
    .where(and(eq(personalAccessTokens.id, id), eq(personalAccessTokens.userId, principal.userId), isNull(personalAccessTokens.revokedAt)))
    .returning();
  if (!row) throw new AppError('NOT_FOUND', { message: 'No such active token' });
  const sessionsRevoked = await revokeSessionsMintedBy(work, 'pat', id, row.organizationIds);
  await recordAudit(work.db, work.actor, {
    organizationId: principal.organizationId,
    action: 'personal_access_token.revoked',
    targetType: 'personal_access_token',
    targetId: id,
    detail: { sessionsRevoked },
  });
  return patInfo(row);
}

/**
 * Creates an API token for an organization the signed-in user (not impersonating) is an owner
 * or admin of, or a service token acts in: `organizationId`, default the current one. Another
 * organization's role is read from its membership row, so a non-member and a member below
 * admin both get 403; a service token may name any organization there is (else 404).
 */
export async function createApiToken(work: Work, input: { name: string; expiresAt?: Date | null; organizationId?: string | null; quota?: number }): Promise<Created<TokenInfo>> {
  const creator = await apiTokenCreator(work, input.organizationId);
  const { organizationId } = creator;
  const name = assertName(input.name);
  assertFuture(input.expiresAt);
  if (input.quota !== undefined) await assertApiTokenQuota(work.db, organizationId, input.quota);
  const token = newOpaqueToken(API_TOKEN_PREFIX);
  const [row] = await work.db
    .insert(apiTokens)
    .values({
      organizationId,
      id: ulid(),
      name,
      tokenHash: hashToken(token),
      lastFour: token.slice(-4),
      createdBy: creator.userId,
      expiresAt: input.expiresAt ?? null,
    })
    .returning();
  if (!row) throw new Error('insert returned no row');
  await recordAudit(work.db, work.actor, { organizationId, action: 'api_token.created', targetType: 'api_token', targetId: row.id });
  return { ...apiTokenInfo(row), token };
}

/** Who may create an API token for `wanted` (default: where the caller acts), and for which organization. */
async function apiTokenCreator(work: Work, wanted: string | null | undefined): Promise<{ organizationId: string; userId: string | null }> {
  const principal = work.actor.principal;
  if (principal && actsForDeployment(principal)) {
    const organizationId = wanted ?? principal.organizationId;
    if (organizationId !== principal.organizationId && !(await getOrganization(work.db, organizationId))) throw new AppError('NOT_FOUND', { message: 'No such organization' });
    return { organizationId, userId: null };
  }
  const user = requireSessionUser(principal);
  const organizationId = wanted ?? user.organizationId;
  if (organizationId === user.organizationId) requireRole(user, organizationId, 'admin');
  else {
    const membership = await membershipOf(work.db, organizationId, user.userId);
    if (!membership || !roleAtLeast(membership.role, 'admin')) throw new AppError('FORBIDDEN', { message: 'This needs the admin role or higher in the organization' });
  }
  return { organizationId, userId: user.userId };
}

/**
 * Refuses an API token beyond the organization's `quota` of live ones (LIMIT_API_TOKENS): the
 * organization's row is locked for the count, so concurrent creations count each other.
 */
async function assertApiTokenQuota(db: Db, organizationId: string, quota: number): Promise<void> {
  await queryRows(db, sql`SELECT 1 FROM organizations WHERE id = ${organizationId} FOR UPDATE`);
  // Counted by a statement of its own: its snapshot is taken after the lock, so it sees what the previous holder committed
  // (a count in the locking statement would use that statement's snapshot, taken before the wait).
  const [row] = await queryRows<{ live: number }>(
    db,
    sql`SELECT count(*)::int AS live FROM api_tokens
        WHERE organization_id = ${organizationId} AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`,
  );
  if ((row?.live ?? 0) >= quota) {
    throw new AppError('CONFLICT', { message: `The organization has reached the limit of ${quota} live API tokens (LIMIT_API_TOKENS); revoke one first` });
  }
}

/** The API tokens of the caller's organization (owner/admin), without values. */
export async function listApiTokens(work: Work, input: { organizationId: string }): Promise<TokenInfo[]> {
  const { organizationId } = input;
  requireRole(work.actor.principal, organizationId, 'admin');
  const rows = await work.db.select().from(apiTokens).where(eq(apiTokens.organizationId, organizationId)).orderBy(desc(apiTokens.id));
  return rows.map(apiTokenInfo);
}

/** Revokes an API token of the caller's organization; another organization's id is "not found". */
export async function revokeApiToken(work: Work, input: { organizationId: string; id: string }): Promise<TokenInfo> {
  const { organizationId, id } = input;
  requireRole(work.actor.principal, organizationId, 'admin');
  const [row] = await work.db
    .update(apiTokens)
    .set({ revokedAt: new Date() })
    .where(and(eq(apiTokens.organizationId, organizationId), eq(apiTokens.id, id), isNull(apiTokens.revokedAt)))
    .returning();
  if (!row) throw new AppError('NOT_FOUND', { message: 'No such active token' });
  const sessionsRevoked = await revokeSessionsMintedBy(work, 'api_token', id, [organizationId]);
  await recordAudit(work.db, work.actor, { organizationId, action: 'api_token.revoked', targetType: 'api_token', targetId: id, detail: { sessionsRevoked } });
  return apiTokenInfo(row);
}

/**
 * Revokes the pending connect sessions a token minted (decision 97): a revoked credential
 * leaves no live link behind. It can only have minted them in the organizations it acts in.
 */
async function revokeSessionsMintedBy(work: Work, kind: 'api_token' | 'pat', id: string, organizationIds: string[]): Promise<number> {
  if (organizationIds.length === 0) return 0;
  const revoked = await work.db
    .update(connectSessions)
    .set({ status: 'revoked' })
    .where(
      and(
        inArray(connectSessions.organizationId, organizationIds),
        eq(connectSessions.createdByKind, kind),
        eq(connectSessions.createdById, id),
        eq(connectSessions.status, 'pending'),
      ),
    )
    .returning({ id: connectSessions.id });
  return revoked.length;
}

function patInfo(row: typeof personalAccessTokens.$inferSelect): PersonalAccessTokenInfo {
  return { ...tokenInfo(row, PAT_PREFIX), organizationIds: row.organizationIds };
}

function apiTokenInfo(row: typeof apiTokens.$inferSelect): TokenInfo {
  return tokenInfo(row, API_TOKEN_PREFIX);
}

/** A token row as listed: its display form, never its value. */
export function tokenInfo(
  row: { id: string; name: string; lastFour: string; expiresAt: Date | null; lastUsedAt: Date | null; revokedAt: Date | null; createdAt: Date },
  prefix: string,
): TokenInfo {
  return {
    id: row.id,
    name: row.name,
    display: `${prefix}…${row.lastFour}`,
    expiresAt: row.expiresAt,
    lastUsedAt: row.lastUsedAt,
    revokedAt: row.revokedAt,
    createdAt: row.createdAt,
  };
}
