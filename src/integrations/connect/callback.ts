import { timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import type { AuditActor } from '../../ground/work.ts';
import type { Principal } from '../../ground/principal.ts';
import { AppError, type ErrorCode } from '../../ground/errors.ts';
import { systemUnitOfWork, type UnitOfWork } from '../../ground/work.ts';
import { membershipOf } from '../../organizations/organizations.ts';
import { open } from '../../secrets/crypto.ts';
import type { Services } from '../../services.ts';
import { findIntegrationByProvider } from '../integrations.ts';
import type { ConfiguredProvider } from '../providers/registry.ts';
import type { Metadata, ProviderAccount, TokenSet } from '../providers/types.ts';
import { type ConnectSession, findSession, recordSessionError } from '../sessions/sessions.ts';
import { consumeState, findState, type StateRow, sha256 } from '../state.ts';
import { tokenRequest } from '../token-endpoint.ts';
import { type FailurePoint, JudgedFailure, judged } from '../tokens/policy.ts';
import { finishConnect, SessionUnusable, sessionUnusable } from './finish.ts';
import type { ConnectedResult } from './store.ts';

/** A callback as plain data: what the provider (or the client relaying it) sent, and what the browser carries. */
export interface CallbackInput {
  state: string;
  code?: string;
  /** The provider's `error` (GET callback), e.g. `access_denied`. */
  error?: string;
  /** POST callback: the provider the client says it is completing. */
  provider?: string;
  /** An app installation's flow (docs/contract.md §5c): the installation the browser came back with — a claim, proven at the provider. */
  installationId?: string;
  /** GitHub's `setup_action`: `install`, `update`, or `request` (an organization owner has yet to approve). */
  setupAction?: string;
  /** The `oauth_tx` cookie the browser sent, binding the flow to it. */
  txCookie?: string;
  /** The caller's credentials, checked only for a flow a user started (theirs may complete it without the cookie); null without valid ones. */
  caller(): Promise<Principal | null>;
  requestId: string;
  log: Pick<Logger, 'warn'>;
}

/**
 * The unit of work the connection is stored in, acting as `actor`: opened only once the
 * provider has answered, since no transaction may span a provider call.
 */
export type OpenWork = (actor: AuditActor) => Promise<UnitOfWork>;

/**
 * A state that passed its checks and was consumed: from here on, failures can be
 * reported to its redirect URI (and, for a connect session, recorded on the session).
 * The failure becomes an answer at the route edge (`toAnswer`).
 */
export class CallbackFailure extends Error {
  readonly failure: AppError | JudgedFailure;
  readonly state: StateRow;
  constructor(failure: AppError | JudgedFailure, state: StateRow) {
    super(failure.message, { cause: failure });
    this.failure = failure;
    this.state = state;
  }
}

const invalidState = (reason: string) => new AppError('INVALID_OAUTH_STATE', { cause: new Error(reason) });

/**
 * Completes a connect flow: claim the state (verified, bound to this browser or user, then
 * used up — committed before the exchange, so a failed exchange still burns it), check who
 * it is for (the starting user must still manage integrations; a connect session must still
 * be pending), exchange the code, validate the token, then finish the connect (finish.ts) in
 * the unit of work `openWork` opens. Unusable states throw AppError; later failures throw CallbackFailure.
 */
export async function completeConnect(services: Services, input: CallbackInput, openWork: OpenWork): Promise<ConnectedResult & { state: StateRow }> {
  const { state, principal } = await claimState(services, input);
  const fail = (error: AppError | JudgedFailure): CallbackFailure => new CallbackFailure(error, state);
  const session = await checkStarter(services, state).catch((error: unknown) => {
    throw error instanceof AppError ? fail(error) : error;
  });
  if (input.error !== undefined) {
    throw fail(input.error === 'access_denied' ? new AppError('ACCESS_DENIED') : new AppError('OAUTH_EXCHANGE_FAILED', { message: 'The provider reported an error' }));
  }
  // The app the flow started with (docs/contract.md §5e): its secret exchanges the code.
  const provider = await services.apps.provider(services.db, state.organizationId, state.appId, state.provider);
  if (!provider) throw fail(new AppError('PROVIDER_NOT_CONFIGURED'));
  const installationId = provider.traits.connects === 'installation' ? installationOf(input, fail) : undefined;
  if (!input.code) throw fail(new AppError('INVALID_INPUT', { details: [{ path: 'code', message: 'is required' }] }));

  const actor: AuditActor = { principal, requestId: input.requestId, ...(state.userId ? { userId: state.userId } : {}) };
  let connected: { tokens: TokenSet; account: ProviderAccount; metadata: Metadata };
  try {
    connected = await exchange(services, input.log, provider, state, input.code, installationId);
  } catch (error) {
    if (!(error instanceof JudgedFailure)) throw error;
    // The verdict may concern the integration being reconnected (our client credentials refused: `warning`).
    // Only when it was made with this app: another app's failure is never its (docs/contract.md §5e).
    const found = error.verdict.transition ? await findIntegrationByProvider(services.db, state.organizationId, provider.id, session?.endUser?.id ?? null) : null;
    const existing = found?.appId === state.appId ? found : null;
    await services.lifecycle.settle({ organizationId: state.organizationId, provider: provider.id, id: existing?.id ?? null }, error, actor);
    throw fail(error);
  }
  const work = await openWork(actor);
  try {
    return { ...(await finishConnect(services, work, { organizationId: state.organizationId, provider, ...connected, ...(session ? { session } : {}) })), state };
  } catch (error) {
    throw error instanceof SessionUnusable ? fail(error) : error;
  }
}

/**
 * Records a failed attempt of a flow whose state was claimed — an OAuth callback's or the hosted
 * page's credential form's: on its connect session (which stays usable until it expires) and as
 * `integration.connect_failed`, so the product hears of it (docs/contract.md §7). In a
 * transaction of its own, the use case's second one (decision 274): the record must outlive the
 * request's, which the failure rolls back (an error answer always does). Call it only once that
 * rollback is done — never with a transaction open on the same database.
 */
export async function recordFailedAttempt(services: Services, state: Pick<StateRow, 'organizationId' | 'connectSessionId' | 'provider'>, code: ErrorCode, requestId: string): Promise<void> {
  await systemUnitOfWork(services.db, services.outbox, { principal: null, requestId }, async (work) => {
    const endUser = state.connectSessionId ? await recordSessionError(work.db, state.organizationId, state.connectSessionId, code) : null;
    await work.outbox.emit(work.db, work.afterCommit, {
      organizationId: state.organizationId,
      type: 'integration.connect_failed',
      data: { provider: state.provider, endUser, sessionId: state.connectSessionId ?? null, code },
    });
  });
}

/**
 * The installation an app's callback names: required, unless GitHub says an organization owner
 * has still to approve the request (`setup_action=request`: nothing is installed yet).
 */
function installationOf(input: CallbackInput, fail: (error: AppError) => CallbackFailure): string {
  if (input.setupAction === 'request' && input.installationId === undefined) {
    throw fail(new AppError('OAUTH_EXCHANGE_FAILED', { message: 'The installation awaits approval by an owner of the account; connect again once it is installed' }));
  }
  if (input.installationId === undefined) throw fail(new AppError('INVALID_INPUT', { details: [{ path: 'installation_id', message: 'is required' }] }));
  // Without a code there is no proof: the app must request user authorization during installation (docs/providers.md).
  if (!input.code) throw fail(new AppError('INVALID_INPUT', { details: [{ path: 'code', message: 'is required: the app must request user authorization (OAuth) during installation' }] }));
  return input.installationId;
}

/**
 * Who a claimed state is for. A user's flow: that user must still manage integrations in
 * the organization (403 otherwise). A connect session's flow: the session, which must still
 * be pending — not used, revoked or expired (409) — with its minting credential still able
 * to mint it (403, docs/contract.md §5a).
 */
async function checkStarter(services: Services, state: StateRow): Promise<ConnectSession | null> {
  if (state.connectSessionId) {
    const session = await findSession(services.db, state.organizationId, state.connectSessionId);
    const unusable = sessionUnusable(session);
    if (unusable) throw unusable;
    return session;
  }
  const membership = state.userId ? await membershipOf(services.db, state.organizationId, state.userId) : null;
  if (!membership || membership.role === 'member') throw new AppError('FORBIDDEN', { message: 'The user who started this no longer manages integrations here' });
  return null;
}

/**
 * The state of a callback, used up — only once it is authentic, unexpired and bound to this
 * browser (the `oauth_tx` cookie) or to the user who started it (their credentials, in the
 * same organization). The binding is checked before the state is used up: an unbound
 * callback leaves it usable by its own flow (decision 27).
 */
async function claimState(services: Services, input: CallbackInput): Promise<{ state: StateRow; principal: Principal | null }> {
  const payload = services.stateCodec.verify(input.state);
  if (!payload) throw invalidState('malformed or forged');
  if (input.provider !== undefined && input.provider !== payload.provider) throw invalidState('wrong provider');
  const nonceHash = sha256(payload.nonce);
  const pending = await findState(services.db, payload.organizationId, nonceHash);
  if (!pending) throw invalidState('unknown or already used');
  if (pending.expiresAt.getTime() <= Date.now()) throw invalidState('expired');
  // A session's flow has no starting user: only its browser (the cookie) can complete it, and
  // whoever else is signed in there is not its actor.
  const principal = pending.userId === null ? null : await input.caller();
  const sameUser = pending.userId !== null && principal?.userId === pending.userId;
  if (sameUser && principal?.organizationId !== pending.organizationId) throw invalidState('organization context changed');
  if (!sameUser && !txMatches(input.txCookie, pending.txHash)) throw invalidState('not bound to this browser or user');
  // Of two racing callbacks exactly one gets it.
  const state = await consumeState(services.db, payload.organizationId, nonceHash);
  if (!state) throw invalidState('unknown or already used');
  // The audit actor is the starting user's credential only when it is theirs.
  return { state, principal: sameUser ? principal : null };
}

/**
 * Exchanges the code (with the PKCE verifier kept for this state), validates the new token,
 * and gathers the integration's metadata — from the token answer, the account answer and
 * the provider's discovery call (Atlassian's sites), later ones winning. Failures are
 * thrown judged (policy.ts, points `exchange` and `connect`).
 */
async function exchange(
  services: Services,
  log: Pick<Logger, 'warn'>,
  provider: ConfiguredProvider,
  state: StateRow,
  code: string,
  installationId?: string,
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
    throw failed(log, provider, error, 'exchange', 'code exchange failed');
  }
  const accept = provider.definition.acceptInstallation;
  if (installationId !== undefined && accept) {
    // The user token only proves who may connect the installation; it is not kept. An
    // installation the user cannot see is a refused exchange (docs/contract.md §5c).
    try {
      return await accept(provider.context, tokens.accessToken, installationId);
    } catch (error) {
      throw failed(log, provider, error, 'exchange', 'installation not accepted');
    }
  }
  try {
    const context = provider.contextFor(tokens.metadata ?? {});
    const account = await provider.definition.validate(context, tokens.accessToken);
    const discovered = (await provider.definition.discover?.(context, tokens.accessToken)) ?? {};
    return { tokens, account, metadata: { ...tokens.metadata, ...account.metadata, ...discovered } };
  } catch (error) {
    throw failed(log, provider, error, 'connect', 'new token failed validation');
  }
}

/** A failure of the exchange or of the new token's check, judged, with its log line (the provider's code only as an identifier). */
function failed(log: Pick<Logger, 'warn'>, provider: ConfiguredProvider, error: unknown, point: FailurePoint, message: string): JudgedFailure {
  const failure = judged(error, point, provider.app);
  log.warn({ provider: provider.id, app: provider.app?.id, stage: point === 'connect' ? 'validate' : point, kind: failure.kind, providerCode: failure.failure.providerCode }, message);
  return failure;
}

function txMatches(cookie: string | undefined, expectedHash: string): boolean {
  if (!cookie) return false;
  const actual = Buffer.from(sha256(cookie));
  const expected = Buffer.from(expectedHash);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** The outcome of a finished browser flow, as the redirect's query carries it. */
export type FlowOutcome = { integrationId: string } | { error: ErrorCode };

/** The redirect for a finished browser flow (docs/contract.md §5, §5a: a session's flow names the session). */
export function callbackRedirect(state: Pick<StateRow, 'redirectUri' | 'provider' | 'connectSessionId'>, outcome: FlowOutcome): string {
  const url = new URL(state.redirectUri);
  for (const [name, value] of Object.entries(outcomeParams(state, outcome))) url.searchParams.set(name, value);
  return url.href;
}

/** `status`, `provider`, then `integration` or `error`, and `session` for a session's flow. */
export function outcomeParams(state: Pick<StateRow, 'provider' | 'connectSessionId'>, outcome: FlowOutcome): Record<string, string> {
  return {
    status: 'integrationId' in outcome ? 'connected' : 'error',
    provider: state.provider,
    ...('integrationId' in outcome ? { integration: outcome.integrationId } : { error: outcome.error }),
    ...(state.connectSessionId ? { session: state.connectSessionId } : {}),
  };
}
