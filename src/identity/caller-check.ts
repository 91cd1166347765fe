/**
 * Credential checks in SQL, and the one way a checked caller becomes a `Principal`. The
 * session and API-token checks (`callerCheck`) are also folded into the token read's own
 * statement (src/integrations/tokens/fast-read.ts), so their text is shared, not copied.
 */
import type { SQL } from 'drizzle-orm';
import { type Db, HotStatement, sql } from '../db/client.ts';
import type { CredentialKind, Principal, Role } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';
import { CREDENTIAL_KINDS, type DeferrableKind, type DeferredCheck, type DeferredCredential, KIND } from './credential-kinds.ts';

/** The `caller` CTE's own columns. */
export const CALLER_COLUMNS = sql.raw('caller_active, caller_role, caller_user_id, caller_system_admin, caller_organization_id, caller_credential_id');

/** The `caller` CTE's columns as a statement returns them (every credential check answers in this shape). */
export interface CallerColumns {
  caller_active: boolean | null;
  caller_role: Role | null;
  caller_user_id: string | null;
  caller_system_admin: boolean | null;
  caller_organization_id: string | null;
  caller_credential_id: string | null;
}

/**
 * Credential checks as CTEs: `q` is `source` — one row per credential, with the columns
 * org, sid and usr (the session JWT's organization, session and user), hash (the API
 * token's) or hash and org (the service token's and the organization it names), and any
 * others the statement needs — and `caller` is each row of `q` with `CALLER_COLUMNS`
 * added, null when the session or token does not exist. Each lookup is a lateral
 * `LIMIT 1`, so it stays an index probe per row however many rows `q` has. A token's use
 * is recorded as on the usual path, unless `touch` is false.
 */
export function callerCheck(kind: DeferrableKind, source: SQL, touch = true): SQL {
  const check: DeferredCheck = CREDENTIAL_KINDS[kind].deferred;
  const record = touch && check.touch !== null ? check.touch : sql``;
  return sql`q AS (${source}), caller AS (SELECT q.*, c.* FROM q LEFT JOIN LATERAL (${check.lookup} LIMIT 1) c ON true)${record}`;
}

/** A credential as `callerCheck` reads it: the placeholders of `CALLER_PARAMS`, or a row of a batch's `q`. */
export function callerValues(credential: DeferredCredential): { org: string; sid: string; usr: string } | { hash: string } | { hash: string; org: string } {
  if ('sessionId' in credential) return { org: credential.organizationId, sid: credential.sessionId, usr: credential.userId };
  // A credential naming the organization it acts in carries it in its `q` row (a service token's).
  return 'organizationId' in credential ? { hash: credential.hash, org: credential.organizationId } : { hash: credential.hash };
}

/** `callerCheck`'s source for one credential, from the placeholders `callerValues` fills. */
const CALLER_PARAMS = {
  jwt: sql`SELECT ${sql.placeholder('org')}::text AS org, ${sql.placeholder('sid')}::text AS sid, ${sql.placeholder('usr')}::text AS usr`,
  api_token: sql`SELECT ${sql.placeholder('hash')}::text AS hash`,
} as const satisfies Partial<Record<DeferrableKind, SQL>>;

/** The usual path: a session's or API token's `callerCheck` as a statement of its own. */
export const CALLER_CHECK = {
  jwt: new HotStatement<CallerColumns>(sql`WITH ${callerCheck(KIND.jwt, CALLER_PARAMS.jwt)} SELECT ${CALLER_COLUMNS} FROM caller`),
  api_token: new HotStatement<CallerColumns>(sql`WITH ${callerCheck(KIND.api_token, CALLER_PARAMS.api_token)} SELECT ${CALLER_COLUMNS} FROM caller`),
};

/**
 * A personal access token's check, answering in the caller shape plus the organizations
 * the token lists: the one `X-Organization-ID` names (default the first listed), and the
 * user's membership there. Its use is recorded at most once a minute.
 */
export const PAT_CHECK = new HotStatement<CallerColumns & { organization_ids: string[] }>(
  sql`WITH t AS (
        SELECT p.id AS caller_credential_id, p.user_id AS caller_user_id, p.organization_ids, u.system_admin AS caller_system_admin,
               (p.revoked_at IS NULL AND (p.expires_at IS NULL OR p.expires_at > now())) AS caller_active,
               COALESCE(${sql.placeholder('wanted')}::text, p.organization_ids[1]) AS caller_organization_id
        FROM personal_access_tokens p JOIN users u ON u.id = p.user_id
        WHERE p.token_hash = ${sql.placeholder('hash')}
      ), touch AS (
        UPDATE personal_access_tokens SET last_used_at = now()
        WHERE token_hash = ${sql.placeholder('hash')} AND revoked_at IS NULL
          AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
        RETURNING 1
      )
      SELECT t.*, m.role AS caller_role FROM t
      LEFT JOIN memberships m ON m.organization_id = t.caller_organization_id AND m.user_id = t.caller_user_id`,
);

/** The credentials `checkCredential` checks on the usual path (a service token's is service-tokens.ts's own check, with its audit row). */
type UsualCredential = Extract<DeferredCredential, { kind: keyof typeof CALLER_CHECK }>;

/** A session's or API token's caller, checked in a statement of its own: the principal, or 401/403. */
export async function checkCredential(db: Db, credential: UsualCredential, viaCookie = false): Promise<Principal> {
  const [row] = await CALLER_CHECK[credential.kind].rows(db, callerValues(credential));
  return principalFromCaller(credential, row, { viaCookie });
}

/**
 * The principal a caller row establishes, with the usual 401 (no such credential, or no
 * longer active) and 403 (no longer a member): the one place a `Principal` is built, for
 * every credential kind and for impersonation.
 */
export function principalFromCaller(
  credential: { kind: CredentialKind },
  row: CallerColumns | undefined,
  via?: { viaCookie?: boolean; impersonatorId?: string },
): Principal {
  // An organization of '' is a service token acting in none (service-tokens.ts); null is no organization at all.
  if (!row?.caller_active || row.caller_organization_id == null || !row.caller_credential_id) {
    throw new AppError('UNAUTHENTICATED', { message: credential.kind === 'jwt' ? 'The session has ended; sign in again' : 'Invalid, expired or revoked token' });
  }
  if (!row.caller_role) throw new AppError('FORBIDDEN', { message: 'You are no longer a member of this organization' });
  const principal: Principal = {
    kind: credential.kind,
    userId: row.caller_user_id,
    organizationId: row.caller_organization_id,
    role: row.caller_role,
    credentialId: row.caller_credential_id,
    systemAdmin: row.caller_system_admin === true,
    viaCookie: via?.viaCookie ?? false,
  };
  // Only an impersonated principal has the key at all (a token read's principal stays the plain shape).
  if (via?.impersonatorId) principal.impersonatorId = via.impersonatorId;
  return principal;
}
