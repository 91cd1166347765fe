/**
 * The world the hostile tests attack (test/hostile/*.test.ts): one app with GitHub and Slack
 * connected, people of every role, credentials of every kind, a loopback "attacker" server that
 * must never hear from us, and every secret issued — so a response or a log line holding one is
 * caught. Each test file that needs it calls `useHostileWorld()` and gets its own.
 *
 * Scale the property runs with HOSTILE_SCALE (e.g. HOSTILE_SCALE=10 for a long soak);
 * reproduce a failure with the seed and path fast-check prints.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import { SessionTokens } from '../../src/identity/credentials.ts';
import type { FakeProvider } from '../fakes/common.ts';
import { startFakeGitHub } from '../fakes/github.ts';
import { startFakeSlack } from '../fakes/slack.ts';
import { type FakeStripe, startFakeStripe } from '../fakes/providers/stripe.ts';
import { createTestApp, TEST_ENCRYPTION_KEY, TEST_JWT_SECRET, type TestApp } from '../helpers/app.ts';
import { eventsEnv, SECRETS } from '../helpers/provider-events.ts';
import { graphqlData } from '../helpers/graphql.ts';
import { type Account, bearer, login, registerAndLogin } from '../helpers/identity.ts';
import { acceptTokenOf } from '../helpers/invitations.ts';
import { OpenApiChecker } from '../helpers/openapi.ts';
import { connect, providerEnv, startFlow } from '../helpers/providers.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhooks.ts';

export const SCALE = Number(process.env.HOSTILE_SCALE ?? '1') || 1;
export const RUNS = { rest: Math.ceil(300 * SCALE), graphql: Math.ceil(150 * SCALE), ssrf: Math.ceil(200 * SCALE) };
export const ONE_MIB = 1024 * 1024;
export const PUBLIC_ORIGIN = 'http://127.0.0.1:8080';

/** docs/contract.md §2: every error code and its status. */
export const CONTRACT_CODES: Readonly<Record<string, number>> = {
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
  PROVIDER_MISCONFIGURED: 502,
  INTERNAL: 500,
};

/** Things that must never reach a client: stack frames, SQL and driver errors, file paths. */
export const INTERNALS = /\bat [^\n"]*\(?[^\n"]*\.[cm]?[jt]s:\d+:\d+\)?|node_modules|\/work\/|syntax error at or near|duplicate key value|violates [a-z ]*constraint|DrizzleQueryError|relation "[a-z_]+"|\bFST_ERR_[A-Z_]+/;

/** A loopback server that must never hear from us. */
export interface Attacker {
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

// Set once the world is up (`useHostileWorld`); importers read them as live bindings.
export let t: TestApp;
export let gh: FakeProvider;
export let slack: FakeProvider;
/** A provider whose credentials a person enters (docs/contract.md §5c): its keys are secrets like tokens. */
export let stripe: FakeStripe;
export let attacker: Attacker;
let receiver: WebhookReceiver;
export let checker: OpenApiChecker;
export let serverPort = 0;

export type Provider = 'github' | 'slack';
export const LOGINS: Record<Provider, string> = { github: 'octo', slack: 'sam' };
/** Users of the happy walk, whose tokens must not leak either. */
export const EXTRA_LOGINS: Record<Provider, string[]> = { github: ['happycat'], slack: ['happysam'] };

export const world = {
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
export type SecretKind = 'jwt' | 'pat' | 'apiToken' | 'capability' | 'providerAccess' | 'providerRefresh' | 'clientSecret' | 'password' | 'serverKey';
export const issued = { jwt: new Set<string>(), capability: new Set<string>(), providerAccess: new Set<string>(), providerRefresh: new Set<string>(), password: new Set<string>() };

export function remember(account: Account): Account {
  issued.jwt.add(account.token);
  if (account.cookies.session) issued.jwt.add(account.cookies.session);
  issued.password.add(account.password);
  return account;
}

export function secrets(): { kind: SecretKind; value: string }[] {
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
    { kind: 'clientSecret', value: SECRETS.github },
    { kind: 'clientSecret', value: SECRETS.slack },
    { kind: 'serverKey', value: TEST_JWT_SECRET },
    { kind: 'serverKey', value: TEST_ENCRYPTION_KEY.slice(TEST_ENCRYPTION_KEY.indexOf(':') + 1) },
  ];
  for (const key of stripe.keysEverIssued) issued.providerAccess.add(key);
  for (const kind of ['jwt', 'capability', 'providerAccess', 'providerRefresh', 'password'] as const) for (const value of issued[kind]) list.push({ kind, value });
  return list.filter((s) => s.value.length >= 8);
}

export const gql = (token: string, query: string, variables?: Record<string, unknown>) => graphqlData(t.fastify, token, query, variables);

async function connectProvider(provider: Provider): Promise<void> {
  const fake = provider === 'github' ? gh : slack;
  const res = await connect(t.fastify, world.owner.token, fake, LOGINS[provider]);
  expect(res.statusCode, res.body).toBe(200);
  world.integrations[provider] = res.json().integration.id;
}

/** Puts back what a run may have broken: sessions logged out, the member removed, integrations deleted or invalid. */
export async function heal(): Promise<void> {
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
  const missing = (['github', 'slack'] as const).filter((provider) => {
    const found = integrations.find((i) => i.provider === provider);
    return !found || found.status === 'invalid';
  });
  // A deleted integration's grant is revoked at the provider after the commit (decision 131): a
  // revocation still on its way would end the grant a reconnect is about to be given, so wait it out.
  if (missing.length > 0) await grantRevocationsSettled();
  for (const provider of missing) await connectProvider(provider);
}

/** Waits (at most 10 s) until no grant revocation of the owner's organization is pending. */
async function grantRevocationsSettled(): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const [row] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM grant_revocations WHERE organization_id = ${world.owner.organizationId}`);
    if ((row?.n ?? 0) === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
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

/**
 * Builds the world under attack for the calling test file, before its tests, and tears it down
 * after: the fakes, the attacker, an owner, an admin, a member, an outsider, both providers
 * connected, a PAT, an API token, a pending flow's state and forged session tokens.
 */
export function useHostileWorld(): void {
  beforeAll(setUp, 120_000);
  afterAll(async () => {
    await t?.close();
    await Promise.all([gh?.close(), slack?.close(), stripe?.close(), attacker?.close(), receiver?.close()]);
  });
}

async function setUp(): Promise<void> {
  [gh, slack, stripe, attacker, receiver] = await Promise.all([startFakeGitHub({ tokenExpiresIn: 28800 }), startFakeSlack(), startFakeStripe(), startAttacker(), startWebhookReceiver()]);
  gh.addUser({ login: LOGINS.github, email: 'octo@example.com', name: 'Octo Cat' });
  gh.addUser({ login: 'happycat', email: 'happy@example.com' });
  slack.addUser({ login: LOGINS.slack, email: 'sam@example.com' });
  slack.addUser({ login: 'happysam', email: 'happysam@example.com' });
  // A webhook gives events their deliveries (the walk retries one); nothing delivers in the background.
  const webhook = { EVENTS_WEBHOOK_URL: receiver.url, EVENTS_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 9).toString('base64')}` };
  const stripeEnv = { INTEGRATION_OAUTH_STRIPE_ENABLED: 'true', INTEGRATION_OAUTH_STRIPE_API_URL: stripe.url };
  t = await createTestApp({ background: false, env: { ...providerEnv(gh), ...providerEnv(slack), ...stripeEnv, ...eventsEnv('github', 'slack'), ...webhook, RATE_LIMIT_MAX: '0' } });
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
}
