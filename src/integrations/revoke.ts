import type { Services } from '../services.ts';
import type { ConfiguredProvider } from './providers/registry.ts';
import type { SecretValues } from './secrets.ts';

/** A grant to revoke: the integration it belonged to, its provider and metadata, and its tokens as read before they were dropped. */
export interface DroppedGrant {
  integrationId: string;
  provider: ConfiguredProvider;
  metadata: Record<string, unknown>;
  secrets: SecretValues;
}

/**
 * Revokes a grant at its provider once the transaction that dropped it has committed — the
 * call the delete makes (delete.ts): best effort, logged without the token. A provider without
 * a revoke endpoint, or a grant without an access token, is asked nothing.
 */
export function revokeAfterCommit(services: Services, afterCommit: (fn: () => unknown) => void, grant: DroppedGrant, why: string): void {
  const { provider, secrets } = grant;
  const revoke = provider.definition.revoke;
  const accessToken = secrets.access_token;
  if (!revoke || !accessToken) return;
  const fields = { integrationId: grant.integrationId, provider: provider.id, why };
  afterCommit(async () => {
    try {
      await revoke(provider.contextFor(grant.metadata), { accessToken, ...(secrets.refresh_token ? { refreshToken: secrets.refresh_token } : {}) });
      services.logger.info(fields, 'grant revoked at the provider');
    } catch (error) {
      services.logger.warn({ ...fields, kind: (error as { kind?: string }).kind }, 'could not revoke the grant at the provider');
    }
  });
}
