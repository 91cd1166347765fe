import { clientRequest } from './providers/engine.ts';
import type { ConfiguredProvider } from './providers/registry.ts';
import type { TokenSet } from './providers/types.ts';

/**
 * One token-endpoint request (code exchange or refresh), authenticated as the
 * definition says. Never retried: codes are single-use and refresh tokens rotate.
 * The client secret travels only here, server to server. The claims the definition declares on
 * every token request (Microsoft's `cp1` capability) go as `claims`, merged with `challenge` —
 * the claims a provider's claims challenge asked for (docs/contract.md §5b).
 */
export async function tokenRequest(provider: ConfiguredProvider, params: Record<string, string>, challenge?: Record<string, unknown>): Promise<TokenSet> {
  const { definition } = provider;
  const claims = mergeClaims(definition.tokenClaims, challenge);
  const request = clientRequest(provider, claims ? { ...params, claims: JSON.stringify(claims) } : params, {
    auth: definition.clientAuth === 'client_secret_basic' ? 'basic' : 'body',
    format: definition.tokenFormat,
    headers: definition.tokenHeaders,
  });
  const response = await provider.context.request(provider.context.endpoints.tokenUrl, { method: 'POST', ...request });
  return definition.parseTokenResponse(response);
}

/** Two claims requests (OpenID Connect Core §5.5) as one: objects merged member by member, `extra` winning elsewhere; undefined when neither is given. */
export function mergeClaims(base: Record<string, unknown> | undefined, extra: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!base || !extra) return base ?? extra;
  const merged: Record<string, unknown> = { ...base };
  const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);
  for (const [key, value] of Object.entries(extra)) {
    const mine = merged[key];
    merged[key] = isObject(mine) && isObject(value) ? mergeClaims(mine, value) : value;
  }
  return merged;
}

/** When a token set's access token expires: `expires_in`, else a JWT's `exp`, else unknown (null). */
export function accessTokenExpiry(tokens: TokenSet, now = Date.now()): Date | null {
  if (tokens.expiresIn !== undefined && tokens.expiresIn > 0) return new Date(now + tokens.expiresIn * 1000);
  return jwtExpiry(tokens.accessToken);
}

export function refreshTokenExpiry(tokens: TokenSet, now = Date.now()): Date | null {
  return tokens.refreshTokenExpiresIn !== undefined && tokens.refreshTokenExpiresIn > 0 ? new Date(now + tokens.refreshTokenExpiresIn * 1000) : null;
}

function jwtExpiry(token: string): Date | null {
  const parts = token.split('.');
  if (parts.length !== 3) return null;
  try {
    const payload = JSON.parse(Buffer.from(parts[1] as string, 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof payload.exp === 'number' ? new Date(payload.exp * 1000) : null;
  } catch {
    return null;
  }
}
