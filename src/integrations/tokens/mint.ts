/**
 * Minting (docs/contract.md §5c): a minted mode's renewal — client credentials, an app
 * installation's token — called by TokenLifecycle under the refresh single-flight (one mint
 * per integration across processes, refresh.ts) and stored before it is served, exactly as a
 * refreshed token is (store-rotated.ts). The definition's `mint` hook says how; this file only
 * gathers what it starts from and stores what it returns.
 */
import type { AuditActor } from '../../ground/work.ts';
import { parseCredentials } from '../providers/auth-modes.ts';
import type { MintedToken, TokenSet } from '../providers/types.ts';
import type { LoadDeps, LoadedIntegration } from './loaded.ts';
import { storeRotated } from './store-rotated.ts';

/** Whether the integration renews without the person: a refresh token, or a mode that mints. */
export function renewable(loaded: LoadedIntegration): boolean {
  return loaded.secrets.refresh_token !== undefined || loaded.provider.traits.renews === 'mint';
}

/** The stored secret requests carry: the access token, or the entered credentials (api_key, basic). */
export function presented(loaded: LoadedIntegration): string | undefined {
  return loaded.secrets[loaded.provider.traits.presents];
}

/**
 * Mints a token with the definition's hook from the stored credentials and metadata (read
 * under the lease), and stores it at once with the compare-and-set of a refresh. Returns the
 * stored integration, or null when the compare-and-set lost. A provider failure is thrown as
 * it came (the lifecycle judges it).
 */
export async function mintAndStore(deps: Pick<LoadDeps, 'db' | 'config'>, loaded: LoadedIntegration, actor: AuditActor): Promise<LoadedIntegration | null> {
  return storeRotated(deps, loaded, tokenSetOf(await mintOnly(loaded)), actor);
}

/** Mints with the definition's hook and keeps nothing: a live check that must change nothing (docs/contract.md §5b). */
export async function mintOnly(loaded: LoadedIntegration): Promise<MintedToken> {
  const { provider, row } = loaded;
  const mint = provider.definition.mint;
  if (!mint) throw new Error(`provider ${provider.id} does not mint tokens`);
  return mint(provider.contextFor(row.metadata), { credentials: parseCredentials(loaded.secrets.credentials), metadata: row.metadata });
}

/** A minted token as the store takes a token endpoint's answer: its expiry in seconds from now. */
export function tokenSetOf(minted: MintedToken, now = Date.now()): TokenSet {
  const expiresIn = minted.expiresAt ? Math.max(1, Math.floor((minted.expiresAt.getTime() - now) / 1000)) : undefined;
  return {
    accessToken: minted.accessToken,
    scopes: minted.scopes,
    tokenType: minted.tokenType,
    ...(expiresIn !== undefined ? { expiresIn } : {}),
    ...(minted.metadata ? { metadata: minted.metadata } : {}),
  };
}
