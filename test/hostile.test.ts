/**
 * Hostile input (issue "Production readiness"): fast-check properties over every REST
 * route of the OpenAPI document and over GraphQL, a documented happy walk through every
 * route, and proxy SSRF attempts against a loopback "attacker" server.
 *
 * Scale the property runs with HOSTILE_SCALE (e.g. HOSTILE_SCALE=10 for a long soak);
 * reproduce a failure with the seed and path fast-check prints.
 */
import { Agent, createServer, type IncomingHttpHeaders, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import {
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLOutputType,
  getNamedType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
} from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { graphqlSchema } from '../src/graphql/schema.ts';
import { SessionTokens } from '../src/identity/credentials.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, TEST_ENCRYPTION_KEY, TEST_JWT_SECRET, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, login, registerAndLogin } from './helpers/identity.ts';
import { acceptTokenOf } from './helpers/invitations.ts';
import { type CheckedResponse, OpenApiChecker, type Route } from './helpers/openapi.ts';
import { connect, providerEnv, REDIRECT_URI, startFlow } from './helpers/providers.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhooks.ts';

const SCALE = Number(process.env.HOSTILE_SCALE ?? '1') || 1;
const RUNS = { rest: Math.ceil(300 * SCALE), graphql: Math.ceil(150 * SCALE), ssrf: Math.ceil(200 * SCALE) };
const ONE_MIB = 1024 * 1024;
const PUBLIC_ORIGIN = 'http://127.0.0.1:8080';

/** CONTRACT.md §2: every error code and its status. */
const CONTRACT_CODES: Readonly<Record<string, number>> = {
  INVALID_INPUT: 400,
  INVALID_OAUTH_STATE: 400,
  PROVIDER_NOT_CONFIGURED: 400,
  INVALID_REDIRECT_URI: 400,
  OAUTH_EXCHANGE_FAILED: 400,
  ACCESS_DENIED: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  CSRF_INVALID: 403,
  NOT_FOUND: 404,
  INTEGRATION_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  TOKEN_VALIDATION_FAILED: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  PROVIDER_RATE_LIMITED: 429,
  PROVIDER_ERROR: 502,
  INTERNAL: 500,
};

/** Things that must never reach a client: stack frames, SQL and driver errors, file paths. */
const INTERNALS = /\bat [^\n"]*\(?[^\n"]*\.[cm]?[jt]s:\d+:\d+\)?|node_modules|\/work\/|syntax error at or near|duplicate key value|violates [a-z ]*constraint|DrizzleQueryError|relation "[a-z_]+"|\bFST_ERR_[A-Z_]+/;

// ---------------------------------------------------------------- the world under attack

/** A loopback server that must never hear from us. */
interface Attacker {
  host: string;
  requests: { method: string; url: string }[];
  close(): Promise<void>;
}

async function startAttacker(): Promise<Attacker> {
  const requests: { method: string; url: string }[] = [];
  const server: Server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '' });
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"pwned":true}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    host: `127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let attacker: Attacker;
let receiver: WebhookReceiver;
let checker: OpenApiChecker;
let serverPort = 0;

type Provider = 'github' | 'slack';
const LOGINS: Record<Provider, string> = { github: 'octo', slack: 'sam' };
/** Users of the happy walk, whose tokens must not leak either. */
const EXTRA_LOGINS: Record<Provider, string[]> = { github: ['happycat'], slack: ['happysam'] };

const world = {
  owner: undefined as unknown as Account,
  member: undefined as unknown as Account,
  admin: undefined as unknown as Account,
  outsider: undefined as unknown as Account,
  pat: '',
  apiToken: '',
  integrations: { github: '', slack: '' } as Record<Provider, string>,
  /** An unfinished flow's state (a well-formed state for the callbacks to chew on). */
  pendingState: '',
  /** Session JWTs an attacker could hold: well signed but for a foreign organization, session or user, expired, badly signed, unsigned. */
  forged: [] as string[],
  /** Set when a run may have logged out, removed or invalidated something; the next run heals first. */
  dirty: false,
};

/** Every value that must never leak, by kind (collected as they are issued). */
type SecretKind = 'jwt' | 'pat' | 'apiToken' | 'providerAccess' | 'providerRefresh' | 'clientSecret' | 'password' | 'serverKey';
const issued = { jwt: new Set<string>(), providerAccess: new Set<string>(), providerRefresh: new Set<string>(), password: new Set<string>() };

function remember(account: Account): Account {
  issued.jwt.add(account.token);
  if (account.cookies.session) issued.jwt.add(account.cookies.session);
  issued.password.add(account.password);
  return account;
}

function secrets(): { kind: SecretKind; value: string }[] {
  for (const fake of [gh, slack]) {
    const id = fake.id as Provider;
    for (const login of [LOGINS[id], ...EXTRA_LOGINS[id]]) {
      for (const tokens of fake.tokensOf(login)) {
        issued.providerAccess.add(tokens.accessToken);
        if (tokens.refreshToken) issued.providerRefresh.add(tokens.refreshToken);
      }
    }
  }
  const list: { kind: SecretKind; value: string }[] = [
    { kind: 'pat', value: world.pat },
    { kind: 'apiToken', value: world.apiToken },
    { kind: 'clientSecret', value: gh.clientSecret },
    { kind: 'clientSecret', value: slack.clientSecret },
    { kind: 'serverKey', value: TEST_JWT_SECRET },
    { kind: 'serverKey', value: TEST_ENCRYPTION_KEY.slice(TEST_ENCRYPTION_KEY.indexOf(':') + 1) },
  ];
  for (const kind of ['jwt', 'providerAccess', 'providerRefresh', 'password'] as const) for (const value of issued[kind]) list.push({ kind, value });
  return list.filter((s) => s.value.length >= 8);
}

const gql = (token: string, query: string, variables?: Record<string, unknown>) => graphqlData(t.fastify, token, query, variables);

async function connectProvider(provider: Provider): Promise<void> {
  const fake = provider === 'github' ? gh : slack;
  const res = await connect(t.fastify, world.owner.token, fake, LOGINS[provider]);
  expect(res.statusCode, res.body).toBe(200);
  world.integrations[provider] = res.json().integration.id;
}

/** Puts back what a run may have broken: sessions logged out, the member removed, integrations deleted or invalid. */
async function heal(): Promise<void> {
  if (!world.dirty) return;
  world.dirty = false;
  const alive = async (account: Account) => (await t.fastify.inject({ url: '/v1/account/access', headers: bearer(account.token) })).statusCode === 200;
  if (!(await alive(world.owner))) world.owner = remember(await login(t.fastify, world.owner.email, world.owner.password));
  if (!(await alive(world.admin))) world.admin = remember(await login(t.fastify, world.admin.email, world.admin.password));
  if (!(await alive(world.member))) {
    const roles = await gql(world.owner.token, '{ members { user { email } role } }');
    if (!roles.members.some((m: { user: { email: string } }) => m.user.email === world.member.email)) await inviteMemberIn();
    await joinOwnerOrganization();
  }
  const listed = await t.fastify.inject({ url: '/v1/integrations', headers: bearer(world.owner.token) });
  const integrations = listed.json().integrations as { provider: Provider; status: string }[];
  for (const provider of ['github', 'slack'] as const) {
    const found = integrations.find((i) => i.provider === provider);
    if (!found || found.status === 'invalid') await connectProvider(provider);
  }
}

/** The member joins the owner's organization the only way there is: the owner invites, the member accepts with a session. */
async function inviteMemberIn(): Promise<void> {
  const invitation = (await gql(world.owner.token, `mutation { addMember(email: ${JSON.stringify(world.member.email)}, role: "member") { id } }`)).addMember;
  const session = remember(await login(t.fastify, world.member.email, world.member.password));
  await gql(session.token, 'mutation($id: ID!, $token: String!) { acceptInvitation(id: $id, token: $token) { id } }', { id: invitation.id, token: await acceptTokenOf(t, invitation.id) });
}

/** The member signs in again and switches to the owner's organization. */
async function joinOwnerOrganization(): Promise<void> {
  const fresh = remember(await login(t.fastify, world.member.email, world.member.password));
  const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(fresh.token), payload: { organizationId: world.owner.organizationId } });
  expect(switched.statusCode, switched.body).toBe(200);
  world.member = remember({ ...fresh, token: switched.json().accessToken, organizationId: world.owner.organizationId });
}

beforeAll(async () => {
  [gh, slack, attacker, receiver] = await Promise.all([startFakeGitHub({ tokenExpiresIn: 28800 }), startFakeSlack(), startAttacker(), startWebhookReceiver()]);
  gh.addUser({ login: LOGINS.github, email: 'octo@example.com', name: 'Octo Cat' });
  gh.addUser({ login: 'happycat', email: 'happy@example.com' });
  slack.addUser({ login: LOGINS.slack, email: 'sam@example.com' });
  slack.addUser({ login: 'happysam', email: 'happysam@example.com' });
  // A webhook gives events their deliveries (the walk retries one); nothing delivers in the background.
  const webhook = { EVENTS_WEBHOOK_URL: receiver.url, EVENTS_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 9).toString('base64')}` };
  t = await createTestApp({ background: false, env: { ...providerEnv(gh), ...providerEnv(slack), ...webhook, RATE_LIMIT_MAX: '0' } });
  checker = await OpenApiChecker.fromApp(t.fastify);

  world.owner = remember(await registerAndLogin(t.fastify, 'owner'));
  world.admin = remember(await registerAndLogin(t.fastify, 'admin'));
  world.outsider = remember(await registerAndLogin(t.fastify, 'outsider'));
  world.member = remember(await registerAndLogin(t.fastify, 'member'));
  await t.database.db.execute(sql`UPDATE users SET system_admin = true WHERE id = ${world.admin.userId}`);
  await inviteMemberIn();
  await joinOwnerOrganization();
  await connectProvider('github');
  await connectProvider('slack');
  world.pat = (await gql(world.owner.token, 'mutation { createPersonalAccessToken(name: "fuzz") { token } }')).createPersonalAccessToken.token;
  world.apiToken = (await gql(world.owner.token, 'mutation { createAPIToken(name: "fuzz") { token } }')).createAPIToken.token;
  world.pendingState = (await startFlow(t.fastify, world.owner.token, 'github')).state;
  // The SSRF attempts go over a real socket: inject would resolve `..`, `\\` and non-ASCII before the app sees them.
  await t.fastify.listen({ port: 0, host: '127.0.0.1' });
  serverPort = (t.fastify.server.address() as AddressInfo).port;

  const tokens = t.app.services.sessionTokens;
  const exp = Math.floor(Date.now() / 1000) + 3600;
  const sid = JSON.parse(Buffer.from(world.owner.token.split('.')[1] ?? '', 'base64url').toString('utf8')).sid as string;
  const wrongKey = new SessionTokens([{ kid: 'default', secret: Buffer.alloc(48, 1) }]);
  const unsigned = (claims: object) =>
    `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT', kid: 'default' })).toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;
  world.forged = [
    tokens.issue({ sub: world.owner.userId, org: world.outsider.organizationId, sid, exp }), // real session, foreign organization
    tokens.issue({ sub: world.owner.userId, org: world.owner.organizationId, sid: '01ARZ3NDEKTSV4RRFFQ69G5FAV', exp }), // no such session
    tokens.issue({ sub: world.admin.userId, org: world.owner.organizationId, sid, exp }), // someone else's session
    tokens.issue({ sub: world.owner.userId, org: world.owner.organizationId, sid, exp: 1 }), // expired
    wrongKey.issue({ sub: world.owner.userId, org: world.owner.organizationId, sid, exp }),
    unsigned({ sub: world.owner.userId, org: world.owner.organizationId, sid, exp, iss: 'tessera', aud: 'tessera' }),
  ];
}, 120_000);

afterAll(async () => {
  await t?.close();
  await Promise.all([gh?.close(), slack?.close(), attacker?.close(), receiver?.close()]);
});

// ---------------------------------------------------------------- checks on every response

interface Sent {
  method: string;
  url: string;
  headers: Record<string, string>;
  /** A short description of the body, for failure messages. */
  body: string;
}

const fakeMarks = { github: 0, slack: 0, logs: 0 };

function routeOf(sent: Sent): Route | null {
  return checker.route(sent.method, sent.url);
}

/** Whether this is the proxy passing a provider's answer through (its security headers mark it). */
function isPassthrough(sent: Sent, res: CheckedResponse): boolean {
  const route = routeOf(sent);
  return !!route?.path.includes('/proxy/') && res.headers['content-security-policy'] === 'sandbox';
}

/** Secret kinds a response may legitimately carry. */
function allowedKinds(sent: Sent, res: CheckedResponse): Set<SecretKind> {
  const route = routeOf(sent);
  const key = route ? `${route.method} ${route.path}` : '';
  // The fakes' /echo endpoint reflects the provider Authorization the proxy sent: that is the provider token.
  if (isPassthrough(sent, res)) return new Set(['providerAccess']);
  if (res.statusCode === 200 && ['GET /v1/integrations/{provider}/token', 'POST /v1/integrations/{provider}/refresh'].includes(key)) return new Set(['providerAccess']);
  // A session token of the caller's own session (switching to the current organization re-issues the same claims).
  if (res.statusCode === 200 && ['POST /v1/login', 'POST /v1/account/switch', 'POST /query'].includes(key)) return new Set(['jwt']);
  return new Set();
}

function leakProblems(sent: Sent, res: CheckedResponse): string[] {
  const allowed = allowedKinds(sent, res);
  const text = `${res.body}\n${JSON.stringify(res.headers)}`;
  return secrets()
    .filter((s) => !allowed.has(s.kind) && text.includes(s.value))
    .map((s) => `response leaks a ${s.kind} (${s.value.slice(0, 6)}…)`);
}

function errorShapeProblems(res: CheckedResponse, requestId: string): string[] {
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

/** GraphQL answers: spec-shaped, every error code from the contract and never INTERNAL. */
function graphqlProblems(res: CheckedResponse): string[] {
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
function fakeProblems(options: { apiOnly: boolean }): string[] {
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

function forwardedHeaderProblems(id: string, headers: IncomingHttpHeaders, ours: { value: string }[]): string[] {
  const problems: string[] = [];
  for (const name of ['cookie', 'x-csrf-token', 'x-impersonate-user', 'x-organization-id', 'x-forwarded-for', 'x-forwarded-host', 'x-request-id', 'origin']) {
    if (headers[name] !== undefined) problems.push(`${id} fake received our ${name} header`);
  }
  const text = JSON.stringify(headers);
  for (const secret of ours) if (text.includes(secret.value)) problems.push(`${id} fake received one of our credentials`);
  return problems;
}

/** New log lines since the last look must hold no secret at all (provider tokens included). */
function logProblems(): string[] {
  const lines = t.logs.lines.slice(fakeMarks.logs);
  fakeMarks.logs = t.logs.lines.length;
  const text = lines.join('\n');
  return secrets()
    .filter((s) => text.includes(s.value))
    .map((s) => `a log line holds a ${s.kind}: ${lines.find((l) => l.includes(s.value))?.slice(0, 300)}`);
}

/** Whether the router can take this URL apart: every path segment percent-decodes and fits the parameter length limit. */
function routable(url: string): boolean {
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
function responseProblems(sent: Sent, res: CheckedResponse): string[] {
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
  if (res.statusCode >= 400 && !passthrough && !head && !(graphqlShaped && res.statusCode === 400)) problems.push(...errorShapeProblems(res, String(requestId)));
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

async function send(sent: Sent, payload?: string): Promise<CheckedResponse> {
  const res = await t.fastify.inject({ method: sent.method as 'GET', url: sent.url, headers: sent.headers, ...(payload !== undefined ? { payload } : {}) });
  return { statusCode: res.statusCode, headers: res.headers, body: res.body };
}

function describeSent(sent: Sent): string {
  return `${sent.method} ${sent.url.slice(0, 300)} headers=${JSON.stringify(sent.headers).slice(0, 600)} body=${sent.body.slice(0, 300)}`;
}

function markDirty(sent: Sent, res: CheckedResponse): void {
  const route = routeOf(sent);
  const key = route ? `${route.method} ${route.path}` : '';
  if (res.statusCode === 409 || res.statusCode === 401) world.dirty = true;
  if (res.statusCode < 300 && ['POST /v1/logout', 'DELETE /v1/integrations/{id}', 'POST /query'].includes(key)) world.dirty = true;
  if (res.statusCode < 300 && key.includes('/proxy/') && sent.method !== 'GET' && sent.method !== 'HEAD') world.dirty = true;
}

// ---------------------------------------------------------------- arbitraries

/** `arbitrary` in about `percent` % of the values, else null. */
function sometimes<T>(arbitrary: fc.Arbitrary<T>, percent: number): fc.Arbitrary<T | null> {
  return fc.oneof({ weight: 100 - percent, arbitrary: fc.constant(null) }, { weight: percent, arbitrary });
}

/** Now and then a string gets a character databases, parsers and loggers trip over. */
function tainted(arbitrary: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const poison = fc.constantFrom('\u0000', '\ud800', '\u202e', '\n', '\r\n', '\u0085', '\u2028', '\\', '"', "'", '%00', '\u00ff', '😀');
  return fc.oneof(
    { weight: 7, arbitrary },
    { weight: 1, arbitrary: fc.tuple(arbitrary, poison, fc.nat()).map(([text, bad, at]) => text.slice(0, at % (text.length + 1)) + bad + text.slice(at % (text.length + 1))) },
  );
}

/** Characters a real HTTP client can put in a header value. */
const headerChar = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.constant('\t') },
);
const headerValue = fc.string({ unit: headerChar, maxLength: 80 });

const nasty = [
  '',
  ' ',
  '0',
  '-1',
  'null',
  'undefined',
  'true',
  '[]',
  '{}',
  '__proto__',
  'constructor',
  'prototype',
  "' OR '1'='1",
  "'; DROP TABLE users; --",
  '$1',
  '%s%n',
  ['$', '{7*7}'].join(''),
  '{{7*7}}',
  '<script>alert(1)</script>',
  'javascript:alert(1)',
  '../../etc/passwd',
  '\u0000',
  '\u202eevil',
  '\ud800',
  '😀',
  'Ω≈ç√',
  'a'.repeat(5000),
  'http://169.254.169.254/latest/meta-data/',
];

function interestingStrings(): string[] {
  return [
    ...nasty,
    'github',
    'slack',
    'gitlab',
    'GitHub',
    world.owner.organizationId,
    world.outsider.organizationId,
    world.owner.userId,
    world.admin.userId,
    world.owner.email,
    world.integrations.github,
    world.integrations.slack,
    world.integrations.github.toLowerCase(),
    '01ARZ3NDEKTSV4RRFFQ69G5FAV',
    world.pendingState,
    REDIRECT_URI,
    `${PUBLIC_ORIGIN}/app`,
    `http://${attacker.host}/`,
    'https://evil.example/cb',
    'http://user:pass@127.0.0.1:8080/app',
    `${REDIRECT_URI}#frag`,
  ];
}

/** Date-time strings, from plain to the edges of what JavaScript and PostgreSQL accept. */
const DATES = ['2099-01-01T00:00:00Z', '2099-01-01', '1970-01-01T00:00:00Z', 'yesterday', '9999-12-31T23:59:59Z', '10000-01-01T00:00:00Z', '+010000-01-01T00:00:00Z', '+275760-09-13T00:00:00.000Z', '-000001-01-01T00:00:00Z', '2099-02-30T00:00:00Z', '2099-01-01T00:00:00+99:00', '0'];

const stringArb = () => fc.oneof({ weight: 3, arbitrary: fc.string({ maxLength: 40 }) }, { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) }, { weight: 3, arbitrary: fc.constantFrom(...interestingStrings()) });

/** Plausible values for body fields by name, so generated bodies get past validation into the handlers. */
function fieldHints(): Record<string, fc.Arbitrary<unknown>> {
  return {
    provider: fc.constantFrom('github', 'slack'),
    redirectUri: fc.constantFrom(REDIRECT_URI, `${PUBLIC_ORIGIN}/elsewhere`, 'https://evil.example/cb', `http://${attacker.host}/`, `${REDIRECT_URI}#x`, 'http://user:pw@127.0.0.1:8080/app', 'javascript:alert(1)', '/relative'),
    organizationId: tainted(fc.constantFrom(world.owner.organizationId, world.outsider.organizationId, '01ARZ3NDEKTSV4RRFFQ69G5FAV')),
    email: tainted(fc.oneof(fc.emailAddress(), fc.constantFrom(world.owner.email, world.owner.email.toUpperCase(), ` ${world.owner.email} `))),
    password: tainted(fc.string({ minLength: 12, maxLength: 40 })),
    name: tainted(fc.string({ maxLength: 30 })),
    state: fc.oneof(fc.constant(null).map(() => world.pendingState), fc.base64String({ minLength: 44, maxLength: 44 }).map((b) => b.replace(/\+/g, '-').replace(/\//g, '_').replace(/=/g, ''))),
    code: tainted(fc.string({ minLength: 1, maxLength: 40 })),
    scopes: fc.subarray(['read:user', 'user:email', 'repo', 'gist', 'admin:org', 'channels:read', 'chat:write', 'users:read']),
  };
}

/** Values shaped by a JSON schema (the documented request bodies), now and then off by one or just wrong. */
function fromSchema(schema: Record<string, unknown> | undefined, depth = 0): fc.Arbitrary<unknown> {
  const wrong = fc.oneof(fc.jsonValue({ maxDepth: 2 }), stringArb());
  if (!schema || depth > 4) return wrong;
  const valid = validFromSchema(schema, depth);
  return fc.oneof({ weight: 9, arbitrary: valid }, { weight: 1, arbitrary: wrong });
}

function validFromSchema(schema: Record<string, unknown>, depth: number): fc.Arbitrary<unknown> {
  const anyOf = (schema.anyOf ?? schema.oneOf) as Record<string, unknown>[] | undefined;
  if (anyOf?.length) return fc.oneof(...anyOf.map((s) => fromSchema(s, depth + 1)));
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  if ('const' in schema) return fc.constant(schema.const);
  switch (schema.type) {
    case 'string': {
      const min = Number(schema.minLength ?? 0);
      const max = Math.min(Number(schema.maxLength ?? 60), 300);
      const sized = tainted(fc.string({ minLength: min, maxLength: Math.max(min, max) }));
      const boundary = fc.constantFrom('x'.repeat(Math.max(0, min - 1)), 'x'.repeat(Number(schema.maxLength ?? 300) + 1));
      const format = schema.format === 'email' ? [fc.emailAddress()] : schema.format === 'date-time' ? [fc.date({ noInvalidDate: true }).map((d) => d.toISOString())] : [];
      return fc.oneof({ weight: 4, arbitrary: sized }, { weight: 1, arbitrary: stringArb() }, { weight: 1, arbitrary: boundary }, ...format.map((arbitrary) => ({ weight: 4, arbitrary })));
    }
    case 'integer':
      return fc.oneof(fc.integer(), fc.constantFrom(0, -1, 2 ** 31, Number.MAX_SAFE_INTEGER + 2));
    case 'number':
      return fc.oneof(fc.double(), fc.integer());
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const items = fromSchema(schema.items as Record<string, unknown> | undefined, depth + 1);
      return fc.oneof({ weight: 5, arbitrary: fc.array(items, { maxLength: 4 }) }, { weight: 1, arbitrary: fc.array(items, { minLength: 101, maxLength: 102 }) });
    }
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, Record<string, unknown>>;
      const required = (schema.required ?? []) as string[];
      const shape: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, property] of Object.entries(properties)) {
        const hint = fieldHints()[name];
        shape[name] = hint ? fc.oneof({ weight: 4, arbitrary: hint }, { weight: 1, arbitrary: fromSchema(property, depth + 1) }) : fromSchema(property, depth + 1);
      }
      const record = fc.record(shape, { requiredKeys: required.filter((k) => k in shape) });
      return fc.tuple(record, sometimes(fc.tuple(fc.constantFrom('extra', '__proto__', 'constructor', 'isAdmin', 'systemAdmin', 'role'), fc.jsonValue({ maxDepth: 1 })), 10)).map(([value, extra]) => {
        const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
        if (extra) Object.defineProperty(out, extra[0], { value: extra[1], enumerable: true, configurable: true, writable: true });
        return out;
      });
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** Raw bodies a JSON parser has to survive. */
const rawBodies = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '{',
    '{"a":',
    '[1,2',
    'null',
    'true',
    '"str"',
    '[]',
    '{"__proto__":{"isAdmin":true}}',
    '{"constructor":{"prototype":{"isAdmin":true}}}',
    '{"email":"a@b.c","email":"x@y.z","password":"correct horse battery"}',
    '\ufeff{}',
    '{"a":"\\ud800"}',
    '{"a":1e999999}',
    `${'['.repeat(5000)}${']'.repeat(5000)}`,
    `${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}`,
    `${'['.repeat(100_000)}${']'.repeat(100_000)}`,
    'query { me { id } }',
    'email=a%40b.c&password=x',
    '\u0000\u0001\u0002',
  ),
  fc.string({ maxLength: 200 }),
  fc.string({ unit: 'binary', maxLength: 100 }),
);

type Body = { kind: 'none' } | { kind: 'json'; value: unknown } | { kind: 'raw'; text: string } | { kind: 'huge' };

function bodyFor(route: Route): fc.Arbitrary<Body> {
  const schema = checker.requestSchema(route) ?? undefined;
  return fc.oneof(
    { weight: 8, arbitrary: fromSchema(schema).map((value): Body => ({ kind: 'json', value })) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((value): Body => ({ kind: 'json', value })) },
    { weight: 1, arbitrary: fc.constant<Body>({ kind: 'none' }) },
    { weight: 1, arbitrary: rawBodies.map((text): Body => ({ kind: 'raw', text })) },
    { weight: 1, arbitrary: fc.constant<Body>({ kind: 'huge' }) },
  );
}

function payloadOf(body: Body): { payload?: string; describe: string } {
  switch (body.kind) {
    case 'none':
      return { describe: '(none)' };
    case 'json': {
      const payload = JSON.stringify(body.value) ?? 'null';
      return { payload, describe: payload };
    }
    case 'raw':
      return { payload: body.text, describe: JSON.stringify(body.text) };
    case 'huge':
      return { payload: JSON.stringify({ name: 'x'.repeat(ONE_MIB + 16) }), describe: '(a JSON body over 1 MiB)' };
  }
}

/** A path segment: a plausible value, an encoded random string, or a classic trick. */
function segmentArb(name: string): fc.Arbitrary<string> {
  const plausible =
    name === 'provider'
      ? fc.constantFrom('github', 'github', 'slack', 'slack', 'gitlab', 'GitHub', 'g', '%67ithub')
      : name === 'id'
        ? fc.constantFrom(world.integrations.github, world.integrations.slack, world.integrations.github.toLowerCase(), '01ARZ3NDEKTSV4RRFFQ69G5FAV', '0'.repeat(26), 'oauth')
        : fc.constantFrom('user', 'user/repos', 'echo', 'echo/a/b', 'auth.test', 'users.info', 'x');
  const tricks = fc.constantFrom('..', '.', '%2e%2e', '%2F', '%5C', '%00', '%ZZ', '%', '%E0%A4%A', '%C0%AE', '%20', '~', "'", '"', '<x>', '%u002e', 'é', '．．', 'a'.repeat(201), 'a'.repeat(64), 'a'.repeat(65), '__proto__', 'constructor');
  const encoded = fc.string({ minLength: 1, maxLength: 30 }).map(encodeURIComponent);
  return fc.oneof({ weight: 7, arbitrary: plausible }, { weight: 2, arbitrary: tricks }, { weight: 1, arbitrary: encoded });
}

const queryArb = fc.oneof(
  fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 30 }), { maxKeys: 4 }).map((o) => new URLSearchParams(o).toString()),
  fc.constantFrom('code=x&state=y', 'error=access_denied&state=y', 'state=', 'state=%ZZ', '%ZZ', 'state=1&state=2', 'state[]=1', 'state[a]=b', '__proto__[x]=1', 'constructor[prototype][x]=1', 'a=%00', '&&&', '=', 'query={me{id}}'),
  fc.constant(null).map(() => `state=${encodeURIComponent(world.pendingState)}&code=abc`),
  fc.constant(null).map(() => `state=${encodeURIComponent(world.pendingState)}&error=access_denied`),
);

type Cred = 'none' | 'owner' | 'ownerCookie' | 'pat' | 'apiToken' | 'member' | 'impersonator';
const credArb = fc.constantFrom<Cred>('none', 'none', 'owner', 'owner', 'owner', 'ownerCookie', 'pat', 'apiToken', 'member', 'impersonator');

/** Hostile values per header name. */
const headerEntries = (): Record<string, fc.Arbitrary<string>> => ({
  authorization: fc.oneof(
    headerValue,
    headerValue.map((v) => `Bearer ${v}`),
    fc.constantFrom('Bearer', 'Bearer ', 'bearer  x', 'Basic Zm9vOmJhcg==', 'Bearer tsp_', 'Bearer tsa_', 'Bearer tsp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'Bearer a.b.c', 'Bearer eyJ.eyJ.', 'Token x', 'Bearer x y'),
    fc.constantFrom(...world.forged).map((v) => `Bearer ${v}`),
  ),
  cookie: fc.oneof(
    headerValue,
    fc.constantFrom('session=', 'session=garbage', 'session=a; session=b', '=;;=', 'csrf_token=x', 'oauth_tx=garbage', '$Version=1; session="x"', 'session=%ZZ'),
    fc.constantFrom(...world.forged).map((v) => `session=${v}`),
  ),
  'x-request-id': fc.oneof(headerValue, fc.string({ minLength: 127, maxLength: 130 }), fc.constantFrom('', ' ', 'é', 'a'.repeat(129), 'a'.repeat(128), '../../x', '<script>')),
  'x-organization-id': fc.oneof(headerValue, fc.constant(null).map(() => world.owner.organizationId), fc.constant(null).map(() => world.outsider.organizationId), fc.constantFrom('', ' ', 'a'.repeat(64), 'a'.repeat(65), "'; DROP TABLE memberships;--")),
  'x-impersonate-user': fc.oneof(headerValue, fc.constant(null).map(() => world.owner.userId), fc.constant(null).map(() => world.admin.userId), fc.constant(null).map(() => world.member.userId), fc.constantFrom('', 'a'.repeat(65))),
  'content-type': fc.oneof(
    headerValue,
    fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'application/json;charset=latin1',
      'application/jsonx',
      'application/json, text/plain',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/graphql',
      '',
    ),
  ),
  origin: fc.oneof(headerValue, fc.constantFrom('null', PUBLIC_ORIGIN, 'https://evil.example', `${PUBLIC_ORIGIN}.evil.example`, 'http://127.0.0.1:8080/')),
  'x-csrf-token': headerValue,
  'x-forwarded-for': fc.constantFrom('127.0.0.1', '10.0.0.1, 127.0.0.1', 'garbage', ''),
  accept: fc.constantFrom('application/json', '*/*', 'text/html', 'application/xml', ''),
});

/** Mostly none or one hostile header (so requests get past the pipeline), sometimes all of them at once. */
const hostileHeaders = (): fc.Arbitrary<Record<string, string>> => {
  const entries = headerEntries();
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant({}) },
    { weight: 4, arbitrary: fc.constantFrom(...Object.keys(entries)).chain((name) => (entries[name] as fc.Arbitrary<string>).map((value) => ({ [name]: value }))) },
    { weight: 2, arbitrary: fc.record(entries, { requiredKeys: [] }) as fc.Arbitrary<Record<string, string>> },
  );
};

/** Applies a credential mode on top of hostile headers (the mode's own headers win). */
function withCredentials(cred: Cred, headers: Record<string, string>, goodCsrf: boolean): Record<string, string> {
  const out = { ...headers };
  const set = (token: string) => {
    out.authorization = `Bearer ${token}`;
  };
  switch (cred) {
    case 'none':
      break;
    case 'owner':
      set(world.owner.token);
      break;
    case 'pat':
      set(world.pat);
      break;
    case 'apiToken':
      set(world.apiToken);
      break;
    case 'member':
      set(world.member.token);
      break;
    case 'impersonator':
      set(world.admin.token);
      out['x-impersonate-user'] ??= world.owner.userId;
      break;
    case 'ownerCookie':
      delete out.authorization;
      out.cookie = `session=${world.owner.cookies.session}; csrf_token=${world.owner.cookies.csrf_token}`;
      if (goodCsrf) {
        out['x-csrf-token'] = world.owner.cookies.csrf_token ?? '';
        out.origin = PUBLIC_ORIGIN;
      }
      break;
  }
  return out;
}

function urlFor(route: Route, segments: string[], query: string | null): string {
  let i = 0;
  const path = route.path.replace(/\{[^}]+\}/g, () => segments[i++] ?? 'x');
  return query === null ? path : `${path}?${query}`;
}

/** One hostile REST request against a documented route (sometimes with another method). */
function restCase() {
  const byKey = new Map(checker.routes.map((route) => [`${route.method} ${route.path}`, route]));
  return fc.constantFrom(...byKey.keys()).chain((key) => {
    const route = byKey.get(key) as Route;
    return fc.record({
      route: fc.constant(key),
      method: fc.oneof({ weight: 9, arbitrary: fc.constant(route.method) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS') }),
      segments: fc.tuple(...route.params.map((name) => segmentArb(name))),
      query: sometimes(queryArb, 30),
      headers: hostileHeaders(),
      cred: credArb,
      goodCsrf: fc.boolean(),
      body: bodyFor(route),
    });
  });
}

/** The URL as the app receives it from `inject` (WHATWG parsing: dot segments resolved, fragments dropped). */
function asInjected(url: string): string {
  const parsed = new URL(url.startsWith('//') ? `http://localhost${url}` : url, 'http://localhost');
  return parsed.pathname + parsed.search;
}

async function runCase(original: Sent, payload: string | undefined): Promise<void> {
  await heal();
  const sent = { ...original, url: asInjected(original.url) };
  const res = await send(sent, payload);
  markDirty(sent, res);
  const problems = [...responseProblems(sent, res), ...fakeProblems({ apiOnly: false }), ...logProblems()];
  expect(problems, describeSent(sent)).toEqual([]);
}

function defaultContentType(headers: Record<string, string>, payload: string | undefined): Record<string, string> {
  if (payload === undefined || 'content-type' in headers) return headers;
  return { ...headers, 'content-type': 'application/json' };
}

// ---------------------------------------------------------------- GraphQL documents

const schema = graphqlSchema();

function literalFor(type: GraphQLInputType, depth = 0): fc.Arbitrary<string> {
  const wrong = fc.constantFrom('null', '1', '"x"', 'true', '[1]', '{a: 1}', '$undefined', '1.5', 'ENUM');
  if (isNonNullType(type)) return fc.oneof({ weight: 9, arbitrary: literalFor(type.ofType, depth) }, { weight: 1, arbitrary: wrong });
  if (isListType(type)) return fc.array(literalFor(type.ofType, depth + 1), { maxLength: 3 }).map((items) => `[${items.join(', ')}]`);
  if (isEnumType(type)) return fc.constantFrom(...type.getValues().map((v) => v.name));
  if (isInputObjectType(type) && depth < 3) {
    const fields = Object.values(type.getFields());
    return fc.tuple(...fields.map((f) => literalFor(f.type, depth + 1).map((v) => `${f.name}: ${v}`))).map((parts) => `{${parts.join(', ')}}`);
  }
  const named = getNamedType(type).name;
  const valid =
    named === 'Int'
      ? fc.oneof(fc.integer({ min: -5, max: 200 }), fc.constantFrom(2 ** 31, -(2 ** 31) - 1)).map(String)
      : named === 'Float'
        ? fc.double({ noNaN: true, noDefaultInfinity: true }).map(String)
        : named === 'Boolean'
          ? fc.boolean().map(String)
          : tainted(fc.oneof(stringArb(), fc.constantFrom('owner', 'admin', 'member', world.owner.email, world.integrations.github, world.owner.organizationId), fc.constantFrom(...DATES))).map((s) => JSON.stringify(s));
  return fc.oneof({ weight: 9, arbitrary: valid }, { weight: 1, arbitrary: wrong });
}

function argumentsFor(args: readonly GraphQLArgument[]): fc.Arbitrary<string> {
  if (args.length === 0) return fc.constant('');
  return fc
    .tuple(...args.map((arg) => sometimes(literalFor(arg.type).map((v) => `${arg.name}: ${v}`), isNonNullType(arg.type) ? 95 : 50)))
    .map((parts) => {
      const present = parts.filter((p): p is string => p !== null);
      return present.length ? `(${present.join(', ')})` : '';
    });
}

function selectionFor(type: GraphQLOutputType, depth: number): fc.Arbitrary<string> {
  const named = getNamedType(type);
  if (isLeafType(named)) return fc.oneof({ weight: 19, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.constant('{ id }') });
  if (!isObjectType(named) && !isInterfaceType(named)) return fc.constant('{ __typename }');
  let fields = Object.values(named.getFields()) as GraphQLField<unknown, unknown>[];
  if (depth >= 3) fields = fields.filter((f) => isLeafType(getNamedType(f.type)));
  if (fields.length === 0) return fc.constant('{ __typename }');
  return fc
    .subarray(fields, { minLength: 1, maxLength: Math.min(4, fields.length) })
    .chain((picked) => fc.tuple(...picked.map((f) => fieldText(f, depth + 1))))
    .map((parts) => `{ ${parts.join(' ')} }`);
}

function fieldText(field: GraphQLField<unknown, unknown>, depth: number): fc.Arbitrary<string> {
  return fc
    .tuple(sometimes(fc.constantFrom('a', 'b', '__typename', 'x1'), 15), argumentsFor(field.args), selectionFor(field.type, depth), sometimes(fc.constantFrom('@skip(if: true)', '@include(if: false)', '@deprecated', '@nope'), 10))
    .map(([alias, args, selection, directive]) => `${alias ? `${alias}: ` : ''}${field.name}${args}${directive ? ` ${directive}` : ''} ${selection}`);
}

function operationArb(): fc.Arbitrary<string> {
  const query = schema.getQueryType();
  const mutation = schema.getMutationType();
  const roots = [query, mutation].filter((r) => r !== null && r !== undefined);
  return fc.constantFrom(...roots).chain((root) =>
    fc
      .subarray(Object.values(root.getFields()) as GraphQLField<unknown, unknown>[], { minLength: 1, maxLength: Math.min(3, Object.keys(root.getFields()).length) })
      .chain((fields) => fc.tuple(fc.constantFrom('query ', ''), ...fields.map((f) => fieldText(f, 1))))
      .map(([keyword, ...parts]) => `${root === mutation ? 'mutation ' : keyword}{ ${parts.join(' ')} }`),
  );
}

const weirdDocuments = fc.oneof(
  fc.string({ maxLength: 100 }),
  fc.constantFrom(
    '{',
    '}',
    '{ me }',
    '{ me { id } ',
    '{ __schema { types { name fields { name } } } }',
    '{ __type(name: "Query") { name } }',
    'query A { me { id } } query B { me { id } }',
    'fragment F on Query { ...F } { ...F }',
    'subscription { me { id } }',
    '{ me { id @skip(if: $x) } }',
    'query ($id: ID!) { integration(id: $id) { id } }',
    'query ($n: Int) { auditLogs(first: $n) { nodes { id } } }',
    `{ ${Array.from({ length: 500 }, (_, i) => `a${i}: me { id }`).join(' ')} }`,
    `{ ${'organization { '.repeat(50)}id${' }'.repeat(50)} }`,
    `{ ${'a { '.repeat(200)}b${' }'.repeat(200)} }`,
    `{ auditLogs(first: 100000) { nodes { id detail } edges { node { id } } } }`,
    `{ integrations { statusDetail { lastError } } integration(id: "${'x'.repeat(300)}") { id } }`,
    '"""unterminated',
    // mercurius falls back to JSON.parse(query) as a ready-made AST when the text does not parse
    '0',
    '"x"',
    'null',
    '[]',
    '{}',
    '{"kind":"Document","definitions":[{}]}',
    '{"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","selectionSet":{"kind":"SelectionSet","selections":[]}}]}',
    '{ me { id } } # comment \u0000',
  ),
  fc.constant(null).map(() => `mutation { ${Array.from({ length: 50 }, (_, i) => `o${i}: createOrganization(name: "n${i}") { id }`).join(' ')} }`),
  fc.constant(null).map(() => 'x'.repeat(100_001)),
);

const graphqlBody = () =>
  fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record({ query: fc.oneof({ weight: 4, arbitrary: operationArb() }, { weight: 2, arbitrary: weirdDocuments }), variables: sometimes(fc.oneof(fc.dictionary(fc.constantFrom('id', 'n', 'x', 'name'), fc.jsonValue({ maxDepth: 2 })), fc.jsonValue({ maxDepth: 1 })), 30), operationName: sometimes(fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom('A', 'B', null)), 20) }, { requiredKeys: ['query'] })
      .map((op): Body => ({ kind: 'json', value: op })),
  },
  { weight: 1, arbitrary: fc.array(fc.record({ query: operationArb() }), { minLength: 1, maxLength: 6 }).map((ops): Body => ({ kind: 'json', value: ops })) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((value): Body => ({ kind: 'json', value })) },
  { weight: 1, arbitrary: rawBodies.map((text): Body => ({ kind: 'raw', text })) },
);

// ---------------------------------------------------------------- 1. properties over every route

describe('hostile input', () => {
  it('every documented REST route survives arbitrary bodies, headers, path segments and credentials', { timeout: 600_000 }, async () => {
    expect(checker.routes.length).toBeGreaterThan(20);
    await fc.assert(
      fc.asyncProperty(restCase(), async ({ route: key, method, segments, query, headers, cred, goodCsrf, body }) => {
        const route = checker.routes.find((r) => `${r.method} ${r.path}` === key) as Route;
        const { payload, describe } = payloadOf(body);
        const finalHeaders = defaultContentType(withCredentials(cred, headers as Record<string, string>, goodCsrf), payload);
        await runCase({ method, url: urlFor(route, segments, query), headers: finalHeaders, body: describe }, payload);
      }),
      { numRuns: RUNS.rest },
    );
  });

  it('POST /query survives arbitrary and schema-derived GraphQL documents, batches and headers', { timeout: 600_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(graphqlBody(), sometimes(hostileHeaders(), 50), credArb, fc.boolean(), async (body, headers, cred, goodCsrf) => {
        const { payload, describe } = payloadOf(body);
        const plain = (headers ?? {}) as Record<string, string>;
        const finalHeaders = defaultContentType(withCredentials(cred, plain, goodCsrf), payload);
        await runCase({ method: 'POST', url: '/query', headers: finalHeaders, body: describe }, payload);
      }),
      { numRuns: RUNS.graphql },
    );
  });
});

// ---------------------------------------------------------------- 2. a documented walk through every route

describe('OpenAPI conformance', () => {
  it('a happy walk through every documented route answers as documented', async () => {
    const problems: string[] = [];
    const covered = new Set<string>();
    const call = async (name: string, method: string, url: string, expected: number, headers: Record<string, string> = {}, payload?: unknown) => {
      const body = payload === undefined ? undefined : typeof payload === 'string' ? payload : JSON.stringify(payload);
      const finalHeaders = body !== undefined && !('content-type' in headers) ? { ...headers, 'content-type': 'application/json' } : headers;
      const res = await t.fastify.inject({ method: method as 'GET', url, headers: finalHeaders, ...(body !== undefined ? { payload: body } : {}) });
      const sent = { method, url, headers: finalHeaders, body: body ?? '' };
      const checked = { statusCode: res.statusCode, headers: res.headers, body: res.body };
      problems.push(...responseProblems(sent, checked).map((p) => `${name}: ${p}`));
      const route = checker.route(method, url);
      if (route && res.statusCode < 400) covered.add(`${method} ${route.path}`);
      expect(res.statusCode, `${name}: ${res.body.slice(0, 300)}`).toBe(expected);
      return res;
    };

    await call('liveness', 'GET', '/livez', 200);
    await call('readiness', 'GET', '/readyz', 200);
    await call('OpenAPI document', 'GET', '/api-docs', 200);

    const email = `happy-${Date.now()}@example.com`;
    const password = 'a perfectly happy password';
    issued.password.add(password);
    await call('register', 'POST', '/v1/register', 201, {}, { email, password, name: 'Happy' });
    const signedIn = await call('login', 'POST', '/v1/login', 200, {}, { email, password });
    const token = signedIn.json().accessToken as string;
    const organizationId = signedIn.json().organizationId as string;
    const session = signedIn.cookies.find((c) => c.name === 'session')?.value ?? '';
    issued.jwt.add(token);
    const auth = bearer(token);
    await call('csrf (anonymous)', 'GET', '/v1/csrf', 200);
    await call('csrf (session)', 'GET', '/v1/csrf', 200, { cookie: `session=${session}` });
    await call('account access', 'GET', '/v1/account/access', 200, auth);
    const second = await call('create organization', 'POST', '/v1/organizations', 201, auth, { name: 'Second' });
    const switched = await call('switch', 'POST', '/v1/account/switch', 200, auth, { organizationId: second.json().organization.id });
    issued.jwt.add(switched.json().accessToken);
    await call('switch back', 'POST', '/v1/account/switch', 200, bearer(switched.json().accessToken), { organizationId });
    await call('providers', 'GET', '/v1/providers', 200, auth);

    // Connect GitHub with the POST callback, Slack with the provider's GET redirect.
    const started = await call('start', 'POST', '/v1/integrations/oauth/start', 200, auth, { provider: 'github', redirectUri: REDIRECT_URI });
    const tx = started.cookies.find((c) => c.name === 'oauth_tx')?.value ?? '';
    const approved = gh.authorize(started.json().authUrl, 'happycat');
    await call('callback (POST)', 'POST', '/v1/integrations/oauth/callback', 200, { cookie: `oauth_tx=${tx}` }, { provider: 'github', code: approved.code, state: approved.state });
    const slackStart = await startFlow(t.fastify, token, 'slack');
    const slackApproved = slack.authorize(slackStart.authUrl, 'happysam');
    const redirected = await call('callback (GET)', 'GET', `/v1/integrations/oauth/callback?code=${encodeURIComponent(slackApproved.code)}&state=${encodeURIComponent(slackApproved.state)}`, 302, { cookie: `oauth_tx=${slackStart.txCookie}` });
    expect(redirected.headers.location).toMatch(/^http:\/\/127\.0\.0\.1:8080\/app\/integrations\?status=connected&provider=slack&integration=[0-9A-Z]{26}$/);
    const denyStart = await startFlow(t.fastify, token, 'github');
    const denied = gh.deny(denyStart.authUrl);
    const deniedRedirect = await call('callback (GET, denied)', 'GET', `/v1/integrations/oauth/callback?error=access_denied&state=${encodeURIComponent(denied.state)}`, 302, { cookie: `oauth_tx=${denyStart.txCookie}` });
    expect(deniedRedirect.headers.location).toContain('error=ACCESS_DENIED');

    const listed = await call('list integrations', 'GET', '/v1/integrations', 200, auth);
    const slackId = (listed.json().integrations as { id: string; provider: string }[]).find((i) => i.provider === 'slack')?.id ?? '';
    await call('token', 'GET', '/v1/integrations/github/token', 200, auth);
    await call('status', 'GET', '/v1/integrations/github/status', 200, auth);
    await call('refresh', 'POST', '/v1/integrations/github/refresh', 200, auth);
    await call('proxy GET', 'GET', '/v1/integrations/github/proxy/user', 200, auth);
    await call('proxy HEAD', 'HEAD', '/v1/integrations/github/proxy/user', 200, auth);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) await call(`proxy ${method}`, method, '/v1/integrations/github/proxy/echo/x?y=1', 200, auth, { a: 1 });
    await call('proxy GET (Slack)', 'GET', '/v1/integrations/slack/proxy/auth.test', 200, auth);
    // Passthrough statuses other than 200 must be documented too (a provider answers 201, 204, 302, 404, 422…).
    await call('proxy passthrough 404', 'GET', '/v1/integrations/github/proxy/no/such/thing', 404, auth);
    await call('proxy passthrough 302', 'GET', '/v1/integrations/github/proxy/redirect', 302, auth);
    await call('GraphQL', 'POST', '/query', 200, auth, { query: '{ me { id } integrations { id status } }' });
    await call('GraphQL over GET', 'GET', '/query?query=%7Bme%7Bid%7D%7D', 405);
    const pat = (await gql(token, 'mutation { createPersonalAccessToken(name: "walk") { token } }')).createPersonalAccessToken.token as string;
    const api = (await gql(token, 'mutation { createAPIToken(name: "walk") { token } }')).createAPIToken.token as string;
    await call('account access (PAT)', 'GET', '/v1/account/access', 200, bearer(pat));
    await call('account access (API token)', 'GET', '/v1/account/access', 200, bearer(api));
    const minted = await call('connect session', 'POST', '/v1/connect/sessions', 201, bearer(api), { redirectUri: REDIRECT_URI, allowedProviders: ['github'], endUser: { id: 'walker' } });
    await call('connect session status', 'GET', `/v1/connect/sessions/${minted.json().session.id}`, 200, bearer(api));
    await call('list connect sessions', 'GET', '/v1/connect/sessions?status=pending&first=5', 200, bearer(api));
    await call('revoke connect session', 'DELETE', `/v1/connect/sessions/${minted.json().session.id}`, 200, bearer(api));
    await call('delete integration', 'DELETE', `/v1/integrations/${slackId}`, 200, auth);
    await call("list an end user's integrations", 'GET', '/v1/integrations?provider=github&endUser=walker', 200, auth);
    await call("delete an end user's integrations", 'DELETE', '/v1/integrations?endUser=walker', 200, auth);
    // Organizations as a whole (CONTRACT.md §5d): read and renamed by their owner, listed by a system administrator's service token, offboarded by the owner.
    const secondId = second.json().organization.id as string;
    await call('read organization', 'GET', `/v1/organizations/${secondId}`, 200, auth);
    await call('rename organization', 'PATCH', `/v1/organizations/${secondId}`, 200, auth, { name: 'Second, renamed' });
    await t.database.db.execute(sql`UPDATE users SET system_admin = true WHERE id = ${signedIn.json().user.id}`);
    const serviceToken = (await gql(token, 'mutation { createServiceToken(name: "walk") { token } }')).createServiceToken.token as string;
    await call('list organizations (service token)', 'GET', '/v1/organizations?first=5', 200, bearer(serviceToken));
    await call('find organizations (system administrator)', 'GET', '/v1/organizations?q=second&first=5', 200, auth);
    const deliveries = await call('webhook deliveries', 'GET', '/v1/webhooks/deliveries?status=pending&eventType=organization.created&first=5', 200, auth);
    await call('retry a delivery', 'POST', `/v1/webhooks/deliveries/${deliveries.json().deliveries[0]?.id}/retry`, 200, auth);
    await call('account access (service token)', 'GET', '/v1/account/access', 200, { ...bearer(serviceToken), 'x-organization-id': organizationId });
    await call('offboard organization', 'DELETE', `/v1/organizations/${secondId}`, 200, auth);

    // Documented errors.
    await call('401', 'GET', '/v1/integrations', 401);
    await call('409', 'POST', '/v1/register', 409, {}, { email, password });
    await call('401 login', 'POST', '/v1/login', 401, {}, { email, password: 'not the password at all' });
    await call('415', 'POST', '/v1/register', 415, { 'content-type': 'text/plain' }, 'hello');
    await call('413', 'POST', '/v1/organizations', 413, auth, { name: 'x'.repeat(ONE_MIB) });
    await call('400', 'POST', '/v1/organizations', 400, auth, { name: '' });
    await call('404 route', 'GET', '/v1/nothing-here', 404, auth);
    await call('404 integration', 'GET', '/v1/integrations/gitlab/token', 404, auth);
    await call('403 CSRF', 'POST', '/v1/organizations', 403, { cookie: `session=${session}` }, { name: 'x' });
    await call('logout', 'POST', '/v1/logout', 200, auth);

    problems.push(...fakeProblems({ apiOnly: false }), ...logProblems());
    // Every documented route is walked with a success (GET /query only ever answers 405): a new route needs a line above.
    const uncovered = checker.routes.map((r) => `${r.method} ${r.path}`).filter((key) => !covered.has(key) && key !== 'GET /query');
    expect({ problems, uncovered }).toEqual({ problems: [], uncovered: [] });
  });
});

// ---------------------------------------------------------------- regressions found by the properties

describe('hostile input, pinned', () => {
  it('answers malformed percent-encoding and over-long path parameters in the contract error shape', async () => {
    const problems: string[] = [];
    for (const method of ['GET', 'HEAD', 'POST']) {
      for (const url of ['/v1/integrations/%ZZ/token', '/v1/integrations/github/proxy/%E0%A4%A', `/v1/integrations/${'x'.repeat(201)}/status`, `/v1/integrations/${'x'.repeat(201)}/proxy/user`]) {
        const sent = { method, url, headers: bearer(world.owner.token), body: '' };
        problems.push(...responseProblems(sent, await send(sent)).map((p) => `${method} ${url.slice(0, 60)}: ${p}`));
      }
    }
    expect(problems).toEqual([]);
  });

  it('treats a GraphQL query that is not GraphQL text (JSON literals, hand-made ASTs) as an input error', async () => {
    const problems: string[] = [];
    for (const query of ['0', '1', '"x"', 'null', '[]', '{}', '{"kind":"Document","definitions":[{}]}', '{"kind":"Document"}']) {
      const sent = { method: 'POST', url: '/query', headers: { ...bearer(world.owner.token), 'content-type': 'application/json' }, body: JSON.stringify({ query }) };
      const res = await send(sent, sent.body);
      problems.push(...responseProblems(sent, res).map((p) => `${JSON.stringify(query)}: ${p}`));
    }
    problems.push(...logProblems());
    expect(problems).toEqual([]);
  });

  it('answers NUL characters in any string input with an input error, never a 500 (PostgreSQL refuses U+0000 in text)', async () => {
    await heal();
    const problems: string[] = [];
    const NUL = '\u0000';
    const rest: [string, string, Record<string, string>, unknown][] = [
      ['POST', '/v1/login', {}, { email: `a${NUL}@example.com`, password: 'whatever it is' }],
      ['POST', '/v1/register', {}, { email: `nul-${Date.now()}@example.com`, password: 'long enough password', name: `a${NUL}` }],
      ['POST', '/v1/organizations', bearer(world.owner.token), { name: `a${NUL}` }],
      ['POST', '/v1/account/switch', bearer(world.owner.token), { organizationId: `a${NUL}` }],
    ];
    for (const [method, url, headers, body] of rest) {
      const sent = { method, url, headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) };
      problems.push(...responseProblems(sent, await send(sent, sent.body)).map((p) => `${url}: ${p}`));
    }
    const graphql = [
      '{ auditLogs(after: "\\u0000") { nodes { id } } }',
      '{ integration(id: "a\\u0000") { id } }',
      'mutation { createOrganization(name: "a\\u0000") { id } }',
      'mutation { addMember(email: "a\\u0000@example.com", role: "member") { role } }',
      'mutation { acceptInvitation(id: "\\u0000", token: "\\u0000") { id } }',
      'mutation { declineInvitation(id: "\\u0000") { id } }',
      'mutation { revokeInvitation(id: "\\u0000") { id } }',
      'mutation { setMemberRole(email: "a\\u0000@example.com", role: "admin") { role } }',
      'mutation { removeMember(email: "a\\u0000@example.com") }',
      'mutation { switchOrganization(organizationId: "\\u0000") { organizationId } }',
      'mutation { refreshIntegration(id: "\\u0000") { id } }',
      'mutation { createPersonalAccessToken(name: "\\u0000") { id } }',
      'mutation { revokePersonalAccessToken(id: "\\u0000") { id } }',
      'mutation { createAPIToken(name: "\\u0000") { id } }',
      'mutation { revokeAPIToken(id: "\\u0000") { id } }',
    ];
    for (const query of graphql) {
      const sent = { method: 'POST', url: '/query', headers: { ...bearer(world.owner.token), 'content-type': 'application/json' }, body: JSON.stringify({ query }) };
      problems.push(...responseProblems(sent, await send(sent, sent.body)).map((p) => `${query}: ${p}`));
    }
    expect(problems).toEqual([]);
  });

  it('answers unpaired UTF-16 surrogates in string input with an input error, never a 500 (PostgreSQL json refuses them)', async () => {
    await heal();
    const problems: string[] = [];
    const rest: [string, string, Record<string, string>, string][] = [
      ['POST', '/v1/organizations', bearer(world.owner.token), '{"name":"\\ud800"}'],
      ['POST', '/v1/organizations', bearer(world.owner.token), '{"name":"a\\udfff"}'],
      ['POST', '/v1/register', {}, `{"email":"lone-${Date.now()}@example.com","password":"long enough password","name":"\\ud83d"}`],
    ];
    for (const [method, url, headers, body] of rest) {
      const sent = { method, url, headers: { ...headers, 'content-type': 'application/json' }, body };
      problems.push(...responseProblems(sent, await send(sent, body)).map((p) => `${url} ${body}: ${p}`));
    }
    const query = 'mutation { createOrganization(name: "\\ud800") { id } }';
    const sent = { method: 'POST', url: '/query', headers: { ...bearer(world.owner.token), 'content-type': 'application/json' }, body: JSON.stringify({ query }) };
    problems.push(...responseProblems(sent, await send(sent, sent.body)).map((p) => `${query}: ${p}`));
    expect(problems).toEqual([]);
  });

  it('answers deeply nested JSON bodies to the proxy without a 500', async () => {
    await heal();
    const problems: string[] = [];
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      const body = `${'['.repeat(5000)}${']'.repeat(5000)}`;
      const sent = { method, url: '/v1/integrations/github/proxy/echo', headers: { ...bearer(world.owner.token), 'content-type': 'application/json' }, body: '(5000 nested arrays)' };
      problems.push(...responseProblems(sent, await send(sent, body)).map((p) => `${method}: ${p}`));
    }
    expect(problems).toEqual([]);
  });

  it('answers expanded-year dates (+275760-…) in token expiries with an input error, never a resolver failure', async () => {
    const problems: string[] = [];
    for (const date of ['+275760-09-13T00:00:00.000Z', '+010000-01-01T00:00:00Z']) {
      for (const mutation of ['createPersonalAccessToken', 'createAPIToken']) {
        const query = `mutation { ${mutation}(name: "far", expiresAt: ${JSON.stringify(date)}) { id expiresAt } }`;
        const sent = { method: 'POST', url: '/query', headers: { ...bearer(world.owner.token), 'content-type': 'application/json' }, body: JSON.stringify({ query }) };
        problems.push(...responseProblems(sent, await send(sent, sent.body)).map((p) => `${mutation} ${date}: ${p}`));
      }
    }
    expect(problems).toEqual([]);
  });

  it('forwards the same provider path whether the provider id in our URL is percent-encoded or not', async () => {
    await heal();
    const forwarded: string[] = [];
    for (const provider of ['github', '%67ithub', '%67%69%74%68%75%62']) {
      const before = gh.requests.length;
      const res = await t.fastify.inject({ method: 'GET', url: `/v1/integrations/${provider}/proxy/echo/a`, headers: bearer(world.owner.token) });
      // Either refused outright, or forwarded to exactly /api/echo/a.
      forwarded.push(`${provider} → ${gh.requests.slice(before).map((r) => r.path).join(', ') || `refused ${res.statusCode}`}`);
    }
    expect(forwarded).toEqual(['github → /api/echo/a', expect.stringMatching(/^%67ithub → (\/api\/echo\/a|refused 4\d\d)$/), expect.stringMatching(/^%67%69%74%68%75%62 → (\/api\/echo\/a|refused 4\d\d)$/)]);
  });
});

// ---------------------------------------------------------------- 3. proxy SSRF

const agent = new Agent({ keepAlive: false, maxSockets: 4 });
afterAll(() => agent.destroy());

/**
 * Printable ASCII stays as it is (`..`, `\\`, `%2e`, `//` reach the app unnormalized); anything else is sent
 * as percent-encoded UTF-8, as clients do (Node's HTTP parser refuses raw non-ASCII request targets).
 */
function onTheWire(path: string): string {
  let out = '';
  for (const byte of Buffer.from(path, 'utf8')) out += byte >= 0x21 && byte <= 0x7e ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  return out;
}

/** A request over a real socket, the request target exactly as given (see onTheWire). */
function sendRaw(method: string, path: string, headers: Record<string, string>, body?: string): Promise<CheckedResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: serverPort, method, path: onTheWire(path), headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

function ssrfBlocks(): string[] {
  const a = attacker.host;
  return [
    '..',
    '.',
    '%2e%2e',
    '%2E%2E',
    '.%2e',
    '%2e.',
    '%2e',
    '%252e%252e',
    '%c0%ae%c0%ae',
    '%uff0e%uff0e',
    '．．',
    '\u2024\u2024',
    '..;',
    '%2F',
    '%2f',
    '%5C',
    '%5c',
    '%252F',
    '\\',
    '\\\\',
    '/',
    '//',
    '///',
    'http:',
    'https:',
    'HTTP:',
    `http://${a}`,
    `//${a}`,
    `\\\\${a}`,
    `@${a}`,
    `user@${a}`,
    `:@${a}`,
    `%40${a}`,
    a,
    `localhost:${a.split(':')[1]}`,
    `[::1]:${a.split(':')[1]}`,
    '127.1',
    '0x7f.1',
    '@',
    '%40',
    ':',
    '%3A',
    '#',
    '%23',
    '%3F',
    ';',
    '%00',
    '%0d%0a',
    '%09',
    '%20',
    '\uff0f',
    '\u2215',
    '\u29f5',
    '\u2044',
    'ｈｔｔｐ：',
    'file:',
    'javascript:',
    'user',
    'echo',
    'api',
    'login',
    'oauth',
    'access_token',
    'x'.repeat(3000),
  ];
}

function classicSsrfPayloads(): string[] {
  const a = attacker.host;
  return [
    '..',
    '../',
    '../../',
    '../../../login/oauth/access_token',
    '..%2f..%2flogin%2foauth%2faccess_token',
    '%2e%2e/%2e%2e/login/oauth/access_token',
    '%2e%2e%2f%2e%2e%2f',
    '..%5c..%5c',
    '%5c..%5c',
    '..\\..\\',
    '%252e%252e%252f',
    '.%2e/.%2e/',
    '%c0%ae%c0%ae/',
    '．．/．．/',
    '..;/..;/',
    'user/../../login/oauth/access_token',
    'user/%2e%2e/%2e%2e/login/oauth/access_token',
    `/${a}/x`,
    `//${a}/x`,
    `///${a}`,
    `/\\${a}`,
    `\\\\${a}\\x`,
    `http://${a}/`,
    `http:/${a}`,
    `http:${a}`,
    `https://${a}`,
    `HTTP://${a}`,
    `@${a}`,
    `user@${a}`,
    `:@${a}/`,
    `%40${a}`,
    `user?x=@${a}`,
    `user?@${a}/`,
    `?url=http://${a}/`,
    `user#@${a}`,
    `user%23@${a}`,
    `%2F%2F${a}`,
    `%5C%5C${a}`,
    `\u2215\u2215${a}`,
    `\uff0f\uff0f${a}`,
    `localhost:${a.split(':')[1]}/`,
    `0.0.0.0:${a.split(':')[1]}`,
    'file:///etc/passwd',
    'data:text/plain,x',
    'user%00',
    'user%0d%0aHost:%20evil',
    'x'.repeat(10_000),
    'a/'.repeat(2000),
    '',
  ];
}

/** Sends a proxy call as the owner (admin rights, header credentials) plus headers that must not pass. */
async function ssrfAttempt(method: string, provider: Provider, tail: string, problems: string[]): Promise<CheckedResponse> {
  const headers: Record<string, string> = {
    ...bearer(world.owner.token),
    host: attacker.host,
    cookie: `session=${world.owner.cookies.session}`,
    'x-csrf-token': 'x',
    'x-organization-id': world.owner.organizationId,
    'x-forwarded-for': '203.0.113.7',
    'x-forwarded-host': attacker.host,
    'x-request-id': 'ssrf',
    origin: `http://${attacker.host}`,
  };
  const body = method === 'GET' || method === 'HEAD' ? undefined : JSON.stringify({ url: `http://${attacker.host}/` });
  if (body !== undefined) headers['content-type'] = 'application/json';
  const path = `/v1/integrations/${provider}/proxy/${tail}`;
  const res = await sendRaw(method, path, headers, body);
  const where = `${method} ${path.slice(0, 120)} → ${res.statusCode}`;
  if (res.statusCode >= 500) problems.push(`${where}: ${res.body.slice(0, 200)}`);
  problems.push(...leakProblems({ method, url: path, headers, body: body ?? '' }, res).map((p) => `${where}: ${p}`));
  problems.push(...fakeProblems({ apiOnly: true }).map((p) => `${where}: ${p}`));
  if (res.statusCode === 409 || res.statusCode === 401) world.dirty = true;
  return res;
}

describe('proxy SSRF', () => {
  it('classic traversal, encoded-slash, absolute-URL and unicode payloads never leave the API base', { timeout: 120_000 }, async () => {
    await heal();
    fakeProblems({ apiOnly: false });
    const problems: string[] = [];
    // The harness does reach the provider: a plain path is proxied.
    const plain = await ssrfAttempt('GET', 'github', 'user', problems);
    expect(plain.statusCode, plain.body).toBe(200);
    expect(gh.requests.at(-1)?.path).toBe('/api/user');
    for (const payload of classicSsrfPayloads()) {
      for (const provider of ['github', 'slack'] as const) {
        for (const method of ['GET', 'POST']) await ssrfAttempt(method, provider, payload, problems);
      }
    }
    problems.push(...logProblems());
    expect(problems).toEqual([]);
    expect(attacker.requests).toEqual([]);
  });

  it('generated paths from building blocks never reach the attacker or leave the API base', { timeout: 600_000 }, async () => {
    await heal();
    fakeProblems({ apiOnly: false });
    const blocks = ssrfBlocks();
    const tail = fc.oneof(
      { weight: 4, arbitrary: fc.array(fc.tuple(fc.constantFrom(...blocks), fc.constantFrom('/', '/', '', '%2F', '\\', '//')), { minLength: 1, maxLength: 8 }).map((parts) => parts.map(([b, sep]) => b + sep).join('')) },
      { weight: 1, arbitrary: fc.stringMatching(/^[a-z0-9./%@:?#\\~-]{0,40}$/) },
      { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
    );
    const query = sometimes(fc.constantFrom(`?x=@${attacker.host}`, `?@${attacker.host}/`, `?url=http://${attacker.host}/`, `?redirect=//${attacker.host}`, `?%40${attacker.host}`, '?next=..%2F..%2F', '?a=1#@evil'), 30);
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'), fc.constantFrom<Provider>('github', 'slack'), tail, query, async (method, provider, path, q) => {
        await heal();
        const problems: string[] = [];
        await ssrfAttempt(method, provider, `${path}${q ?? ''}`, problems);
        expect(problems).toEqual([]);
      }),
      { numRuns: RUNS.ssrf },
    );
    expect(logProblems()).toEqual([]);
    expect(attacker.requests).toEqual([]);
  });
});

// ---------------------------------------------------------------- classes found by an outside attack

describe('hostile classes: config values', () => {
  it('no config problem shows any run of 8 characters of a secret setting, whatever its value', async () => {
    const { loadConfig, ConfigError } = await import('../src/config/load.ts');
    const { settingsOf } = await import('../src/config/schema.ts');
    const secretEnv = settingsOf()
      .filter((setting) => setting.secret && setting.env)
      .map((setting) => setting.env as string);
    expect(secretEnv).toEqual(expect.arrayContaining(['ENCRYPTION_KEYS', 'JWT_SECRET', 'JWT_SECRETS', 'DATABASE_URL', 'BOOTSTRAP_ADMIN_PASSWORD']));
    const names = [...secretEnv, 'INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET', 'INTEGRATION_OAUTH_SLACK_CLIENT_SECRET', 'EVENTS_WEBHOOK_SECRET', 'EVENTS_WEBHOOK_URL'];
    const value = fc.oneof(
      fc.string({ minLength: 8, maxLength: 120 }),
      fc.stringMatching(/^[A-Za-z0-9+/=]{8,88}$/),
      fc.stringMatching(/^[a-z0-9]{1,8}:[A-Za-z0-9+/=]{8,60}(,[A-Za-z0-9+/=:]{8,60})?$/),
      fc.stringMatching(/^[a-z]{2,10}:\/\/[a-z]{1,8}:[A-Za-z0-9]{8,30}@[a-z.]{1,20}(:[0-9]{1,5})?\/[a-z]{0,10}$/),
    );
    fc.assert(
      fc.property(fc.constantFrom(...names), value, fc.boolean(), (name, secret, withEmail) => {
        const env: Record<string, string> = { [name]: secret };
        if (withEmail) Object.assign(env, { BOOTSTRAP_ADMIN_EMAIL: 'x', EVENTS_WEBHOOK_URL: env.EVENTS_WEBHOOK_URL ?? 'https://hooks.example.com/x' });
        if (name !== 'ENCRYPTION_KEYS') env.PORT = 'not a port'; // a problem elsewhere, so every run has output
        let text = '';
        try {
          loadConfig({ env, persistGeneratedSecrets: false });
        } catch (error) {
          if (!(error instanceof ConfigError)) throw error;
          text = error.problems.join('\n');
        }
        for (let at = 0; at + 8 <= secret.length; at++) {
          const run = secret.slice(at, at + 8);
          if (run.trim().length === 8 && !/^[a-z ]+$/.test(run)) expect(text, `${name}=${JSON.stringify(secret)}`).not.toContain(run);
        }
      }),
      { numRuns: Math.ceil(400 * SCALE) },
    );
  });
});

describe('hostile classes: provider-sent text, slow clients, batch budgets', () => {
  let app: TestApp;
  let fake: FakeProvider;
  let evil: Server;
  let evilAnswer = { status: 200, body: '{}' };
  let account: Account;
  let appPort = 0;

  beforeAll(async () => {
    fake = await startFakeGitHub();
    evil = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(evilAnswer.status, { 'content-type': 'application/json' }).end(evilAnswer.body));
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    app = await createTestApp({
      background: false,
      env: { ...providerEnv(fake), INTEGRATION_OAUTH_GITHUB_TOKEN_URL: `http://127.0.0.1:${(evil.address() as AddressInfo).port}/token`, RATE_LIMIT_MAX: '0', REQUEST_TIMEOUT: '1' },
    });
    account = await registerAndLogin(app.fastify, 'classes');
    await app.fastify.listen({ port: 0, host: '127.0.0.1' });
    appPort = (app.fastify.server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await app?.close();
    await fake?.close();
    await new Promise<void>((resolve) => {
      evil?.close(() => resolve());
      evil?.closeAllConnections();
    });
  });

  it('text a token endpoint sends reaches the log only as a short identifier, whatever it is', { timeout: 300_000 }, async () => {
    const text = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.string({ unit: 'binary', maxLength: 100 }),
      fc.stringMatching(/^[A-Za-z0-9_.:-]{1,80}$/),
      fc.constantFrom('<script>alert(1)</script>', `client_secret=${fake.clientSecret}`, 'x'.repeat(100_000), '{"nested":"json"}', '\u0000\u001b[31m', 'line\nbreak'),
    );
    const shape = fc.constantFrom(
      (error: string) => ({ status: 200, body: JSON.stringify({ error }) }),
      (error: string) => ({ status: 400, body: JSON.stringify({ error, error_description: error }) }),
      (error: string) => ({ status: 401, body: JSON.stringify({ error: 'invalid_client', error_description: error, error_uri: error }) }),
    );
    await fc.assert(
      fc.asyncProperty(text, shape, async (error, answer) => {
        evilAnswer = answer(error);
        const started = await startFlow(app.fastify, account.token, 'github');
        const marker = app.logs.lines.length;
        const res = await app.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers: { cookie: `oauth_tx=${started.txCookie}` }, payload: { provider: 'github', code: 'c', state: started.state } });
        expect([400, 502]).toContain(res.statusCode);
        const lines = app.logs.lines.slice(marker);
        const identifier = /^[A-Za-z0-9_.:-]{1,64}$/.test(error);
        for (const line of lines) {
          expect(line.length).toBeLessThan(2048);
          expect(line).not.toContain(fake.clientSecret);
          if (!identifier && error.length >= 12) expect(line).not.toContain(JSON.stringify(error).slice(1, 13));
        }
      }),
      { numRuns: Math.ceil(60 * SCALE) },
    );
  });

  it('slow clients of every kind are closed within REQUEST_TIMEOUT (plus the check interval) while others are served', { timeout: 60_000 }, async () => {
    const { connect: connectSocket } = await import('node:net');
    const slow = (first: string, dribble: string) =>
      new Promise<{ closedAfterMs: number; answer: string }>((resolve) => {
        const socket = connectSocket(appPort, '127.0.0.1');
        const started = Date.now();
        let answer = '';
        let timer: ReturnType<typeof setInterval> | undefined;
        socket.on('data', (data) => (answer += data.toString()));
        socket.on('error', () => {});
        socket.on('close', () => {
          clearInterval(timer);
          resolve({ closedAfterMs: Date.now() - started, answer });
        });
        socket.once('connect', () => {
          if (first) socket.write(first);
          let sent = 0;
          timer = setInterval(() => {
            if (sent < dribble.length && !socket.destroyed) socket.write(dribble[sent++] ?? '');
          }, 200);
        });
      });
    const clients = [
      ...Array.from({ length: 8 }, () => slow('', 'GET /livez HTTP/1.1\r\nHost: x\r\nX-A: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb')),
      ...Array.from({ length: 8 }, () => slow('POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n', '{"email":"aaaaaaaaaaaaaaaaaaaaaa')),
      ...Array.from({ length: 4 }, () => slow('', '')),
    ];
    const served = await fetch(`http://127.0.0.1:${appPort}/livez`);
    expect(served.status).toBe(200);
    for (const client of await Promise.all(clients)) {
      expect(client.closedAfterMs).toBeLessThan(6000);
      if (client.answer) expect(client.answer).toMatch(/^HTTP\/1\.1 408 [^\r]*\r\n[\s\S]*X-Request-ID: [0-9A-Z]{26}[\s\S]*"code":"REQUEST_TIMEOUT"/);
    }
  });

  it('a batch over the cost budget runs nothing, however its cost is spread', { timeout: 300_000 }, async () => {
    const organizations = async () => (await app.fastify.inject({ method: 'POST', url: '/query', headers: bearer(account.token), payload: { query: '{ organizations { id } }' } })).json().data.organizations.length;
    const before = await organizations();
    const operation = fc.oneof(
      // A root field reads the database (10 each time, every alias counted); a field of what it loaded costs 1:
      // up to 455 aliases of `me`, as up to 2,500 were before, span the budget.
      fc.integer({ min: 1, max: 455 }).map((n) => ({ query: `{ ${Array.from({ length: n }, (_, i) => `m${i}: me { id }`).join(' ')} }`, cost: 11 * n })),
      fc.tuple(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 1, max: 100 })).map(([n, first]) => ({
        query: `{ ${Array.from({ length: n }, (_, i) => `a${i}: auditLogs(first: ${first}) { nodes { id } }`).join(' ')} }`,
        cost: n * (10 + 2 * first),
      })),
    );
    let created = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 2, maxLength: 4 }), async (operations) => {
        const total = operations.reduce((sum, op) => sum + op.cost, 0);
        const batch = [{ query: 'mutation { createOrganization(name: "Budgeted") { id } }' }, ...operations.map(({ query }) => ({ query }))];
        const res = await app.fastify.inject({ method: 'POST', url: '/query', headers: bearer(account.token), payload: batch });
        if (total + 11 > 5000) {
          expect(res.statusCode).toBe(400);
          for (const result of res.json() as { data?: unknown }[]) expect(result.data).toBeUndefined();
        } else {
          expect(res.statusCode, res.body.slice(0, 200)).toBe(200);
          created++;
        }
      }),
      { numRuns: Math.ceil(40 * SCALE) },
    );
    // Only batches under the budget created their organization.
    expect(await organizations()).toBe(before + created);
  });
});
