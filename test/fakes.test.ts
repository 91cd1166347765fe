import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { type FakeGitHubUser, startFakeGitHub } from './fakes/github.ts';
import { startFakeSalesforce } from './fakes/providers/salesforce.ts';
import { type FakeSlackUser, startFakeSlack } from './fakes/slack.ts';

const CALLBACK = 'http://127.0.0.1:9/v1/integrations/oauth/callback';

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

function authorizeUrl(fake: FakeProvider, params: Record<string, string>): string {
  const url = new URL(fake.authUrl);
  for (const [key, value] of Object.entries({ client_id: fake.clientId, redirect_uri: CALLBACK, ...params })) {
    url.searchParams.set(key, value);
  }
  return url.href;
}

function postForm(url: string, params: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(params),
  });
}

async function jsonOf(response: Response): Promise<Record<string, unknown>> {
  return (await response.json()) as Record<string, unknown>;
}

function basic(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
}

/** A clock the test moves by hand. */
function manualClock(): { now: () => number; advance: (seconds: number) => void } {
  let time = Date.now();
  return { now: () => time, advance: (seconds) => (time += seconds * 1000) };
}

describe('fake GitHub, classic tokens', () => {
  let github: FakeProvider<FakeGitHubUser>;
  const clock = manualClock();
  const credentials = () => ({ client_id: github.clientId, client_secret: github.clientSecret });
  const token = (value: string) => ({ authorization: `token ${value}` });

  beforeAll(async () => {
    github = await startFakeGitHub({ now: clock.now });
    github.addUser({ login: 'octo', email: 'octo@example.com', name: 'Octo Cat' });
    github.addUser({ login: 'hidden', email: 'hidden@example.com', publicEmail: false });
  });
  afterAll(() => github.close());

  async function connect(login: string, scope = 'read:user user:email repo'): Promise<string> {
    const { verifier, challenge } = pkce();
    const url = authorizeUrl(github, { scope, state: 's', code_challenge: challenge, code_challenge_method: 'S256' });
    const { code } = github.authorize(url, login);
    const response = await postForm(
      github.tokenUrl,
      { ...credentials(), code, redirect_uri: CALLBACK, code_verifier: verifier },
      { accept: 'application/json' },
    );
    return (await jsonOf(response)).access_token as string;
  }

  it('serves a small consent page whose Approve and Deny redirect back like GitHub', async () => {
    const url = authorizeUrl(github, { scope: 'repo user:email', state: 'st4te' });
    const page = await fetch(url);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('<label for="login">');
    expect(html).toMatch(/<button[^>]*value="approve"[^>]*>Approve<\/button>/);
    expect(html).toContain('<code>user:email</code>');
    expect(html).not.toContain('<script');

    const manual = await fetch(url, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'login=octo&decision=approve',
    });
    expect(manual.status).toBe(302);
    const location = new URL(manual.headers.get('location') ?? '');
    expect(location.origin + location.pathname).toBe(CALLBACK);
    expect(location.searchParams.get('code')).toMatch(/^[0-9a-f]{20}$/);
    expect(location.searchParams.get('state')).toBe('st4te');

    const denied = await fetch(url, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'decision=deny',
    });
    expect(denied.headers.get('location')).toBe(`${CALLBACK}?error=access_denied&state=st4te`);
    expect(github.deny(url)).toEqual({ state: 'st4te', location: `${CALLBACK}?error=access_denied&state=st4te` });

    const unknownClient = await fetch(authorizeUrl(github, { client_id: 'nope' }));
    expect(unknownClient.status).toBe(404);
  });

  it('exchanges a code once, answering JSON or form-encoded by Accept, with errors as HTTP 200', async () => {
    const { verifier, challenge } = pkce();
    const scope = 'read:user user:email repo';
    const url = authorizeUrl(github, { scope, state: 'xyz', code_challenge: challenge, code_challenge_method: 'S256' });
    const granted = github.authorize(url, 'octo');
    expect(granted.state).toBe('xyz');
    expect(granted.redirectUri).toBe(CALLBACK);
    expect(granted.location).toBe(`${CALLBACK}?code=${granted.code}&state=xyz`);

    const body = { ...credentials(), code: granted.code, redirect_uri: CALLBACK, code_verifier: verifier };
    const first = await postForm(github.tokenUrl, body, { accept: 'application/json' });
    expect(first.status).toBe(200);
    const tokens = await jsonOf(first);
    expect(tokens).toEqual({
      access_token: expect.stringMatching(/^gho_[A-Za-z0-9]{36}$/),
      token_type: 'bearer',
      scope: 'read:user,user:email,repo',
    });
    expect(github.tokensOf('octo')).toContainEqual({ accessToken: tokens.access_token });

    const again = await postForm(github.tokenUrl, body, { accept: 'application/json' });
    expect(again.status).toBe(200);
    expect(await jsonOf(again)).toEqual({
      error: 'bad_verification_code',
      error_description: expect.any(String),
      error_uri: expect.any(String),
    });

    const second = github.authorize(authorizeUrl(github, { scope: 'repo' }), 'octo');
    const form = await postForm(github.tokenUrl, { ...credentials(), code: second.code });
    expect(form.headers.get('content-type')).toMatch(/^application\/x-www-form-urlencoded/);
    const parsed = new URLSearchParams(await form.text());
    expect(parsed.get('access_token')).toMatch(/^gho_/);
    expect(parsed.get('token_type')).toBe('bearer');
    expect(parsed.get('scope')).toBe('repo');
    expect(github.stats.codeExchanges).toBe(3);

    const user = await fetch(`${github.apiUrl}/user`, { headers: token(tokens.access_token as string) });
    expect(user.status).toBe(200);
    expect(user.headers.get('x-ratelimit-limit')).toBe('5000');
    expect(user.headers.get('x-ratelimit-remaining')).toBe('4999');
    expect(user.headers.get('x-oauth-scopes')).toBe('read:user, user:email, repo');
    expect(await user.json()).toMatchObject({ id: expect.any(Number), login: 'octo', name: 'Octo Cat', email: 'octo@example.com' });
    const bearer = await fetch(`${github.apiUrl}/user`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(bearer.status).toBe(200);
    const emails = await fetch(`${github.apiUrl}/user/emails`, { headers: token(tokens.access_token as string) });
    expect(await emails.json()).toEqual([{ email: 'octo@example.com', primary: true, verified: true, visibility: 'public' }]);
    const repos = await fetch(`${github.apiUrl}/user/repos`, { headers: token(tokens.access_token as string) });
    expect(Array.isArray(await repos.json())).toBe(true);
    // Without an e-mail scope GitHub hides the list.
    const noScope = await fetch(`${github.apiUrl}/user/emails`, { headers: token(parsed.get('access_token') ?? '') });
    expect(noScope.status).toBe(404);
  });

  it('shows a private e-mail only through /user/emails', async () => {
    const access = await connect('hidden');
    const user = await jsonOf(await fetch(`${github.apiUrl}/user`, { headers: token(access) }));
    expect(user.email).toBeNull();
    const emails = await fetch(`${github.apiUrl}/user/emails`, { headers: token(access) });
    expect(await emails.json()).toEqual([{ email: 'hidden@example.com', primary: true, verified: true, visibility: 'private' }]);
  });

  it('refuses a wrong PKCE verifier, redirect_uri, client credentials or an expired code; accepts Basic and JSON bodies', async () => {
    const { verifier, challenge } = pkce();
    const url = authorizeUrl(github, { scope: 'repo', code_challenge: challenge, code_challenge_method: 'S256' });
    const { code } = github.authorize(url, 'octo');
    const exchange = async (params: Record<string, string>, headers: Record<string, string> = {}) =>
      jsonOf(await postForm(github.tokenUrl, params, { accept: 'application/json', ...headers }));

    expect((await exchange({ ...credentials(), code, code_verifier: pkce().verifier })).error).toBe('bad_verification_code');
    expect((await exchange({ ...credentials(), code })).error).toBe('bad_verification_code');
    expect((await exchange({ ...credentials(), code, code_verifier: verifier, redirect_uri: 'http://127.0.0.1:9/other' })).error).toBe(
      'redirect_uri_mismatch',
    );
    expect((await exchange({ client_id: github.clientId, client_secret: 'wrong', code, code_verifier: verifier })).error).toBe(
      'incorrect_client_credentials',
    );
    // Failed attempts leave the code usable; HTTP Basic carries the client credentials.
    const ok = await exchange({ code, code_verifier: verifier }, { authorization: basic(github.clientId, github.clientSecret) });
    expect(ok.access_token).toMatch(/^gho_/);

    const json = await fetch(github.tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ ...credentials(), code: github.authorize(authorizeUrl(github, {}), 'octo').code }),
    });
    expect(await jsonOf(json)).toMatchObject({ access_token: expect.stringMatching(/^gho_/), scope: '' });

    const late = github.authorize(authorizeUrl(github, {}), 'octo');
    clock.advance(601);
    expect((await exchange({ ...credentials(), code: late.code })).error).toBe('bad_verification_code');
  });

  it('validates authorize URLs like GitHub and honours granted scopes', () => {
    expect(() => github.authorize(authorizeUrl(github, { client_id: 'other' }), 'octo')).toThrow(/Not Found/);
    const elsewhere = `http://127.0.0.1:1/login/oauth/authorize?client_id=${github.clientId}`;
    expect(() => github.authorize(elsewhere, 'octo')).toThrow(/expected an authorize URL/);
    const plain = authorizeUrl(github, { code_challenge: pkce().challenge, code_challenge_method: 'plain' });
    expect(() => github.authorize(plain, 'octo')).toThrow(/S256/);
    expect(() => github.authorize(authorizeUrl(github, {}), 'nobody')).toThrow(/addUser/);
    expect(() => github.authorize(`${github.authUrl}?client_id=${github.clientId}`, 'octo')).toThrow(/redirect_uri/);
    const { code } = github.authorize(authorizeUrl(github, { scope: 'repo user:email' }), 'octo', { grantedScopes: ['user:email'] });
    expect(code).toMatch(/^[0-9a-f]{20}$/);
  });

  it('revokes through revokeUser and through the grant API (Basic client credentials)', async () => {
    github.addUser({ login: 'gone' });
    const a = await connect('gone');
    github.revokeUser('gone');
    expect((await fetch(`${github.apiUrl}/user`, { headers: token(a) })).status).toBe(401);
    expect(github.tokensOf('gone')).toEqual([]);

    const b = await connect('octo');
    const c = await connect('octo');
    const revoke = (auth: string) =>
      fetch(`${github.apiUrl}/applications/${github.clientId}/grant`, {
        method: 'DELETE',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: JSON.stringify({ access_token: b }),
      });
    expect((await revoke(basic(github.clientId, 'wrong'))).status).toBe(404);
    expect((await revoke(basic(github.clientId, github.clientSecret))).status).toBe(204);
    expect(github.stats.revocations).toBe(1);
    for (const access of [b, c]) {
      const response = await fetch(`${github.apiUrl}/user`, { headers: token(access) });
      expect(response.status).toBe(401);
      expect(await response.json()).toMatchObject({ message: 'Bad credentials' });
    }
  });

  it('serves echo, redirect and an 11 MiB body for proxy tests, behind the token check', async () => {
    const access = await connect('octo');
    const echo = await fetch(`${github.apiUrl}/echo/repos/a/b?x=1`, {
      method: 'PATCH',
      headers: { ...token(access), 'content-type': 'application/json', 'x-custom': 'yes' },
      body: '{"a":1}',
    });
    expect(await echo.json()).toMatchObject({
      method: 'PATCH',
      path: '/api/echo/repos/a/b',
      query: { x: '1' },
      headers: { 'x-custom': 'yes', authorization: `token ${access}` },
      body: '{"a":1}',
    });
    expect((await fetch(`${github.apiUrl}/echo/x`)).status).toBe(401);
    const redirect = await fetch(`${github.apiUrl}/redirect`, { headers: token(access), redirect: 'manual' });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get('location')).toBe('http://127.0.0.2:1/elsewhere');
    const big = await fetch(`${github.apiUrl}/big`, { headers: token(access) });
    expect((await big.arrayBuffer()).byteLength).toBeGreaterThan(11 * 1024 * 1024);
    expect(github.requests.at(-1)).toMatchObject({ method: 'GET', path: '/api/big', query: {}, body: '' });
  });

  it('fails on demand: API modes, token modes, latency', async () => {
    const access = await connect('octo');
    const call = () => fetch(`${github.apiUrl}/user`, { headers: token(access) });
    try {
      github.mode.api = 'rate-limited';
      let response = await call();
      expect(response.status).toBe(403);
      expect(response.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(Number(response.headers.get('x-ratelimit-reset'))).toBe(Math.floor(clock.now() / 1000) + 60);
      expect(await response.json()).toMatchObject({ message: 'API rate limit exceeded for user ID 1.' });

      github.mode.api = 'secondary-rate-limit';
      response = await call();
      expect([response.status, response.headers.get('retry-after')]).toEqual([403, '30']);
      expect(((await jsonOf(response)).message as string).startsWith('You have exceeded a secondary rate limit')).toBe(true);

      github.mode.api = 'forbidden';
      response = await call();
      expect([response.status, response.headers.get('x-ratelimit-remaining')]).toEqual([403, '4999']);
      expect(await response.json()).toMatchObject({ message: 'Resource not accessible by integration' });

      github.mode.api = 'down';
      response = await call();
      expect([response.status, await response.text()]).toEqual([503, expect.stringContaining('unavailable')]);

      github.mode.api = 'garbage';
      response = await call();
      expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect([response.status, await response.text()]).toEqual([200, '<html>oops']);

      github.mode.api = 'hang';
      await expect(fetch(`${github.apiUrl}/user`, { headers: token(access), signal: AbortSignal.timeout(100) })).rejects.toThrow();
      github.mode.api = 'ok';

      github.mode.token = 'down';
      const code = github.authorize(authorizeUrl(github, {}), 'octo').code;
      response = await postForm(github.tokenUrl, { ...credentials(), code }, { accept: 'application/json' });
      expect(response.status).toBe(503);
      github.mode.token = 'garbage';
      response = await postForm(github.tokenUrl, { ...credentials(), code }, { accept: 'application/json' });
      expect([response.status, await response.text()]).toEqual([200, '<html>oops']);
      github.mode.token = 'hang';
      const hanging = postForm(github.tokenUrl, { ...credentials(), code }, { accept: 'application/json' }).catch(() => 'ended');
      expect(await Promise.race([hanging, sleep(100).then(() => 'pending')])).toBe('pending');
      github.mode.token = 'ok';
      // The code was never used by the failed attempts.
      response = await postForm(github.tokenUrl, { ...credentials(), code }, { accept: 'application/json' });
      expect((await jsonOf(response)).access_token).toMatch(/^gho_/);

      github.latencyMs = 150;
      const started = performance.now();
      expect((await call()).status).toBe(200);
      expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    } finally {
      github.mode = { token: 'ok', api: 'ok' };
      github.latencyMs = 0;
    }
  });
});

describe('fake GitHub, expiring tokens', () => {
  let github: FakeProvider<FakeGitHubUser>;
  const clock = manualClock();
  const credentials = () => ({ client_id: github.clientId, client_secret: github.clientSecret });

  beforeAll(async () => {
    github = await startFakeGitHub({ now: clock.now, tokenExpiresIn: 28_800, refreshTokenExpiresIn: 86_400 });
    github.addUser({ login: 'octo', email: 'octo@example.com' });
  });
  afterAll(() => github.close());

  const tokenRequest = async (params: Record<string, string>) =>
    jsonOf(await postForm(github.tokenUrl, { ...credentials(), ...params }, { accept: 'application/json' }));
  const user = (access: string) => fetch(`${github.apiUrl}/user`, { headers: { authorization: `token ${access}` } });

  it('rotates on refresh: the old access and refresh tokens die at once, reuse is refused and counted', async () => {
    const { code } = github.authorize(authorizeUrl(github, { scope: 'repo' }), 'octo');
    const first = await tokenRequest({ code });
    expect(first).toEqual({
      access_token: expect.stringMatching(/^ghu_[A-Za-z0-9]{36}$/),
      expires_in: 28_800,
      refresh_token: expect.stringMatching(/^ghr_[A-Za-z0-9]{76}$/),
      refresh_token_expires_in: 86_400,
      token_type: 'bearer',
      scope: 'repo',
    });

    const second = await tokenRequest({ grant_type: 'refresh_token', refresh_token: first.refresh_token as string });
    expect(second.access_token).toMatch(/^ghu_/);
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect((await user(first.access_token as string)).status).toBe(401);
    expect((await user(second.access_token as string)).status).toBe(200);

    const reused = await tokenRequest({ grant_type: 'refresh_token', refresh_token: first.refresh_token as string });
    expect(reused).toMatchObject({ error: 'bad_refresh_token', error_description: expect.any(String) });
    expect(github.stats).toMatchObject({ refreshes: 2, reusedRefreshTokens: 1 });
    // A reuse does not take the winner's tokens down (concurrent refreshes must be survivable).
    expect(github.tokensOf('octo')).toEqual([{ accessToken: second.access_token, refreshToken: second.refresh_token }]);
    expect((await tokenRequest({ grant_type: 'refresh_token', refresh_token: 'ghr_unknown' })).error).toBe('bad_refresh_token');
    expect(github.stats.reusedRefreshTokens).toBe(1);

    clock.advance(28_800);
    expect((await user(second.access_token as string)).status).toBe(401);
    const third = await tokenRequest({ grant_type: 'refresh_token', refresh_token: second.refresh_token as string });
    expect((await user(third.access_token as string)).status).toBe(200);

    clock.advance(86_400);
    expect((await tokenRequest({ grant_type: 'refresh_token', refresh_token: third.refresh_token as string })).error).toBe(
      'bad_refresh_token',
    );
    expect(github.tokensOf('octo')).toEqual([]);
  });

  it('kills the refresh token too when the user is revoked', async () => {
    const { code } = github.authorize(authorizeUrl(github, {}), 'octo');
    const tokens = await tokenRequest({ code });
    github.revokeUser('octo');
    expect((await user(tokens.access_token as string)).status).toBe(401);
    expect((await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token as string })).error).toBe(
      'bad_refresh_token',
    );
  });
});

describe('fake Slack', () => {
  let slack: FakeProvider<FakeSlackUser>;
  let ada: FakeSlackUser;
  const credentials = () => ({ client_id: slack.clientId, client_secret: slack.clientSecret });
  const SCOPES = 'users:read,users:read.email,chat:write';

  beforeAll(async () => {
    slack = await startFakeSlack({ teamId: 'T0TESSERA', teamName: 'Tessera Test' });
    ada = slack.addUser({ login: 'ada', email: 'ada@example.com', name: 'Ada Lovelace' });
    slack.addUser({ login: 'bob' });
  });
  afterAll(() => slack.close());

  const api = (method: string, access: string, init: RequestInit = {}) =>
    fetch(`${slack.apiUrl}/${method}`, { method: 'POST', ...init, headers: { authorization: `Bearer ${access}` } }).then(jsonOf);

  async function connect(login: string, userScope = SCOPES): Promise<Record<string, unknown>> {
    const { code } = slack.authorize(authorizeUrl(slack, { user_scope: userScope, state: 's' }), login);
    return jsonOf(await postForm(slack.tokenUrl, { ...credentials(), code, redirect_uri: CALLBACK }));
  }

  it('exchanges a code for a user token under authed_user, once', async () => {
    expect(ada).toEqual({ login: 'ada', email: 'ada@example.com', name: 'Ada Lovelace', id: expect.stringMatching(/^U/), teamId: 'T0TESSERA' });
    const url = authorizeUrl(slack, { user_scope: SCOPES, state: 'abc' });
    const page = await (await fetch(url)).text();
    expect(page).toContain('<code>users:read.email</code>');
    const { code, location } = slack.authorize(url, 'ada');
    expect(location).toBe(`${CALLBACK}?code=${encodeURIComponent(code)}&state=abc`);

    const response = await postForm(slack.tokenUrl, { ...credentials(), code, redirect_uri: CALLBACK });
    const body = await jsonOf(response);
    expect(response.status).toBe(200);
    expect(body).toEqual({
      ok: true,
      app_id: 'A0FAKE',
      authed_user: { id: ada.id, scope: SCOPES, access_token: expect.stringMatching(/^xoxp-/), token_type: 'user' },
      team: { id: 'T0TESSERA', name: 'Tessera Test' },
      enterprise: null,
      is_enterprise_install: false,
    });
    const access = (body.authed_user as { access_token: string }).access_token;
    expect(await api('auth.test', access)).toMatchObject({ ok: true, user: 'ada', user_id: ada.id, team_id: 'T0TESSERA', team: 'Tessera Test' });
    const info = await fetch(`${slack.apiUrl}/users.info?user=${ada.id}`, { headers: { authorization: `Bearer ${access}` } });
    expect(await info.json()).toMatchObject({
      ok: true,
      user: { id: ada.id, name: 'ada', real_name: 'Ada Lovelace', profile: { email: 'ada@example.com' } },
    });

    const again = await jsonOf(await postForm(slack.tokenUrl, { ...credentials(), code, redirect_uri: CALLBACK }));
    expect(again).toEqual({ ok: false, error: 'invalid_code' });
    expect(slack.stats.codeExchanges).toBe(2);
  });

  it('answers errors as HTTP 200 {ok:false}, like Slack', async () => {
    const url = authorizeUrl(slack, { user_scope: 'users:read' });
    const { code } = slack.authorize(url, 'bob');
    const exchange = async (params: Record<string, string>, headers: Record<string, string> = {}) => {
      const response = await postForm(slack.tokenUrl, params, headers);
      expect(response.status).toBe(200);
      return jsonOf(response);
    };
    const refused = async (params: Record<string, string>) => (await exchange(params)).error;
    expect(await refused({ ...credentials(), code, redirect_uri: 'http://127.0.0.1:9/elsewhere' })).toBe('bad_redirect_uri');
    expect(await refused({ ...credentials(), code })).toBe('bad_redirect_uri');
    expect(await refused({ client_id: 'nope', client_secret: slack.clientSecret, code, redirect_uri: CALLBACK })).toBe('invalid_client_id');
    expect(await refused({ client_id: slack.clientId, client_secret: 'nope', code, redirect_uri: CALLBACK })).toBe('bad_client_secret');
    expect(await refused({ ...credentials(), code: 'made.up.code', redirect_uri: CALLBACK })).toBe('invalid_code');
    expect(await refused({ ...credentials(), grant_type: 'refresh_token', refresh_token: 'xoxe-1-nope' })).toBe('invalid_refresh_token');
    expect(await exchange({ ...credentials(), code: 'made.up.code' })).toEqual({ ok: false, error: 'invalid_code' });
    const viaBasic = await exchange({ code, redirect_uri: CALLBACK }, { authorization: basic(slack.clientId, slack.clientSecret) });
    const access = (viaBasic.authed_user as { access_token: string }).access_token;

    // users:read without users:read.email: the profile has no e-mail; neither scope: missing_scope.
    const info = await fetch(`${slack.apiUrl}/users.info`, {
      method: 'POST',
      headers: { authorization: `Bearer ${access}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: `user=${ada.id}`,
    }).then(jsonOf);
    expect(info).toMatchObject({ ok: true, user: { id: ada.id } });
    expect((info.user as { profile: Record<string, unknown> }).profile.email).toBeUndefined();
    const narrow = await connect('bob', 'chat:write');
    const narrowAccess = (narrow.authed_user as { access_token: string }).access_token;
    expect(await api(`users.info?user=${ada.id}`, narrowAccess)).toMatchObject({ ok: false, error: 'missing_scope', needed: 'users:read' });

    expect(await api('auth.test', 'xoxp-unknown')).toEqual({ ok: false, error: 'invalid_auth' });
    expect(await fetch(`${slack.apiUrl}/auth.test`, { method: 'POST' }).then(jsonOf)).toEqual({ ok: false, error: 'not_authed' });
    expect(await api('echo/anything', 'xoxp-unknown')).toEqual({ ok: false, error: 'invalid_auth' });
    const unknown = await fetch(`${slack.apiUrl}/no.such.method`, { method: 'POST', headers: { authorization: `Bearer ${access}` } });
    expect(unknown.status).toBe(404);

    expect(() => slack.authorize(authorizeUrl(slack, { user_scope: 'users:read chat:write' }), 'ada')).toThrow(/invalid_scope/);
    expect(() => slack.authorize(authorizeUrl(slack, { client_id: 'nope', user_scope: 'users:read' }), 'ada')).toThrow(/invalid_client_id/);
    expect(slack.deny(authorizeUrl(slack, { user_scope: 'users:read', state: 'q' }))).toEqual({
      state: 'q',
      location: `${CALLBACK}?error=access_denied&state=q`,
    });
  });

  it('revokes through revokeUser (token_revoked) and auth.revoke', async () => {
    const first = (await connect('bob')).authed_user as { access_token: string };
    slack.revokeUser('bob');
    expect(await api('auth.test', first.access_token)).toEqual({ ok: false, error: 'token_revoked' });
    expect(slack.tokensOf('bob')).toEqual([]);

    const second = (await connect('bob')).authed_user as { access_token: string };
    expect(await api('auth.revoke', second.access_token)).toEqual({ ok: true, revoked: true });
    expect(slack.stats.revocations).toBe(1);
    expect(await api('auth.test', second.access_token)).toEqual({ ok: false, error: 'token_revoked' });
  });

  it('fails on demand: rate limits as 429, forbidden as 403, down, garbage, hang', async () => {
    const access = ((await connect('ada')).authed_user as { access_token: string }).access_token;
    const call = () => fetch(`${slack.apiUrl}/auth.test`, { method: 'POST', headers: { authorization: `Bearer ${access}` } });
    try {
      for (const mode of ['rate-limited', 'secondary-rate-limit'] as const) {
        slack.mode.api = mode;
        const response = await call();
        expect([response.status, response.headers.get('retry-after')]).toEqual([429, '30']);
        expect(await response.json()).toEqual({ ok: false, error: 'ratelimited' });
      }
      slack.mode.api = 'forbidden';
      let response = await call();
      expect([response.status, await response.json()]).toEqual([403, { ok: false, error: 'access_denied' }]);
      slack.mode.api = 'down';
      expect((await call()).status).toBe(503);
      slack.mode.api = 'garbage';
      response = await call();
      expect([response.status, await response.text()]).toEqual([200, '<html>oops']);
      slack.mode.api = 'hang';
      await expect(fetch(`${slack.apiUrl}/auth.test`, { method: 'POST', signal: AbortSignal.timeout(100) })).rejects.toThrow();
      slack.mode.api = 'ok';
      // The token endpoint lives under /api but follows the token mode.
      slack.mode.token = 'down';
      expect((await postForm(slack.tokenUrl, { ...credentials(), code: 'x' })).status).toBe(503);
      expect((await call()).status).toBe(200);
    } finally {
      slack.mode = { token: 'ok', api: 'ok' };
    }
  });
});

describe('fake Slack with token rotation', () => {
  let slack: FakeProvider<FakeSlackUser>;
  const clock = manualClock();
  const credentials = () => ({ client_id: slack.clientId, client_secret: slack.clientSecret });

  beforeAll(async () => {
    slack = await startFakeSlack({ tokenExpiresIn: 43_200, now: clock.now, redirectUris: [CALLBACK] });
    slack.addUser({ login: 'ada', email: 'ada@example.com' });
  });
  afterAll(() => slack.close());

  const refresh = async (refreshToken: string) =>
    jsonOf(await postForm(slack.tokenUrl, { ...credentials(), grant_type: 'refresh_token', refresh_token: refreshToken }));
  const authTest = (access: string) =>
    fetch(`${slack.apiUrl}/auth.test`, { method: 'POST', headers: { authorization: `Bearer ${access}` } }).then(jsonOf);

  it('rotates: new tokens at the top level, old ones die, reuse is refused and counted', async () => {
    expect(() => slack.authorize(authorizeUrl(slack, { user_scope: 'users:read', redirect_uri: 'http://127.0.0.1:9/evil' }), 'ada')).toThrow(
      /bad_redirect_uri/,
    );
    const { code } = slack.authorize(authorizeUrl(slack, { user_scope: 'users:read' }), 'ada');
    const body = await jsonOf(await postForm(slack.tokenUrl, { ...credentials(), code, redirect_uri: CALLBACK }));
    const first = body.authed_user as { access_token: string; refresh_token: string; expires_in: number };
    expect(first).toMatchObject({
      access_token: expect.stringMatching(/^xoxe\.xoxp-/),
      refresh_token: expect.stringMatching(/^xoxe-1-/),
      expires_in: 43_200,
    });

    const second = await refresh(first.refresh_token);
    expect(second).toMatchObject({
      ok: true,
      access_token: expect.stringMatching(/^xoxe\.xoxp-/),
      refresh_token: expect.stringMatching(/^xoxe-1-/),
      expires_in: 43_200,
      token_type: 'user',
      scope: 'users:read',
      team: { id: 'T0FAKE0001' },
    });
    expect(await authTest(first.access_token)).toMatchObject({ ok: false, error: 'invalid_auth' });
    expect(await authTest(second.access_token as string)).toMatchObject({ ok: true, user: 'ada' });
    expect(await refresh(first.refresh_token)).toEqual({ ok: false, error: 'invalid_refresh_token' });
    expect(slack.stats).toMatchObject({ refreshes: 2, reusedRefreshTokens: 1 });
    expect(slack.tokensOf('ada')).toEqual([{ accessToken: second.access_token, refreshToken: second.refresh_token }]);

    clock.advance(43_200);
    expect(await authTest(second.access_token as string)).toEqual({ ok: false, error: 'token_expired' });
    const third = await refresh(second.refresh_token as string);
    expect(await authTest(third.access_token as string)).toMatchObject({ ok: true });
  });
});

describe('fake Salesforce revocation', () => {
  it('an access token revokes only itself; the refresh token revokes the grant with every access token of it', async () => {
    const sf = await startFakeSalesforce();
    try {
      sf.addUser({ login: 'marc', email: 'marc@example.com' });
      const redirectUri = 'http://127.0.0.1:9/cb';
      const { code } = sf.authorize(`${sf.authUrl}?${new URLSearchParams({ client_id: sf.clientId, response_type: 'code', redirect_uri: redirectUri })}`, 'marc');
      const token = async (params: Record<string, string>) => {
        const res = await fetch(sf.tokenUrl, { method: 'POST', body: new URLSearchParams({ ...params, client_id: sf.clientId, client_secret: sf.clientSecret }) });
        return { status: res.status, body: (await res.json()) as { access_token?: string; refresh_token?: string } };
      };
      const revoke = async (value: string) => (await fetch(`${sf.url}/services/oauth2/revoke`, { method: 'POST', body: new URLSearchParams({ token: value }) })).status;
      const api = async (accessToken: string | undefined) => (await fetch(`${sf.apiUrl}/limits`, { headers: { authorization: `Bearer ${accessToken}` } })).status;
      const issued = await token({ grant_type: 'authorization_code', code, redirect_uri: redirectUri });
      const refreshToken = issued.body.refresh_token ?? '';

      expect(await revoke(issued.body.access_token ?? '')).toBe(200);
      expect(await api(issued.body.access_token)).toBe(401);
      expect(sf.tokensOf('marc')).toHaveLength(1);
      const renewed = await token({ grant_type: 'refresh_token', refresh_token: refreshToken });
      expect(renewed.status).toBe(200);
      expect(await api(renewed.body.access_token)).toBe(200);

      expect(await revoke(refreshToken)).toBe(200);
      expect(await api(renewed.body.access_token)).toBe(401);
      expect((await token({ grant_type: 'refresh_token', refresh_token: refreshToken })).status).toBe(400);
      expect(sf.tokensOf('marc')).toEqual([]);
      expect(await revoke('unknown')).toBe(400);
    } finally {
      await sf.close();
    }
  });
});

describe('close()', () => {
  it('ends hanging and streaming responses so nothing waits forever', async () => {
    const github = await startFakeGitHub();
    github.addUser({ login: 'octo' });
    const { code } = github.authorize(authorizeUrl(github, {}), 'octo');
    const credentials = { client_id: github.clientId, client_secret: github.clientSecret, code };
    const tokens = await jsonOf(await postForm(github.tokenUrl, credentials, { accept: 'application/json' }));
    const big = await fetch(`${github.apiUrl}/big`, { headers: { authorization: `token ${tokens.access_token}` } });
    const reader = big.body?.getReader();
    expect((await reader?.read())?.done).toBe(false);

    github.mode.token = 'hang';
    github.latencyMs = 10_000;
    const pending = [
      postForm(github.tokenUrl, credentials),
      fetch(`${github.apiUrl}/user`),
    ].map((request) => request.then(() => 'answered', () => 'ended'));
    while (github.requests.length < 4) await sleep(5);
    const closing = github.close().then(() => 'closed');
    expect(await Promise.race([closing, sleep(1000).then(() => 'close() hung')])).toBe('closed');
    // The unread rest of the 11 MiB cannot have fit in socket buffers: the stream was cut, not finished.
    const drained = (async () => {
      while (!(await reader?.read())?.done) {}
    })();
    expect(await Promise.all([...pending, drained.then(() => 'answered', () => 'ended')])).toEqual(['ended', 'ended', 'ended']);
    await github.close();
  });
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe('fake GitHub, two OAuth apps of one account', () => {
  let github: FakeProvider<FakeGitHubUser>;
  const second = { clientId: 'Ov23liSecondApp', clientSecret: 'second-app-secret-0123456789abcdef' };

  beforeAll(async () => {
    github = await startFakeGitHub({ tokenExpiresIn: 28800, extraClients: [second] });
    github.addUser({ login: 'octo' });
  });
  afterAll(() => github.close());

  async function exchange(client: { clientId: string; clientSecret: string }, code: string) {
    const body = { client_id: client.clientId, client_secret: client.clientSecret, code, redirect_uri: CALLBACK };
    return jsonOf(await postForm(github.tokenUrl, body, { accept: 'application/json' }));
  }
  const authorizeAs = (clientId: string) => github.authorize(authorizeUrl(github, { client_id: clientId, state: 's' }), 'octo');
  const revokeGrant = (clientId: string, secret: string, accessToken: string) =>
    fetch(`${github.apiUrl}/applications/${clientId}/grant`, {
      method: 'DELETE',
      headers: { authorization: basic(clientId, secret), 'content-type': 'application/json' },
      body: JSON.stringify({ access_token: accessToken }),
    });

  it("knows both; a code, a refresh token and a grant are the issuing app's; the record says which client each call used", async () => {
    const first = { clientId: github.clientId, clientSecret: github.clientSecret };
    expect(github.clients).toEqual([first, second]);
    const third = github.registerClient();
    expect(github.clients).toEqual([first, second, third]);
    expect(() => github.registerClient({ clientId: second.clientId })).toThrow(/already registered/);
    const since = github.clientCalls.length;

    // Another app of the same account cannot redeem the code.
    const stolen = authorizeAs(first.clientId);
    expect((await exchange(second, stolen.code)).error).toBe('bad_verification_code');
    const one = await exchange(first, stolen.code);
    const two = await exchange(second, authorizeAs(second.clientId).code);
    expect(one.access_token).toMatch(/^ghu_/);
    expect(two.access_token).toMatch(/^ghu_/);

    // Nor refresh its tokens.
    const refresh = (client: typeof first, token: unknown) =>
      postForm(github.tokenUrl, { client_id: client.clientId, client_secret: client.clientSecret, grant_type: 'refresh_token', refresh_token: String(token) }, { accept: 'application/json' }).then(jsonOf);
    expect((await refresh(second, one.refresh_token)).error).toBe('bad_refresh_token');
    const renewed = await refresh(second, two.refresh_token);
    expect(renewed.access_token).toMatch(/^ghu_/);

    // A grant revocation names its app: another app's token is not found, and only that app's grant goes.
    expect((await revokeGrant(second.clientId, second.clientSecret, String(one.access_token))).status).toBe(404);
    expect((await revokeGrant(second.clientId, first.clientSecret, String(renewed.access_token))).status).toBe(404);
    expect((await revokeGrant(second.clientId, second.clientSecret, String(renewed.access_token))).status).toBe(204);
    expect(github.tokensOf('octo').map((t) => t.accessToken)).toEqual([one.access_token]);

    // A rotated secret of one app leaves the other's working.
    const rotated = github.rotateClientSecret(undefined, second.clientId);
    expect(github.clients[1]).toEqual({ clientId: second.clientId, clientSecret: rotated });
    expect((await refresh(first, one.refresh_token)).access_token).toMatch(/^ghu_/);
    expect((await exchange(second, authorizeAs(second.clientId).code)).error).toBe('incorrect_client_credentials');
    expect(() => github.rotateClientSecret(undefined, 'unknown')).toThrow(/no client/);

    expect(github.clientCalls.slice(since)).toEqual([
      { endpoint: 'authorize', clientId: first.clientId },
      { endpoint: 'token', clientId: second.clientId },
      { endpoint: 'token', clientId: first.clientId },
      { endpoint: 'authorize', clientId: second.clientId },
      { endpoint: 'token', clientId: second.clientId },
      { endpoint: 'refresh', clientId: second.clientId },
      { endpoint: 'refresh', clientId: second.clientId },
      { endpoint: 'revoke', clientId: second.clientId },
      { endpoint: 'revoke', clientId: second.clientId },
      { endpoint: 'revoke', clientId: second.clientId },
      { endpoint: 'refresh', clientId: first.clientId },
      { endpoint: 'authorize', clientId: second.clientId },
      { endpoint: 'token', clientId: second.clientId },
    ]);
    expect(github.issuedTokens()).toEqual(expect.arrayContaining([one.access_token, one.refresh_token, two.access_token, renewed.refresh_token]));
  });
});
