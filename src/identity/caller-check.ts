/**
 * Credential checks in SQL, and the one way a checked caller becomes a `Principal`. The
 * session and API-token checks (`callerCheck`) are also folded into the token read's own
 * statement (src/integrations/tokens/fast-read.ts), so their text is shared, not copied.
 */
import type { SQL } from 'drizzle-orm';
import { type Db, HotStatement, sql } from '../db/client.ts';
import type { CredentialKind, Principal, Role } from '../ground/principal.ts';
import { AppError } from '../ground/errors.ts';

/**
 * A credential whose database check the route runs itself. A token's `touch` says whether
 * the check also records its use (`last_used_at`, kept to the minute). A service token acts
 * in the organization `X-Organization-ID` names (`organizationId`), checked by the statement.
 */
export type DeferredCredential =
  | { kind: 'jwt'; sessionId: string; userId: string; organizationId: string }
  | { kind: 'api_token'; hash: string; touch: boolean }
  | { kind: 'service_token'; hash: string; organizationId: string; credentialId: string; touch: boolean };

/** The credentials `checkCredential` checks on the usual path (a service token's is `checkServiceToken`). */
type UsualCredential = Exclude<DeferredCredential, { kind: 'service_token' }>;

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
 * Records the use of the API tokens in `q`, at most once a minute each, and only where no
 * other transaction holds the token's row (a revocation, another statement recording a
 * use): a best-effort record never waits, so it cannot stall the reads sharing its
 * statement, nor deadlock against another batch.
 */
const TOUCH_API_TOKEN = sql`, touch AS (
          UPDATE api_tokens SET last_used_at = now()
          WHERE (organization_id, id) IN (
            SELECT organization_id, id FROM api_tokens
            WHERE token_hash IN (SELECT hash FROM q) AND revoked_at IS NULL
              AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
            FOR UPDATE SKIP LOCKED)
          RETURNING 1
        )`;

/** `TOUCH_API_TOKEN` for service tokens (not led by an organization: one serves them all), as `SERVICE_TOKEN_CHECK` records it. */
const TOUCH_SERVICE_TOKEN = sql`, touch AS (
          UPDATE service_tokens SET last_used_at = now()
          WHERE id IN (
            SELECT id FROM service_tokens
            WHERE token_hash IN (SELECT hash FROM q) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
              AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
            FOR UPDATE SKIP LOCKED)
          RETURNING 1
        )`;

/** Each credential kind's lookup of its `q` row, in the caller shape. */
const LOOKUP = {
  jwt: sql`SELECT (s.revoked_at IS NULL AND s.expires_at > now()) AS caller_active, m.role::text AS caller_role, u.id AS caller_user_id,
                   u.system_admin AS caller_system_admin, q.org AS caller_organization_id, s.id AS caller_credential_id
            FROM sessions s
            JOIN users u ON u.id = s.user_id
            LEFT JOIN memberships m ON m.organization_id = q.org AND m.user_id = s.user_id
            WHERE s.id = q.sid AND s.user_id = q.usr`,
  api_token: sql`SELECT (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())) AS caller_active, 'admin'::text AS caller_role,
                   NULL::text AS caller_user_id, false AS caller_system_admin, organization_id AS caller_organization_id, id AS caller_credential_id
            FROM api_tokens WHERE token_hash = q.hash`,
  // As SERVICE_TOKEN_CHECK: admin in the organization q.org names, '' when there is none with that id (the caller answers 404).
  service_token: sql`SELECT (t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())) AS caller_active, 'admin'::text AS caller_role,
                   NULL::text AS caller_user_id, false AS caller_system_admin,
                   COALESCE((SELECT o.id FROM organizations o WHERE o.id = q.org), '') AS caller_organization_id, t.id AS caller_credential_id
            FROM service_tokens t WHERE t.token_hash = q.hash`,
} as const;

/**
 * Credential checks as CTEs: `q` is `source` — one row per credential, with the columns
 * org, sid and usr (the session JWT's organization, session and user), hash (the API
 * token's) or hash and org (the service token's and the organization it names), and any
 * others the statement needs — and `caller` is each row of `q` with `CALLER_COLUMNS`
 * added, null when the session or token does not exist. Each lookup is a lateral
 * `LIMIT 1`, so it stays an index probe per row however many rows `q` has. A token's use
 * is recorded as on the usual path, unless `touch` is false.
 */
export function callerCheck(kind: DeferredCredential['kind'], source: SQL, touch = true): SQL {
  const record = !touch || kind === 'jwt' ? sql`` : kind === 'api_token' ? TOUCH_API_TOKEN : TOUCH_SERVICE_TOKEN;
  return sql`q AS (${source}), caller AS (SELECT q.*, c.* FROM q LEFT JOIN LATERAL (${LOOKUP[kind]} LIMIT 1) c ON true)${record}`;
}

/** A credential as `callerCheck` reads it: the placeholders of `CALLER_PARAMS`, or a row of a batch's `q`. */
export function callerValues(credential: DeferredCredential): { org: string; sid: string; usr: string } | { hash: string } | { hash: string; org: string } {
  if (credential.kind === 'jwt') return { org: credential.organizationId, sid: credential.sessionId, usr: credential.userId };
  return credential.kind === 'service_token' ? { hash: credential.hash, org: credential.organizationId } : { hash: credential.hash };
}

/** `callerCheck`'s source for one credential, from the placeholders `callerValues` fills. */
const CALLER_PARAMS = {
  jwt: sql`SELECT ${sql.placeholder('org')}::text AS org, ${sql.placeholder('sid')}::text AS sid, ${sql.placeholder('usr')}::text AS usr`,
  api_token: sql`SELECT ${sql.placeholder('hash')}::text AS hash`,
} as const;

/** The usual path: a session's or API token's `callerCheck` as a statement of its own. */
export const CALLER_CHECK = {
  jwt: new HotStatement<CallerColumns>(sql`WITH ${callerCheck('jwt', CALLER_PARAMS.jwt)} SELECT ${CALLER_COLUMNS} FROM caller`),
  api_token: new HotStatement<CallerColumns>(sql`WITH ${callerCheck('api_token', CALLER_PARAMS.api_token)} SELECT ${CALLER_COLUMNS} FROM caller`),
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
