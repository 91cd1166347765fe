import { and, eq } from 'drizzle-orm';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { type AuditActor, recordAudit } from '../audit/audit.ts';
import type { Db } from '../db/client.ts';
import { integrationSecrets, integrations } from '../db/schema.ts';
import type { Principal } from '../http/context.ts';
import { AppError } from '../http/errors.ts';
import { requireRole } from '../identity/authorize.ts';
import type { Services } from '../services.ts';
import { findIntegrationById, findIntegrationByProvider, type IntegrationSummary, listIntegrationSummaries } from './integrations.ts';
import type { Current } from './lifecycle.ts';
import { readSecrets } from './secrets.ts';
import { effectiveStatus, statusObject } from './status.ts';

const PROVIDER_ID = /^[a-z][a-z0-9]{1,31}$/;
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

const TokenSchema = Type.Object({
  accessToken: Type.String(),
  tokenType: Type.String(),
  expiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  scopes: Type.Array(Type.String()),
});
const StatusSchema = Type.Object({
  provider: Type.String(),
  connected: Type.Boolean(),
  status: Type.Union([Type.Literal('connected'), Type.Literal('expired'), Type.Literal('invalid'), Type.Literal('warning')]),
  tokenValid: Type.Boolean(),
  tokenExpired: Type.Boolean(),
  lastValidated: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  message: Type.String(),
  actions: Type.Array(Type.Union([Type.Literal('reconnect'), Type.Literal('refresh'), Type.Literal('configure')])),
  lastError: Type.Optional(Type.String()),
  detectedAt: Type.Optional(Type.String({ format: 'date-time' })),
});
export const IntegrationSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  kind: Type.String(),
  description: Type.String(),
  provider: Type.String(),
  status: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
});
const ProviderParams = Type.Object({ provider: Type.String({ maxLength: 64 }) });

/** The caller, if a member of their organization; the path's provider id, checked. */
function memberCall(request: FastifyRequest): { principal: Principal; provider: string } {
  const principal = request.ctx.principal;
  if (!principal) throw new AppError('UNAUTHENTICATED');
  requireRole(principal, principal.organizationId, 'member');
  const { provider } = request.params as { provider: string };
  // A malformed provider id names no integration: the same 404 as any other.
  if (!PROVIDER_ID.test(provider)) throw new AppError('INTEGRATION_NOT_FOUND');
  return { principal, provider };
}

/** Raw token reads: header credentials only, never while impersonating, owner/admin or API token. */
export function requireTokenReader(principal: Principal | null): Principal {
  if (!principal) throw new AppError('UNAUTHENTICATED');
  if (principal.viaCookie) throw new AppError('UNAUTHENTICATED', { message: 'Token access needs credentials in the Authorization header' });
  if (principal.impersonatorId) throw new AppError('FORBIDDEN', { message: 'Token access is not allowed while impersonating' });
  return requireRole(principal, principal.organizationId, 'admin');
}

/** The roles `requireTokenReader` accepts (API tokens act as admin). */
const TOKEN_READER_ROLES = ['owner', 'admin'] as const;

function actorOf(request: FastifyRequest): AuditActor {
  return { principal: request.ctx.principal, requestId: request.id };
}

function tokenBody(current: Current) {
  return {
    accessToken: current.secrets.access_token as string,
    tokenType: 'Bearer',
    expiresAt: current.row.tokenExpiresAt?.toISOString() ?? null,
    scopes: current.row.scopes,
  };
}

/** Token reads, status, refresh, listing and delete (CONTRACT.md §5). */
export function integrationRoutes(app: FastifyInstance, services: Services): void {
  const { lifecycle } = services;

  app.get(
    '/v1/integrations',
    {
      config: { auth: 'authenticated' },
      schema: {
        summary: "The organization's integrations",
        tags: ['integrations'],
        response: { 200: Type.Object({ success: Type.Literal(true), integrations: Type.Array(IntegrationSchema) }) },
      },
    },
    async (request) => {
      const principal = requireRole(request.ctx.principal, request.ctx.principal?.organizationId ?? '', 'member');
      const rows = await listIntegrationSummaries(services.db, principal.organizationId);
      return { success: true as const, integrations: rows.map((row) => integrationView(row)) };
    },
  );

  app.get(
    '/v1/integrations/:provider/token',
    {
      config: { auth: 'authenticated', noStore: true, deferCredentialCheck: true },
      schema: {
        summary: "The organization's access token for the provider (refreshed first when about to expire)",
        tags: ['integrations'],
        params: ProviderParams,
        response: { 200: Type.Object({ success: Type.Literal(true), provider: Type.String(), token: TokenSchema }) },
      },
    },
    async (request) => {
      const deferred = request.ctx.deferredCredential;
      let loaded: Current;
      if (deferred) {
        // One statement checks the credential, reads the token and writes the audit row (without the token).
        const { provider } = request.params as { provider: string };
        const use = await lifecycle.loadForUseAs(deferred, provider, TOKEN_READER_ROLES, { action: 'integration.token_read', requestId: request.id });
        request.ctx.principal = use.principal;
        requireTokenReader(use.principal);
        if (!PROVIDER_ID.test(provider) || !use.current) throw new AppError('INTEGRATION_NOT_FOUND');
        loaded = use.current;
      } else {
        const principal = requireTokenReader(request.ctx.principal);
        const { provider } = memberCall(request);
        // One statement reads the token and writes the audit row (without the token).
        loaded = await lifecycle.loadForUse(principal.organizationId, provider, { actor: actorOf(request), action: 'integration.token_read' });
      }
      const current = await lifecycle.usable(loaded, actorOf(request));
      return { success: true as const, provider: loaded.provider.id, token: tokenBody(current) };
    },
  );

  app.get(
    '/v1/integrations/:provider/status',
    {
      config: { auth: 'authenticated' },
      schema: {
        summary: 'The integration status (validated live when the last check is older than OAUTH_STATUS_MAX_AGE)',
        tags: ['integrations'],
        params: ProviderParams,
        response: { 200: Type.Object({ success: Type.Literal(true), status: StatusSchema }) },
      },
    },
    async (request) => {
      const { principal, provider } = memberCall(request);
      const row = await findIntegrationByProvider(services.db, principal.organizationId, provider);
      const configured = row ? services.providers.get(row.provider) : undefined;
      if (!row || !configured) throw new AppError('INTEGRATION_NOT_FOUND');
      const age = Date.now() - (row.lastValidatedAt?.getTime() ?? 0);
      // Secrets are read and the provider asked only when the last validation is too old.
      if (row.status !== 'invalid' && age > services.config.oauth.statusMaxAge * 1000) {
        const current = await liveCheck(services, await lifecycle.load(principal.organizationId, provider), actorOf(request));
        return { success: true as const, status: statusObject(current.row, current.provider.displayName) };
      }
      return { success: true as const, status: statusObject(row, configured.displayName) };
    },
  );

  app.post(
    '/v1/integrations/:provider/refresh',
    {
      config: { auth: 'authenticated', noStore: true },
      schema: {
        summary: 'Refresh the token now (one provider call however many ask at once)',
        tags: ['integrations'],
        params: ProviderParams,
        response: {
          200: Type.Object({
            success: Type.Literal(true),
            message: Type.String(),
            token: Type.Optional({ ...TokenSchema, description: 'Absent for cookie sessions: a browser never receives raw tokens' }),
          }),
        },
      },
    },
    async (request) => {
      const { principal, provider } = memberCall(request);
      requireRole(principal, principal.organizationId, 'admin');
      const current = await lifecycle.load(principal.organizationId, provider);
      const refreshed = await lifecycle.refresh(current, actorOf(request));
      const message = `${refreshed.provider.displayName} token refreshed`;
      // Raw tokens go to header credentials only, never while impersonating.
      if (principal.viaCookie || principal.impersonatorId) return { success: true as const, message };
      return { success: true as const, message, token: tokenBody(refreshed) };
    },
  );

  app.delete(
    '/v1/integrations/:id',
    {
      config: { auth: 'authenticated' },
      schema: {
        summary: 'Delete an integration: its secrets and entity; the grant is then revoked at the provider',
        tags: ['integrations'],
        params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
        response: { 200: Type.Object({ success: Type.Literal(true), message: Type.String() }) },
      },
    },
    async (request) => {
      const { id } = request.params as { id: string };
      const deleted = await deleteIntegrationWithEvents(services, request, id);
      return { success: true as const, message: `${deleted.displayName} integration deleted` };
    },
  );
}

/**
 * Deletes an integration of the caller's organization (owner/admin or API token) in the
 * request's transaction: secrets and entity, an audit row, `integration.deleted`; after
 * the commit, the grant is revoked at the provider (best effort, logged).
 */
export async function deleteIntegrationWithEvents(services: Services, request: FastifyRequest, id: string): Promise<{ displayName: string }> {
  const principal = request.ctx.principal;
  if (!principal) throw new AppError('UNAUTHENTICATED');
  requireRole(principal, principal.organizationId, 'admin');
  if (!ULID.test(id)) throw new AppError('INTEGRATION_NOT_FOUND');
  const tx = await request.ctx.tx();
  const row = await findIntegrationById(tx, principal.organizationId, id);
  if (!row) throw new AppError('INTEGRATION_NOT_FOUND');
  const secrets = await readSecrets(tx, services.config.keyring, { organizationId: principal.organizationId, integrationId: id, provider: row.provider });
  await deleteIntegration(tx, principal.organizationId, id);
  await recordAudit(tx, actorOf(request), { organizationId: principal.organizationId, action: 'integration.deleted', targetType: 'integration', targetId: id, detail: { provider: row.provider } });
  await services.outbox.emit(tx, (fn) => request.ctx.afterCommit(fn), {
    organizationId: principal.organizationId,
    type: 'integration.deleted',
    data: { integration: { id, provider: row.provider, name: row.name } },
  });
  const provider = services.providers.get(row.provider);
  const accessToken = secrets.access_token;
  if (provider && accessToken) {
    request.ctx.afterCommit(async () => {
      try {
        await provider.definition.revoke(provider.context, { accessToken, ...(secrets.refresh_token ? { refreshToken: secrets.refresh_token } : {}) });
        services.logger.info({ integrationId: id, provider: row.provider }, 'grant revoked at the provider');
      } catch (error) {
        services.logger.warn({ integrationId: id, provider: row.provider, kind: (error as { kind?: string }).kind }, 'could not revoke the grant at the provider');
      }
    });
  }
  return { displayName: provider?.displayName ?? row.provider };
}

/** The list view of an integration. */
export function integrationView(row: IntegrationSummary) {
  return {
    id: row.id,
    name: row.name,
    kind: row.provider,
    description: row.description,
    provider: row.provider,
    status: effectiveStatus(row),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** A live check for the status route: refresh when expired or expiring and refreshable, else validate. */
async function liveCheck(services: Services, current: Current, actor: AuditActor): Promise<Current> {
  try {
    const expiresAt = current.row.tokenExpiresAt?.getTime();
    if (expiresAt !== undefined && expiresAt - Date.now() < 5 * 60 * 1000 && current.secrets.refresh_token) {
      return await services.lifecycle.refresh(current, actor);
    }
    return (await services.lifecycle.validate(current, actor)).current;
  } catch (error) {
    // The status route reports; it does not fail because the provider did.
    if (error instanceof AppError && error.status !== 500) return services.lifecycle.reload(current.row.organizationId, current.row.id);
    throw error;
  }
}

/** Deletes the secrets and the entity (in the caller's transaction). */
export async function deleteIntegration(tx: Db, organizationId: string, id: string): Promise<void> {
  await tx.delete(integrationSecrets).where(and(eq(integrationSecrets.organizationId, organizationId), eq(integrationSecrets.integrationId, id)));
  await tx.delete(integrations).where(and(eq(integrations.organizationId, organizationId), eq(integrations.id, id)));
}
