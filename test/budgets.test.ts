// Calling providers within their limits (docs/contract.md §5f), against a scriptable fake GitHub and
// Slack: budgets learned from answers and shared by every instance through the database, no call sent
// while a budget is known exhausted, `Tessera-Max-Wait` waits that fit and those that do not, retries
// only where the contract allows them, `Tessera-Next-Page`, the MCP tools' `maxWait`, the validation
// pass and the metrics.
import type { AddressInfo } from 'node:net';
// The worktree's own client (node_modules may link another checkout's).
import { Tessera } from '../packages/client/src/index.js';
import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { queryRows } from '../src/db/client.ts';
import { runValidationPass } from '../src/integrations/validator.ts';
import type { Metrics } from '../src/http/metrics.ts';
import { createLogger } from '../src/http/logging.ts';
import type { FakeContext, FakeProvider, FakeReply } from './fakes/common.ts';
import { json } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, LogCapture, type TestApp } from './helpers/app.ts';
import { TEST_DATABASE_URL } from './helpers/database.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv } from './helpers/providers.ts';

let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let logins = 0;

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  slack = await startFakeSlack({ tokenExpiresIn: 43200 });
  t = await createTestApp({ env: { ...providerEnv(gh), ...providerEnv(slack), PROVIDER_TIMEOUT: '2', RATE_LIMIT_MAX: '0', METRICS_ENABLED: 'true' }, background: false });
});
afterAll(async () => {
  await t?.close();
  await gh?.close();
  await slack?.close();
});
afterEach(() => {
  gh.script = null;
  slack.script = null;
});

async function connected(fake: FakeProvider = gh): Promise<Account> {
  const login = `${fake.id}-budget-${++logins}`;
  fake.addUser({ login, email: `${login}@example.com` });
  const account = await registerAndLogin(t.fastify, login);
  const res = await connect(t.fastify, account.token, fake, login);
  expect(res.statusCode, res.body).toBe(200);
  return account;
}

const call = (fastify: TestApp['fastify'], token: string, path: string, options: { method?: 'GET' | 'POST' | 'PUT'; headers?: Record<string, string>; payload?: unknown } = {}) =>
  fastify.inject({
    method: options.method ?? 'GET',
    url: `/v1/integrations/${path}`,
    headers: { ...bearer(token), ...options.headers },
    ...(options.payload !== undefined ? { payload: options.payload as Record<string, unknown> } : {}),
  });

/** Scripts the fake's answers to `/api/scripted/…`: each request gets the next reply of `replies` (the last one repeats); counts them. */
function scripted(fake: FakeProvider, replies: (FakeReply | ((ctx: FakeContext) => FakeReply))[]): { seen: FakeContext[] } {
  const seen: FakeContext[] = [];
  fake.script = (ctx) => {
    if (!ctx.path.includes('/scripted')) return null;
    seen.push(ctx);
    const reply = replies[Math.min(seen.length - 1, replies.length - 1)];
    return typeof reply === 'function' ? reply(ctx) : (reply ?? null);
  };
  return { seen };
}

const epoch = (secondsFromNow: number) => String(Math.floor(Date.now() / 1000) + secondsFromNow);
const ok = (headers: Record<string, string> = {}) => json(200, { ok: true }, headers);

async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const values = (await (t.app.services.metrics as Metrics).registry.getSingleMetric(name)?.get())?.values ?? [];
  return values.filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l) && !('le' in v.labels)).reduce((sum, v) => sum + v.value, 0);
}

async function budgetRows(provider = 'github') {
  return queryRows<{ scope: string; remaining: number | null; blocked_until: Date | null; organization_id: string | null }>(
    t.database.db,
    sql`SELECT scope, remaining, blocked_until, organization_id FROM provider_budgets WHERE provider = ${provider}`,
  );
}

describe('budgets learned from answers', () => {
  it('remembers an exhausted budget and sends nothing until its reset: 429 with the true Retry-After, no provider call', async () => {
    const account = await connected();
    const script = scripted(gh, [ok({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': epoch(40) })]);
    const first = await call(t.fastify, account.token, 'github/proxy/scripted/a');
    expect(first.statusCode, first.body).toBe(200);
    expect(first.headers['tessera-attempts']).toBe('1');
    const exhaustedBefore = await metric('tessera_provider_budget_exhausted_total', { provider: 'github' });

    const second = await call(t.fastify, account.token, 'github/proxy/scripted/b');
    expect(second.statusCode, second.body).toBe(429);
    expect(second.json().code).toBe('PROVIDER_RATE_LIMITED');
    const retryAfter = Number(second.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(38);
    expect(retryAfter).toBeLessThanOrEqual(41);
    expect(second.headers['tessera-attempts']).toBe('0');
    expect(script.seen).toHaveLength(1);
    expect(await metric('tessera_provider_budget_exhausted_total', { provider: 'github' })).toBe(exhaustedBefore + 1);
  });

  it('writes nothing while the budget has calls left', async () => {
    const account = await connected();
    const before = (await budgetRows()).length;
    scripted(gh, [ok({ 'x-ratelimit-remaining': '4998', 'x-ratelimit-reset': epoch(3600) })]);
    for (let i = 0; i < 3; i++) expect((await call(t.fastify, account.token, 'github/proxy/scripted/c')).statusCode).toBe(200);
    expect(await budgetRows()).toHaveLength(before);
  });

  it('learns a 429 with Retry-After (Slack), and an IETF RateLimit-Reset in delta seconds', async () => {
    const account = await connected(slack);
    const script = scripted(slack, [json(429, { ok: false, error: 'ratelimited' }, { 'retry-after': '30' })]);
    const first = await call(t.fastify, account.token, 'slack/proxy/scripted.list');
    expect(first.statusCode).toBe(429);
    expect(Number(first.headers['retry-after'])).toBe(30);
    const second = await call(t.fastify, account.token, 'slack/proxy/scripted.list');
    expect(second.statusCode).toBe(429);
    expect(Number(second.headers['retry-after'])).toBeGreaterThanOrEqual(29);
    expect(script.seen).toHaveLength(1);
    // A deployment app's budget is the provider account's, not one organization's.
    const [row] = await budgetRows('slack');
    expect(row).toMatchObject({ scope: 'slack', organization_id: null });

    const other = await connected();
    scripted(gh, [ok({ 'ratelimit-remaining': '0', 'ratelimit-reset': '20' })]);
    expect((await call(t.fastify, other.token, 'github/proxy/scripted/d')).statusCode).toBe(200);
    const refused = await call(t.fastify, other.token, 'github/proxy/scripted/d');
    expect(refused.statusCode).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(19);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(21);
  });

  // PostgreSQL only: the lock is held by another connection of the pool (PGlite has one connection).
  it.runIf(TEST_DATABASE_URL)('a budget the database cannot take within 1 s is skipped and logged; the answer is returned anyway', async () => {
    const account = await connected();
    scripted(gh, [ok({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': epoch(30) })]);
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let locked: () => void = () => {};
    const isLocked = new Promise<void>((resolve) => {
      locked = resolve;
    });
    const holder = t.database.db.transaction(async (tx) => {
      await tx.execute(sql`LOCK TABLE provider_budgets IN EXCLUSIVE MODE`);
      locked();
      await held;
    });
    await isLocked;
    const started = Date.now();
    const res = await call(t.fastify, account.token, 'github/proxy/scripted/x');
    const took = Date.now() - started;
    release();
    await holder;
    expect(res.statusCode, res.body).toBe(200);
    expect(took).toBeGreaterThanOrEqual(900);
    expect(took).toBeLessThan(5000);
    expect(t.logs.text).toContain('a provider budget could not be stored within 1 s; skipped');
  });

  it('is shared by every instance: a budget one instance learned stops the other before it calls', async () => {
    const logs = new LogCapture();
    const second = await buildApp({ config: t.config, database: t.database, logger: createLogger({ level: 'warn', stream: logs }) });
    try {
      const account = await connected();
      const script = scripted(gh, [ok({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': epoch(30) })]);
      expect((await call(t.fastify, account.token, 'github/proxy/scripted/e')).statusCode).toBe(200);
      const elsewhere = await call(second.fastify, account.token, 'github/proxy/scripted/e');
      expect(elsewhere.statusCode, elsewhere.body).toBe(429);
      expect(elsewhere.headers['tessera-attempts']).toBe('0');
      expect(script.seen).toHaveLength(1);
    } finally {
      await second.fastify.close();
    }
  });
});

describe('budgets written by racing instances', () => {
  it("an answer older than another instance's block never lifts or shortens it; a longer block lengthens it", async () => {
    const budgets = t.app.services.budgets;
    const key = { scope: 'github', accountId: 'race-account', organizationId: null, provider: 'github' };
    const now = Date.now();
    // One instance learns a 429 blocking for 60 s.
    await budgets.learn(key, null, { remaining: 0, resetAt: null, blockedUntil: now + 60_000 });
    const blocked = (await budgets.read(key))?.blockedUntil as number;
    expect(blocked).toBeGreaterThan(now + 50_000);
    // Another, which read nothing before the block, stores an earlier answer with calls left: the block stays.
    await budgets.learn(key, null, { remaining: 10, resetAt: null, blockedUntil: null });
    expect((await budgets.read(key))?.blockedUntil).toBe(blocked);
    // A shorter block does not shorten it; a longer one lengthens it.
    await budgets.learn(key, null, { remaining: 0, resetAt: null, blockedUntil: now + 5_000 });
    expect((await budgets.read(key))?.blockedUntil).toBe(blocked);
    await budgets.learn(key, null, { remaining: 0, resetAt: null, blockedUntil: now + 120_000 });
    expect((await budgets.read(key))?.blockedUntil).toBeGreaterThan(blocked);
  });
});

describe('Tessera-Max-Wait', () => {
  it('waits for a Retry-After that fits and sends again: Tessera-Waited and Tessera-Attempts', async () => {
    const account = await connected();
    const waitsBefore = await metric('tessera_proxy_waits_total', { provider: 'github' });
    const script = scripted(gh, [json(429, { message: 'slow down' }, { 'retry-after': '1' }), ok()]);
    const res = await call(t.fastify, account.token, 'github/proxy/scripted/f', { headers: { 'tessera-max-wait': '5' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['tessera-attempts']).toBe('2');
    expect(Number(res.headers['tessera-waited'])).toBeGreaterThanOrEqual(900);
    expect(Number(res.headers['tessera-waited'])).toBeLessThan(2500);
    expect(script.seen).toHaveLength(2);
    expect(await metric('tessera_proxy_waits_total', { provider: 'github' })).toBe(waitsBefore + 1);
    expect(await metric('tessera_proxy_wait_seconds')).toBeGreaterThan(0);
  });

  it('waits for a known reset that fits before sending, and refuses one that does not without calling', async () => {
    const account = await connected();
    const script = scripted(gh, [ok({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': epoch(2) }), ok()]);
    expect((await call(t.fastify, account.token, 'github/proxy/scripted/g')).statusCode).toBe(200);
    const refused = await call(t.fastify, account.token, 'github/proxy/scripted/g', { headers: { 'tessera-max-wait': '0' } });
    expect(refused.statusCode).toBe(429);
    expect(script.seen).toHaveLength(1);
    const waited = await call(t.fastify, account.token, 'github/proxy/scripted/g', { headers: { 'tessera-max-wait': '4' } });
    expect(waited.statusCode, waited.body).toBe(200);
    expect(Number(waited.headers['tessera-waited'])).toBeGreaterThan(0);
    expect(waited.headers['tessera-attempts']).toBe('1');
    expect(script.seen).toHaveLength(2);
  });

  it('answers 429 with the true Retry-After when the wait does not fit', async () => {
    const account = await connected();
    const script = scripted(gh, [json(429, { message: 'slow down' }, { 'retry-after': '30' })]);
    const res = await call(t.fastify, account.token, 'github/proxy/scripted/h', { headers: { 'tessera-max-wait': '3' } });
    expect(res.statusCode).toBe(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(29);
    expect(res.headers['tessera-attempts']).toBe('1');
    expect(res.headers['tessera-waited']).toBeUndefined();
    expect(script.seen).toHaveLength(1);
  });

  it('is whole seconds from 0 to 60: anything else is 400 INVALID_INPUT', async () => {
    const account = await connected();
    for (const value of ['61', '-1', '1.5', 'soon', '']) {
      const res = await call(t.fastify, account.token, 'github/proxy/user', { headers: { 'tessera-max-wait': value } });
      expect(res.statusCode, value).toBe(400);
      expect(res.json().code).toBe('INVALID_INPUT');
      // Errors included, every proxied answer says how many sends it took: none here.
      expect(res.headers['tessera-attempts'], value).toBe('0');
    }
    const unknown = await call(t.fastify, account.token, 'nosuchprovider/proxy/user');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.headers['tessera-attempts']).toBe('0');
    expect((await call(t.fastify, account.token, 'github/proxy/user', { headers: { 'tessera-max-wait': '60' } })).statusCode).toBe(200);
  });
});

describe('retries', () => {
  it('tries an idempotent call again after 503s, at most 3 attempts, within the max wait', async () => {
    const account = await connected();
    const retriesBefore = await metric('tessera_proxy_retries_total', { provider: 'github', reason: '503' });
    const script = scripted(gh, [json(503, { message: 'unavailable' }), json(503, { message: 'unavailable' }), ok()]);
    const res = await call(t.fastify, account.token, 'github/proxy/scripted/i', { headers: { 'tessera-max-wait': '10' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['tessera-attempts']).toBe('3');
    expect(res.headers['tessera-waited']).toBeUndefined();
    expect(script.seen).toHaveLength(3);
    expect(await metric('tessera_proxy_retries_total', { provider: 'github', reason: '503' })).toBe(retriesBefore + 2);

    const always = scripted(gh, [json(502, { message: 'bad gateway' })]);
    const failed = await call(t.fastify, account.token, 'github/proxy/scripted/j', { headers: { 'tessera-max-wait': '10' } });
    expect(failed.statusCode).toBe(502);
    expect(failed.json().code).toBe('PROVIDER_ERROR');
    expect(failed.headers['tessera-attempts']).toBe('3');
    expect(always.seen).toHaveLength(3);
  });

  it('never tries a POST again, unless it carries an Idempotency-Key, which reaches the provider', async () => {
    const account = await connected();
    const plain = scripted(gh, [json(503, { message: 'unavailable' }), ok()]);
    const once = await call(t.fastify, account.token, 'github/proxy/scripted/k', { method: 'POST', payload: { a: 1 }, headers: { 'tessera-max-wait': '10' } });
    expect(once.statusCode).toBe(502);
    expect(once.headers['tessera-attempts']).toBe('1');
    expect(plain.seen).toHaveLength(1);

    const keyed = scripted(gh, [json(503, { message: 'unavailable' }), ok()]);
    const twice = await call(t.fastify, account.token, 'github/proxy/scripted/k', { method: 'POST', payload: { a: 1 }, headers: { 'tessera-max-wait': '10', 'idempotency-key': 'order-77' } });
    expect(twice.statusCode, twice.body).toBe(200);
    expect(twice.headers['tessera-attempts']).toBe('2');
    expect(keyed.seen.map((ctx) => ctx.req.headers['idempotency-key'])).toEqual(['order-77', 'order-77']);
  });

  it('with no max wait, makes one attempt as before', async () => {
    const account = await connected();
    const script = scripted(gh, [json(503, { message: 'unavailable' }), ok()]);
    const res = await call(t.fastify, account.token, 'github/proxy/scripted/l');
    expect(res.statusCode).toBe(502);
    expect(res.headers['tessera-attempts']).toBe('1');
    expect(script.seen).toHaveLength(1);
  });
});

describe('Tessera-Next-Page', () => {
  it('follows the definition: a Link under the API base (GitHub), never a foreign one', async () => {
    const account = await connected();
    scripted(gh, [(ctx) => ok({ link: `<${gh.apiUrl}/scripted/repos?page=2&per_page=5>; rel="next", <${gh.apiUrl}/scripted/repos?page=9>; rel="last"`, 'x-seen': ctx.path })]);
    const res = await call(t.fastify, account.token, 'github/proxy/scripted/repos?per_page=5');
    expect(res.statusCode).toBe(200);
    expect(res.headers['tessera-next-page']).toBe('scripted/repos?page=2&per_page=5');

    for (const foreign of ['http://127.0.0.2:1/api/scripted/repos?page=2', `${gh.url}/apiother/x?page=2`, `${gh.url}/login/oauth/authorize?page=2`]) {
      scripted(gh, [ok({ link: `<${foreign}>; rel="next"` })]);
      const refused = await call(t.fastify, account.token, 'github/proxy/scripted/repos');
      expect(refused.statusCode).toBe(200);
      expect(refused.headers['tessera-next-page'], foreign).toBeUndefined();
    }
    scripted(gh, [ok()]);
    expect((await call(t.fastify, account.token, 'github/proxy/scripted/repos')).headers['tessera-next-page']).toBeUndefined();
  });

  it("is what the client's paginate() follows, page after page, until an answer has none", async () => {
    const account = await connected();
    const apiToken = (await graphqlData(t.fastify, account.token, 'mutation { createAPIToken(name: "pages") { token } }')).createAPIToken.token as string;
    await t.fastify.listen({ host: '127.0.0.1', port: 0 });
    const baseUrl = `http://127.0.0.1:${(t.fastify.server.address() as AddressInfo).port}`;
    const script = scripted(gh, [
      (ctx) => {
        const page = Number(ctx.query.get('page') ?? '1');
        const link = page < 3 ? `<${gh.apiUrl}/scripted/repos?per_page=2&page=${page + 1}>; rel="next"` : `<${gh.apiUrl}/scripted/repos?per_page=2&page=1>; rel="first"`;
        return json(200, [{ page }], { link });
      },
    ]);
    const tessera = new Tessera({ baseUrl, apiToken });
    const pages: unknown[] = [];
    for await (const page of tessera.paginate('github', { path: 'scripted/repos', query: { per_page: 2 }, maxWait: 5 })) pages.push(page.body);
    expect(pages).toEqual([[{ page: 1 }], [{ page: 2 }], [{ page: 3 }]]);
    expect(script.seen.map((ctx) => ctx.path + (ctx.req.url?.slice(ctx.req.url.indexOf('?')) ?? ''))).toEqual([
      '/api/scripted/repos?per_page=2',
      '/api/scripted/repos?per_page=2&page=2',
      '/api/scripted/repos?per_page=2&page=3',
    ]);
  });

  it('reads a cursor in the body (Slack response_metadata.next_cursor → cursor)', async () => {
    const account = await connected(slack);
    scripted(slack, [json(200, { ok: true, channels: [], response_metadata: { next_cursor: 'dGVhbTpDMDYxRkE1UEI=' } }), json(200, { ok: true, channels: [], response_metadata: { next_cursor: '' } })]);
    const res = await call(t.fastify, account.token, 'slack/proxy/scripted.list?limit=2');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['tessera-next-page']).toBe('scripted.list?limit=2&cursor=dGVhbTpDMDYxRkE1UEI%3D');
    const last = await call(t.fastify, account.token, 'slack/proxy/scripted.list?limit=2&cursor=dGVhbTpDMDYxRkE1UEI%3D');
    expect(last.headers['tessera-next-page']).toBeUndefined();
  });
});

describe('the validation pass and the status route', () => {
  it('skip an account whose budget is known exhausted until its reset, without counting a failure', async () => {
    const account = await connected();
    const script = scripted(gh, [ok({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': epoch(120) })]);
    expect((await call(t.fastify, account.token, 'github/proxy/scripted/v')).statusCode).toBe(200);
    expect(script.seen).toHaveLength(1);
    // Only this integration is due, and its last validation is stale.
    await t.database.db.execute(sql`UPDATE integrations SET next_validation_at = now() + interval '1 day'`);
    await t.database.db.execute(
      sql`UPDATE integrations SET next_validation_at = now() - interval '1 second', last_validated_at = now() - interval '1 day' WHERE organization_id = ${account.organizationId}`,
    );
    const accountChecks = () => gh.requests.filter((r) => r.path === '/api/user').length;
    const before = accountChecks();
    const result = await runValidationPass(t.app.services, { batchSize: 50 });
    expect(result).toMatchObject({ claimed: 1, budgetExhausted: 1, valid: 0, rateLimited: 0, transient: 0, errors: 0 });
    expect(accountChecks()).toBe(before);
    // Validated again right after the reset, not a whole interval later.
    const [row] = await queryRows<{ next: Date }>(t.database.db, sql`SELECT next_validation_at AS next FROM integrations WHERE organization_id = ${account.organizationId}`);
    expect(Math.abs(new Date(row?.next ?? 0).getTime() - (Date.now() + 120_000))).toBeLessThan(5_000);

    const status = await call(t.fastify, account.token, 'github/status');
    expect(status.statusCode).toBe(200);
    expect(status.json().status.status).toBe('connected');
    expect(accountChecks()).toBe(before);
  });
});

describe('the validation pass reads a batch\'s budgets at once (decision 333)', () => {
  it('and still sends nothing to an account whose budget an earlier check of the same batch found exhausted', async () => {
    // Two organizations' integrations of one GitHub account: one budget, the deployment app's grant of that account.
    const login = `github-budget-shared-${++logins}`;
    gh.addUser({ login, email: `${login}@example.com` });
    const first = await registerAndLogin(t.fastify, `${login}-a`);
    const second = await registerAndLogin(t.fastify, `${login}-b`);
    for (const account of [first, second]) expect((await connect(t.fastify, account.token, gh, login)).statusCode).toBe(200);
    await t.database.db.execute(sql`UPDATE integrations SET next_validation_at = now() + interval '1 day'`);
    await t.database.db.execute(
      sql`UPDATE integrations SET next_validation_at = now() - interval '1 second', last_validated_at = now() - interval '1 day' WHERE organization_id IN (${first.organizationId}, ${second.organizationId})`,
    );
    // Earlier tests' budgets have reset (decision 326): this account starts with none.
    await t.database.db.execute(sql`DELETE FROM provider_budgets`);
    const seen: FakeContext[] = [];
    gh.script = (ctx) => {
      if (ctx.path !== '/api/user') return null;
      seen.push(ctx);
      return json(200, { id: 4242, login }, { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': epoch(120) });
    };
    const result = await runValidationPass(t.app.services, { batchSize: 50, concurrencyPerProvider: 1 });
    expect(result).toMatchObject({ claimed: 2, valid: 1, budgetExhausted: 1, errors: 0, rateLimited: 0 });
    expect(seen).toHaveLength(1);
    expect((await budgetRows()).map((row) => row.remaining)).toEqual([0]);
    // The reset passes (decision 326).
    await t.database.db.execute(sql`DELETE FROM provider_budgets`);
  });
});

describe('what validation learns', () => {
  it('a rate-limited account check in a validation pass is remembered: the next proxied call is not sent', async () => {
    const account = await connected();
    await t.database.db.execute(sql`UPDATE integrations SET next_validation_at = now() + interval '1 day'`);
    await t.database.db.execute(sql`UPDATE integrations SET next_validation_at = now() - interval '1 second' WHERE organization_id = ${account.organizationId}`);
    gh.script = (ctx) => (ctx.path === '/api/user' ? json(429, { message: 'API rate limit exceeded' }, { 'retry-after': '45' }) : null);
    const result = await runValidationPass(t.app.services, { batchSize: 50 });
    expect(result).toMatchObject({ claimed: 1, rateLimited: 1 });
    const script = scripted(gh, [ok()]);
    const res = await call(t.fastify, account.token, 'github/proxy/scripted/w');
    expect(res.statusCode).toBe(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(43);
    expect(res.headers['tessera-attempts']).toBe('0');
    expect(script.seen).toHaveLength(0);
  });
});

describe('the MCP tools', () => {
  it("take maxWait: a tool call waits for a rate limit's reset that fits; beyond 60 it is refused", async () => {
    const account = await connected();
    const apiToken = (await graphqlData(t.fastify, account.token, 'mutation { createAPIToken(name: "agent") { token } }')).createAPIToken.token as string;
    const tool = (args: Record<string, unknown>) =>
      t.fastify.inject({
        method: 'POST',
        url: '/mcp',
        headers: { ...bearer(apiToken), accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
        payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'github_api', arguments: args } },
      });
    const script = scripted(gh, [json(429, { message: 'slow down' }, { 'retry-after': '1' }), ok()]);
    const waited = await tool({ method: 'GET', path: '/scripted/m', maxWait: 5 });
    expect(waited.statusCode, waited.body).toBe(200);
    expect(waited.body).toContain('\\"status\\":200');
    expect(waited.body).not.toContain('"isError":true');
    expect(script.seen).toHaveLength(2);

    const refused = await tool({ method: 'GET', path: '/scripted/m', maxWait: 61 });
    expect(refused.body).toContain('INVALID_INPUT');
    const once = scripted(gh, [json(429, { message: 'slow down' }, { 'retry-after': '1' }), ok()]);
    const limited = await tool({ method: 'GET', path: '/scripted/n' });
    expect(limited.body).toContain('PROVIDER_RATE_LIMITED');
    expect(once.seen).toHaveLength(1);
  });
});
