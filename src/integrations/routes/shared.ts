import type { FastifyRequest } from 'fastify';
import { appRef } from '../apps/catalog.ts';
import { Type } from 'typebox';
import type { Principal } from '../../ground/principal.ts';
import { AppError } from '../../ground/errors.ts';
import { NameSchema } from '../../ground/names.ts';
import { requireRole } from '../../identity/authorize.ts';
import { PRODUCT_ID_PATTERN, PROVIDER_ID } from '../../lib/ids.ts';
import { effectiveStatus } from '../status.ts';
import type { IntegrationSummary } from '../integrations.ts';
import type { LoadedIntegration } from '../tokens/loaded.ts';
import { toAnswer } from '../tokens/policy.ts';
import { parseCredentials } from '../providers/auth-modes.ts';
import type { AuthMode } from '../providers/types.ts';

/** Non-secret, provider-defined values a client needs to use the token (docs/providers.md). */
export const Metadata = Type.Record(Type.String(), Type.Unknown(), { description: 'Provider-defined, non-secret values: instanceUrl, apiUrl, sites, workspaceId, tenantId… (docs/providers.md)' });

export const TokenSchema = Type.Object({
  accessToken: Type.String(),
  tokenType: Type.String(),
  expiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  scopes: Type.Array(Type.String()),
});

/** An end user's id: the product's own key for a person, team or workspace (docs/contract.md §5a, §5d). */
export const EndUserId = Type.String({ minLength: 1, maxLength: 128, pattern: PRODUCT_ID_PATTERN, description: "The product's own id for its end user (1–128 printable characters)" });

/** The end user a product names when it mints a connect session (docs/contract.md §5a). */
export const EndUserSchema = Type.Object(
  {
    id: EndUserId,
    email: Type.Optional(Type.String({ minLength: 3, maxLength: 254 })),
    displayName: Type.Optional(NameSchema({ minLength: 1, maxLength: 200 })),
  },
  { additionalProperties: false },
);
/** Which end user connected it, through which connect session (docs/contract.md §5a); null when an owner or admin did. */
export const ConnectedViaSchema = Type.Union([Type.Object({ sessionId: Type.String(), endUser: Type.Union([EndUserSchema, Type.Null()]) }), Type.Null()]);

/** The app that made an integration's grant (docs/contract.md §5e). */
export const AppRefSchema = Type.Object(
  { id: Type.String(), owner: Type.Union([Type.Literal('deployment'), Type.Literal('organization')]) },
  { description: 'The app that made its grant: refresh, validation and revocation use its credentials' },
);

export const IntegrationSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  kind: Type.String(),
  description: Type.String(),
  provider: Type.String(),
  app: AppRefSchema,
  status: Type.String(),
  metadata: Metadata,
  connectedVia: ConnectedViaSchema,
  endUser: Type.Union([EndUserSchema, Type.Null()], { description: "The end user it belongs to; null for the organization's own integration" }),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
});

export const ProviderParams = Type.Object({ provider: Type.String({ maxLength: 64 }) });

/** `?endUser=<id>` of every `/v1/integrations/{provider}/…` route (docs/contract.md §5d): present, that end user's integration; absent, the organization's own. */
export const EndUserQuery = Type.Object({
  endUser: Type.Optional({ ...EndUserId, description: "Selects that end user's integration; without it, the organization's own" }),
});

/** A provider id in a body. */
export const ProviderId = Type.String({ minLength: 1, maxLength: 64, description: 'Provider id, e.g. github or slack' });

/** An app's id (docs/contract.md §5e): a deployment app's (`github`, `github-readonly`) or an organization's own (a ULID). */
export const AppIdSchema = Type.String({ minLength: 1, maxLength: 64, description: "An app's id: the provider's (its deployment app), another deployment app's, or one of the organization's own apps" });

/** An id in the path (a ULID; anything else is "not found"). */
export const IdParams = Type.Object({ id: Type.String({ maxLength: 64 }) });

/**
 * The route edge of the integrations core: a provider failure its services threw, judged by
 * tokens/policy.ts, becomes the answer its verdict names; anything else passes as it is.
 */
export async function answered<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    throw toAnswer(error);
  }
}

/** A provider id from a path: a malformed one names no integration, the same 404 as any other (decision 41). */
export function providerIdFrom(value: string): string {
  if (!PROVIDER_ID.test(value)) throw new AppError('INTEGRATION_NOT_FOUND');
  return value;
}

/** The caller, if a member of their organization. */
export function member(request: FastifyRequest): Principal {
  const principal = request.ctx.principal;
  return requireRole(principal, principal?.organizationId ?? '', 'member');
}

/** Raw token reads: header credentials only, never while impersonating, owner/admin or API token. */
export function requireTokenReader(principal: Principal | null): Principal {
  if (!principal) throw new AppError('UNAUTHENTICATED');
  if (principal.viaCookie) throw new AppError('UNAUTHENTICATED', { message: 'Token access needs credentials in the Authorization header' });
  if (principal.impersonatorId) throw new AppError('FORBIDDEN', { message: 'Token access is not allowed while impersonating' });
  return requireRole(principal, principal.organizationId, 'admin');
}

/** The roles `requireTokenReader` accepts (API tokens act as admin). */
export const TOKEN_READER_ROLES = ['owner', 'admin'] as const;

/** How a provider's integrations are credentialed (docs/contract.md §5c). */
export const AuthModeSchema = Type.Union([Type.Literal('oauth2'), Type.Literal('app_installation'), Type.Literal('api_key'), Type.Literal('basic'), Type.Literal('client_credentials')]);

/** The credentials a person entered, by field name (api_key, basic): handed out like a token. */
export const EnteredCredentials = Type.Record(Type.String(), Type.String(), { description: 'The entered fields by name (api_key, basic)' });

/**
 * What a token read hands out: the token — or, for api_key and basic, the entered credentials —
 * and the mode, except for `oauth2`, whose answer stays §5's as it was.
 */
export function usableBody(loaded: LoadedIntegration): { authMode?: AuthMode; token?: ReturnType<typeof tokenBody>; credentials?: Record<string, string> } {
  const { traits } = loaded.provider;
  if (traits.presents === 'credentials') return { authMode: traits.mode, credentials: parseCredentials(loaded.secrets.credentials) };
  return { ...(traits.namedInTokenRead ? { authMode: traits.mode } : {}), token: tokenBody(loaded) };
}

/** A token as the API hands it out. */
export function tokenBody(loaded: LoadedIntegration) {
  return {
    accessToken: loaded.secrets.access_token as string,
    tokenType: 'Bearer',
    expiresAt: loaded.row.tokenExpiresAt?.toISOString() ?? null,
    scopes: loaded.row.scopes,
  };
}

/** The list view of an integration. */
export function integrationView(row: IntegrationSummary) {
  return {
    id: row.id,
    name: row.name,
    kind: row.provider,
    description: row.description,
    provider: row.provider,
    app: appRef(row.appId),
    status: effectiveStatus(row),
    metadata: row.metadata,
    connectedVia: row.connectedVia ?? null,
    endUser: row.endUser ?? null,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}
