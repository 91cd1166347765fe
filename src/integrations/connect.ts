import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { calculatePKCECodeChallenge, generateRandomCodeVerifier } from 'oauth4webapi';
import { recordAudit } from '../audit/audit.ts';
import { isLoopbackHost } from '../config/load.ts';
import { type Db, sql } from '../db/client.ts';
import type { Principal } from '../http/context.ts';
import { AppError, type ErrorCode } from '../http/errors.ts';
import { authenticateOptional } from '../identity/authenticate.ts';
import { requireRole, requireUser } from '../identity/authorize.ts';
import { membershipOf } from '../organizations/organizations.ts';
import { open, seal } from '../secrets/crypto.ts';
import type { Services } from '../services.ts';
import { upsertConnectedIntegration } from './integrations.ts';
import { failureAnswer } from './tokens/policy.ts';
import type { ConfiguredProvider } from './providers/registry.ts';
import { replaceSecrets } from './secrets.ts';
import { consumeState, findState, type StateRow, sha256 } from './state.ts';
import { accessTokenExpiry, refreshTokenExpiry, tokenRequest } from './token-endpoint.ts';

export const OAUTH_TX_COOKIE = 'oauth_tx';
export const OAUTH_COOKIE_PATH = '/v1/integrations/oauth';

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
export function checkRedirectUri(services: Services, value: string): string {
  const refuse = (message: string) => new AppError('INVALID_REDIRECT_URI', { message, details: [{ path: 'body.redirectUri', message }] });
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw refuse('redirectUri must be an absolute URL');
  }
  const loopbackHttp = url.protocol === 'http:' && isLoopbackHost(url.hostname) && !services.config.isProduction;
  if (url.protocol !== 'https:' && !loopbackHttp) throw refuse('redirectUri must use https');
  if (url.username || url.password) throw refuse('redirectUri must not carry userinfo');
  if (url.hash || value.includes('#')) throw refuse('redirectUri must not carry a fragment');
  if (!services.config.oauth.redirectOrigins.includes(url.origin)) throw refuse('redirectUri origin is not allowed');
  return url.href;
}

export interface StartInput {
  provider: string;
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
  const redirectUri = checkRedirectUri(services, input.redirectUri);
  const scopes = input.scopes ? [...new Set(input.scopes)] : provider.scopes;
  const outside = scopes.filter((scope) => !provider.scopes.includes(scope));
  if (outside.length > 0) {
    throw new AppError('INVALID_INPUT', { details: [{ path: 'body.scopes', message: `not among the provider's configured scopes: ${outside.join(', ')}` }] });
  }

  const { state, payload } = services.stateCodec.create(user.organizationId, provider.id);
  const nonceHash = sha256(payload.nonce);
  const verifier = provider.definition.pkce ? generateRandomCodeVerifier() : null;
  const sealedVerifier = verifier ? seal(services.config.keyring, { organizationId: user.organizationId, recordId: nonceHash, name: 'code_verifier' }, verifier) : null;
  // Parallel flows in one browser share the cookie, so starting a second does not break the first.
  const txValue = existingTx && /^[A-Za-z0-9_-]{43}$/.test(existingTx) ? existingTx : randomBytes(32).toString('base64url');

  // One statement, no transaction: purge the organization's expired states and store this one.
  await db.execute(sql`
    WITH purge AS (DELETE FROM oauth_states WHERE organization_id = ${user.organizationId} AND expires_at < now())
    INSERT INTO oauth_states (organization_id, nonce_hash, user_id, provider, redirect_uri, scopes, code_verifier, code_verifier_key_id, tx_hash, expires_at)
    VALUES (${user.organizationId}, ${nonceHash}, ${user.userId}, ${provider.id}, ${redirectUri}, ${sql.param(scopes)}::text[],
            ${sealedVerifier?.envelope ?? null}, ${sealedVerifier?.keyId ?? null}, ${sha256(txValue)},
            now() + ${`${services.config.oauth.stateExpiry} seconds`}::interval)`);

  const url = new URL(provider.context.endpoints.authUrl);
  url.searchParams.set('client_id', provider.clientId);
  url.searchParams.set('redirect_uri', provider.redirectUri);
  url.searchParams.set(provider.definition.scopeParam, scopes.join(provider.definition.scopeSeparator));
  url.searchParams.set('state', state);
  if (verifier) {
    url.searchParams.set('code_challenge', await calculatePKCECodeChallenge(verifier));
    url.searchParams.set('code_challenge_method', 'S256');
  }
  return { authUrl: url.href, state, txValue };
}

export interface CallbackInput {
  state: string;
  code?: string;
  /** The provider's `error` (GET callback), e.g. `access_denied`. */
  error?: string;
  /** POST callback: the provider the client says it is completing. */
  provider?: string;
}

export interface ConnectedResult {
  integration: { id: string; name: string; provider: string };
  displayName: string;
}

/**
 * A state that passed its checks and was consumed: from here on, failures can be
 * reported to its redirect URI.
 */
export class CallbackFailure extends Error {
  readonly appError: AppError;
  readonly redirectUri: string;
  readonly provider: string;
  constructor(appError: AppError, state: StateRow) {
    super(appError.message, { cause: appError });
    this.appError = appError;
    this.redirectUri = state.redirectUri;
    this.provider = state.provider;
  }
}

const invalidState = (reason: string) => new AppError('INVALID_OAUTH_STATE', { cause: new Error(reason) });

/**
 * Completes a connect flow: verify the state, check the browser binding, consume the state
 * (committed before the exchange, so a failed exchange still burns it), exchange
 * the code, validate the token, then store everything in the request's transaction.
 * Unusable states throw AppError; later failures throw CallbackFailure.
 */
export async function completeConnect(services: Services, request: FastifyRequest, input: CallbackInput): Promise<ConnectedResult & { state: StateRow }> {
  const payload = services.stateCodec.verify(input.state);
  if (!payload) throw invalidState('malformed or forged');
  if (input.provider !== undefined && input.provider !== payload.provider) throw invalidState('wrong provider');
  const nonceHash = sha256(payload.nonce);
  const pending = await findState(services.db, payload.organizationId, nonceHash);
  if (!pending) throw invalidState('unknown or already used');
  if (pending.expiresAt.getTime() <= Date.now()) throw invalidState('expired');

  // The binding first: a callback from another browser or user is refused and leaves the
  // state usable by its own flow (else anyone holding a victim's state could burn it).
  const principal = await authenticateOptional(services, request);
  const sameUser = principal?.userId === pending.userId;
  if (sameUser && principal?.organizationId !== pending.organizationId) throw invalidState('organization context changed');
  if (!sameUser && !txMatches(request.cookies[OAUTH_TX_COOKIE], pending.txHash)) throw invalidState('not bound to this browser or user');
  // Then used up, committed before the exchange: of two racing callbacks exactly one gets it.
  const state = await consumeState(services.db, payload.organizationId, nonceHash);
  if (!state) throw invalidState('unknown or already used');

  const fail = (error: AppError): CallbackFailure => new CallbackFailure(error, state);
  const membership = await membershipOf(services.db, state.organizationId, state.userId);
  if (!membership || membership.role === 'member') throw fail(new AppError('FORBIDDEN', { message: 'The user who started this no longer manages integrations here' }));
  if (input.error !== undefined) {
    throw fail(input.error === 'access_denied' ? new AppError('ACCESS_DENIED') : new AppError('OAUTH_EXCHANGE_FAILED', { message: 'The provider reported an error' }));
  }
  if (!input.code) throw fail(new AppError('INVALID_INPUT', { details: [{ path: 'code', message: 'is required' }] }));

  const provider = services.providers.get(state.provider);
  if (!provider) throw fail(new AppError('PROVIDER_NOT_CONFIGURED'));
  const params: Record<string, string> = { grant_type: 'authorization_code', code: input.code, redirect_uri: provider.redirectUri };
  if (state.codeVerifier && state.codeVerifierKeyId) {
    params.code_verifier = open(services.config.keyring, { organizationId: state.organizationId, recordId: state.nonceHash, name: 'code_verifier' }, {
      keyId: state.codeVerifierKeyId,
      envelope: state.codeVerifier,
    });
  }

  let tokens: Awaited<ReturnType<typeof tokenRequest>>;
  let account: Awaited<ReturnType<ConfiguredProvider['definition']['validate']>>;
  try {
    tokens = await tokenRequest(provider, params);
  } catch (error) {
    request.log.warn({ provider: provider.id, stage: 'exchange', kind: (error as { kind?: string }).kind, providerCode: (error as { providerCode?: string }).providerCode }, 'code exchange failed');
    throw fail(failureAnswer(error, 'exchange'));
  }
  try {
    account = await provider.definition.validate(provider.context, tokens.accessToken);
  } catch (error) {
    request.log.warn({ provider: provider.id, stage: 'validate', kind: (error as { kind?: string }).kind }, 'new token failed validation');
    throw fail(failureAnswer(error, 'connect'));
  }

  const now = Date.now();
  const tokenExpiresAt = accessTokenExpiry(tokens, now);
  const tx = await request.ctx.tx();
  const { before, after } = await upsertConnectedIntegration(tx, {
    organizationId: state.organizationId,
    provider: provider.id,
    name: `${provider.displayName} Integration (${account.username})`,
    description: `OAuth integration with ${provider.id} for ${account.username}`,
    scopes: tokens.scopes,
    providerAccountId: account.id,
    tokenExpiresAt,
    refreshTokenExpiresAt: refreshTokenExpiry(tokens, now),
    hasRefreshToken: tokens.refreshToken !== undefined,
    nextValidationAt: new Date(now + services.config.oauth.validationInterval * 1000),
  });
  await replaceSecrets(tx, services.config.keyring, { organizationId: state.organizationId, integrationId: after.id, provider: provider.id }, {
    access_token: tokens.accessToken,
    refresh_token: tokens.refreshToken,
    expires_at: tokenExpiresAt?.toISOString(),
    provider_user_id: account.id,
    provider_username: account.username,
    provider_email: account.email,
  });
  const actor = { principal: principal ?? null, requestId: request.id, userId: state.userId };
  const accountChanged = before !== null && before.providerAccountId !== account.id;
  await recordAudit(tx, actor, {
    organizationId: state.organizationId,
    action: before ? 'integration.reconnected' : 'integration.connected',
    targetType: 'integration',
    targetId: after.id,
    detail: { provider: provider.id, scopes: tokens.scopes, accountChanged, ...(accountChanged ? { previousAccountId: before?.providerAccountId } : {}) },
  });
  await services.outbox.emit(tx, (fn) => request.ctx.afterCommit(fn), {
    organizationId: state.organizationId,
    type: 'integration.connected',
    data: { integration: { id: after.id, provider: provider.id, name: after.name }, reconnected: before !== null, accountChanged },
  });
  return { integration: { id: after.id, name: after.name, provider: provider.id }, displayName: provider.displayName, state };
}

function txMatches(cookie: string | undefined, expectedHash: string): boolean {
  if (!cookie) return false;
  const actual = Buffer.from(sha256(cookie));
  const expected = Buffer.from(expectedHash);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** The redirect for a finished browser flow (CONTRACT.md §5). */
export function callbackRedirect(redirectUri: string, provider: string, outcome: { integrationId: string } | { error: ErrorCode }): string {
  const url = new URL(redirectUri);
  if ('integrationId' in outcome) {
    url.searchParams.set('status', 'connected');
    url.searchParams.set('provider', provider);
    url.searchParams.set('integration', outcome.integrationId);
  } else {
    url.searchParams.set('status', 'error');
    url.searchParams.set('provider', provider);
    url.searchParams.set('error', outcome.error);
  }
  return url.href;
}
