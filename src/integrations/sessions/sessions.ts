/**
 * Connect sessions (docs/contract.md §5a): a product's backend mints a short-lived link for its
 * end user, who connects one integration for the organization through a page we host,
 * without an account here. The session is one more thing an OAuth state carries; the flow
 * itself is the usual one (connect/start.ts, connect/callback.ts).
 */
import { and, desc, eq, getTableColumns, lt, type SQL, sql } from 'drizzle-orm';
import { recordAudit } from '../../audit/audit.ts';
import type { Db } from '../../db/client.ts';
import { connectSessions, type EndUser } from '../../db/schema.ts';
import { AppError } from '../../ground/errors.ts';
import type { Work } from '../../ground/work.ts';
import { hashToken } from '../../identity/credentials.ts';
import { grantorAuthorized } from '../../identity/grantor.ts';
import { newId, newSecret, SECRET, ULID } from '../../lib/ids.ts';
import type { Services } from '../../services.ts';
import { checkRedirectUri } from '../connect/start.ts';

export type ConnectSessionRow = typeof connectSessions.$inferSelect;
/** A session as looked up: its row, and whether the credential that minted it could still mint it (§5a). */
export type ConnectSession = ConnectSessionRow & { grantorAlive: boolean };
export type SessionStatus = 'pending' | 'completed' | 'expired' | 'revoked';

/** Whether the session's minting credential could still mint it: folded into every lookup of a session. */
const GRANTOR_ALIVE = grantorAuthorized(connectSessions.organizationId, {
  kind: connectSessions.createdByKind,
  credentialId: connectSessions.createdById,
  userId: connectSessions.createdByUserId,
});
const SESSION_COLUMNS = { ...getTableColumns(connectSessions), grantorAlive: GRANTOR_ALIVE.mapWith((value: unknown) => value === true) };

/** Seconds a session lives when the request names none, and the bounds it may name. */
export const SESSION_EXPIRY = { default: 1800, min: 60, max: 14400 } as const;

export interface MintInput {
  redirectUri: string;
  allowedProviders?: string[];
  /** The app its own provider connects through (docs/contract.md §5e); the others use their defaults. */
  app?: string;
  endUser?: EndUser;
  expiresIn?: number;
}

/** A session as the API shows it (never its secret). */
export interface SessionView {
  id: string;
  status: SessionStatus;
  expiresAt: string;
  allowedProviders: string[];
  endUser: EndUser | null;
  integrationId?: string;
  error?: string;
}

/**
 * A session's status as of `now`: a pending one past its expiry is `expired`, and one whose
 * minting credential could no longer mint it (revoked, expired, logged out, or its person no
 * longer owner or admin) is `revoked` — it cannot be used, whatever its row says.
 */
export function sessionStatus(row: Pick<ConnectSessionRow, 'status' | 'expiresAt'> & { grantorAlive?: boolean }, now = Date.now()): SessionStatus {
  if (row.status !== 'pending') return row.status;
  if (row.expiresAt.getTime() <= now) return 'expired';
  return row.grantorAlive === false ? 'revoked' : 'pending';
}

/** A pending row whose grantor lost the authority to mint it: refused as FORBIDDEN where a flow meets it (the callback). */
export function grantorLost(row: Pick<ConnectSession, 'status' | 'expiresAt' | 'grantorAlive'>): boolean {
  return row.status === 'pending' && row.expiresAt.getTime() > Date.now() && !row.grantorAlive;
}

export function sessionView(row: ConnectSessionRow & { grantorAlive?: boolean }): SessionView {
  return {
    id: row.id,
    status: sessionStatus(row),
    expiresAt: row.expiresAt.toISOString(),
    allowedProviders: row.allowedProviders,
    endUser: row.endUser ?? null,
    ...(row.integrationId ? { integrationId: row.integrationId } : {}),
    ...(row.lastError ? { error: row.lastError } : {}),
  };
}

/**
 * Mints a session for the caller's organization: the secret (32 random bytes, base64url) is
 * returned once, in the URL, and stored only as its hash. The redirect URI follows the
 * start's rules; the providers must be configured ones (default: all of them).
 */
export async function mintSession(services: Pick<Services, 'config' | 'providers' | 'apps'>, work: Work, input: MintInput): Promise<SessionView & { url: string }> {
  const principal = work.actor.principal;
  if (!principal) throw new AppError('UNAUTHENTICATED');
  const redirectUri = checkRedirectUri(services, input.redirectUri);
  const configured = (await services.apps.usableProviders(work.db, principal.organizationId)).map(({ provider }) => provider.id);
  const allowedProviders = input.allowedProviders ? [...new Set(input.allowedProviders)] : configured;
  const unknown = allowedProviders.filter((id) => !configured.includes(id));
  if (unknown.length > 0) {
    throw new AppError('PROVIDER_NOT_CONFIGURED', { details: unknown.map((id) => ({ path: 'body.allowedProviders', message: `${id.slice(0, 64)} is not a configured provider` })) });
  }
  if (allowedProviders.length === 0) throw new AppError('PROVIDER_NOT_CONFIGURED', { message: 'No provider is configured' });
  // The app applies to its own provider, which the session must allow (docs/contract.md §5e).
  const app = input.app === undefined ? undefined : await services.apps.usable(work.db, principal.organizationId, input.app);
  if (input.app !== undefined && (!app || !allowedProviders.includes(app.id))) {
    throw new AppError('INVALID_INPUT', { details: [{ path: 'body.app', message: 'no app of an allowed provider that this organization may use' }] });
  }
  const secret = newSecret();
  const id = newId();
  const [row] = await work.db
    .insert(connectSessions)
    .values({
      organizationId: principal.organizationId,
      id,
      secretHash: hashToken(secret),
      redirectUri,
      allowedProviders,
      appId: input.app ?? null,
      endUser: input.endUser ?? null,
      createdByKind: principal.kind,
      createdById: principal.credentialId,
      createdByUserId: principal.userId,
      expiresAt: sql`now() + ${`${input.expiresIn ?? SESSION_EXPIRY.default} seconds`}::interval`,
    })
    .returning();
  await recordAudit(work.db, work.actor, { organizationId: principal.organizationId, action: 'connect_session.created', targetType: 'connect_session', targetId: id, detail: { allowedProviders } });
  return { ...sessionView(row as ConnectSessionRow), url: `${services.config.server.publicUrl}/connect/${secret}` };
}

/** Which rows read as each status (`sessionStatus`, in SQL). */
const STATUS_WHERE: Record<SessionStatus, SQL | undefined> = {
  pending: and(eq(connectSessions.status, 'pending'), sql`${connectSessions.expiresAt} > now()`, GRANTOR_ALIVE),
  completed: eq(connectSessions.status, 'completed'),
  expired: and(eq(connectSessions.status, 'pending'), sql`${connectSessions.expiresAt} <= now()`),
  revoked: sql`(${connectSessions.status} = 'revoked' OR (${connectSessions.status} = 'pending' AND ${connectSessions.expiresAt} > now() AND NOT ${GRANTOR_ALIVE}))`,
};

/**
 * The organization's sessions, newest first, `first` after the cursor `after` (a session id),
 * optionally only those of one status (docs/contract.md §11).
 */
export async function listSessions(
  db: Db,
  organizationId: string,
  input: { first: number; after?: string; status?: SessionStatus },
): Promise<{ sessions: (SessionView & { createdAt: string })[]; pageInfo: { endCursor: string | null; hasNextPage: boolean } }> {
  if (input.after !== undefined && !ULID.test(input.after)) {
    throw new AppError('INVALID_INPUT', { details: [{ path: 'querystring.after', message: 'must be an endCursor from an earlier page' }] });
  }
  const where = [eq(connectSessions.organizationId, organizationId)];
  if (input.after !== undefined) where.push(lt(connectSessions.id, input.after));
  if (input.status) where.push(STATUS_WHERE[input.status] as SQL);
  const rows = await db
    .select(SESSION_COLUMNS)
    .from(connectSessions)
    .where(and(...where))
    .orderBy(desc(connectSessions.id))
    .limit(input.first + 1);
  const page = rows.slice(0, input.first);
  return {
    sessions: page.map((row) => ({ ...sessionView(row), createdAt: row.createdAt.toISOString() })),
    pageInfo: { endCursor: page.at(-1)?.id ?? null, hasNextPage: rows.length > input.first },
  };
}

/** The organization's session `id`, or 404 (unknown, malformed, or another organization's). */
export async function findSession(db: Db, organizationId: string, id: string): Promise<ConnectSession> {
  if (!ULID.test(id)) throw new AppError('NOT_FOUND', { message: 'No such connect session' });
  const [row] = await db.select(SESSION_COLUMNS).from(connectSessions).where(and(eq(connectSessions.organizationId, organizationId), eq(connectSessions.id, id)));
  if (!row) throw new AppError('NOT_FOUND', { message: 'No such connect session' });
  return row;
}

/**
 * Revokes a pending session (a revoked one stays revoked); a completed or expired one is a 409.
 * One that reads as revoked because its minter lost the authority is revoked for good here:
 * the product's word outlasts the person getting the role back.
 */
export async function revokeSession(work: Work, organizationId: string, id: string): Promise<ConnectSession> {
  const row = await findSession(work.db, organizationId, id);
  const status = sessionStatus(row);
  if (row.status === 'revoked') return row;
  if (status !== 'pending' && !grantorLost(row)) throw new AppError('CONFLICT', { message: `The connect session is ${status}` });
  const [revoked] = await work.db
    .update(connectSessions)
    .set({ status: 'revoked' })
    .where(and(eq(connectSessions.organizationId, organizationId), eq(connectSessions.id, id), eq(connectSessions.status, 'pending')))
    .returning();
  if (!revoked) throw new AppError('CONFLICT', { message: 'The connect session has just ended' });
  await recordAudit(work.db, work.actor, { organizationId, action: 'connect_session.revoked', targetType: 'connect_session', targetId: id });
  return { ...revoked, grantorAlive: row.grantorAlive };
}

/** The session a link's secret opens, whatever its state, or null. The one lookup not led by an organization: the secret is all the browser has. */
export async function sessionBySecret(db: Db, secret: string): Promise<ConnectSession | null> {
  if (!SECRET.test(secret)) return null;
  const [row] = await db.select(SESSION_COLUMNS).from(connectSessions).where(eq(connectSessions.secretHash, hashToken(secret)));
  return row ?? null;
}

/**
 * Marks a session completed by `integrationId`, in the transaction storing the integration;
 * false when it is no longer usable (another flow of it won, it ended, or its minting
 * credential lost the authority to mint it while the flow was at the provider).
 */
export async function completeSession(tx: Db, organizationId: string, id: string, integrationId: string): Promise<boolean> {
  const [row] = await tx
    .update(connectSessions)
    .set({ status: 'completed', integrationId, lastError: null, completedAt: sql`now()` })
    .where(
      and(eq(connectSessions.organizationId, organizationId), eq(connectSessions.id, id), eq(connectSessions.status, 'pending'), sql`${connectSessions.expiresAt} > now()`, GRANTOR_ALIVE),
    )
    .returning({ id: connectSessions.id });
  return row !== undefined;
}

/** Records why an attempt failed (the session stays usable until it expires); the session's end user, for the event. */
export async function recordSessionError(db: Db, organizationId: string, id: string, code: string): Promise<EndUser | null> {
  const [row] = await db
    .update(connectSessions)
    .set({ lastError: code })
    .where(and(eq(connectSessions.organizationId, organizationId), eq(connectSessions.id, id), eq(connectSessions.status, 'pending')))
    .returning({ endUser: connectSessions.endUser });
  return row?.endUser ?? null;
}
