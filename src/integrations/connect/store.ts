import { type AuditActor, recordAudit } from '../../audit/audit.ts';
import type { Db } from '../../db/client.ts';
import type { Services } from '../../services.ts';
import { upsertConnectedIntegration } from '../integrations.ts';
import type { ConfiguredProvider } from '../providers/registry.ts';
import type { Metadata, ProviderAccount, TokenSet } from '../providers/types.ts';
import { replaceSecrets } from '../secrets.ts';
import type { ConnectSessionRow } from '../sessions/sessions.ts';
import { accessTokenExpiry, refreshTokenExpiry } from '../token-endpoint.ts';

export interface ConnectedResult {
  integration: { id: string; name: string; provider: string };
  displayName: string;
}

/** What a finished exchange brings: the organization, the provider, its tokens, the account they act as, and the metadata found. */
export interface Connection {
  organizationId: string;
  provider: ConfiguredProvider;
  tokens: TokenSet;
  account: ProviderAccount;
  metadata: Metadata;
  /** The connect session it came through (its end user, and the credential that minted it). */
  session?: ConnectSessionRow;
}

/**
 * Stores a new connection in the request's transaction: the organization's one integration
 * for the provider (created, or reset to `connected` keeping its id), its secrets replaced,
 * an audit row noting a change of provider account, and `integration.connected`.
 */
export async function storeConnection(
  services: Services,
  work: { tx: Db; afterCommit(fn: () => unknown): void; actor: AuditActor },
  connection: Connection,
): Promise<ConnectedResult> {
  const { organizationId, provider, tokens, account, session } = connection;
  const now = Date.now();
  const tokenExpiresAt = accessTokenExpiry(tokens, now);
  const { before, after } = await upsertConnectedIntegration(work.tx, {
    organizationId,
    provider: provider.id,
    name: `${provider.displayName} Integration (${account.username})`,
    description: `OAuth integration with ${provider.id} for ${account.username}`,
    scopes: tokens.scopes,
    providerAccountId: account.id,
    tokenExpiresAt,
    refreshTokenExpiresAt: refreshTokenExpiry(tokens, now),
    hasRefreshToken: tokens.refreshToken !== undefined,
    nextValidationAt: new Date(now + services.config.oauth.validationInterval * 1000),
    metadata: connection.metadata,
    connectedVia: connection.session ? { sessionId: connection.session.id, endUser: connection.session.endUser ?? null } : null,
  });
  await replaceSecrets(work.tx, services.config.keyring, { organizationId, integrationId: after.id, provider: provider.id }, {
    access_token: tokens.accessToken,
    refresh_token: tokens.refreshToken,
    expires_at: tokenExpiresAt?.toISOString(),
    provider_user_id: account.id,
    provider_username: account.username,
    provider_email: account.email,
  });
  const accountChanged = before !== null && before.providerAccountId !== account.id;
  await recordAudit(work.tx, work.actor, {
    organizationId,
    action: before ? 'integration.reconnected' : 'integration.connected',
    targetType: 'integration',
    targetId: after.id,
    detail: {
      provider: provider.id,
      scopes: tokens.scopes,
      accountChanged,
      ...(accountChanged ? { previousAccountId: before?.providerAccountId } : {}),
      ...(session ? { connectSession: session.id, sessionCreatedBy: { credentialKind: session.createdByKind, credentialId: session.createdById, userId: session.createdByUserId } } : {}),
    },
  });
  await services.outbox.emit(work.tx, work.afterCommit, {
    organizationId,
    type: 'integration.connected',
    data: {
      integration: { id: after.id, provider: provider.id, name: after.name },
      reconnected: before !== null,
      accountChanged,
      ...(session ? { sessionId: session.id, endUser: session.endUser ?? null } : {}),
    },
  });
  // Once committed: a connect that rolled back never happened. Ids only (decision 147).
  work.afterCommit(() =>
    services.logger.info({ provider: provider.id, integrationId: after.id, organizationId, reconnected: before !== null, ...(session ? { sessionId: session.id } : {}) }, 'integration connected'),
  );
  return { integration: { id: after.id, name: after.name, provider: provider.id }, displayName: provider.displayName };
}
