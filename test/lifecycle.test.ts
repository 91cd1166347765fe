import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { listAudit } from '../src/audit/audit.ts';
import { HotStatement, queryRows } from '../src/db/client.ts';
import { createApiToken } from '../src/identity/access-tokens.ts';
import { addMembership } from '../src/organizations/organizations.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { TEST_DATABASE_URL } from './helpers/database.ts';
import { type Account, bearer, browser, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv } from './helpers/providers.ts';
import { loadByProvider } from '../src/integrations/tokens/loaded.ts';
import { storeRotated } from '../src/integrations/tokens/store-rotated.ts';

let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let logins = 0;

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  slack = await startFakeSlack({ tokenExpiresIn: 43200 });
  t = await createTestApp({ env: { ...providerEnv(gh), ...providerEnv(slack), PROVIDER_TIMEOUT: '2', OAUTH_STATUS_MAX_AGE: '3600', RATE_LIMIT_MAX: '0' } });
});
afterAll(async () => {
  await t?.close();
  await gh?.close();
  await slack?.close();
});

interface Connected {
  account: Account;
  id: string;
  login: string;
}

async function connected(fake: FakeProvider = gh): Promise<Connected> {
  const login = `${fake.id}-user-${++logins}`;
  fake.addUser({ login, email: `${login}@example.com` });
  const account = await registerAndLogin(t.fastify, login);
  const res = await connect(t.fastify, account.token, fake, login);
  expect(res.statusCode, res.body).toBe(200);
  return { account, id: res.json().integration.id, login };
}

const get = (token: string, url: string, headers: Record<string, string> = {}) => t.fastify.inject({ method: 'GET', url, headers: { ...bearer(token), ...headers } });
const post = (token: string, url: string, payload?: Record<string, unknown>) => t.fastify.inject({ method: 'POST', url, headers: bearer(token), ...(payload === undefined ? {} : { payload }) });

async function status(c: Connected, provider = 'github') {
  return (await get(c.account.token, `/v1/integrations/${provider}/status`)).json().status;
}

async function storedRow(id: string) {
  const [row] = await queryRows<{ status: string; last_error: string | null; token_version: number }>(t.database.db, sql`SELECT status, last_error, token_version FROM integrations WHERE id = ${id}`);
  return row;
}

describe('token reads', () => {
  it('hands the token to owners with no-store, audited without the token', async () => {
    const c = await connected();
    const res = await get(c.account.token, '/v1/integrations/github/token');
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const [token] = gh.tokensOf(c.login);
    expect(res.json()).toEqual({
      success: true,
      provider: 'github',
      token: { accessToken: token?.accessToken, tokenType: 'Bearer', expiresAt: expect.any(String), scopes: ['read:user', 'user:email', 'repo'] },
      // Provider-defined metadata (docs/contract.md §5): GitHub keeps none.
      metadata: {},
      // The organization's own integration (docs/contract.md §5d).
      endUser: null,
      // Made with the provider's deployment app, the settings' (docs/contract.md §5e).
      app: { id: 'github', owner: 'deployment' },
    });
    const audit = await listAudit(t.database.db, c.account.organizationId, { first: 5 });
    expect(audit[0]).toMatchObject({
      action: 'integration.token_read',
      targetType: 'integration',
      targetId: c.id,
      actorUserId: c.account.userId,
      credentialKind: 'jwt',
      requestId: res.headers['x-request-id'],
      detail: { provider: 'github' },
    });
    expect(JSON.stringify(audit)).not.toContain(token?.accessToken);
  });

  it('allows API tokens, refuses members, cookie sessions and impersonators', async () => {
    const c = await connected();
    const sid = JSON.parse(Buffer.from(c.account.token.split('.')[1] ?? '', 'base64url').toString()).sid;
    const principal = { kind: 'jwt' as const, userId: c.account.userId, organizationId: c.account.organizationId, role: 'owner' as const, credentialId: sid, systemAdmin: false, viaCookie: false };
    const api = await createApiToken({ db: t.database.db, actor: { principal, requestId: null } }, { name: 'svc' });
    expect((await get(api.token, '/v1/integrations/github/token')).statusCode).toBe(200);

    const member = await registerAndLogin(t.fastify, 'plain-member');
    await addMembership(t.database.db, c.account.organizationId, member.userId, 'member');
    const memberToken = (await post(member.token, '/v1/account/switch', { organizationId: c.account.organizationId })).json().accessToken;
    const readsBefore = await listAudit(t.database.db, c.account.organizationId, { first: 50 });
    expect((await get(memberToken, '/v1/integrations/github/token')).json()).toMatchObject({ code: 'FORBIDDEN', error: 'This needs the admin role or higher in the organization' });
    // Refused in the same statement that would have read it: no token_read entry for the member.
    expect(await listAudit(t.database.db, c.account.organizationId, { first: 50 })).toEqual(readsBefore);
    expect((await get(memberToken, '/v1/integrations/github/status')).statusCode).toBe(200);
    expect((await get(memberToken, '/v1/integrations')).json().integrations).toHaveLength(1);

    const viaCookie = await t.fastify.inject({ method: 'GET', url: '/v1/integrations/github/token', headers: { cookie: `session=${c.account.cookies.session}` } });
    expect(viaCookie.statusCode).toBe(401);
  });

  it("records an API token's use at most once a minute on the one-statement path too", async () => {
    const c = await connected();
    const org = c.account.organizationId;
    const sid = JSON.parse(Buffer.from(c.account.token.split('.')[1] ?? '', 'base64url').toString()).sid;
    const principal = { kind: 'jwt' as const, userId: c.account.userId, organizationId: org, role: 'owner' as const, credentialId: sid, systemAdmin: false, viaCookie: false };
    const api = await createApiToken({ db: t.database.db, actor: { principal, requestId: null } }, { name: 'touch' });
    const lastUsed = async () =>
      (await queryRows<{ age: number | null }>(t.database.db, sql`SELECT extract(epoch FROM now() - last_used_at)::float8 AS age FROM api_tokens WHERE id = ${api.id}`))[0]?.age;
    const read = async () => expect((await get(api.token, '/v1/integrations/github/token')).statusCode).toBe(200);
    await read(); // the usual path: checked and recorded
    expect(await lastUsed()).toBeLessThan(30);
    await t.database.db.execute(sql`UPDATE api_tokens SET last_used_at = now() - interval '10 minutes' WHERE id = ${api.id}`);
    await read(); // within the minute: the statement leaves the row alone
    expect(await lastUsed()).toBeGreaterThan(500);
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(Date.now() + 61_000);
      await read(); // a minute on: recorded again
    } finally {
      vi.useRealTimers();
    }
    expect(await lastUsed()).toBeLessThan(30);
  });

  it.runIf(TEST_DATABASE_URL)("records an API token's use only when its row is free: a read never waits for it", async () => {
    const c = await connected();
    const sid = JSON.parse(Buffer.from(c.account.token.split('.')[1] ?? '', 'base64url').toString()).sid;
    const principal = { kind: 'jwt' as const, userId: c.account.userId, organizationId: c.account.organizationId, role: 'owner' as const, credentialId: sid, systemAdmin: false, viaCookie: false };
    const api = await createApiToken({ db: t.database.db, actor: { principal, requestId: null } }, { name: 'locked' });
    // Another transaction holds the token's row (as a revocation would) while it is used.
    await t.database.db.transaction(async (tx) => {
      await tx.execute(sql`SELECT 1 FROM api_tokens WHERE id = ${api.id} FOR UPDATE`);
      const res = await get(api.token, '/v1/integrations/github/token');
      expect(res.statusCode, res.body).toBe(200);
    });
    const [row] = await queryRows<{ last_used_at: unknown }>(t.database.db, sql`SELECT last_used_at FROM api_tokens WHERE id = ${api.id}`);
    expect(row?.last_used_at).toBeNull();
  });

  it('checks the credential in the statement that reads the token: ended sessions, revoked tokens, removed members', async () => {
    const c = await connected();
    const org = c.account.organizationId;
    const sid = JSON.parse(Buffer.from(c.account.token.split('.')[1] ?? '', 'base64url').toString()).sid;
    const principal = { kind: 'jwt' as const, userId: c.account.userId, organizationId: org, role: 'owner' as const, credentialId: sid, systemAdmin: false, viaCookie: false };
    const reads = async () => (await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM audit_logs WHERE organization_id = ${org} AND action = 'integration.token_read'`))[0]?.n;

    // API token: audited with its own id, its use recorded; revoked or expired, 401 and no read.
    const api = await createApiToken({ db: t.database.db, actor: { principal, requestId: null } }, { name: 'svc' });
    const viaApi = await get(api.token, '/v1/integrations/github/token', { 'x-request-id': 'api-read-1' });
    expect(viaApi.statusCode, viaApi.body).toBe(200);
    const [apiAudit] = await queryRows<{ credential_kind: string; credential_id: string; actor_user_id: string | null; target_id: string }>(
      t.database.db,
      sql`SELECT credential_kind, credential_id, actor_user_id, target_id FROM audit_logs WHERE organization_id = ${org} AND request_id = 'api-read-1'`,
    );
    expect(apiAudit).toEqual({ credential_kind: 'api_token', credential_id: api.id, actor_user_id: null, target_id: c.id });
    const [used] = await queryRows<{ last_used_at: unknown }>(t.database.db, sql`SELECT last_used_at FROM api_tokens WHERE id = ${api.id}`);
    expect(used?.last_used_at).not.toBeNull();
    // Naming the token's own organization takes the usual path, with the same answer; another organization is refused.
    expect((await get(api.token, '/v1/integrations/github/token', { 'x-organization-id': org })).statusCode).toBe(200);
    expect((await get(api.token, '/v1/integrations/github/token', { 'x-organization-id': 'other-org' })).statusCode).toBe(403);
    const before = await reads();
    await t.database.db.execute(sql`UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = ${api.id}`);
    expect((await get(api.token, '/v1/integrations/github/token')).json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    expect((await get(`${api.token}x`, '/v1/integrations/github/token')).statusCode).toBe(401);

    // A member removed from the organization: 403 at once, no read.
    const admin = await registerAndLogin(t.fastify, 'soon-removed');
    await addMembership(t.database.db, org, admin.userId, 'admin');
    const adminToken = (await post(admin.token, '/v1/account/switch', { organizationId: org })).json().accessToken;
    expect((await get(adminToken, '/v1/integrations/github/token')).statusCode).toBe(200);
    const afterAdmin = await reads();
    expect(afterAdmin).toBe((before ?? 0) + 1);
    await t.database.db.execute(sql`DELETE FROM memberships WHERE organization_id = ${org} AND user_id = ${admin.userId}`);
    expect((await get(adminToken, '/v1/integrations/github/token')).json()).toMatchObject({ code: 'FORBIDDEN', error: 'You are no longer a member of this organization' });

    // An integration whose provider is no longer configured: 404, and no read is audited.
    await t.database.db.execute(sql`INSERT INTO integrations (organization_id, id, provider, app_id, name, description, provider_account_id)
      VALUES (${org}, '01JG0000000000000000000000', 'gitlab', 'gitlab', 'GitLab', 'gone', '1')`);
    expect((await get(c.account.token, '/v1/integrations/gitlab/token')).json()).toMatchObject({ code: 'INTEGRATION_NOT_FOUND' });
    expect(await reads()).toBe(afterAdmin);

    // A session signed out: 401; a forged signature never reaches the database.
    expect((await post(c.account.token, '/v1/logout')).statusCode).toBe(200);
    expect((await get(c.account.token, '/v1/integrations/github/token')).json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    expect((await get(`${c.account.token.slice(0, -2)}xx`, '/v1/integrations/github/token')).statusCode).toBe(401);
    // Unknown providers answer 404 only to a caller who passed every check.
    expect((await get(c.account.token, '/v1/integrations/gitlab/token')).statusCode).toBe(401);
    expect(await reads()).toBe(afterAdmin);
  });

  it('answers reads that arrive together in one statement, each as it would alone', async () => {
    const a = await connected();
    const b = await connected();
    const s = await connected(slack);
    const sid = JSON.parse(Buffer.from(a.account.token.split('.')[1] ?? '', 'base64url').toString()).sid;
    const principal = { kind: 'jwt' as const, userId: a.account.userId, organizationId: a.account.organizationId, role: 'owner' as const, credentialId: sid, systemAdmin: false, viaCookie: false };
    const api = await createApiToken({ db: t.database.db, actor: { principal, requestId: null } }, { name: 'batched' });
    const member = await registerAndLogin(t.fastify, 'batch-member');
    await addMembership(t.database.db, a.account.organizationId, member.userId, 'member');
    const memberToken = (await post(member.token, '/v1/account/switch', { organizationId: a.account.organizationId })).json().accessToken;
    const ended = await registerAndLogin(t.fastify, 'batch-ended');
    expect((await post(ended.token, '/v1/logout')).statusCode).toBe(200);

    const reads: { token: string; provider: string; organizationId: string | null; targetId?: string }[] = [
      { token: a.account.token, provider: 'github', organizationId: a.account.organizationId, targetId: a.id },
      { token: b.account.token, provider: 'github', organizationId: b.account.organizationId, targetId: b.id },
      { token: s.account.token, provider: 'slack', organizationId: s.account.organizationId, targetId: s.id },
      { token: api.token, provider: 'github', organizationId: a.account.organizationId, targetId: a.id },
      { token: memberToken, provider: 'github', organizationId: null },
      { token: ended.token, provider: 'github', organizationId: null },
      { token: b.account.token, provider: 'slack', organizationId: null },
      // A NUL in the path: PostgreSQL would refuse it (and the statement with it); it never reaches the statement.
      { token: a.account.token, provider: '%00', organizationId: null },
    ];
    // Each alone first (the API token's first use also makes it known, so later reads of it are deferred too).
    // An answer without its request id, which differs from read to read.
    const answer = (res: Awaited<ReturnType<typeof get>>) => {
      const { requestId: _requestId, ...body } = res.json();
      return body;
    };
    // biome-ignore lint/suspicious/noExplicitAny: answers read loosely; the assertions check their shape
    const alone: Record<string, any>[] = [];
    for (const read of reads) alone.push(answer(await get(read.token, `/v1/integrations/${read.provider}/token`)));
    const issued = (fake: FakeProvider, c: Connected) => fake.tokensOf(c.login)[0]?.accessToken;
    expect(alone.map((body) => body.code ?? body.token.accessToken)).toEqual([
      issued(gh, a),
      issued(gh, b),
      issued(slack, s),
      issued(gh, a),
      'FORBIDDEN',
      'UNAUTHENTICATED',
      'INTEGRATION_NOT_FOUND',
      'INTEGRATION_NOT_FOUND',
    ]);

    const batches: number[] = [];
    const original = HotStatement.prototype.rows;
    const rows = vi.spyOn(HotStatement.prototype, 'rows').mockImplementation(function (this: HotStatement<unknown>, db, values) {
      if (typeof values.batch === 'string') batches.push(JSON.parse(values.batch).length);
      return original.call(this, db, values);
    });
    const together = reads.flatMap((read) => [read, read, read]);
    let responses: Awaited<ReturnType<typeof get>>[];
    try {
      responses = await Promise.all(together.map((read) => get(read.token, `/v1/integrations/${read.provider}/token`)));
    } finally {
      rows.mockRestore();
    }
    // Fewer statements than reads, every read carried by one of them.
    expect(batches.reduce((sum, size) => sum + size, 0)).toBe(together.length);
    expect(Math.max(...batches)).toBeGreaterThan(1);
    for (const [i, res] of responses.entries()) expect(answer(res), `read ${i}`).toEqual(alone[Math.floor(i / 3)]);

    // Audited once per read that got a token, in its own organization, against its own request.
    for (const [i, read] of together.entries()) {
      const requestId = responses[i]?.headers['x-request-id'] as string;
      const audit = await queryRows<{ organization_id: string; target_id: string }>(t.database.db, sql`SELECT organization_id, target_id FROM audit_logs WHERE request_id = ${requestId}`);
      expect(audit, `read ${i}`).toEqual(read.organizationId ? [{ organization_id: read.organizationId, target_id: read.targetId }] : []);
    }
  });

  it('fails only the read the database refuses when reads share a statement', async () => {
    const c = await connected();
    const sessionId = JSON.parse(Buffer.from(c.account.token.split('.')[1] ?? '', 'base64url').toString()).sid;
    const credential = { kind: 'jwt' as const, sessionId, userId: c.account.userId, organizationId: c.account.organizationId };
    const read = (requestId: string) =>
      t.app.services.lifecycle.reads.loadForUseAs(credential, 'github', null, ['owner', 'admin'], { action: 'integration.token_read', requestId }).then(
        (use) => use.loaded?.secrets.access_token,
        () => 'refused',
      );
    // The first reads take the free slots alone; the rest wait and share one statement, which PostgreSQL refuses (a NUL in text).
    const ids = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'bad\u0000', 'r7'];
    const token = gh.tokensOf(c.login)[0]?.accessToken;
    expect(await Promise.all(ids.map(read))).toEqual(ids.map((id) => (id.startsWith('bad') ? 'refused' : token)));
    const audited = await queryRows<{ request_id: string }>(t.database.db, sql`SELECT request_id FROM audit_logs WHERE organization_id = ${c.account.organizationId} AND action = 'integration.token_read' ORDER BY request_id`);
    expect(audited.map((row) => row.request_id)).toEqual(ids.filter((id) => !id.startsWith('bad')));
  });

  it('refreshes first when the token expires within 5 minutes', async () => {
    const c = await connected();
    await t.database.db.execute(sql`UPDATE integrations SET token_expires_at = now() + interval '2 minutes' WHERE id = ${c.id}`);
    const before = gh.stats.refreshes;
    const old = gh.tokensOf(c.login)[0]?.accessToken;
    const res = await get(c.account.token, '/v1/integrations/github/token');
    expect(res.statusCode).toBe(200);
    expect(gh.stats.refreshes - before).toBe(1);
    expect(res.json().token.accessToken).not.toBe(old);
    expect(res.json().token.accessToken).toBe(gh.tokensOf(c.login)[0]?.accessToken);
  });
});

describe('refresh', () => {
  it('replaces the tokens, validates the new one and returns it', async () => {
    const c = await connected();
    const versionBefore = (await storedRow(c.id))?.token_version ?? 0;
    const res = await post(c.account.token, '/v1/integrations/github/refresh');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ success: true, message: 'GitHub token refreshed', token: { accessToken: gh.tokensOf(c.login)[0]?.accessToken } });
    expect((await storedRow(c.id))?.token_version).toBe(versionBefore + 1);
    const audit = await listAudit(t.database.db, c.account.organizationId, { first: 10 });
    expect(audit.map((a) => a.action)).toContain('integration.refreshed');
    const names = await queryRows<{ name: string }>(t.database.db, sql`SELECT name FROM integration_secrets WHERE integration_id = ${c.id} ORDER BY name`);
    expect(names.map((n) => n.name)).toEqual(['github_access_token', 'github_expires_at', 'github_provider_email', 'github_provider_user_id', 'github_provider_username', 'github_refresh_token']);
    const lastCall = gh.requests.filter((r) => r.path === '/api/user').at(-1);
    expect(lastCall?.headers.authorization).toBe(`token ${res.json().token.accessToken}`);
  });

  it('makes one provider call for 25 concurrent refreshes, and never reuses a refresh token', async () => {
    const c = await connected();
    const before = { ...gh.stats };
    const results = await Promise.all(Array.from({ length: 25 }, () => post(c.account.token, '/v1/integrations/github/refresh')));
    expect(results.map((r) => r.statusCode)).toEqual(Array(25).fill(200));
    expect(gh.stats.refreshes - before.refreshes).toBe(1);
    expect(gh.stats.reusedRefreshTokens - before.reusedRefreshTokens).toBe(0);
    const tokens = new Set(results.map((r) => r.json().token.accessToken));
    expect(tokens).toEqual(new Set([gh.tokensOf(c.login)[0]?.accessToken]));
  });

  it('answers 502 when the provider is down at refresh, and the old token stays usable', async () => {
    const c = await connected();
    const old = (await get(c.account.token, '/v1/integrations/github/token')).json().token.accessToken;
    gh.mode.token = 'down';
    try {
      const res = await post(c.account.token, '/v1/integrations/github/refresh');
      expect(res.statusCode).toBe(502);
      expect(res.json().code).toBe('PROVIDER_ERROR');
    } finally {
      gh.mode.token = 'ok';
    }
    expect((await get(c.account.token, '/v1/integrations/github/token')).json().token.accessToken).toBe(old);
    const proxied = await get(c.account.token, '/v1/integrations/github/proxy/user');
    expect(proxied.statusCode).toBe(200);
    expect((await status(c)).status).toBe('connected');
  });

  it('marks the integration invalid when the refresh token is rejected', async () => {
    const c = await connected();
    gh.revokeUser(c.login);
    const res = await post(c.account.token, '/v1/integrations/github/refresh');
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ code: 'TOKEN_VALIDATION_FAILED', error: 'Token Validation Failed' });
    expect(await storedRow(c.id)).toMatchObject({ status: 'invalid' });
    expect((await get(c.account.token, '/v1/integrations/github/token')).statusCode).toBe(409);
  });

  it('uses the winner’s result when the refresh token changed meanwhile (another refresh won)', async () => {
    const c = await connected(slack);
    const before = await loadByProvider(t.app.services, c.account.organizationId, 'slack', null);
    // Tessera's refresh reaches the provider slowly; meanwhile another instance rotates with the same
    // refresh token and stores its result, bypassing the lease (as if that instance's lease had lapsed).
    slack.latencyMs = 1000;
    const refreshesBefore = slack.stats.refreshes;
    const ours = post(c.account.token, '/v1/integrations/slack/refresh');
    // Once our refresh request is at the provider (and waiting), the other instance's goes first.
    await expect.poll(() => slack.stats.refreshes - refreshesBefore, { interval: 10 }).toBe(1);
    slack.latencyMs = 0;
    const rotated = await fetch(slack.tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: before.secrets.refresh_token ?? '', client_id: slack.clientId, client_secret: slack.clientSecret }).toString(),
    }).then((r) => r.json() as Promise<{ access_token: string; refresh_token: string }>);
    expect(rotated, JSON.stringify(rotated)).toHaveProperty('access_token');
    const { replaceSecrets } = await import('../src/integrations/secrets.ts');
    await replaceSecrets(t.database.db, t.config.keyring, { organizationId: c.account.organizationId, integrationId: c.id, provider: 'slack' }, {
      ...before.secrets,
      access_token: rotated.access_token,
      refresh_token: rotated.refresh_token,
    });
    const res = await ours;
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().token.accessToken).toBe(rotated.access_token);
    expect((await storedRow(c.id))?.status).toBe('connected');
  });

  it('keeps a refresh token the provider does not return again', async () => {
    const noRotation = await startFakeGitHub({ tokenExpiresIn: 28800 });
    noRotation.addUser({ login: 'keeper', email: 'keeper@example.com' });
    const app = await createTestApp({ env: providerEnv(noRotation) });
    try {
      const account = await registerAndLogin(app.fastify, 'keeper');
      await connect(app.fastify, account.token, noRotation, 'keeper');
      const current = await loadByProvider(app.app.services, account.organizationId, 'github', null);
      const stored = await storeRotated(app.app.services, current, { accessToken: 'ghu_new_access_without_refresh_000000', scopes: [], tokenType: 'bearer', expiresIn: 100 }, { principal: null, requestId: null });
      expect(stored?.secrets.refresh_token).toBe(current.secrets.refresh_token);
      const reread = await loadByProvider(app.app.services, account.organizationId, 'github', null);
      expect(reread.secrets.refresh_token).toBe(current.secrets.refresh_token);
      expect(reread.secrets.access_token).toBe('ghu_new_access_without_refresh_000000');
    } finally {
      await app.close();
      await noRotation.close();
    }
  });

  it('refreshes Slack user tokens (answered at the top level)', async () => {
    const c = await connected(slack);
    const res = await post(c.account.token, '/v1/integrations/slack/refresh');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().token.accessToken).toMatch(/^xoxe\.xoxp-/);
    expect(res.json().token.accessToken).toBe(slack.tokensOf(c.login)[0]?.accessToken);
  });

  it('never returns the raw token to a cookie session', async () => {
    const c = await connected();
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/github/refresh', headers: { ...browser(c.account), 'content-type': 'application/json' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true, message: 'GitHub token refreshed' });
  });
});

describe('status and transitions', () => {
  it('reports connected with the status object', async () => {
    const c = await connected();
    expect(await status(c)).toEqual({
      provider: 'github',
      connected: true,
      status: 'connected',
      tokenValid: true,
      tokenExpired: false,
      lastValidated: expect.any(String),
      message: 'GitHub is connected.',
      actions: [],
    });
  });

  it('notices a revocation through the proxy: 409, invalid, reconnect', async () => {
    const c = await connected();
    gh.revokeUser(c.login);
    const res = await get(c.account.token, '/v1/integrations/github/proxy/user');
    expect(res.statusCode).toBe(409);
    expect(res.json().code).toBe('TOKEN_VALIDATION_FAILED');
    const s = await status(c);
    expect(s).toMatchObject({ status: 'invalid', connected: false, tokenValid: false, actions: ['reconnect'], lastError: 'token unauthorized', detectedAt: expect.any(String) });
    const events = await queryRows<{ type: string; data: { to?: string } }>(t.database.db, sql`SELECT type, data FROM events WHERE organization_id = ${c.account.organizationId} AND type = 'integration.status_changed'`);
    expect(events.map((e) => e.data.to)).toEqual(['invalid']);
  });

  it('moves to warning on a plain 403 (which passes through) and back to connected after a refresh', async () => {
    const c = await connected();
    gh.mode.api = 'forbidden';
    try {
      const res = await get(c.account.token, '/v1/integrations/github/proxy/user/repos');
      expect(res.statusCode).toBe(403);
      expect(res.json().message).toBe('Resource not accessible by integration');
    } finally {
      gh.mode.api = 'ok';
    }
    expect(await status(c)).toMatchObject({ status: 'warning', connected: true, tokenValid: true, actions: ['refresh', 'configure'], lastError: 'API access forbidden' });
    expect((await post(c.account.token, '/v1/integrations/github/refresh')).statusCode).toBe(200);
    expect((await status(c)).status).toBe('connected');
  });

  it('leaves the status alone on rate limits and answers 429 with Retry-After', async () => {
    const c = await connected();
    for (const mode of ['rate-limited', 'secondary-rate-limit'] as const) {
      gh.mode.api = mode;
      try {
        const res = await get(c.account.token, '/v1/integrations/github/proxy/user');
        expect(res.statusCode, mode).toBe(429);
        expect(res.json().code).toBe('PROVIDER_RATE_LIMITED');
        expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      } finally {
        gh.mode.api = 'ok';
      }
    }
    expect((await storedRow(c.id))?.status).toBe('connected');
  });

  it('reports an expired token with no refresh token as expired, reconnect only', async () => {
    const c = await connected();
    await t.database.db.execute(sql`UPDATE integrations SET token_expires_at = now() - interval '1 minute', has_refresh_token = false WHERE id = ${c.id}`);
    expect(await status(c)).toMatchObject({ status: 'expired', connected: false, tokenExpired: true, actions: ['reconnect'] });
    expect((await get(c.account.token, '/v1/integrations')).json().integrations[0].status).toBe('expired');
  });

  it('validates live when the last validation is older than OAUTH_STATUS_MAX_AGE', async () => {
    const c = await connected();
    await t.database.db.execute(sql`UPDATE integrations SET last_validated_at = now() - interval '2 hours' WHERE id = ${c.id}`);
    gh.revokeUser(c.login);
    expect((await status(c)).status).toBe('invalid');
  });

  it('proxies a call in flight while the provider rotates the token, and stays connected', async () => {
    const c = await connected();
    gh.latencyMs = 1000;
    const callsBefore = gh.stats.apiCalls;
    const inFlight = get(c.account.token, '/v1/integrations/github/proxy/user');
    await expect.poll(() => gh.stats.apiCalls - callsBefore, { interval: 10 }).toBe(1);
    gh.latencyMs = 0;
    const refreshed = await post(c.account.token, '/v1/integrations/github/refresh');
    expect(refreshed.statusCode).toBe(200);
    const res = await inFlight;
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().login).toBe(c.login);
    expect((await storedRow(c.id))?.status).toBe('connected');
    expect(gh.stats.reusedRefreshTokens).toBe(0);
  });
});

describe('proxy', () => {
  it('passes method, query and JSON body, with only allowlisted headers each way', async () => {
    const c = await connected();
    const res = await t.fastify.inject({
      method: 'POST',
      url: '/v1/integrations/github/proxy/echo/a%20b/c?x=1&y=two',
      headers: { ...bearer(c.account.token), 'x-organization-id': c.account.organizationId, 'x-csrf-token': 'csrf', cookie: 'session=abc', 'x-forwarded-for': '1.2.3.4', accept: 'application/json' },
      payload: { hello: 'world' },
    });
    expect(res.statusCode, res.body).toBe(200);
    const echo = res.json();
    expect(echo).toMatchObject({ method: 'POST', path: '/api/echo/a%20b/c', query: { x: '1', y: 'two' } });
    expect(JSON.parse(echo.body)).toEqual({ hello: 'world' });
    const sent = Object.keys(echo.headers).map((h) => h.toLowerCase());
    for (const banned of ['cookie', 'x-csrf-token', 'x-organization-id', 'x-forwarded-for', 'x-impersonate-user']) expect(sent).not.toContain(banned);
    expect(echo.headers.authorization).toBe(`token ${gh.tokensOf(c.login)[0]?.accessToken}`);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['content-security-policy']).toBe('sandbox');
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('never leaves the API base: dot segments, encoded slashes, absolute URLs', async () => {
    const c = await connected();
    const before = gh.stats.apiCalls;
    for (const path of ['..%2F..%2Fetc', '%2e%2e/user', 'a/%2F%2Fevil.example', '%5C%5Cevil.example', 'a//b', 'http:%2F%2Fevil.example%2F', '.%2e/x']) {
      const res = await get(c.account.token, `/v1/integrations/github/proxy/${path}`);
      expect([400, 404], path).toContain(res.statusCode);
      expect(gh.stats.apiCalls, path).toBe(before);
    }
    expect(gh.stats.apiCalls).toBe(before);
    const dotted = await t.fastify.inject({ method: 'GET', url: '/v1/integrations/github/proxy/../../v1/account/access', headers: bearer(c.account.token) });
    expect([400, 404]).toContain(dotted.statusCode);
    expect(gh.requests.some((r) => !r.path.startsWith('/api') && !r.path.startsWith('/login'))).toBe(false);
  });

  it('does not follow redirects, and strips their Location', async () => {
    const c = await connected();
    const res = await get(c.account.token, '/v1/integrations/github/proxy/redirect');
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toBeUndefined();
  });

  it('answers 502 for answers over 10 MiB, garbage-free bodies, and hangs past the timeout', async () => {
    const c = await connected();
    const big = await get(c.account.token, '/v1/integrations/github/proxy/big');
    expect(big.statusCode).toBe(502);
    expect(big.json().code).toBe('PROVIDER_ERROR');
    gh.mode.api = 'hang';
    try {
      const hung = await get(c.account.token, '/v1/integrations/github/proxy/user');
      expect(hung.statusCode).toBe(502);
    } finally {
      gh.mode.api = 'ok';
    }
    gh.mode.api = 'down';
    try {
      const down = await get(c.account.token, '/v1/integrations/github/proxy/user');
      expect(down.statusCode).toBe(502);
      expect(down.body).not.toContain('unavailable');
    } finally {
      gh.mode.api = 'ok';
    }
  });

  it('lets members GET but not POST, and needs header credentials', async () => {
    const c = await connected();
    const member = await registerAndLogin(t.fastify, 'proxy-member');
    await addMembership(t.database.db, c.account.organizationId, member.userId, 'member');
    const token = (await post(member.token, '/v1/account/switch', { organizationId: c.account.organizationId })).json().accessToken;
    expect((await get(token, '/v1/integrations/github/proxy/user')).statusCode).toBe(200);
    expect((await t.fastify.inject({ method: 'POST', url: '/v1/integrations/github/proxy/echo/x', headers: bearer(token), payload: {} })).statusCode).toBe(403);
    const cookie = await t.fastify.inject({ method: 'GET', url: '/v1/integrations/github/proxy/user', headers: { cookie: `session=${c.account.cookies.session}` } });
    expect(cookie.statusCode).toBe(401);
  });
});

describe('organization isolation and delete', () => {
  it('answers 404 INTEGRATION_NOT_FOUND to another organization on every endpoint', async () => {
    const c = await connected();
    const stranger = await registerAndLogin(t.fastify, 'stranger');
    const calls = [
      get(stranger.token, '/v1/integrations/github/token'),
      get(stranger.token, '/v1/integrations/github/status'),
      post(stranger.token, '/v1/integrations/github/refresh'),
      get(stranger.token, '/v1/integrations/github/proxy/user'),
      t.fastify.inject({ method: 'DELETE', url: `/v1/integrations/${c.id}`, headers: bearer(stranger.token) }),
      t.fastify.inject({ method: 'DELETE', url: '/v1/integrations/not-a-ulid', headers: bearer(stranger.token) }),
      get(stranger.token, '/v1/integrations/GitHub/status'),
    ];
    for (const res of await Promise.all(calls)) {
      expect(res.statusCode, res.body).toBe(404);
      expect(res.json()).toMatchObject({ code: 'INTEGRATION_NOT_FOUND', error: 'Integration Not Found' });
    }
    expect((await get(stranger.token, '/v1/integrations')).json().integrations).toEqual([]);
  });

  it('deletes the entity and every secret, audits it, emits integration.deleted and revokes the grant after commit', async () => {
    const c = await connected();
    const revocationsBefore = gh.stats.revocations;
    const res = await t.fastify.inject({ method: 'DELETE', url: `/v1/integrations/${c.id}`, headers: bearer(c.account.token) });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true, message: 'GitHub integration deleted' });
    const [secrets] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM integration_secrets WHERE integration_id = ${c.id}`);
    expect(secrets?.n).toBe(0);
    expect(await storedRow(c.id)).toBeUndefined();
    const audit = await listAudit(t.database.db, c.account.organizationId, { first: 3 });
    expect(audit[0]).toMatchObject({ action: 'integration.deleted', targetId: c.id });
    const [event] = await queryRows<{ type: string }>(t.database.db, sql`SELECT type FROM events WHERE organization_id = ${c.account.organizationId} ORDER BY id DESC LIMIT 1`);
    expect(event?.type).toBe('integration.deleted');
    await expect.poll(() => gh.stats.revocations - revocationsBefore).toBe(1);
    expect((await t.fastify.inject({ method: 'DELETE', url: `/v1/integrations/${c.id}`, headers: bearer(c.account.token) })).statusCode).toBe(404);
  });
});
