/** Who calls: the principal the authentication step establishes, in the words every room shares. */
import type { CREDENTIAL_KINDS } from '../identity/credential-kinds.ts';

export type Role = 'owner' | 'admin' | 'member';
/** A credential kind: a row of identity's table (decision 261), named here only as a type. */
export type CredentialKind = keyof typeof CREDENTIAL_KINDS;

/** An agent capability's narrowing (docs/contract.md §9): what the `capability` credential kind may reach, and on whose authority. */
export interface CapabilityGrant {
  /** The agent's name as the minter gave it; null when none was. */
  agent: string | null;
  /** Provider id → the access granted there (`write` includes `read`). */
  providers: ReadonlyMap<string, 'read' | 'write'>;
  /** The end user whose integrations alone it reaches; null: not narrowed. */
  endUserId: string | null;
  /** The credential it was exchanged for, and its user (null for an API or service token). */
  subject: { kind: string; id: string; userId: string | null };
  /** What the rate limiter counts it against: its subject's own key (docs/contract.md §4). */
  rateKey: string;
}

/** Who is calling, as established by the authentication step. */
export interface Principal {
  kind: CredentialKind;
  /** Effective user (the impersonated one while impersonating); null for API and service tokens (a capability: its subject's user). */
  userId: string | null;
  /** The organization it acts in; '' for a service token acting in none (organization management, docs/contract.md §5d). */
  organizationId: string;
  role: Role;
  /** Id of the session, PAT, API token or service token that authenticated the request. */
  credentialId: string;
  systemAdmin: boolean;
  /** Set while a system admin impersonates `userId`. */
  impersonatorId?: string;
  /**
   * Set when a system administrator entered this organization with `X-Organization-ID` on their
   * own session (docs/contract.md §11): they read there as a member would (and its audit log), never
   * a token read or a write; `role` is `member`.
   */
  entered?: true;
  /** True when the credential came from the `session` cookie rather than a header. */
  viaCookie: boolean;
  /** Set for an agent capability (`kind` `capability`): its own narrow rights, checked where it may act at all. */
  capability?: CapabilityGrant;
}
