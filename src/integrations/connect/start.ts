import { newSecret, SECRET } from '../../lib/ids.ts';
import { calculatePKCECodeChallenge, generateRandomCodeVerifier } from 'oauth4webapi';
import { allowedScheme } from '../../config/checks.ts';
import { type Db, sql } from '../../db/client.ts';
import type { Principal } from '../../ground/principal.ts';
import { AppError } from '../../ground/errors.ts';
import { requireRole, requireUser } from '../../identity/authorize.ts';
import { seal } from '../../secrets/crypto.ts';
import type { Services } from '../../services.ts';
import type { ConfiguredProvider } from '../providers/registry.ts';
import { sha256 } from '../state.ts';

export const OAUTH_TX_COOKIE = 'oauth_tx';
/** The `oauth_tx` cookie's path (docs/contract.md §5): every route that starts a flow or ends one is under it, so each sees the cookie. */
export const OAUTH_COOKIE_PATH = '/v1/integrations/oauth';

/** The attributes of the cookie binding a flow to this browser (docs/contract.md §5: HttpOnly, SameSite=Lax, Secure in production, max-age = state expiry). */
export function txCookieOptions(services: Pick<Services, 'config'>) {
  return { path: OAUTH_COOKIE_PATH, httpOnly: true, sameSite: 'lax', secure: services.config.isProduction, maxAge: services.config.oauth.stateExpiry } as const;
}

/** The configured provider, or 400 PROVIDER_NOT_CONFIGURED (unknown id, or no client id/secret). */
export function configuredProvider(services: Services, id: string): ConfiguredProvider {
  const provider = services.providers.get(id);
  if (!provider) throw new AppError('PROVIDER_NOT_CONFIGURED');
  return provider;
}

/**
 * A redirect URI the flow may send the browser back to: HTTPS (loopback http in
 * development), an allowed origin, no userinfo, no fragment; parsed by the WHATWG parser.
 */
export function checkRedirectUri(services: Pick<Services, 'config'>, value: string): string {
  const refuse = (message: string) => new AppError('INVALID_REDIRECT_URI', { message, details: [{ path: 'body.redirectUri', message }] });
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw refuse('redirectUri must be an absolute URL');
  }
  if (!allowedScheme(url, services.config.isProduction)) throw refuse('redirectUri must use https');
  if (url.username || url.password) throw refuse('redirectUri must not carry userinfo');
  if (url.hash || value.includes('#')) throw refuse('redirectUri must not carry a fragment');
  if (!services.config.oauth.redirectOrigins.includes(url.origin)) throw refuse('redirectUri origin is not allowed');
  return url.href;
}

export interface StartInput {
  provider: string;
  /** The app to connect through (docs/contract.md §5e); absent: the organization's default, else the provider's deployment app. */
  app?: string;
  scopes?: string[];
  redirectUri: string;
}

export interface StartResult {
  authUrl: string;
  state: string;
  /** The `oauth_tx` value to set as a cookie (reused when the browser already has one). */
  txValue: string;
}

/** Starts a connect flow: owner/admin users only; the state is stored server-side with `db`. */
export async function startConnect(services: Services, db: Db, principal: Principal | null, input: StartInput, existingTx?: string): Promise<StartResult> {
  const user = requireUser(principal);
  requireRole(user, user.organizationId, 'admin');
  const provider = configuredProvider(services, input.provider);
  if (provider.traits.connects === 'entered') {
    // Entered credentials have no sign-in page to send a browser to (docs/contract.md §5c).
    throw new AppError('INVALID_INPUT', { details: [{ path: 'body.provider', message: `${provider.displayName} connects with entered credentials: POST /v1/integrations/${provider.id}/credentials` }] });
  }
  const redirectUri = checkRedirectUri(services, input.redirectUri);
  const app = await services.apps.choose(db, user.organizationId, provider.id, input.app);
  return beginFlow(services, db, { organizationId: user.organizationId, userId: user.userId, provider: app, scopes: requestedScopes(app, input.scopes), redirectUri }, existingTx);
}

/** The scopes a flow asks for: the app's (its own, else the provider's configured set) unless the request names some, which must lie within them. */
export function requestedScopes(app: ConfiguredProvider, requested: readonly string[] | undefined, path = 'body.scopes'): string[] {
  const scopes = requested ? [...new Set(requested)] : app.scopes;
  const outside = scopes.filter((scope) => !app.scopes.includes(scope));
  if (outside.length > 0) {
    const whose = app.app?.owner === 'organization' ? "the app's scopes" : "the provider's configured scopes";
    throw new AppError('INVALID_INPUT', { details: [{ path, message: `not among ${whose}: ${outside.join(', ')}` }] });
  }
  return scopes;
}

/** Who and what a flow is for: a user of the organization, or an end user through a connect session. */
export interface FlowInput {
  organizationId: string;
  userId: string | null;
  connectSessionId?: string;
  /** Started in a popup by connect.js: the callback then answers with a page that tells the opener. */
  popup?: boolean;
  /** The provider bound to the app the flow goes through: the state binds it, the callback exchanges with its secret. */
  provider: ConfiguredProvider;
  scopes: string[];
  redirectUri: string;
}

/**
 * Stores a flow's state (with its PKCE verifier, sealed, and the hash of the `oauth_tx`
 * value that binds it to the browser) and builds the provider's authorize URL. One
 * statement, no transaction: the organization's expired states are purged with it.
 */
export async function beginFlow(services: Services, db: Db, flow: FlowInput, existingTx?: string): Promise<StartResult> {
  const { organizationId, provider, scopes } = flow;
  const { state, payload } = services.stateCodec.create(organizationId, provider.id);
  const nonceHash = sha256(payload.nonce);
  const verifier = provider.definition.pkce ? generateRandomCodeVerifier() : null;
  const sealedVerifier = verifier ? seal(services.config.keyring, { organizationId, recordId: nonceHash, name: 'code_verifier' }, verifier) : null;
  // Parallel flows in one browser share the cookie, so starting a second does not break the first.
  const txValue = existingTx && SECRET.test(existingTx) ? existingTx : newSecret();

  await db.execute(sql`
    WITH purge AS (DELETE FROM oauth_states WHERE organization_id = ${organizationId} AND expires_at < now())
    INSERT INTO oauth_states (organization_id, nonce_hash, user_id, connect_session_id, popup, provider, app_id, redirect_uri, scopes, code_verifier, code_verifier_key_id, tx_hash, expires_at)
    VALUES (${organizationId}, ${nonceHash}, ${flow.userId}, ${flow.connectSessionId ?? null}, ${flow.popup === true}, ${provider.id}, ${provider.app?.id ?? provider.id}, ${flow.redirectUri}, ${sql.param(scopes)}::text[],
            ${sealedVerifier?.envelope ?? null}, ${sealedVerifier?.keyId ?? null}, ${sha256(txValue)},
            now() + ${`${services.config.oauth.stateExpiry} seconds`}::interval)`);

  const url = new URL(provider.context.endpoints.authUrl);
  // An app's install page takes only the state: it returns it with the installation (docs/contract.md §5c).
  if (provider.traits.connects === 'installation') {
    url.searchParams.set('state', state);
    return { authUrl: url.href, state, txValue };
  }
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', provider.clientId);
  url.searchParams.set('redirect_uri', provider.redirectUri);
  // Providers whose scopes are set on the app (Bitbucket, Notion, Zoom) get no scope parameter when none are configured.
  if (scopes.length > 0) url.searchParams.set(provider.definition.scopeParam, scopes.join(provider.definition.scopeSeparator));
  for (const [name, value] of Object.entries(provider.definition.authorizeParams)) url.searchParams.set(name, value);
  url.searchParams.set('state', state);
  if (verifier) {
    url.searchParams.set('code_challenge', await calculatePKCECodeChallenge(verifier));
    url.searchParams.set('code_challenge_method', 'S256');
  }
  return { authUrl: url.href, state, txValue };
}
