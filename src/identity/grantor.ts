/**
 * Delegated authority (docs/contract.md §5a, §9, §3): something minted by a credential — a
 * connect session, an agent capability — is usable only while the credential that minted it
 * could still mint it. One check, in SQL, for every kind, so each
 * delegated thing asks the same question and a statement can fold it into its own lookup.
 */
import type { SQL, SQLWrapper } from 'drizzle-orm';
import { sql } from '../db/client.ts';
import { CREDENTIAL_KINDS, KINDS, kindLiteral, STILL_MEMBER } from './credential-kinds.ts';

/**
 * The grantor kind of a person's standing consent (an MCP client's grant, docs/contract.md §9a):
 * no credential of theirs backs it — their logout or session expiry does not end it — only their
 * membership (owner or admin where it writes); a deleted account has none.
 */
export const PERSON_GRANTOR = 'user';

/** Who minted a delegated credential, as SQL expressions (columns of the delegated row, or parameters): the minting credential's kind (identity/credential-kinds.ts; `jwt` is a login session) and id, and its user (null for an API or service token). */
export interface GrantorColumns {
  kind: SQLWrapper;
  credentialId: SQLWrapper;
  userId: SQLWrapper;
}

/** `WHEN <kind> THEN <its grantor rule>` for every kind whose row has one, built once. */
const RULES = sql.join(
  KINDS.flatMap((kind) => {
    const rule: SQL | null = CREDENTIAL_KINDS[kind].grantor;
    return rule === null ? [] : [sql`WHEN ${kindLiteral(kind)} THEN ${rule}`];
  }),
  sql.raw('\n      '),
);
const PERSON_RULE = sql`WHEN ${sql.raw(`'${PERSON_GRANTOR}'`)} THEN g.cid = g.uid AND ${STILL_MEMBER}`;

/**
 * True while the grantor could still mint in `organizationId`, by its kind's rule (the `grantor`
 * of its row): an API token of that organization neither revoked nor expired; a service token
 * neither revoked nor expired (it may act in any organization, docs/contract.md §5d); a person
 * still owner or admin there — or, where `manager` is false (an agent capability that only
 * reads, §9), still a member — through the login session that minted it still open (not logged
 * out, not expired) or the personal access token still valid and still listing the organization.
 * A kind without a rule: false, so a kind added without one grants nothing.
 */
export function grantorAuthorized(organizationId: SQLWrapper, grantor: GrantorColumns, manager: SQLWrapper = sql`true`): SQL<boolean> {
  // The inputs are read once, in a FROM-less select: an unqualified column given as input
  // resolves to the caller's row there, never to a same-named column of the tables below.
  return sql<boolean>`(SELECT CASE g.kind
      ${RULES}
      ${PERSON_RULE}
      ELSE false END
    FROM (SELECT ${organizationId}::text AS org, ${grantor.kind}::text AS kind, ${grantor.credentialId}::text AS cid, ${grantor.userId}::text AS uid,
                 ${manager}::boolean AS manager) g)`;
}
