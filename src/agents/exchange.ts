/**
 * Minting and revoking agent capabilities (docs/contract.md §9): RFC 8693 token exchange of a
 * subject credential — an API token, or a person's PAT or a service token naming an organization —
 * for a `tsc_` capability narrowed to some providers, read or write, for minutes. What a
 * capability may then do is the authentication step's (src/identity/capabilities.ts).
 */
import { and, eq, inArray, isNull } from 'drizzle-orm';
import { recordAudit } from '../audit/audit.ts';
import type { Db } from '../db/client.ts';
import { agentCapabilities, integrations } from '../db/schema.ts';
import { AppError } from '../ground/errors.ts';
import type { Principal } from '../ground/principal.ts';
import type { AuditActor, Work } from '../ground/work.ts';
import { checkToken } from '../identity/authenticate.ts';
import { roleAtLeast } from '../identity/authorize.ts';
import { CAPABILITY_SCOPE, providersOf } from '../identity/capabilities.ts';
import { CREDENTIAL_KINDS, KIND, kindOfToken } from '../identity/credential-kinds.ts';
import { CAPABILITY_PREFIX, hashToken, newOpaqueToken } from '../identity/credentials.ts';
import { endUserKey } from '../integrations/integrations.ts';
import type { ProviderRegistry } from '../integrations/providers/registry.ts';
import { newId, PRODUCT_ID, ULID } from '../lib/ids.ts';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
/** A capability's lifetime in seconds: the default, and the range `expires_in` may ask for. */
export const LIFETIME = { default: 900, min: 60, max: 3600 } as const;
const AGENT_NAME = /^[\x20-\x7e]{1,64}$/;

/** The RFC 6749 §5.2 error codes the token endpoint answers with. */
export type OAuthErrorCode = 'invalid_request' | 'invalid_scope' | 'unsupported_grant_type' | 'invalid_target' | 'invalid_grant' | 'invalid_client';

/** A refusal of the token endpoint, rendered `{error, error_description}` with 400 (never the house's error shape). */
export class OAuthError extends Error {
  readonly error: OAuthErrorCode;
  constructor(error: OAuthErrorCode, description: string) {
    super(description);
    this.error = error;
  }
}

/** The token endpoint's parameters, as strings (a parameter given twice is refused before this). */
export type ExchangeParams = Partial<Record<string, string>>;

/** What a successful exchange answers (RFC 8693 §2.2.1). */
export interface Minted {
  access_token: string;
  issued_token_type: typeof ACCESS_TOKEN_TYPE;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
}

/** What minting uses. */
export interface ExchangeDeps {
  /** The root handle: the subject is checked outside the request's transaction. */
  db: Db;
  providers: ProviderRegistry;
  /** `<PUBLIC_URL>/mcp`, the one `resource` a capability may be minted for. */
  mcpResource: string;
}

/** The validated request: everything but the subject. */
interface Request {
  scopes: string[];
  expiresIn: number;
  agent: string | null;
  endUserId: string | null;
}

/** Checks the parameters other than the subject, in RFC order: grant type, then the request's shape, then the target. */
function readRequest(params: ExchangeParams, mcpResource: string): Request {
  if (params.grant_type === undefined) throw new OAuthError('invalid_request', 'grant_type is required');
  if (params.grant_type !== TOKEN_EXCHANGE) throw new OAuthError('unsupported_grant_type', `Only ${TOKEN_EXCHANGE} is supported`);
  if (!params.subject_token) throw new OAuthError('invalid_request', 'subject_token is required');
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) throw new OAuthError('invalid_request', `subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
  if (params.requested_token_type !== undefined && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
    throw new OAuthError('invalid_request', `requested_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  const scopes = [...new Set((params.scope ?? '').split(' ').filter((scope) => scope !== ''))];
  if (scopes.length === 0) throw new OAuthError('invalid_scope', 'scope is required: integrations:<provider>:read or integrations:<provider>:write');
  const malformed = scopes.find((scope) => !CAPABILITY_SCOPE.test(scope));
  if (malformed !== undefined) throw new OAuthError('invalid_scope', `Unknown scope "${malformed.slice(0, 100)}": expected integrations:<provider>:read or integrations:<provider>:write`);
  let expiresIn: number = LIFETIME.default;
  if (params.expires_in !== undefined) {
    expiresIn = /^\d{1,5}$/.test(params.expires_in) ? Number(params.expires_in) : Number.NaN;
    if (!(expiresIn >= LIFETIME.min && expiresIn <= LIFETIME.max)) throw new OAuthError('invalid_request', `expires_in must be ${LIFETIME.min}–${LIFETIME.max} seconds`);
  }
  if (params.agent !== undefined && !AGENT_NAME.test(params.agent)) throw new OAuthError('invalid_request', 'agent must be 1–64 printable characters');
  if (params.end_user !== undefined && !PRODUCT_ID.test(params.end_user)) throw new OAuthError('invalid_request', "end_user must be an end user's id (1–128 printable characters)");
  if (params.organization !== undefined && !ULID.test(params.organization)) throw new OAuthError('invalid_request', "organization must be an organization's id");
  if (params.resource !== undefined && params.resource !== mcpResource) throw new OAuthError('invalid_target', `The only resource is ${mcpResource}`);
  return { scopes, expiresIn, agent: params.agent ?? null, endUserId: params.end_user ?? null };
}

const INVALID_SUBJECT = 'The subject token is invalid, expired or revoked';

/**
 * The subject credential as the authentication step takes it — the same check of its kind
 * (identity/authenticate.ts `checkToken`), its use recorded as any use is — acting in the
 * organization it mints for; `invalid_request` otherwise, saying what the check said. Only
 * the kinds whose row takes them as a subject are: a capability cannot be exchanged for
 * another (delegation stops at one step), a session JWT is no access token.
 */
async function checkSubject(db: Db, token: string, organization: string | undefined, requestId: string): Promise<Principal> {
  const kind = kindOfToken(token);
  const row = kind === null ? null : CREDENTIAL_KINDS[kind];
  if (row?.subject == null) throw new OAuthError('invalid_request', row?.delegated ? 'A capability cannot be exchanged' : INVALID_SUBJECT);
  if (row.subject === 'named' && organization === undefined) throw new OAuthError('invalid_request', `A ${row.title} needs organization=<id>`);
  try {
    const checked = checkToken(db, token, { wanted: () => organization ?? null, method: 'POST', route: undefined, requestId, impersonating: false, purpose: 'exchange' });
    if (checked === null) throw new OAuthError('invalid_request', INVALID_SUBJECT);
    return await checked;
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    // 401: the token is no good; 403: it does not act in that organization; 404: there is none with that id.
    throw new OAuthError('invalid_request', error.code === 'UNAUTHENTICATED' ? INVALID_SUBJECT : error.message);
  }
}

/**
 * `invalid_scope` unless every provider is configured and connected in the organization (for
 * `end_user`, that end user's integration), and the subject may do what the scopes ask: a
 * member's PAT reads only (docs/contract.md §3), an owner's, an admin's, an API or service token writes too.
 */
export async function checkScopes(deps: Pick<ExchangeDeps, 'db' | 'providers'>, subject: Pick<Principal, 'role' | 'organizationId'>, request: Pick<Request, 'scopes' | 'endUserId'>): Promise<void> {
  const wanted = providersOf(request.scopes);
  const unknown = [...wanted.keys()].find((provider) => !deps.providers.get(provider));
  if (unknown !== undefined) throw new OAuthError('invalid_scope', `Provider ${unknown} is not configured`);
  if ([...wanted.values()].includes('write') && !roleAtLeast(subject.role, 'admin')) {
    throw new OAuthError('invalid_scope', 'The subject may only read: write needs an owner, an admin, an API or a service token');
  }
  const connected = await deps.db
    .selectDistinct({ provider: integrations.provider })
    .from(integrations)
    .where(
      and(
        eq(integrations.organizationId, subject.organizationId),
        inArray(integrations.provider, [...wanted.keys()]),
        request.endUserId !== null ? eq(integrations.endUserKey, endUserKey(request.endUserId)) : undefined,
      ),
    );
  const missing = [...wanted.keys()].find((provider) => !connected.some((row) => row.provider === provider));
  if (missing !== undefined) throw new OAuthError('invalid_scope', `${missing} is not connected${request.endUserId !== null ? ' for that end user' : ''} in the organization`);
}

/**
 * The token exchange: checks the request and its subject, then — in the unit of work `open`
 * opens acting as the subject (the request's transaction, opened only now: the checks read
 * outside it) — stores the capability (its hash only) and the audit row of its minting, and
 * answers the value once.
 */
export async function mintCapability(deps: ExchangeDeps, open: (actor: AuditActor) => Promise<Work>, params: ExchangeParams, requestId: string): Promise<Minted> {
  const request = readRequest(params, deps.mcpResource);
  const subject = await checkSubject(deps.db, params.subject_token ?? '', params.organization, requestId);
  await checkScopes(deps, subject, request);
  // The scope as granted: one scope per provider, the wider one when both were asked.
  const scopes = [...providersOf(request.scopes)].map(([provider, access]) => `integrations:${provider}:${access}`);
  const work = await open({ principal: subject, requestId });
  const { token } = await issueCapability(work, {
    organizationId: subject.organizationId,
    agent: request.agent,
    scopes,
    endUserId: request.endUserId,
    subject: { kind: subject.kind, id: subject.credentialId, userId: subject.userId },
    expiresIn: request.expiresIn,
    grantId: null,
  });
  return { access_token: token, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: request.expiresIn, scope: scopes.join(' ') };
}

/** What a capability is issued for: its organization, narrowing, subject and lifetime, and the MCP client's grant it belongs to (docs/contract.md §9a). */
export interface CapabilityIssue {
  organizationId: string;
  agent: string | null;
  scopes: string[];
  endUserId: string | null;
  /** The credential it was exchanged for, or the person (`user`) or token that consented to an MCP client's grant. */
  subject: { kind: string; id: string; userId: string | null };
  expiresIn: number;
  grantId: string | null;
}

/**
 * Stores a capability (its hash only) and the audit row of its minting, in `work`: the one way a
 * capability comes to be, for a token exchange and an MCP client's grant alike. Answers its value once.
 */
export async function issueCapability(work: Work, issue: CapabilityIssue): Promise<{ id: string; token: string }> {
  const token = newOpaqueToken(CAPABILITY_PREFIX);
  const id = newId();
  await work.db.insert(agentCapabilities).values({
    organizationId: issue.organizationId,
    id,
    tokenHash: hashToken(token),
    agent: issue.agent,
    scopes: issue.scopes,
    endUserId: issue.endUserId,
    subjectKind: issue.subject.kind,
    subjectId: issue.subject.id,
    subjectUserId: issue.subject.userId,
    expiresAt: new Date(Date.now() + issue.expiresIn * 1000),
    grantId: issue.grantId,
  });
  await recordAudit(work.db, work.actor, {
    organizationId: issue.organizationId,
    action: 'capability.created',
    targetType: KIND.capability,
    targetId: id,
    detail: { agent: issue.agent, scopes: issue.scopes, endUser: issue.endUserId, expiresIn: issue.expiresIn, ...(issue.grantId ? { grant: issue.grantId } : {}) },
  });
  return { id, token };
}

/** RFC 7009: ends a live capability early, with the audit row of it (`work`'s actor: nobody, holding the value is enough); anything else (unknown, already dead, not a capability) changes nothing. */
export async function revokeCapability(work: Work, token: string): Promise<void> {
  if (kindOfToken(token) !== KIND.capability) return;
  const [row] = await work.db
    .update(agentCapabilities)
    .set({ revokedAt: new Date() })
    .where(and(eq(agentCapabilities.tokenHash, hashToken(token)), isNull(agentCapabilities.revokedAt)))
    .returning({ organizationId: agentCapabilities.organizationId, id: agentCapabilities.id, agent: agentCapabilities.agent });
  if (!row) return;
  await recordAudit(work.db, work.actor, { organizationId: row.organizationId, action: 'capability.revoked', targetType: KIND.capability, targetId: row.id, detail: { agent: row.agent } });
}
