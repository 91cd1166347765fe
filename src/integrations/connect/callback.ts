import { timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { AppError, type ErrorCode } from '../../http/errors.ts';
import type { Principal } from '../../http/context.ts';
import { authenticateOptional } from '../../identity/authenticate.ts';
import { membershipOf } from '../../organizations/organizations.ts';
import { open } from '../../secrets/crypto.ts';
import type { Services } from '../../services.ts';
import type { ConfiguredProvider } from '../providers/registry.ts';
import type { Metadata, ProviderAccount, TokenSet } from '../providers/types.ts';
import { consumeState, findState, type StateRow, sha256 } from '../state.ts';
import { tokenRequest } from '../token-endpoint.ts';
import { failureAnswer } from '../tokens/policy.ts';
import { OAUTH_TX_COOKIE } from './start.ts';
import { type ConnectedResult, storeConnection } from './store.ts';

export interface CallbackInput {
  state: string;
  code?: string;
  /** The provider's `error` (GET callback), e.g. `access_denied`. */
  error?: string;
  /** POST callback: the provider the client says it is completing. */
  provider?: string;
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
 * Completes a connect flow: claim the state (verified, bound to this browser or user, then
 * used up — committed before the exchange, so a failed exchange still burns it), exchange
 * the code, validate the token, then store everything in the request's transaction.
 * Unusable states throw AppError; later failures throw CallbackFailure.
 */
export async function completeConnect(services: Services, request: FastifyRequest, input: CallbackInput): Promise<ConnectedResult & { state: StateRow }> {
  const { state, principal } = await claimState(services, request, input);
  const fail = (error: AppError): CallbackFailure => new CallbackFailure(error, state);
  const membership = await membershipOf(services.db, state.organizationId, state.userId);
  if (!membership || membership.role === 'member') throw fail(new AppError('FORBIDDEN', { message: 'The user who started this no longer manages integrations here' }));
  if (input.error !== undefined) {
    throw fail(input.error === 'access_denied' ? new AppError('ACCESS_DENIED') : new AppError('OAUTH_EXCHANGE_FAILED', { message: 'The provider reported an error' }));
  }
  if (!input.code) throw fail(new AppError('INVALID_INPUT', { details: [{ path: 'code', message: 'is required' }] }));
  const provider = services.providers.get(state.provider);
  if (!provider) throw fail(new AppError('PROVIDER_NOT_CONFIGURED'));

  let connected: { tokens: TokenSet; account: ProviderAccount; metadata: Metadata };
  try {
    connected = await exchange(services, request, provider, state, input.code);
  } catch (error) {
    throw error instanceof AppError ? fail(error) : error;
  }
  const work = { tx: await request.ctx.tx(), afterCommit: (fn: () => unknown) => request.ctx.afterCommit(fn), actor: { principal, requestId: request.id, userId: state.userId } };
  const result = await storeConnection(services, work, { organizationId: state.organizationId, provider, ...connected });
  return { ...result, state };
}

/**
 * The state of a callback, used up — only once it is authentic, unexpired and bound to this
 * browser (the `oauth_tx` cookie) or to the user who started it (their credentials, in the
 * same organization). The binding is checked before the state is used up: an unbound
 * callback leaves it usable by its own flow (decision 27).
 */
async function claimState(services: Services, request: FastifyRequest, input: CallbackInput): Promise<{ state: StateRow; principal: Principal | null }> {
  const payload = services.stateCodec.verify(input.state);
  if (!payload) throw invalidState('malformed or forged');
  if (input.provider !== undefined && input.provider !== payload.provider) throw invalidState('wrong provider');
  const nonceHash = sha256(payload.nonce);
  const pending = await findState(services.db, payload.organizationId, nonceHash);
  if (!pending) throw invalidState('unknown or already used');
  if (pending.expiresAt.getTime() <= Date.now()) throw invalidState('expired');
  const principal = await authenticateOptional(services, request);
  const sameUser = principal?.userId === pending.userId;
  if (sameUser && principal?.organizationId !== pending.organizationId) throw invalidState('organization context changed');
  if (!sameUser && !txMatches(request.cookies[OAUTH_TX_COOKIE], pending.txHash)) throw invalidState('not bound to this browser or user');
  // Of two racing callbacks exactly one gets it.
  const state = await consumeState(services.db, payload.organizationId, nonceHash);
  if (!state) throw invalidState('unknown or already used');
  return { state, principal };
}

/**
 * Exchanges the code (with the PKCE verifier kept for this state), validates the new token,
 * and gathers the integration's metadata — from the token answer, the account answer and
 * the provider's discovery call (Atlassian's sites), later ones winning. Failures as
 * policy.ts says.
 */
async function exchange(
  services: Services,
  request: FastifyRequest,
  provider: ConfiguredProvider,
  state: StateRow,
  code: string,
): Promise<{ tokens: TokenSet; account: ProviderAccount; metadata: Metadata }> {
  const params: Record<string, string> = { grant_type: 'authorization_code', code, redirect_uri: provider.redirectUri };
  if (state.codeVerifier && state.codeVerifierKeyId) {
    params.code_verifier = open(services.config.keyring, { organizationId: state.organizationId, recordId: state.nonceHash, name: 'code_verifier' }, {
      keyId: state.codeVerifierKeyId,
      envelope: state.codeVerifier,
    });
  }
  let tokens: TokenSet;
  try {
    tokens = await tokenRequest(provider, params);
  } catch (error) {
    request.log.warn({ provider: provider.id, stage: 'exchange', kind: (error as { kind?: string }).kind, providerCode: (error as { providerCode?: string }).providerCode }, 'code exchange failed');
    throw failureAnswer(error, 'exchange');
  }
  try {
    const context = provider.contextFor(tokens.metadata ?? {});
    const account = await provider.definition.validate(context, tokens.accessToken);
    const discovered = (await provider.definition.discover?.(context, tokens.accessToken)) ?? {};
    return { tokens, account, metadata: { ...tokens.metadata, ...account.metadata, ...discovered } };
  } catch (error) {
    request.log.warn({ provider: provider.id, stage: 'validate', kind: (error as { kind?: string }).kind }, 'new token failed validation');
    throw failureAnswer(error, 'connect');
  }
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
