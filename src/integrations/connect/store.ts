import { recordAudit } from '../../audit/audit.ts';
import type { UnitOfWork } from '../../http/unit-of-work.ts';
import type { Services } from '../../services.ts';
import { upsertConnectedIntegration } from '../integrations.ts';
import type { ConfiguredProvider } from '../providers/registry.ts';
import type { Metadata, ProviderAccount, TokenSet } from '../providers/types.ts';
import { grantsToRevoke } from '../delete.ts';
import { readSecrets, replaceSecrets } from '../secrets.ts';
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
 * Stores a new connection in `work`'s transaction: the one integration for
 * (organization, provider, end user) — the session's end user, none without one — created,
 * or reset to `connected` keeping its id; its secrets replaced; an audit row; and
 * `integration.connected`. Another provider account replacing the one connected (docs/contract.md
 * §5d) is named in both, and the replaced grant is revoked at the provider after the commit.
 */
export async function storeConnection(services: Pick<Services, 'config' | 'revocations' | 'logger'>, work: UnitOfWork, connection: Connection): Promise<ConnectedResult> {
  const { organizationId, provider, tokens, account, session } = connection;
  const endUser = session?.endUser ?? null;
  const now = Date.now();
  const tokenExpiresAt = accessTokenExpiry(tokens, now);
  const { before, after } = await upsertConnectedIntegration(work.db, {
    organizationId,
    provider: provider.id,
    endUser,
    name: `${provider.displayName} Integration (${account.username})`,
    description: `OAuth integration with ${provider.id} for ${account.username}`,
    scopes: tokens.scopes,
    providerAccountId: account.id,
    providerWorkspaceId: account.workspaceId ?? null,
    tokenExpiresAt,
    refreshTokenExpiresAt: refreshTokenExpiry(tokens, now),
    hasRefreshToken: tokens.refreshToken !== undefined,
    nextValidationAt: new Date(now + services.config.oauth.validationInterval * 1000),
    metadata: connection.metadata,
    connectedVia: connection.session ? { sessionId: connection.session.id, endUser: connection.session.endUser ?? null } : null,
  });
  const ref = { organizationId, integrationId: after.id, provider: provider.id };
  const accountChanged = before !== null && before.providerAccountId !== account.id;
  // The replaced account's tokens, read before they are replaced: its grant is revoked once this commits.
  const previous = accountChanged ? await readSecrets(work.db, services.config.keyring, ref) : null;
  await replaceSecrets(work.db, services.config.keyring, ref, {
    access_token: tokens.accessToken,
    refresh_token: tokens.refreshToken,
    expires_at: tokenExpiresAt?.toISOString(),
    provider_user_id: account.id,
    provider_username: account.username,
    provider_email: account.email,
  });
  const previousAccount = before && previous ? { id: before.providerAccountId, username: previous.provider_username ?? before.providerAccountId } : null;
  await recordAudit(work.db, work.actor, {
    organizationId,
    action: before ? 'integration.reconnected' : 'integration.connected',
    targetType: 'integration',
    targetId: after.id,
    detail: {
      provider: provider.id,
      scopes: tokens.scopes,
      accountChanged,
      ...(previousAccount ? { previousAccountId: previousAccount.id, previousAccount } : {}),
      ...(endUser ? { endUser: endUser.id } : {}),
      ...(session ? { connectSession: session.id, sessionCreatedBy: { credentialKind: session.createdByKind, credentialId: session.createdById, userId: session.createdByUserId } } : {}),
    },
  });
  await work.outbox.emit(work.db, work.afterCommit, {
    organizationId,
    type: 'integration.connected',
    data: {
      integration: { id: after.id, provider: provider.id, name: after.name },
      provider: provider.id,
      endUser,
      reconnected: before !== null,
      accountChanged,
      ...(previousAccount ? { previousAccount } : {}),
      ...(session ? { sessionId: session.id } : {}),
    },
  });
  // Never the grant just stored: a provider may hand the same token out again.
  if (before && previous && previous.access_token !== tokens.accessToken) {
    await services.revocations.queue(
      work,
      grantsToRevoke([{ organizationId, integrationId: after.id, provider: provider.id, metadata: before.metadata, secrets: previous }], 'account.replaced'),
    );
  }
  // Once committed: a connect that rolled back never happened. Ids only (decision 147).
  work.afterCommit(() =>
    services.logger.info({ provider: provider.id, integrationId: after.id, organizationId, reconnected: before !== null, ...(session ? { sessionId: session.id } : {}) }, 'integration connected'),
  );
  return { integration: { id: after.id, name: after.name, provider: provider.id }, displayName: provider.displayName };
}
