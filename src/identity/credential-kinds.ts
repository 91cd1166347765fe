/**
 * The credential kinds (docs/contract.md §3, §5d, §9), one row each: how a bearer value of the
 * kind starts, what it may do beyond its role, whether a hot route may fold its check into its
 * own statement (and with which SQL), what the rate limiter counts it against, how its uses are
 * audited, whether the token exchange takes it as a subject, and how a delegated credential it
 * minted learns it could still mint. Authentication (authenticate.ts, steps.ts), the hot read
 * (src/integrations/tokens/fast-read.ts), the token exchange (src/agents/exchange.ts), the
 * grantor check and every rights question read these rows: a new kind is one more row (and its
 * check, keyed by the kind in authenticate.ts, so the compiler asks for it).
 */
import type { SQL } from 'drizzle-orm';
import { sql } from '../db/client.ts';
import type { Principal, Role } from '../ground/principal.ts';
import { SERVICE_BUDGET_KEY } from '../http/rate-limit.ts';
import { API_TOKEN_PREFIX, CAPABILITY_PREFIX, PAT_PREFIX, SERVICE_TOKEN_PREFIX } from './credentials.ts';
import { SERVICE_TOKEN_FIELDS } from './service-token-rights.ts';

/** What the rate limiter's key of a caller is made from. */
export interface RateCaller {
  userId: string | null;
  credentialId: string;
  /** A token's hash (API tokens are counted by it). */
  hash?: string;
}

/** How the hot read checks a kind inside its own statement (caller-check.ts `callerCheck`). */
export interface DeferredCheck {
  /** The columns of its `q` row besides the statement's own, as `json_to_recordset` declares them. */
  columns: string;
  /** Its lookup of the `q` row, in the caller shape (caller-check.ts `CALLER_COLUMNS`). */
  lookup: SQL;
  /** Records its use, at most once a minute, never waiting on a locked row; null: its use is not recorded (a session). */
  touch: SQL | null;
}

/** One credential kind. */
export interface CredentialKindRow {
  /** How people call it, in messages. */
  title: string;
  /** How a bearer value of the kind starts; null: a session JWT (the header's fallback, or the `session` cookie). */
  prefix: string | null;
  /** A person's own sign-in (a session, a PAT): a system administrator acts as themselves only through one. */
  personal: boolean;
  /**
   * Acts for the deployment, outside organizations (a product's backend, §5d): a member of none, it
   * lists, creates, finds and manages any organization, sets product keys, and creates API tokens
   * for any organization.
   */
  actsForDeployment: boolean;
  /** The roles it may give a person (inviting, promoting, renewing or revoking an invitation): any, `member` only, or as its own role allows. */
  gives: 'any' | 'member' | 'by role';
  /** Minted from another credential (an agent capability): it reaches only its own short list, and is never exchanged again. */
  delegated: boolean;
  /** The GraphQL root fields it may use; null: every field its role allows. */
  graphqlFields: ReadonlySet<string> | null;
  /** What the 403 says where it reaches a route or field not on its list; null: it has no list. */
  refused: string | null;
  /** The MCP endpoint takes it (docs/contract.md §9): an agent's own credentials, never a person's or a product's. */
  mcp: boolean;
  /**
   * As a token exchange's subject (§9): `own` mints for its own organization (naming another is
   * refused), `named` needs `organization=<id>`; null: not a subject.
   */
  subject: 'own' | 'named' | null;
  /** The audit action its check writes, in its own statement, on every use (refused ones too); null: only what it changes is audited. */
  auditsUse: string | null;
  /** Its key in the rate limiter (decisions 62, 128); null: its subject's (a capability). */
  rateKey: ((caller: RateCaller) => string) | null;
  /** How a route with `deferCredentialCheck` folds its check into its own statement; null: never deferred. */
  deferred: DeferredCheck | null;
  /**
   * Whether a credential it minted (a connect session, a capability) is still backed: true while it
   * could still mint in `g.org` (grantor.ts, whose `g` row holds org, cid, uid and manager); null: never.
   */
  grantor: SQL | null;
}

/**
 * The grantor's person still holds the role the delegated thing needs: owner or admin where
 * it must manage (`g.manager`: a connect session, a capability that writes), else any
 * membership (a capability that only reads, as a member may, docs/contract.md §3).
 */
export const STILL_MEMBER = sql`EXISTS (SELECT 1 FROM memberships m WHERE m.organization_id = g.org AND m.user_id = g.uid
      AND (NOT g.manager OR m.role IN ('owner', 'admin')))`;

const user = (caller: RateCaller) => `user:${caller.userId}`;

/** Every credential kind. The order is the order `authMethod` lists them in. */
export const CREDENTIAL_KINDS = {
  jwt: {
    title: 'session',
    prefix: null,
    personal: true,
    actsForDeployment: false,
    gives: 'by role',
    delegated: false,
    graphqlFields: null,
    refused: null,
    mcp: false,
    subject: null,
    auditsUse: null,
    // A user's sessions and PATs share one budget (the caller's, before any impersonation).
    rateKey: user,
    deferred: {
      columns: 'org text, sid text, usr text',
      lookup: sql`SELECT (s.revoked_at IS NULL AND s.expires_at > now()) AS caller_active, m.role::text AS caller_role, u.id AS caller_user_id,
                   u.system_admin AS caller_system_admin, q.org AS caller_organization_id, s.id AS caller_credential_id
            FROM sessions s
            JOIN users u ON u.id = s.user_id
            LEFT JOIN memberships m ON m.organization_id = q.org AND m.user_id = s.user_id
            WHERE s.id = q.sid AND s.user_id = q.usr`,
      touch: null,
    },
    grantor: sql`EXISTS (
        SELECT 1 FROM sessions s WHERE s.id = g.cid AND s.user_id = g.uid
          AND s.revoked_at IS NULL AND s.expires_at > now()) AND ${STILL_MEMBER}`,
  },
  pat: {
    title: 'personal access token',
    prefix: PAT_PREFIX,
    personal: true,
    actsForDeployment: false,
    gives: 'by role',
    delegated: false,
    graphqlFields: null,
    refused: null,
    mcp: false,
    subject: 'named',
    auditsUse: null,
    rateKey: user,
    deferred: null,
    grantor: sql`EXISTS (
        SELECT 1 FROM personal_access_tokens p WHERE p.id = g.cid AND p.user_id = g.uid
          AND p.revoked_at IS NULL AND (p.expires_at IS NULL OR p.expires_at > now()) AND g.org = ANY (p.organization_ids)) AND ${STILL_MEMBER}`,
  },
  api_token: {
    title: 'API token',
    prefix: API_TOKEN_PREFIX,
    personal: false,
    actsForDeployment: false,
    // A leaked machine credential cannot make a lasting human admin.
    gives: 'member',
    delegated: false,
    graphqlFields: null,
    refused: null,
    mcp: true,
    subject: 'own',
    auditsUse: null,
    rateKey: (caller) => `api_token:${caller.hash ?? ''}`,
    deferred: {
      columns: 'hash text',
      lookup: sql`SELECT (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())) AS caller_active, 'admin'::text AS caller_role,
                   NULL::text AS caller_user_id, false AS caller_system_admin, organization_id AS caller_organization_id, id AS caller_credential_id
            FROM api_tokens WHERE token_hash = q.hash`,
      // Only where no other transaction holds the token's row (a revocation, another statement recording a use): a
      // best-effort record never waits, so it cannot stall the reads sharing its statement, nor deadlock against another batch.
      touch: sql`, touch AS (
          UPDATE api_tokens SET last_used_at = now()
          WHERE (organization_id, id) IN (
            SELECT organization_id, id FROM api_tokens
            WHERE token_hash IN (SELECT hash FROM q) AND revoked_at IS NULL
              AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
            FOR UPDATE SKIP LOCKED)
          RETURNING 1
        )`,
    },
    grantor: sql`EXISTS (
        SELECT 1 FROM api_tokens t WHERE t.organization_id = g.org AND t.id = g.cid
          AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now()))`,
  },
  service_token: {
    title: 'service token',
    prefix: SERVICE_TOKEN_PREFIX,
    personal: false,
    actsForDeployment: true,
    gives: 'any',
    delegated: false,
    graphqlFields: SERVICE_TOKEN_FIELDS,
    refused: 'Service tokens cannot do this',
    mcp: false,
    subject: 'named',
    auditsUse: 'service_token.request',
    // Its own budget, RATE_LIMIT_SERVICE_MAX (the limiter tells it by the key's start).
    rateKey: (caller) => `${SERVICE_BUDGET_KEY}${caller.credentialId}`,
    deferred: {
      columns: 'hash text, org text',
      // As service-tokens.ts's check: admin in the organization q.org names, '' when there is none with that id (the caller answers 404).
      lookup: sql`SELECT (t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())) AS caller_active, 'admin'::text AS caller_role,
                   NULL::text AS caller_user_id, false AS caller_system_admin,
                   COALESCE((SELECT o.id FROM organizations o WHERE o.id = q.org), '') AS caller_organization_id, t.id AS caller_credential_id
            FROM service_tokens t WHERE t.token_hash = q.hash`,
      // Not led by an organization: one serves them all.
      touch: sql`, touch AS (
          UPDATE service_tokens SET last_used_at = now()
          WHERE id IN (
            SELECT id FROM service_tokens
            WHERE token_hash IN (SELECT hash FROM q) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
              AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
            FOR UPDATE SKIP LOCKED)
          RETURNING 1
        )`,
    },
    // It may act in any organization (docs/contract.md §5d).
    grantor: sql`EXISTS (
        SELECT 1 FROM service_tokens st WHERE st.id = g.cid
          AND st.revoked_at IS NULL AND (st.expires_at IS NULL OR st.expires_at > now()))`,
  },
  capability: {
    title: 'agent capability',
    prefix: CAPABILITY_PREFIX,
    personal: false,
    actsForDeployment: false,
    gives: 'by role',
    delegated: true,
    // It never reaches /query (capabilities.ts): no field either, should it ever.
    graphqlFields: new Set<string>(),
    refused: 'A capability reaches only the proxy of its providers and /mcp',
    mcp: true,
    subject: null,
    auditsUse: 'capability.request',
    // docs/contract.md §4: it counts against its subject, so minting more never buys capacity.
    rateKey: null,
    deferred: null,
    // Delegation stops at one step.
    grantor: null,
  },
} as const satisfies Record<string, CredentialKindRow>;

type Kinds = typeof CREDENTIAL_KINDS;
type Kind = keyof Kinds;

/** Each kind's name, for code that speaks of one kind in particular (its own module, its SQL). */
export const KIND = Object.fromEntries(Object.keys(CREDENTIAL_KINDS).map((kind) => [kind, kind])) as { readonly [K in Kind]: K };

/** Every kind, in the table's order. */
export const KINDS = Object.keys(CREDENTIAL_KINDS) as Kind[];

/** The kinds a bearer value's prefix names (all but a session JWT). */
export type PrefixedKind = { [K in Kind]: Kinds[K]['prefix'] extends null ? never : K }[Kind];

/** The kinds a person or a product holds directly (all but a delegated one: a capability). */
export type DirectKind = { [K in Kind]: Kinds[K]['delegated'] extends true ? never : K }[Kind];
export const DIRECT_KINDS = KINDS.filter(isDirect);

/** Whether `kind` is held directly (not `delegated`). */
export function isDirect(kind: Kind): kind is DirectKind {
  return !CREDENTIAL_KINDS[kind].delegated;
}

/** The kinds a route may check inside its own statement. */
export type DeferrableKind = { [K in Kind]: Kinds[K]['deferred'] extends null ? never : K }[Kind];
export const DEFERRABLE_KINDS = KINDS.filter((kind): kind is DeferrableKind => CREDENTIAL_KINDS[kind].deferred !== null);

/** The kinds that record their use (and so have a read that leaves the token's row alone, once recorded this minute). */
export type TouchedKind = { [K in DeferrableKind]: Kinds[K]['deferred']['touch'] extends null ? never : K }[DeferrableKind];

/**
 * A credential whose database check the route runs itself (deferred). A token's `touch` says
 * whether the check also records its use (`last_used_at`, kept to the minute). A service token
 * acts in the organization `X-Organization-ID` names (`organizationId`), checked by the statement.
 */
export type DeferredCredential =
  | { kind: typeof KIND.jwt; sessionId: string; userId: string; organizationId: string }
  | { kind: typeof KIND.api_token; hash: string; touch: boolean }
  | { kind: typeof KIND.service_token; hash: string; organizationId: string; credentialId: string; touch: boolean };

/** The row of `kind`, for a kind read from the database (a capability's subject); null for a name no row has. */
export function credentialKind(kind: string): CredentialKindRow | null {
  return Object.hasOwn(CREDENTIAL_KINDS, kind) ? CREDENTIAL_KINDS[kind as Kind] : null;
}

const PREFIXED_KINDS = KINDS.filter((kind): kind is PrefixedKind => CREDENTIAL_KINDS[kind].prefix !== null);

/** The kind a bearer value's prefix names; null: none (a session JWT, or garbage the JWT check refuses). */
export function kindOfToken(token: string): PrefixedKind | null {
  for (const kind of PREFIXED_KINDS) if (token.startsWith(CREDENTIAL_KINDS[kind].prefix)) return kind;
  return null;
}

/** The caller acts for the deployment, outside organizations (`actsForDeployment`). */
export function actsForDeployment(principal: Principal | null | undefined): boolean {
  return principal != null && CREDENTIAL_KINDS[principal.kind].actsForDeployment;
}

/** The caller may give a person `role`, as far as its kind goes (`gives`); its own role is asked only where the kind gives by role. */
export function kindGives(principal: Principal, role: Role): 'yes' | 'no' | 'by role' {
  const gives: CredentialKindRow['gives'] = CREDENTIAL_KINDS[principal.kind].gives;
  if (gives === 'any') return 'yes';
  if (gives === 'member') return role === 'member' ? 'yes' : 'no';
  return 'by role';
}

/** Whether a caller of `kind` may use the GraphQL root field `field` (`graphqlFields`). */
export function mayUseField(kind: Kind, field: string): boolean {
  const fields: ReadonlySet<string> | null = CREDENTIAL_KINDS[kind].graphqlFields;
  return fields === null || fields.has(field);
}

/** Whether every kind may use `field` (then no per-request guard is needed for its reads; a capability's empty list keeps every field guarded). */
export function fieldOpenToAll(field: string): boolean {
  return KINDS.every((kind) => mayUseField(kind, field));
}

/** A kind's name as an SQL literal, for a statement built once (a constant of this table, never input). */
export function kindLiteral(kind: Kind): SQL {
  return sql.raw(`'${kind}'`);
}
