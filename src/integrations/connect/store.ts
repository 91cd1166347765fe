import { recordAudit } from '../../audit/audit.ts';
import type { EndUser } from '../../db/schema.ts';
import type { UnitOfWork } from '../../ground/work.ts';
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

/** What a finished exchange (or a verification of entered credentials) brings: the organization, the provider, its tokens, the account they act as, and the metadata found. */
export interface Connection {
  organizationId: string;
  provider: ConfiguredProvider;
  /** The token set; null when requests carry the entered credentials themselves (api_key, basic). */
  tokens: TokenSet | null;
  /** The credentials a person entered (docs/contract.md §5c), stored encrypted as one secret. */
  credentials?: Record<string, string>;
  account: ProviderAccount;
  metadata: Metadata;
  /** The connect session it came through (its end user, and the credential that minted it). */
  session?: ConnectSessionRow;
  /** Without a session: the end user it is for (`?endUser=`, docs/contract.md §5d); absent for the organization's own. */
  endUser?: EndUser | null;
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
  const endUser = session ? (session.endUser ?? null) : (connection.endUser ?? null);
  const now = Date.now();
  const tokenExpiresAt = tokens ? accessTokenExpiry(tokens, now) : null;
  const scopes = tokens?.scopes ?? [];
  // Entered credentials are no app's: such a grant keeps the provider's id (docs/contract.md §5e).
  const appId = provider.app?.id ?? provider.id;
  const { before, after } = await upsertConnectedIntegration(work.db, {
    organizationId,
    provider: provider.id,
    appId,
    endUser,
    name: `${provider.displayName} Integration (${account.username})`,
    description: `${provider.traits.label} integration with ${provider.id} for ${account.username}`,
    scopes,
    providerAccountId: account.id,
    providerWorkspaceId: account.workspaceId ?? null,
    tokenExpiresAt,
    refreshTokenExpiresAt: tokens ? refreshTokenExpiry(tokens, now) : null,
    // A minted mode renews without the person, as a refresh token does.
    hasRefreshToken: tokens?.refreshToken !== undefined || provider.traits.renews === 'mint',
    nextValidationAt: new Date(now + services.config.oauth.validationInterval * 1000),
    metadata: connection.metadata,
    connectedVia: connection.session ? { sessionId: connection.session.id, endUser: connection.session.endUser ?? null } : null,
  });
  const ref = { organizationId, integrationId: after.id, provider: provider.id };
  const accountChanged = before !== null && before.providerAccountId !== account.id;
  // Another app's grant is replaced as another account's is (docs/contract.md §5e).
  const appChanged = before !== null && before.appId !== appId;
  // The replaced grant's tokens, read before they are replaced: it is revoked, with its own app, once this commits.
  const previous = accountChanged || appChanged ? await readSecrets(work.db, services.config.keyring, ref) : null;
  await replaceSecrets(work.db, services.config.keyring, ref, {
    access_token: tokens?.accessToken,
    refresh_token: tokens?.refreshToken,
    expires_at: tokenExpiresAt?.toISOString(),
    provider_user_id: account.id,
    provider_username: account.username,
    provider_email: account.email,
    credentials: connection.credentials ? JSON.stringify(connection.credentials) : undefined,
  });
  const previousAccount = before && previous ? { id: before.providerAccountId, username: previous.provider_username ?? before.providerAccountId } : null;
  await recordAudit(work.db, work.actor, {
    organizationId,
    action: before ? 'integration.reconnected' : 'integration.connected',
    targetType: 'integration',
    targetId: after.id,
    detail: {
      provider: provider.id,
      scopes,
      accountChanged,
      ...(previousAccount && accountChanged ? { previousAccountId: previousAccount.id, previousAccount } : {}),
      app: appId,
      ...(appChanged ? { appChanged, previousApp: before.appId } : {}),
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
      ...(previousAccount && accountChanged ? { previousAccount } : {}),
      app: { id: appId },
      appChanged,
      ...(appChanged ? { previousApp: { id: before.appId } } : {}),
      ...(session ? { sessionId: session.id } : {}),
    },
  });
  // Never the grant just stored: a provider may hand the same token out again.
  if (before && previous && previous.access_token !== tokens?.accessToken) {
    await services.revocations.queue(
      work,
      grantsToRevoke([{ organizationId, integrationId: after.id, provider: provider.id, appId: before.appId, metadata: before.metadata, secrets: previous }], accountChanged ? 'account.replaced' : 'app.replaced'),
    );
  }
  // Once committed: a connect that rolled back never happened. Ids only (decision 147).
  work.afterCommit(() =>
    services.logger.info({ provider: provider.id, integrationId: after.id, organizationId, reconnected: before !== null, ...(session ? { sessionId: session.id } : {}) }, 'integration connected'),
  );
  return { integration: { id: after.id, name: after.name, provider: provider.id }, displayName: provider.displayName };
}
