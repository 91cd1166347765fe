/**
 * What every response of the hostile tests is held to (docs/contract.md §2, §5, §8): the error shape
 * and codes, X-Request-ID, the OpenAPI document, no internals, no secret in a response or a log
 * line, and nothing sent to the fakes outside their API base or to the attacker at all.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { expect } from 'vitest';
import type { CheckedResponse, Route } from '../helpers/openapi.ts';
import { attacker, CONTRACT_CODES, checker, gh, heal, INTERNALS, type Provider, type SecretKind, secrets, slack, t, world } from './world.ts';

export interface Sent {
  method: string;
  url: string;
  headers: Record<string, string>;
  /** A short description of the body, for failure messages. */
  body: string;
}

const fakeMarks = { github: 0, slack: 0, logs: 0 };

export function routeOf(sent: Sent): Route | null {
  return checker.route(sent.method, sent.url);
}

/** Whether this is the proxy passing a provider's answer through (its security headers mark it). */
export function isPassthrough(sent: Sent, res: CheckedResponse): boolean {
  const route = routeOf(sent);
  return !!route?.path.includes('/proxy/') && res.headers['content-security-policy'] === 'sandbox';
}

/** Secret kinds a response may legitimately carry. */
export function allowedKinds(sent: Sent, res: CheckedResponse): Set<SecretKind> {
  const route = routeOf(sent);
  const key = route ? `${route.method} ${route.path}` : '';
  // The fakes' /echo endpoint reflects the provider Authorization the proxy sent: that is the provider token.
  if (isPassthrough(sent, res)) return new Set(['providerAccess']);
  if (res.statusCode === 200 && ['GET /v1/integrations/{provider}/token', 'POST /v1/integrations/{provider}/refresh'].includes(key)) return new Set(['providerAccess']);
  // A session token of the caller's own session (switching to the current organization re-issues the same claims).
  if (res.statusCode === 200 && ['POST /v1/login', 'POST /v1/account/switch', 'POST /query'].includes(key)) return new Set(['jwt']);
  return new Set();
}

export function leakProblems(sent: Sent, res: CheckedResponse): string[] {
  const allowed = allowedKinds(sent, res);
  const text = `${res.body}\n${JSON.stringify(res.headers)}`;
  return secrets()
    .filter((s) => !allowed.has(s.kind) && text.includes(s.value))
    .map((s) => `response leaks a ${s.kind} (${s.value.slice(0, 6)}…)`);
}

export function errorShapeProblems(res: CheckedResponse, requestId: string): string[] {
  let body: unknown;
  try {
    body = JSON.parse(res.body);
  } catch {
    return [`error body is not JSON: ${res.body.slice(0, 200)}`];
  }
  const problems: string[] = [];
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return [`error body is not an object: ${res.body.slice(0, 200)}`];
  const record = body as Record<string, unknown>;
  const extra = Object.keys(record).filter((k) => !['success', 'error', 'code', 'requestId', 'details'].includes(k));
  if (extra.length) problems.push(`error body has fields outside the contract: ${extra.join(', ')}`);
  if (record.success !== false) problems.push('error body: success is not false');
  if (typeof record.error !== 'string' || record.error.length === 0) problems.push('error body: error is not a message');
  if (typeof record.code !== 'string' || !(record.code in CONTRACT_CODES)) problems.push(`error body: code ${JSON.stringify(record.code)} is not in the contract`);
  else if (CONTRACT_CODES[record.code] !== res.statusCode) problems.push(`error body: code ${record.code} with status ${res.statusCode}`);
  if (record.requestId !== requestId) problems.push(`error body: requestId ${JSON.stringify(record.requestId)} differs from X-Request-ID ${requestId}`);
  if (record.details !== undefined) {
    const ok =
      Array.isArray(record.details) &&
      record.details.every(
        (d: unknown) =>
          typeof d === 'object' && d !== null && Object.keys(d).sort().join() === 'message,path' && typeof (d as { path: unknown }).path === 'string' && typeof (d as { message: unknown }).message === 'string',
      );
    if (!ok) problems.push(`error body: details are not [{path, message}]: ${JSON.stringify(record.details).slice(0, 200)}`);
  }
  if (!/^application\/json\b/i.test(String(res.headers['content-type'] ?? ''))) problems.push(`error content-type ${String(res.headers['content-type'])}`);
  return problems;
}

/** The RFC error codes each OAuth route refuses with (docs/contract.md §9, §9a): the token and revoke endpoints RFC 6749 §5.2's, registration RFC 7591's. */
const OAUTH_ERRORS: Record<string, readonly string[]> = {
  '/v1/oauth/token': ['invalid_request', 'invalid_scope', 'unsupported_grant_type', 'invalid_target', 'invalid_grant', 'invalid_client'],
  '/v1/oauth/revoke': ['invalid_request'],
  '/oauth/register': ['invalid_redirect_uri', 'invalid_client_metadata', 'access_denied'],
};

/** A refusal of an OAuth endpoint: the RFC's `{error, error_description}`, one of its codes, JSON. */
function oauthErrorProblems(res: CheckedResponse, path: string): string[] {
  const body = JSON.parse(res.body) as Record<string, unknown>;
  const problems: string[] = [];
  if (Object.keys(body).sort().join() !== 'error,error_description') problems.push(`OAuth error body has other fields: ${Object.keys(body).join(', ')}`);
  if (!(OAUTH_ERRORS[path] ?? []).includes(String(body.error))) problems.push(`OAuth error ${JSON.stringify(body.error)} is not one of ${path}'s`);
  if (!/^application\/json\b/i.test(String(res.headers['content-type'] ?? ''))) problems.push(`error content-type ${String(res.headers['content-type'])}`);
  return problems;
}

/** GraphQL answers: spec-shaped, every error code from the contract and never INTERNAL. */
export function graphqlProblems(res: CheckedResponse): string[] {
  let body: unknown;
  try {
    body = JSON.parse(res.body);
  } catch {
    return [`GraphQL body is not JSON: ${res.body.slice(0, 200)}`];
  }
  const results = Array.isArray(body) ? body : [body];
  const problems: string[] = [];
  for (const result of results) {
    if (typeof result !== 'object' || result === null) {
      problems.push(`GraphQL result is not an object: ${JSON.stringify(result)}`);
      continue;
    }
    const extra = Object.keys(result).filter((k) => !['data', 'errors', 'extensions'].includes(k));
    if (extra.length) problems.push(`GraphQL result has fields ${extra.join(', ')}`);
    const errors = (result as { errors?: unknown }).errors;
    if (errors === undefined) continue;
    if (!Array.isArray(errors) || errors.length === 0) {
      problems.push('GraphQL errors is not a non-empty list');
      continue;
    }
    for (const error of errors as { message?: unknown; extensions?: { code?: unknown } }[]) {
      const code = error?.extensions?.code;
      if (typeof error?.message !== 'string') problems.push('GraphQL error without a message');
      if (typeof code !== 'string' || !(code in CONTRACT_CODES)) problems.push(`GraphQL error code ${JSON.stringify(code)} is not in the contract (${String(error?.message).slice(0, 120)})`);
      else if (code === 'INTERNAL') problems.push(`GraphQL resolver failed: ${String(error.message)}`);
    }
  }
  return problems;
}

/** Requests the fakes received since the last look: only under their API base, never with our credentials or headers. */
export function fakeProblems(options: { apiOnly: boolean }): string[] {
  const problems: string[] = [];
  const ours = secrets().filter((s) => ['jwt', 'pat', 'apiToken'].includes(s.kind));
  for (const fake of [gh, slack]) {
    const id = fake.id as Provider;
    const fresh = fake.requests.slice(fakeMarks[id]);
    fakeMarks[id] = fake.requests.length;
    const tokenPath = new URL(fake.tokenUrl).pathname;
    for (const request of fresh) {
      const underApi = request.path === '/api' || request.path.startsWith('/api/');
      if (!underApi && (options.apiOnly || request.path !== tokenPath)) problems.push(`${fake.id} fake received ${request.method} ${request.path} (outside the API base)`);
      problems.push(...forwardedHeaderProblems(fake.id, request.headers, ours));
    }
  }
  if (attacker.requests.length) problems.push(`the attacker server was called: ${JSON.stringify(attacker.requests.slice(0, 3))}`);
  return problems;
}

export function forwardedHeaderProblems(id: string, headers: IncomingHttpHeaders, ours: { value: string }[]): string[] {
  const problems: string[] = [];
  for (const name of ['cookie', 'x-csrf-token', 'x-impersonate-user', 'x-organization-id', 'x-forwarded-for', 'x-forwarded-host', 'x-request-id', 'origin']) {
    if (headers[name] !== undefined) problems.push(`${id} fake received our ${name} header`);
  }
  const text = JSON.stringify(headers);
  for (const secret of ours) if (text.includes(secret.value)) problems.push(`${id} fake received one of our credentials`);
  return problems;
}

/** New log lines since the last look must hold no secret at all (provider tokens included). */
export function logProblems(): string[] {
  const lines = t.logs.lines.slice(fakeMarks.logs);
  fakeMarks.logs = t.logs.lines.length;
  const text = lines.join('\n');
  return secrets()
    .filter((s) => text.includes(s.value))
    .map((s) => `a log line holds a ${s.kind}: ${lines.find((l) => l.includes(s.value))?.slice(0, 300)}`);
}

/** Whether the router can take this URL apart: every path segment percent-decodes and fits the parameter length limit. */
export function routable(url: string): boolean {
  const path = url.split('?')[0] ?? '';
  return path.split('/').every((segment) => {
    try {
      return decodeURIComponent(segment).length <= 200;
    } catch {
      return false;
    }
  });
}

/** Everything §2, §5 and §8 promise about one response. */
export function responseProblems(sent: Sent, res: CheckedResponse): string[] {
  const problems: string[] = [];
  const route = routeOf(sent);
  // With the fake providers healthy there is no legitimate 502 either.
  if (res.statusCode >= 500) problems.push(`status ${res.statusCode}: ${res.body.slice(0, 300)}`);
  const requestId = res.headers['x-request-id'];
  const sentId = sent.headers['x-request-id'];
  if (typeof requestId !== 'string' || !/^[\x20-\x7e]{1,128}$/.test(requestId)) problems.push(`X-Request-ID missing or malformed: ${JSON.stringify(requestId)}`);
  else if (sentId !== undefined && /^[\x20-\x7e]{1,128}$/.test(sentId) && requestId !== sentId) problems.push('X-Request-ID: a valid one sent was not kept');
  const passthrough = isPassthrough(sent, res);
  const isGraphql = route?.path === '/query' && sent.method === 'POST';
  let body: { code?: string; errors?: unknown } | null = null;
  try {
    body = JSON.parse(res.body);
  } catch {
    body = null;
  }
  const graphqlShaped = isGraphql && (Array.isArray(body) || (body !== null && typeof body === 'object' && 'errors' in body && !('success' in body)));
  const head = sent.method === 'HEAD';
  // docs/contract.md §9, §9a: the token and revoke endpoints refuse in RFC 6749 §5.2's shape, registration in RFC 7591's; the MCP transport answers protocol errors in JSON-RPC's.
  const oauthPath = route?.path !== undefined && Object.hasOwn(OAUTH_ERRORS, route.path);
  // Registration closed is RFC 7591's 403 access_denied; every other refusal of these routes is a 400.
  const oauthStatus = res.statusCode === 400 || (route?.path === '/oauth/register' && res.statusCode === 403);
  const oauthShaped = oauthPath && sent.method === 'POST' && oauthStatus && body !== null && typeof body === 'object' && 'error_description' in body;
  const jsonRpcShaped = route?.path === '/mcp' && body !== null && typeof body === 'object' && 'jsonrpc' in body;
  if (oauthShaped) problems.push(...oauthErrorProblems(res, route?.path ?? ''));
  if (res.statusCode >= 400 && !passthrough && !head && !(graphqlShaped && res.statusCode === 400) && !oauthShaped && !jsonRpcShaped) problems.push(...errorShapeProblems(res, String(requestId)));
  if (isGraphql && (res.statusCode === 200 || graphqlShaped)) problems.push(...graphqlProblems(res));
  if (!passthrough && INTERNALS.test(res.body)) problems.push(`internals in the body: ${res.body.match(INTERNALS)?.[0]}`);
  problems.push(...checker.check(sent.method, sent.url, res, { passthrough }));
  // §5: the callbacks and the token route answer no-store, errors included (once routed: a URL the router cannot decode never reaches them).
  if (route && routable(sent.url) && body?.code !== 'NOT_FOUND' && /oauth\/callback$|\/token$|\/refresh$/.test(route.path)) {
    if (res.headers['cache-control'] !== 'no-store') problems.push(`${route.path}: Cache-Control ${String(res.headers['cache-control'])}`);
  }
  problems.push(...leakProblems(sent, res));
  return problems;
}

export async function send(sent: Sent, payload?: string): Promise<CheckedResponse> {
  const res = await t.fastify.inject({ method: sent.method as 'GET', url: sent.url, headers: sent.headers, ...(payload !== undefined ? { payload } : {}) });
  return { statusCode: res.statusCode, headers: res.headers, body: res.body };
}

export function describeSent(sent: Sent): string {
  return `${sent.method} ${sent.url.slice(0, 300)} headers=${JSON.stringify(sent.headers).slice(0, 600)} body=${sent.body.slice(0, 300)}`;
}

export function markDirty(sent: Sent, res: CheckedResponse): void {
  const route = routeOf(sent);
  const key = route ? `${route.method} ${route.path}` : '';
  if (res.statusCode === 409 || res.statusCode === 401) world.dirty = true;
  if (res.statusCode < 300 && ['POST /v1/logout', 'DELETE /v1/integrations/{id}', 'POST /query'].includes(key)) world.dirty = true;
  if (res.statusCode < 300 && key.includes('/proxy/') && sent.method !== 'GET' && sent.method !== 'HEAD') world.dirty = true;
}


/** The URL as the app receives it from `inject` (WHATWG parsing: dot segments resolved, fragments dropped). */
export function asInjected(url: string): string {
  const parsed = new URL(url.startsWith('//') ? `http://localhost${url}` : url, 'http://localhost');
  return parsed.pathname + parsed.search;
}

export async function runCase(original: Sent, payload: string | undefined): Promise<void> {
  await heal();
  const sent = { ...original, url: asInjected(original.url) };
  const res = await send(sent, payload);
  markDirty(sent, res);
  const problems = [...responseProblems(sent, res), ...fakeProblems({ apiOnly: false }), ...logProblems()];
  expect(problems, describeSent(sent)).toEqual([]);
}

export function defaultContentType(headers: Record<string, string>, payload: string | undefined): Record<string, string> {
  if (payload === undefined || 'content-type' in headers) return headers;
  return { ...headers, 'content-type': 'application/json' };
}
