/**
 * Delegated authority (docs/contract.md §5a, §9, §3): something minted by a credential — a
 * connect session, an agent capability — is usable only while the credential that minted it
 * could still mint it. One check, in SQL, for every kind, so each
 * delegated thing asks the same question and a statement can fold it into its own lookup.
 */
import type { SQL, SQLWrapper } from 'drizzle-orm';
import { type Db, queryRows, sql } from '../db/client.ts';

/** Who minted a delegated credential: the minting credential's kind and id, and its user (null for an API token). */
export interface Grantor {
  /** `jwt` (a login session: the id is the session's), `pat`, `api_token` or `service_token`. */
  kind: string;
  credentialId: string;
  userId: string | null;
}

/** The same, as SQL expressions: columns of the delegated row, or parameters. */
export interface GrantorColumns {
  kind: SQLWrapper;
  credentialId: SQLWrapper;
  userId: SQLWrapper;
}

/**
 * The grantor's person still holds the role the delegated thing needs: owner or admin where
 * it must manage (`g.manager`: a connect session, a capability that writes), else any
 * membership (a capability that only reads, as a member may, docs/contract.md §3).
 */
const STILL_MEMBER = sql`EXISTS (SELECT 1 FROM memberships m WHERE m.organization_id = g.org AND m.user_id = g.uid
      AND (NOT g.manager OR m.role IN ('owner', 'admin')))`;

/**
 * True while the grantor could still mint in `organizationId`: an API token of that
 * organization neither revoked nor expired; a service token neither revoked nor expired (it may
 * act in any organization, docs/contract.md §5d); a person still owner or admin there — or, where
 * `manager` is false (an agent capability that only reads, §9), still a member — through the
 * login session that minted it still open (not logged out, not expired) or the personal access
 * token still valid and still listing the organization. Any other kind: false, so a kind added
 * without its rule here grants nothing.
 */
export function grantorAuthorized(organizationId: SQLWrapper, grantor: GrantorColumns, manager: SQLWrapper = sql`true`): SQL<boolean> {
  // The inputs are read once, in a FROM-less select: an unqualified column given as input
  // resolves to the caller's row there, never to a same-named column of the tables below.
  return sql<boolean>`(SELECT CASE g.kind
      WHEN 'api_token' THEN EXISTS (
        SELECT 1 FROM api_tokens t WHERE t.organization_id = g.org AND t.id = g.cid
          AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now()))
      WHEN 'service_token' THEN EXISTS (
        SELECT 1 FROM service_tokens st WHERE st.id = g.cid
          AND st.revoked_at IS NULL AND (st.expires_at IS NULL OR st.expires_at > now()))
      WHEN 'jwt' THEN EXISTS (
        SELECT 1 FROM sessions s WHERE s.id = g.cid AND s.user_id = g.uid
          AND s.revoked_at IS NULL AND s.expires_at > now()) AND ${STILL_MEMBER}
      WHEN 'pat' THEN EXISTS (
        SELECT 1 FROM personal_access_tokens p WHERE p.id = g.cid AND p.user_id = g.uid
          AND p.revoked_at IS NULL AND (p.expires_at IS NULL OR p.expires_at > now()) AND g.org = ANY (p.organization_ids)) AND ${STILL_MEMBER}
      ELSE false END
    FROM (SELECT ${organizationId}::text AS org, ${grantor.kind}::text AS kind, ${grantor.credentialId}::text AS cid, ${grantor.userId}::text AS uid,
                 ${manager}::boolean AS manager) g)`;
}

/** `grantorAuthorized` as a statement of its own, for a grantor at hand (`manager`: it must still be owner or admin, the default). */
export async function grantorStillAuthorized(db: Db, organizationId: string, grantor: Grantor, manager = true): Promise<boolean> {
  const [row] = await queryRows<{ alive: boolean }>(
    db,
    sql`SELECT ${grantorAuthorized(sql`${organizationId}`, { kind: sql`${grantor.kind}`, credentialId: sql`${grantor.credentialId}`, userId: sql`${grantor.userId}` }, sql`${manager}`)} AS alive`,
  );
  return row?.alive === true;
}
