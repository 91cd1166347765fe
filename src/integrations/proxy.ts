import type { Logger } from 'pino';
import type { AuditActor } from '../ground/work.ts';
import { AppError } from '../ground/errors.ts';
import { PRODUCT_ID } from '../lib/ids.ts';
import type { ProviderRegistry } from './providers/registry.ts';
import type { ProviderAnswer } from './providers/transport.ts';
import { ProviderError, restIsWrite } from './providers/types.ts';
import type { TokenLifecycle } from './tokens/lifecycle.ts';
import type { LoadedIntegration } from './tokens/loaded.ts';
import { presented } from './tokens/mint.ts';
import { JudgedFailure, judged, rateLimitOf } from './tokens/policy.ts';
import {
  type Budget,
  type BudgetKey,
  backoffMs,
  blockedUntil,
  budgetKey,
  IDEMPOTENT_METHODS,
  MAX_ATTEMPTS,
  type ProviderBudgets,
  RETRIED_STATUSES,
  readBudget,
  sleep,
} from './budgets.ts';
import { nextPage } from './pages.ts';

/** Largest proxied answer, after decompression. */
export const PROXY_MAX_BYTES = 10 * 1024 * 1024;
/** Headers passed to the provider. Never our Authorization, cookies, CSRF, impersonation, organization or forwarding headers. */
const REQUEST_HEADERS = ['accept', 'accept-language', 'content-type', 'if-match', 'if-none-match', 'if-modified-since', 'idempotency-key', 'x-github-api-version'];
/** Headers passed back. Never the provider's Set-Cookie or Location. */
export const RESPONSE_HEADERS = [
  'content-type',
  'content-language',
  'etag',
  'last-modified',
  'link',
  'retry-after',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'x-ratelimit-used',
  'x-ratelimit-resource',
  'x-oauth-scopes',
  'x-accepted-oauth-scopes',
  'x-github-request-id',
];

/**
 * Turns the raw path after `/proxy/` into validated segments: each is percent-decoded
 * once and must not be empty, `.`/`..`, or hold a slash, backslash or control
 * character (encoded or not), so `//host`, `\\host` and `..` cannot leave the API base.
 */
export function proxyPath(raw: string): string {
  return proxySegments(raw).map(encodeURIComponent).join('/');
}

/** The decoded segments of a proxy path, each checked as `proxyPath` says. */
export function proxySegments(raw: string): string[] {
  if (raw === '') return [];
  return raw.split('/').map((segment) => {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      throw invalidPath();
    }
    if (decoded === '' || decoded === '.' || decoded === '..' || /[/\\\x00-\x1f\x7f]/.test(decoded)) throw invalidPath();
    return decoded;
  });
}

/** 400 for a proxy path that could leave the API base. */
export function invalidPath(): AppError {
  return new AppError('INVALID_INPUT', { details: [{ path: 'path', message: 'must be plain path segments (no empty, ".", ".." or encoded slashes)' }] });
}

/**
 * Takes `endUser` out of a proxied call's raw query string (`?…` or ''): it selects our
 * integration (docs/contract.md §5d) and is never forwarded, under any spelling of its name. The
 * other parameters pass byte for byte. Given twice, as `endUser[…]`, or not an end user's id → 400.
 */
export function takeEndUser(query: string): { endUserId: string | null; forwarded: string } {
  if (query === '' || query === '?') return { endUserId: null, forwarded: query };
  const kept: string[] = [];
  const found: string[] = [];
  let bracketed = false;
  for (const part of query.slice(1).split('&')) {
    const at = part.indexOf('=');
    const name = decodeQueryPart(at === -1 ? part : part.slice(0, at));
    if (name === 'endUser') found.push(decodeQueryPart(at === -1 ? '' : part.slice(at + 1)) ?? '');
    // `endUser[]=x`, `endUser[k]=x`: never a provider's parameter, never silently the organization's own (decision 231).
    else if (name?.startsWith('endUser[')) bracketed = true;
    else kept.push(part);
  }
  if (found.length === 0 && !bracketed) return { endUserId: null, forwarded: query };
  const [endUserId] = found;
  if (bracketed || found.length > 1 || endUserId === undefined || !PRODUCT_ID.test(endUserId)) {
    throw new AppError('INVALID_INPUT', { details: [{ path: 'querystring.endUser', message: "must be one end user's id (1–128 printable characters)" }] });
  }
  return { endUserId, forwarded: kept.length > 0 ? `?${kept.join('&')}` : '' };
}

/** A query-string name or value as a form decoder reads it; null when it is not valid percent-encoding. */
function decodeQueryPart(raw: string): string | null {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return null;
  }
}

/**
 * What the proxy answers: the provider's status, headers and body (within the cap); how many sends
 * it took and how long it waited on rate limits (docs/contract.md §5f `Tessera-Attempts`,
 * `Tessera-Waited`); and the next page, when the definition's pagination shows one (`Tessera-Next-Page`).
 */
export interface ProxyAnswer extends ProviderAnswer {
  attempts: number;
  waitedMs: number;
  nextPage: string | null;
}

/** How many sends a failed call made and how long it waited, for the `Tessera-Attempts` and `Tessera-Waited` of its error. */
const TALLIES = new WeakMap<object, Tally>();

/** Sends and rate-limit waits of one proxied call. */
export interface Tally {
  attempts: number;
  waitedMs: number;
}

/** The tally of an error `proxyCall` threw; `{0, 0}` when it threw before sending anything it counted. */
export function tallyOf(error: unknown): Tally {
  return (typeof error === 'object' && error !== null ? TALLIES.get(error) : undefined) ?? { attempts: 0, waitedMs: 0 };
}

/** An answer as a definition classifies it (a large body is not read for signals). */
export function toResponse(answer: ProviderAnswer) {
  return { status: answer.status, headers: answer.headers, body: answer.body.length > 65536 ? '' : answer.body.toString('utf8') };
}

/** Whether a proxied call writes (owner/admin or API token only): the provider's definition says (decision 76); an unknown provider by the REST rule. */
export function proxyWrites(providers: ProviderRegistry, providerId: string, method: string, segments: readonly string[], body: unknown): boolean {
  const definition = providers.get(providerId)?.definition;
  return definition ? definition.isWrite(method, segments, body) : restIsWrite(method);
}

/** A proxied call as plain data: whose integration, and the request to forward. */
export interface ProxyCall {
  organizationId: string;
  provider: string;
  /** The end user whose integration it is; null for the organization's own. */
  endUserId: string | null;
  method: string;
  /** The path under the API base, as checked segments (`proxySegments`). */
  segments: readonly string[];
  /** The query string to forward as the caller sent it (`''` or `?…`), `endUser` taken out (`takeEndUser`). */
  query: string;
  /** The caller's headers: only the allowlist passes. */
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The JSON body to forward, serialized; none for GET and HEAD. */
  body?: string;
  actor: AuditActor;
  /** Seconds the call may wait for a rate limit's reset or retry (`Tessera-Max-Wait`, 0–60); 0 or absent: one attempt, no wait. */
  maxWaitSeconds?: number;
}

/** What a proxied call uses. */
export interface ProxyDeps {
  lifecycle: TokenLifecycle;
  budgets: ProviderBudgets;
  logger: Pick<Logger, 'warn'>;
}

/**
 * An API call on the caller's behalf (docs/contract.md §5), for any consumer — the REST route, an
 * MCP tool: the integration's token (refreshed if due), the call through the provider
 * transport, and what its answer means (policy.ts, point `call`, carried out by
 * `TokenLifecycle.execute`): a rejection is re-read, then refreshed, then retried once before it
 * is believed (decision 37); a 403 passes through after marking the integration suspicious.
 * Each send is paced by the account's provider budget (docs/contract.md §5f, `sendPaced`).
 * Failures throw judged (`toAnswer` at the edge), with their tally (`tallyOf`).
 */
export async function proxyCall(deps: ProxyDeps, call: ProxyCall): Promise<ProxyAnswer> {
  const tally: Tally = { attempts: 0, waitedMs: 0 };
  try {
    return await pacedCall(deps, call, tally);
  } catch (error) {
    if (typeof error === 'object' && error !== null) TALLIES.set(error, tally);
    throw error;
  }
}

async function pacedCall(deps: ProxyDeps, call: ProxyCall, tally: Tally): Promise<ProxyAnswer> {
  const { lifecycle } = deps;
  const read = await lifecycle.reads.loadForCall(call.organizationId, call.provider, call.endUserId);
  const loaded = await lifecycle.usable(read.loaded, call.actor);
  const base = loaded.provider.contextFor(loaded.row.metadata).endpoints.apiUrl;
  const target = new URL(`${base}/${call.segments.map(encodeURIComponent).join('/')}${call.query}`);
  const baseUrl = new URL(base);
  // Defence in depth: whatever the path was, the call stays under the API base.
  if (target.origin !== baseUrl.origin || !`${target.pathname}/`.startsWith(`${baseUrl.pathname.replace(/\/$/, '')}/`)) throw invalidPath();
  const pacing: Pacing = {
    key: budgetKey(loaded.row, loaded.provider),
    known: read.budget,
    deadline: Date.now() + (call.maxWaitSeconds ?? 0) * 1000,
    retryable: IDEMPOTENT_METHODS.has(call.method) || (typeof call.headers['idempotency-key'] === 'string' && call.headers['idempotency-key'].trim() !== ''),
  };

  // The lifecycle carries out what the answer means: its recheck runs this attempt once more with a newer token.
  const attempt = async (current: LoadedIntegration, again: boolean): Promise<ProviderAnswer> => {
    const { answer, failure } = await sendPaced(deps, current, target, call, pacing, tally);
    if (!failure) return answer;
    const failed = new JudgedFailure(failure, 'call');
    const done = await lifecycle.execute(failed, {
      loaded: current,
      actor: call.actor,
      refused: { token: presented(current) ?? '' },
      ...(again ? { again: (newer: LoadedIntegration) => attempt(newer, false) } : {}),
    });
    if (done.kind === 'retried') return done.value;
    if (done.kind === 'stands' && done.goesOn) return answer;
    throw failed;
  };
  const answer = await attempt(loaded, true);
  const { definition } = loaded.provider;
  // Credentials a definition carries in the query are never part of a page shown to the caller.
  const hidden = Object.keys(definition.carry(presented(loaded) ?? '').query);
  return { ...answer, ...tally, nextPage: nextPage(definition.pagination, answer, target, base, hidden) };
}

/** A call's pacing (docs/contract.md §5f): whose budget, what is known of it, until when it may wait, whether it may be sent again. */
interface Pacing {
  key: BudgetKey;
  known: Budget | null;
  /** Epoch milliseconds: waits and back-offs end before it. */
  deadline: number;
  retryable: boolean;
}

/**
 * The budget step around each send: while the account's budget is known exhausted the call waits
 * for its reset when that fits before the deadline, else fails 429 without calling the provider;
 * what an answer teaches is stored before it is returned; a rate-limited answer is sent again after
 * its wait when that fits; a network error, a timeout or a 502/503/504 is tried again after a
 * jittered back-off when the request may be repeated — at most `MAX_ATTEMPTS` sends in all. Waiting
 * holds no database connection: the proxy's reads and writes are single statements outside any
 * transaction.
 */
async function sendPaced(deps: ProxyDeps, current: LoadedIntegration, target: URL, call: ProxyCall, pacing: Pacing, tally: Tally): Promise<{ answer: ProviderAnswer; failure: ProviderError | null }> {
  const { budgets } = deps;
  const provider = current.provider.id;
  const retryAfter = (until: number) => Math.max(1, Math.ceil((until - Date.now()) / 1000));
  for (;;) {
    const until = blockedUntil(pacing.known);
    if (until !== null) {
      if (until > pacing.deadline) {
        budgets.metrics?.budgetExhausted(provider);
        throw new JudgedFailure(new ProviderError('rateLimited', 'provider budget known exhausted', { retryAfter: retryAfter(until) }), 'call');
      }
      const waited = Math.max(0, until - Date.now());
      await sleep(waited);
      tally.waitedMs += waited;
      budgets.metrics?.proxyWait(provider, waited / 1000);
    }
    tally.attempts++;
    let answer: ProviderAnswer;
    try {
      answer = await forward(deps, current, target, call);
    } catch (error) {
      const failed = judged(error, 'call');
      const reason = failed.failure.message === 'provider timed out' ? 'timeout' : 'network';
      if (failed.failure.kind === 'transient' && failed.failure.status === undefined && (await backedOff(deps, pacing, tally, provider, reason))) continue;
      throw failed;
    }
    const failure = current.provider.definition.classify(toResponse(answer));
    const limited = rateLimitOf(failure);
    const learned = readBudget(current.provider.definition, answer, limited);
    pacing.known = await budgets.learn(pacing.key, pacing.known, learned);
    if (limited) {
      const next = blockedUntil(pacing.known) ?? Date.now() + (limited.retryAfter ?? 60) * 1000;
      if (tally.attempts < MAX_ATTEMPTS && next <= pacing.deadline) {
        if (blockedUntil(pacing.known) === null) pacing.known = { remaining: 0, resetAt: null, blockedUntil: next };
        continue;
      }
      // The answer's Retry-After is the true remaining time, rounded up.
      return { answer, failure: new ProviderError('rateLimited', limited.message, { status: answer.status, retryAfter: retryAfter(next) }) };
    }
    if (failure?.kind === 'transient' && RETRIED_STATUSES.has(answer.status) && (await backedOff(deps, pacing, tally, provider, String(answer.status)))) continue;
    return { answer, failure };
  }
}

/** Waits a jittered back-off and returns true when the call may be sent again (docs/contract.md §5f), else false at once. */
async function backedOff(deps: ProxyDeps, pacing: Pacing, tally: Tally, provider: string, reason: string): Promise<boolean> {
  if (!pacing.retryable || tally.attempts >= MAX_ATTEMPTS) return false;
  const delay = backoffMs(tally.attempts);
  if (Date.now() + delay > pacing.deadline) return false;
  deps.budgets.metrics?.proxyRetry(provider, reason);
  await sleep(delay);
  return true;
}

/** One forwarded call through the provider transport: allowlisted headers, the stored credentials carried as the definition says, the proxy's size cap. */
async function forward(deps: ProxyDeps, current: LoadedIntegration, target: URL, call: ProxyCall): Promise<ProviderAnswer> {
  const { definition } = current.provider;
  const carried = definition.carry(presented(current) ?? '');
  // The provider's own required headers (Notion-Version), unless the client sent its own value.
  const headers: Record<string, string> = { 'user-agent': 'Tessera', ...definition.apiHeaders };
  for (const name of REQUEST_HEADERS) {
    const value = call.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  // The credentials last: a caller's header of the same name never replaces them.
  for (const [name, value] of Object.entries(carried.headers)) headers[name.toLowerCase()] = value;
  let url = target;
  if (Object.keys(carried.query).length > 0) {
    url = new URL(target);
    for (const [name, value] of Object.entries(carried.query)) url.searchParams.set(name, value);
  }
  try {
    return await current.provider.send({ url, method: call.method, headers, ...(call.body !== undefined ? { body: call.body } : {}) }, PROXY_MAX_BYTES);
  } catch (error) {
    const failed = judged(error, 'call');
    deps.logger.warn({ provider: current.provider.id, integrationId: current.row.id, kind: failed.kind }, 'proxied call failed');
    throw failed;
  }
}
