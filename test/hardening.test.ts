// What an outside attack broke or weakened, each as a user would notice it (HTTP in;
// HTTP, logs and exit codes out). The classes behind them also run in hostile.test.ts.
import { createServer, type Server } from 'node:http';
import { type AddressInfo, connect as connectSocket, type Socket } from 'node:net';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv, startFlow } from './helpers/providers.ts';

/** A token endpoint that answers whatever the test sets, or forwards to the real fake. */
interface HostileTokenEndpoint {
  url: string;
  /** null: forward to the fake's own token endpoint. */
  answer: { status: number; body: string } | null;
  close(): Promise<void>;
}

async function startHostileTokenEndpoint(forwardTo: () => string): Promise<HostileTokenEndpoint> {
  const endpoint: HostileTokenEndpoint = { url: '', answer: null, close: async () => {} };
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const answer = endpoint.answer;
    if (answer) {
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
      return;
    }
    const forwarded = await fetch(forwardTo(), { method: 'POST', headers: req.headers as Record<string, string>, body: Buffer.concat(chunks) });
    res.writeHead(forwarded.status, { 'content-type': forwarded.headers.get('content-type') ?? 'application/json' }).end(await forwarded.text());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`;
  endpoint.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return endpoint;
}

let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let hostile: HostileTokenEndpoint;
let owner: Account;
let member: Account;
let port = 0;

beforeAll(async () => {
  [gh, slack] = await Promise.all([startFakeGitHub({ tokenExpiresIn: 28800 }), startFakeSlack()]);
  hostile = await startHostileTokenEndpoint(() => gh.tokenUrl);
  gh.addUser({ login: 'octo', email: 'octo@example.com' });
  slack.addUser({ login: 'sam', email: 'sam@example.com' });
  t = await createTestApp({
    background: false,
    env: { ...providerEnv(gh), INTEGRATION_OAUTH_GITHUB_TOKEN_URL: hostile.url, ...providerEnv(slack), RATE_LIMIT_MAX: '0', REQUEST_TIMEOUT: '1' },
    routes: (app) => {
      app.post('/test/slow-handler', { config: { auth: 'public', errors: [] } }, async () => {
        await new Promise((resolve) => setTimeout(resolve, 2500));
        return { success: true };
      });
    },
  });
  owner = await registerAndLogin(t.fastify, 'owner');
  member = await registerAndLogin(t.fastify, 'member');
  await t.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${owner.organizationId}, ${member.userId}, 'member')`);
  member = { ...member, token: await switchTo(member, owner.organizationId) };
  await t.fastify.listen({ port: 0, host: '127.0.0.1' });
  port = (t.fastify.server.address() as AddressInfo).port;
});

afterAll(async () => {
  await t?.close();
  await Promise.all([gh?.close(), slack?.close(), hostile?.close()]);
});

async function switchTo(account: Account, organizationId: string): Promise<string> {
  const res = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(account.token), payload: { organizationId } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().accessToken;
}

async function callback(state: string, code: string, headers: Record<string, string> = {}) {
  return t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers, payload: { provider: 'github', code, state } });
}

describe('text a provider sends', () => {
  const huge = (secret: string) => `${'A'.repeat(50_000)} client_secret=${secret} <script>alert(1)</script> ${'B'.repeat(50_000)}`;

  it('reaches a log line only as a short identifier, else as "unrecognized", whatever the token endpoint answers', async () => {
    // [answer, expected status, the providerCode logged]
    const cases: [{ status: number; body: string }, number, string | undefined][] = [
      [{ status: 200, body: JSON.stringify({ error: huge(gh.clientSecret) }) }, 400, 'unrecognized'], // GitHub's style: HTTP 200 {error}
      [{ status: 400, body: JSON.stringify({ error: huge(gh.clientSecret), error_description: huge(gh.clientSecret) }) }, 400, 'unrecognized'],
      [{ status: 200, body: JSON.stringify({ error: `bad code ${gh.clientSecret}` }) }, 400, 'unrecognized'],
      [{ status: 200, body: JSON.stringify({ error: 'a'.repeat(65) }) }, 400, 'unrecognized'],
      [{ status: 200, body: JSON.stringify({ error: 'bad_verification_code' }) }, 400, 'bad_verification_code'],
      // A refusal (HTTP 400) whose error is no code at all.
      [{ status: 400, body: JSON.stringify({ error: { nested: gh.clientSecret } }) }, 400, 'unrecognized'],
      // Garbage: no JSON at all.
      [{ status: 200, body: `<html>${gh.clientSecret}</html>` }, 502, undefined],
      [{ status: 500, body: huge(gh.clientSecret) }, 502, undefined],
    ];
    try {
      await checkAll(cases);
    } finally {
      hostile.answer = null;
    }
  });

  async function checkAll(cases: [{ status: number; body: string }, number, string | undefined][]): Promise<void> {
    for (const [answer, status, providerCode] of cases) {
      hostile.answer = answer;
      const started = await startFlow(t.fastify, owner.token, 'github');
      const marker = t.logs.lines.length;
      const res = await callback(started.state, 'any-code', { cookie: `oauth_tx=${started.txCookie}` });
      expect(res.statusCode, res.body).toBe(status);
      expect(res.body).not.toContain(gh.clientSecret);
      const lines = t.logs.lines.slice(marker);
      for (const line of lines) {
        expect(line).not.toContain(gh.clientSecret);
        expect(line).not.toContain('<script>');
        expect(line.length).toBeLessThan(2048);
      }
      const logged = lines.map((line) => JSON.parse(line)).find((entry) => entry.msg === 'code exchange failed');
      expect(logged?.providerCode, answer.body.slice(0, 80)).toBe(providerCode);
    }
  }
});

describe('which proxy calls write', () => {
  beforeAll(async () => {
    const connected = await connect(t.fastify, owner.token, slack, 'sam');
    expect(connected.statusCode, connected.body).toBe(200);
  });

  it("is Slack's to say by API method: a member's GET of auth.revoke or chat.postMessage is refused, reads pass", async () => {
    for (const [method, path] of [
      ['GET', 'auth.revoke'],
      ['HEAD', 'auth.revoke'],
      ['GET', 'chat.postMessage?channel=general&text=hi'],
      ['GET', 'auth%2Erevoke'],
      ['GET', 'auth.test/..%2Fauth.revoke'],
      ['POST', 'chat.postMessage'],
    ] as const) {
      const res = await t.fastify.inject({ method, url: `/v1/integrations/slack/proxy/${path}`, headers: bearer(member.token) });
      expect([403, 400], `${method} ${path}: ${res.body}`).toContain(res.statusCode);
    }
    expect(slack.stats.revocations).toBe(0);
    expect(slack.stats.messagesPosted ?? 0).toBe(0);
    const status = await t.fastify.inject({ url: '/v1/integrations/slack/status', headers: bearer(member.token) });
    expect(status.json().status.status).toBe('connected');

    for (const [method, path] of [
      ['GET', 'auth.test'],
      ['GET', 'conversations.list'],
      ['POST', 'conversations.list'],
    ] as const) {
      const res = await t.fastify.inject({ method, url: `/v1/integrations/slack/proxy/${path}`, headers: bearer(member.token), ...(method === 'POST' ? { payload: {} } : {}) });
      expect(res.statusCode, `${method} ${path}: ${res.body}`).toBe(200);
      expect(res.json().ok).toBe(true);
    }
  });

  it('lets an owner write through Slack whatever the HTTP method', async () => {
    const res = await t.fastify.inject({ url: '/v1/integrations/slack/proxy/chat.postMessage?channel=general&text=hello', headers: bearer(owner.token) });
    expect(res.statusCode, res.body).toBe(200);
    expect(slack.stats.messagesPosted).toBe(1);
  });

  it('keeps the REST rule for GitHub: members read with GET, every other method needs owner/admin', async () => {
    const connected = await connect(t.fastify, owner.token, gh, 'octo');
    expect(connected.statusCode, connected.body).toBe(200);
    expect((await t.fastify.inject({ url: '/v1/integrations/github/proxy/user', headers: bearer(member.token) })).statusCode).toBe(200);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) {
      const res = await t.fastify.inject({ method, url: '/v1/integrations/github/proxy/user', headers: bearer(member.token), payload: {} });
      expect(res.statusCode, method).toBe(403);
    }
  });
});

describe('the callback binding', () => {
  it('is checked before the state is used up: unbound callbacks leave the flow usable by its own browser', async () => {
    const started = await startFlow(t.fastify, owner.token, 'github');
    const outsider = await registerAndLogin(t.fastify, 'outsider');
    const attempts = [
      t.fastify.inject({ url: `/v1/integrations/oauth/callback?state=${encodeURIComponent(started.state)}&error=access_denied` }),
      t.fastify.inject({ url: `/v1/integrations/oauth/callback?state=${encodeURIComponent(started.state)}&code=stolen`, headers: { cookie: 'oauth_tx=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' } }),
      callback(started.state, 'stolen'),
      callback(started.state, 'stolen', bearer(outsider.token)),
      callback(started.state, 'stolen', { cookie: 'oauth_tx=wrong' }),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().code).toBe('INVALID_OAUTH_STATE');
    }
    const approved = gh.authorize(started.authUrl, 'octo');
    const own = await callback(approved.state, approved.code, { cookie: `oauth_tx=${started.txCookie}` });
    expect(own.statusCode, own.body).toBe(200);
    // Used up now, by its own flow.
    expect((await callback(approved.state, approved.code, { cookie: `oauth_tx=${started.txCookie}` })).json().code).toBe('INVALID_OAUTH_STATE');
  });
});

describe('a database failure during optional authentication', () => {
  it('is a 500, not an anonymous caller, and leaves the flow usable once the database is back', async () => {
    const started = await startFlow(t.fastify, owner.token, 'github');
    const approved = gh.authorize(started.authUrl, 'octo');
    await t.database.db.execute(sql`ALTER TABLE sessions RENAME TO sessions_away`);
    let res: Awaited<ReturnType<typeof callback>>;
    try {
      // The starting user's own credentials, and no oauth_tx cookie: only the credential check can bind it.
      res = await callback(approved.state, approved.code, bearer(owner.token));
    } finally {
      await t.database.db.execute(sql`ALTER TABLE sessions_away RENAME TO sessions`);
    }
    expect(res.statusCode, res.body).toBe(500);
    expect(res.json().code).toBe('INTERNAL');
    const again = await callback(approved.state, approved.code, bearer(owner.token));
    expect(again.statusCode, again.body).toBe(200);
  });
});

// ---------------------------------------------------------------- the HTTP layer, over a real socket

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Milliseconds from the first byte sent to the connection's close. */
  closedAfterMs: number;
}

/** Sends raw bytes (the last ones after `dribble` pauses), and reads until the server closes. */
function raw(chunks: string[], dribbleMs = 0): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket: Socket = connectSocket(port, '127.0.0.1');
    const started = Date.now();
    let received = '';
    let timer: ReturnType<typeof setTimeout> | undefined;
    socket.on('data', (data) => (received += data.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      const [head = '', ...rest] = received.split('\r\n\r\n');
      const [statusLine = '', ...headerLines] = head.split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of headerLines) {
        const at = line.indexOf(':');
        if (at > 0) headers[line.slice(0, at).toLowerCase()] = line.slice(at + 1).trim();
      }
      resolve({ status: Number(statusLine.split(' ')[1] ?? 0), headers, body: rest.join('\r\n\r\n'), closedAfterMs: Date.now() - started });
    });
    socket.once('connect', () => {
      const queue = [...chunks];
      const next = () => {
        const chunk = queue.shift();
        if (chunk === undefined || socket.destroyed) return;
        socket.write(chunk);
        timer = setTimeout(next, dribbleMs);
      };
      next();
    });
    setTimeout(() => {
      socket.destroy();
      reject(new Error('the server kept the connection open for 20 s'));
    }, 20_000).unref();
  });
}

function expectContractError(answer: RawAnswer, status: number, code: string): void {
  expect(answer.status, JSON.stringify(answer)).toBe(status);
  expect(answer.headers['x-request-id']).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
  const body = JSON.parse(answer.body);
  expect(body).toMatchObject({ success: false, error: expect.any(String), code, requestId: answer.headers['x-request-id'] });
  expect(Object.keys(body).filter((key) => !['success', 'error', 'code', 'requestId', 'details'].includes(key))).toEqual([]);
}

describe('the HTTP layer', () => {
  it('answers a slow client with a 408 in the contract shape and closes the connection (REQUEST_TIMEOUT=1)', async () => {
    // Headers one byte at a time, never finished.
    const slowHeaders = raw('GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa'.split(''), 300);
    // Headers at once, then a body that never arrives in full.
    const slowBody = raw(
      ['POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n', ...'{"email":"a@example.com","password":'.split('')],
      300,
    );
    // Connected, silent.
    const silent = raw([]);
    for (const answer of await Promise.all([slowHeaders, slowBody, silent])) {
      expect(answer.closedAfterMs).toBeLessThan(8000);
      if (answer.status !== 0) expectContractError(answer, 408, 'REQUEST_TIMEOUT');
    }
    expectContractError(await slowHeaders, 408, 'REQUEST_TIMEOUT');
    expectContractError(await slowBody, 408, 'REQUEST_TIMEOUT');
  });

  it('lets a handler take longer than REQUEST_TIMEOUT once its request has arrived', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/test/slow-handler`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(200);
  });

  it('answers malformed and oversized headers in the contract shape with a request id', async () => {
    expectContractError(await raw(['GET /livez HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0000b\r\n\r\n']), 400, 'INVALID_INPUT');
    expectContractError(await raw(['GET /livez HTTP/1.1\r\nHost: x\r\nX-Bad: a\rb\r\n\r\n']), 400, 'INVALID_INPUT');
    expectContractError(await raw(['NOT-HTTP\r\n\r\n']), 400, 'INVALID_INPUT');
    expectContractError(await raw([`GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`]), 431, 'HEADERS_TOO_LARGE');
    expectContractError(await raw([`GET /livez HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 400 }, (_, i) => `X-H${i}: ${'v'.repeat(60)}\r\n`).join('')}\r\n`]), 431, 'HEADERS_TOO_LARGE');
  });

  it('logs a client that aborts its body at info, without a stack, and each warn line carries one request id', async () => {
    const marker = t.logs.lines.length;
    const socket = connectSocket(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"email":');
    await new Promise((resolve) => setTimeout(resolve, 200));
    socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 300));
    // A provider failure: a warn line.
    hostile.answer = { status: 503, body: 'down' };
    const started = await startFlow(t.fastify, owner.token, 'github');
    expect((await callback(started.state, 'x', { cookie: `oauth_tx=${started.txCookie}` })).statusCode).toBe(502);
    hostile.answer = null;
    const entries = t.logs.lines.slice(marker).map((line) => ({ line, entry: JSON.parse(line) as Record<string, unknown> }));
    expect(entries.filter(({ entry }) => (entry.level as number) >= 50)).toEqual([]);
    expect(entries.some(({ entry }) => entry.code === 'CLIENT_ABORTED' && entry.level === 30)).toBe(true);
    expect(entries.map(({ line }) => line).join('\n')).not.toMatch(/"stack"/);
    const warns = entries.filter(({ entry }) => entry.level === 40);
    expect(warns.length).toBeGreaterThan(0);
    for (const { line } of warns) expect(line.match(/"requestId"/g)).toHaveLength(1);
  });
});

// ---------------------------------------------------------------- rate limits and password hashing

describe('rate limits', () => {
  let limited: TestApp;
  beforeAll(async () => {
    limited = await createTestApp({ background: false, env: { RATE_LIMIT_MAX: '5', RATE_LIMIT_WINDOW: '60' } });
  });
  afterAll(async () => {
    await limited?.close();
  });

  const from = (remoteAddress: string, headers: Record<string, string> = {}) => ({ remoteAddress, headers });
  const access = (remoteAddress: string, headers: Record<string, string>) => limited.fastify.inject({ url: '/v1/account/access', ...from(remoteAddress, headers) });
  const loginAs = (remoteAddress: string, email: string, password: string) =>
    limited.fastify.inject({ method: 'POST', url: '/v1/login', remoteAddress, payload: { email, password } });
  let registered = 0;
  /** A user of their own, registered and signed in from an address of their own (each address has 5 requests a minute). */
  async function newUser(name: string): Promise<Account> {
    const remoteAddress = `10.200.0.${++registered}`;
    const email = `${name}-${registered}@example.com`;
    const password = `correct horse battery ${registered}`;
    expect((await limited.fastify.inject({ method: 'POST', url: '/v1/register', remoteAddress, payload: { email, password } })).statusCode).toBe(201);
    const res = await loginAs(remoteAddress, email, password);
    expect(res.statusCode, res.body).toBe(200);
    return { userId: res.json().user.id, organizationId: res.json().organizationId, email, password, token: res.json().accessToken, cookies: {} };
  }

  it('count failed authentications per client IP and refuse that address early once it is over, whatever it sends next', async () => {
    const victim = await newUser('ip-victim');
    const forged = `${victim.token.slice(0, -4)}AAAA`;
    const guesses = [
      bearer('tsa_madeUpApiTokenValue0000000000000000000'),
      bearer('tsp_madeUpPersonalAccessToken000000000000000'),
      bearer(forged),
      { authorization: 'Basic dXNlcjpwYXNz' },
      { cookie: `session=${forged}` },
    ];
    for (const headers of guesses) expect((await access('10.0.0.1', headers)).statusCode).toBe(401);
    // Over the limit: even a valid credential, even a password sign-in, is refused before any lookup.
    for (const res of [await access('10.0.0.1', bearer('tsa_another0000000000000000000000000000000')), await access('10.0.0.1', bearer(victim.token)), await loginAs('10.0.0.1', victim.email, victim.password)]) {
      expect(res.statusCode, res.body).toBe(429);
      expect(res.json().code).toBe('RATE_LIMITED');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    }
    // Another address is not affected.
    expect((await access('10.0.0.2', bearer(victim.token))).statusCode).toBe(200);
    // Bad passwords count too.
    for (let i = 0; i < 5; i++) expect((await loginAs('10.0.0.3', victim.email, `wrong password ${i}!`)).statusCode).toBe(401);
    expect((await access('10.0.0.3', bearer('tsa_yetAnother000000000000000000000000000000'))).statusCode).toBe(429);
    // A request without any credential is not a guess.
    for (let i = 0; i < 8; i++) expect((await access('10.0.0.4', {})).statusCode).toBe(401);
    expect((await access('10.0.0.4', bearer(victim.token))).statusCode).toBe(200);
  });

  it('count per principal: all sessions and PATs of one user share a budget; each API token has its own', async () => {
    const user = await newUser('budget');
    const gql = async (token: string, query: string) => (await limited.fastify.inject({ method: 'POST', url: '/query', remoteAddress: '10.2.0.1', headers: bearer(token), payload: { query } })).json().data;
    const pats = [
      (await gql(user.token, 'mutation { createPersonalAccessToken(name: "a") { token } }')).createPersonalAccessToken.token,
      (await gql(user.token, 'mutation { createPersonalAccessToken(name: "b") { token } }')).createPersonalAccessToken.token,
    ];
    const apiTokens = [
      (await gql(user.token, 'mutation { createAPIToken(name: "a") { token } }')).createAPIToken.token,
      (await gql(user.token, 'mutation { createAPIToken(name: "b") { token } }')).createAPIToken.token,
    ];
    // Four requests so far by this user's session; one more from a PAT, then the user is done.
    expect((await access('10.2.0.2', bearer(pats[0] as string))).statusCode).toBe(200);
    for (const token of [pats[1], pats[0], user.token] as string[]) expect((await access('10.2.0.3', bearer(token))).statusCode).toBe(429);
    for (const token of apiTokens) {
      for (let i = 0; i < 5; i++) expect((await access('10.2.0.4', bearer(token))).statusCode).toBe(200);
      expect((await access('10.2.0.4', bearer(token))).statusCode).toBe(429);
    }
  });

  it("never let a flood of wrong passwords for one e-mail from other addresses refuse its owner's correct password", async () => {
    const dave = await newUser('dave');
    for (let i = 1; i <= 8; i++) expect((await loginAs(`10.1.0.${i}`, dave.email, 'not daves password')).statusCode).toBe(401);
    expect((await loginAs('10.1.0.100', dave.email, dave.password)).statusCode).toBe(200);
    // One address over its own limit for that e-mail is refused there, and only there.
    for (let i = 0; i < 5; i++) await loginAs('10.1.1.1', dave.email, 'not daves password');
    expect((await loginAs('10.1.1.1', dave.email, dave.password)).statusCode).toBe(429);
    expect((await loginAs('10.1.1.2', dave.email, dave.password)).statusCode).toBe(200);
  });
});

describe('password hashing', () => {
  let slow: TestApp;
  beforeAll(async () => {
    slow = await createTestApp({ background: false, env: { RATE_LIMIT_MAX: '0', PASSWORD_COST: '15' } });
  });
  afterAll(async () => {
    await slow?.close();
  });

  it("is shared fairly per client: 80 bad logins from one client never fail another client's correct login", async () => {
    const alice = await registerAndLogin(slow.fastify, 'alice');
    const flood = Array.from({ length: 80 }, (_, i) =>
      slow.fastify.inject({ method: 'POST', url: '/v1/login', remoteAddress: '10.9.0.1', payload: { email: `nobody-${i}@example.com`, password: 'a wrong password' } }),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    const real = await slow.fastify.inject({ method: 'POST', url: '/v1/login', remoteAddress: '10.9.0.2', payload: { email: alice.email, password: alice.password } });
    expect(real.statusCode, real.body).toBe(200);
    const statuses = (await Promise.all(flood)).map((res) => res.statusCode);
    expect(new Set(statuses)).toEqual(new Set([401, 429]));
  });
});

// ---------------------------------------------------------------- GraphQL budgets and messages

describe('GraphQL limits', () => {
  const query = (token: string, body: unknown) => t.fastify.inject({ method: 'POST', url: '/query', headers: bearer(token), payload: body as Record<string, unknown> });

  it("count a connection's page size through its nodes and edges", async () => {
    const pages = (count: number, selection: string) => `{ ${Array.from({ length: count }, (_, i) => `a${i}: auditLogs(first: 100) { ${selection} }`).join(' ')} }`;
    for (const document of [
      pages(68, 'nodes { id action createdAt }'),
      pages(30, 'edges { cursor node { id action } }'),
      `query($n: Int) { ${Array.from({ length: 30 }, (_, i) => `a${i}: auditLogs(first: $n) { nodes { id action } }`).join(' ')} }`,
      `fragment F on AuditLogConnection { nodes { id action detail } } { ${Array.from({ length: 30 }, (_, i) => `a${i}: auditLogs(first: 100) { ...F }`).join(' ')} }`,
    ]) {
      const res = await query(owner.token, { query: document, variables: { n: 100 } });
      expect(res.statusCode, document.slice(0, 80)).toBe(400);
      expect(res.json().errors[0]).toMatchObject({ message: expect.stringMatching(/too expensive/), extensions: { code: 'INVALID_INPUT' } });
    }
    // A default the operation declares for its variable counts like a value sent.
    const defaulted = await query(owner.token, { query: `query($n: Int = 100) { ${Array.from({ length: 30 }, (_, i) => `a${i}: auditLogs(first: $n) { nodes { id action } }`).join(' ')} }` });
    expect(defaulted.statusCode, defaulted.body.slice(0, 200)).toBe(400);
    expect(defaulted.json().errors[0]).toMatchObject({ message: expect.stringMatching(/too expensive/), extensions: { code: 'INVALID_INPUT' } });
    const fine = await query(owner.token, { query: '{ auditLogs(first: 100) { nodes { id action } pageInfo { hasNextPage } } }' });
    expect(fine.statusCode, fine.body).toBe(200);
    expect(fine.json().data.auditLogs.nodes.length).toBeGreaterThan(0);
  });

  it('apply one cost budget to a whole batch: nothing of an expensive batch runs', async () => {
    const aliased = (count: number) => `{ ${Array.from({ length: count }, (_, i) => `m${i}: me { id }`).join(' ')} }`;
    const before = await t.fastify.inject({ method: 'POST', url: '/query', headers: bearer(owner.token), payload: { query: '{ organizations { id } }' } });
    expect(before.statusCode).toBe(200);
    // Each operation is under the budget (cost 11 × aliases: `me` reads the database); together they are over it.
    for (const batch of [Array.from({ length: 5 }, () => ({ query: aliased(450) })), Array.from({ length: 3 }, () => ({ query: aliased(200) }))]) {
      const started = Date.now();
      const res = await query(owner.token, batch);
      expect(res.statusCode).toBe(400);
      const results = res.json() as { data?: unknown; errors: { message: string }[] }[];
      expect(results).toHaveLength(batch.length);
      for (const result of results) {
        expect(result.data).toBeUndefined();
        expect(result.errors[0]?.message).toMatch(/too expensive/);
      }
      expect(Date.now() - started).toBeLessThan(2000);
    }
    // A batch whose writes would have run: none of them did.
    const organizations = async () => (await query(owner.token, { query: '{ organizations { id } }' })).json().data.organizations.length;
    const count = await organizations();
    const mixed = await query(owner.token, [{ query: 'mutation { createOrganization(name: "Should not exist") { id } }' }, { query: aliased(400) }, { query: aliased(100) }]);
    expect(mixed.statusCode).toBe(400);
    expect(await organizations()).toBe(count);
    const small = await query(owner.token, Array.from({ length: 5 }, () => ({ query: aliased(10) })));
    expect(small.statusCode).toBe(200);
  });

  it('name or suggest no schema field in any message when introspection is off', async () => {
    const closed = await createTestApp({ background: false, env: { GRAPHQL_INTROSPECTION: 'false', RATE_LIMIT_MAX: '0' } });
    try {
      const user = await registerAndLogin(closed.fastify, 'closed');
      const attempts: { query: string; variables?: Record<string, unknown> }[] = [
        { query: '{ integrationz { id } }' },
        { query: '{ integrations { idd nam } }' },
        { query: '{ auditLogs(firstt: 1) { nodes { id } } }' },
        { query: '{ auditLogs(first: "x") { nodez { id } } }' },
        { query: '{ me { ...F } } fragment F on Usr { id }' },
        { query: 'mutation { createOrganizaton(name: "x") { id } }' },
        { query: 'query($n: Int) { auditLogs(first: $n) { nodes { id } } }', variables: { n: 'many' } },
        { query: 'query($x: Strin) { me { id } }' },
        { query: '{ __schema { types { name } } }' },
        { query: '{ __type(name: "Query") { fields { name } } }' },
      ];
      const fields = Object.keys((await import('../src/graphql/schema.ts')).graphqlSchema().getQueryType()?.getFields() ?? {});
      for (const attempt of attempts) {
        const res = await closed.fastify.inject({ method: 'POST', url: '/query', headers: bearer(user.token), payload: attempt });
        const messages = (res.json().errors as { message: string }[]).map((error) => error.message).join(' | ');
        expect(messages, attempt.query).not.toMatch(/Did you mean|"(?!__)[A-Za-z_]+"|\b(Query|Mutation|AuditLogConnection|Organization|Integration)\b/);
        for (const field of fields) expect(messages, attempt.query).not.toMatch(new RegExp(`\\b${field}\\b`));
      }
      // With introspection on (development), the messages keep helping.
      const open = await query(owner.token, { query: '{ integrationz { id } }' });
      expect(open.json().errors[0].message).toMatch(/Did you mean/);
    } finally {
      await closed.close();
    }
  });
});
