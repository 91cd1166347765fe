// Connect sessions (docs/contract.md §5a), HTTP in, HTTP, events and audit out: a product's
// backend mints a link, its end user connects through the hosted page without an account.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, browser, registerAndLogin } from './helpers/identity.ts';
import { providerEnv } from './helpers/providers.ts';
import { openPage, press, startThroughPage } from './helpers/connect-page.ts';

const PRODUCT = 'http://127.0.0.1:4455';
const RETURN = `${PRODUCT}/integrations/done`;

let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let owner: Account;
let apiToken: string;

const gql = (token: string, query: string) => graphqlData(t.fastify, token, query);

async function mint(token: string, body: Record<string, unknown> = {}) {
  return t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(token), payload: { redirectUri: RETURN, ...body } });
}

/** The path of a session's link (its secret is in it). */
const pathOf = (url: string) => new URL(url).pathname;

/** Follows a session's link to the provider, as a browser would: the page, its button, then the provider's redirect back. */
async function runFlow(sessionUrl: string, provider: FakeProvider, login: string, options: { deny?: boolean; cookie?: string } = {}) {
  const { tx: cookie, authUrl } = await startThroughPage(t.fastify, sessionUrl, provider.id, options.cookie ? { tx: options.cookie } : {});
  const back = options.deny ? provider.deny(authUrl).location : provider.authorize(authUrl, login).location;
  const callback = new URL(back);
  const res = await t.fastify.inject({ url: `${callback.pathname}${callback.search}`, headers: { cookie: `oauth_tx=${cookie}` } });
  return { res, cookie, redirect: res.headers.location ? new URL(res.headers.location as string) : null };
}

beforeAll(async () => {
  [gh, slack] = await Promise.all([startFakeGitHub(), startFakeSlack()]);
  gh.addUser({ login: 'enduser', email: 'end@example.com', name: 'End User' });
  slack.addUser({ login: 'slacker', email: 'slacker@example.com' });
  t = await createTestApp({ env: { ...providerEnv(gh), ...providerEnv(slack), OAUTH_REDIRECT_ORIGINS: `http://127.0.0.1:8080,${PRODUCT}`, RATE_LIMIT_MAX: '0' } });
  owner = await registerAndLogin(t.fastify, 'product');
  apiToken = (await gql(owner.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
});

afterAll(async () => {
  await t?.close();
  await Promise.all([gh?.close(), slack?.close()]);
});

describe('minting a session', () => {
  it('is for the organization’s API token or an owner/admin with header credentials; the secret is shown once and stored hashed', async () => {
    const res = await mint(apiToken, { allowedProviders: ['github'], endUser: { id: 'customer-42', email: 'c42@example.com', displayName: 'Customer 42' }, expiresIn: 600 });
    expect(res.statusCode, res.body).toBe(201);
    const { session } = res.json();
    expect(session).toEqual({
      id: expect.stringMatching(/^[0-9A-HJKMNP-TV-Z]{26}$/),
      url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:8080\/connect\/[A-Za-z0-9_-]{43}$/),
      expiresAt: expect.any(String),
      allowedProviders: ['github'],
      endUser: { id: 'customer-42', email: 'c42@example.com', displayName: 'Customer 42' },
    });
    expect(res.headers['cache-control']).toBe('no-store');
    const secret = session.url.split('/').at(-1);
    const stored = await queryRows<Record<string, unknown>>(t.database.db, sql`SELECT * FROM connect_sessions WHERE id = ${session.id}`);
    expect(JSON.stringify(stored)).not.toContain(secret);
    expect(Date.parse(session.expiresAt) - Date.now()).toBeGreaterThan(590_000);
    expect((await mint(owner.token)).statusCode).toBe(201);
    // An end user's id follows the externalId rule: printable characters, not only ASCII.
    expect((await mint(apiToken, { endUser: { id: 'józef-顧客' } })).json().session.endUser).toEqual({ id: 'józef-顧客' });
    // Every configured provider by default.
    expect((await mint(owner.token)).json().session.allowedProviders).toEqual(['github', 'slack']);
  });

  it('refuses members, impersonation, cookie sessions and bad input', async () => {
    const member = await registerAndLogin(t.fastify, 'member');
    await t.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${owner.organizationId}, ${member.userId}, 'member')`);
    const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(member.token), payload: { organizationId: owner.organizationId } });
    expect((await mint(switched.json().accessToken)).statusCode).toBe(403);
    const admin = await registerAndLogin(t.fastify, 'sysadmin');
    await t.database.db.execute(sql`UPDATE users SET system_admin = true WHERE id = ${admin.userId}`);
    expect((await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: { ...bearer(admin.token), 'x-impersonate-user': owner.userId }, payload: { redirectUri: RETURN } })).statusCode).toBe(403);
    // The console mints with its cookie session (docs/contract.md §5a), and only with the CSRF header.
    const { 'x-csrf-token': _csrf, ...withoutCsrf } = browser(owner);
    expect((await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: { ...withoutCsrf, 'content-type': 'application/json' }, payload: { redirectUri: RETURN } })).json().code).toBe('CSRF_INVALID');
    expect((await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: { ...browser(owner), 'content-type': 'application/json' }, payload: { redirectUri: RETURN } })).statusCode).toBe(201);
    expect((await mint(apiToken, { redirectUri: 'https://evil.example/steal' })).json().code).toBe('INVALID_REDIRECT_URI');
    expect((await mint(apiToken, { allowedProviders: ['gitlab'] })).json().code).toBe('PROVIDER_NOT_CONFIGURED');
    for (const bad of [{ expiresIn: 59 }, { expiresIn: 14401 }, { endUser: { id: '' } }, { endUser: { id: 'x'.repeat(129) } }, { endUser: { id: 'tab\tin' } }, { endUser: { id: 'zero\u200bwidth' } }, { extra: true }]) {
      expect((await mint(apiToken, bad)).json().code, JSON.stringify(bad)).toBe('INVALID_INPUT');
    }
  });
});

describe('the hosted page', () => {
  it('shows the organization and the allowed providers by display name, with a strict CSP and no cache', async () => {
    await t.database.db.execute(sql`UPDATE organizations SET name = ${'Acme <script>alert(1)</script> & Co'} WHERE id = ${owner.organizationId}`);
    const { session } = (await mint(apiToken, { allowedProviders: ['slack', 'github'] })).json();
    const res = await t.fastify.inject({ url: pathOf(session.url) });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['content-security-policy']).toMatch(/default-src 'self'; script-src 'self'; style-src 'self'/);
    expect(res.headers['content-security-policy']).not.toMatch(/unsafe-inline/);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.body).toContain('Acme &#60;script&#62;alert(1)&#60;/script&#62; &#38; Co');
    expect(res.body).not.toContain('<script>alert');
    // One form posting to the start, with the page's nonce; a button per provider (no link starts anything).
    expect(res.body).toMatch(/<form method="post" action="\/v1\/integrations\/oauth\/connect\/[A-Za-z0-9_-]{43}\/start">\n<input type="hidden" name="nonce" value="[A-Za-z0-9_-]{43}">/);
    expect(res.body).toMatch(/<button class="provider" type="submit" name="provider" value="slack">Connect Slack<\/button>[\s\S]*Connect GitHub/);
    expect(res.body).not.toMatch(/<a [^>]*href="[^"]*\/start/);
    expect(res.body).not.toMatch(/<script(?! src)/);
  });

  it('says in words when a link is unknown (404), expired, used or cancelled (410), and starts nothing', async () => {
    const unknown = await t.fastify.inject({ url: `/connect/${'A'.repeat(43)}` });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.body).toContain('This link does not work');
    const { session } = (await mint(apiToken, { allowedProviders: ['github'] })).json();
    // The page was open before the link expired: its button starts nothing now.
    const open = await openPage(t.fastify, session.url);
    await t.database.db.execute(sql`UPDATE connect_sessions SET expires_at = now() - interval '1 second' WHERE id = ${session.id}`);
    const expired = await t.fastify.inject({ url: pathOf(session.url) });
    expect(expired.statusCode).toBe(410);
    expect(expired.body).toContain('This link has expired');
    const start = await press(t.fastify, open, 'github');
    expect(start.statusCode).toBe(410);
    expect(start.cookies).toEqual([]);
    const revoked = (await mint(apiToken)).json().session;
    expect((await t.fastify.inject({ method: 'DELETE', url: `/v1/connect/sessions/${revoked.id}`, headers: bearer(apiToken) })).json().session.status).toBe('revoked');
    const cancelled = await t.fastify.inject({ url: pathOf(revoked.url) });
    expect(cancelled.statusCode).toBe(410);
    expect(cancelled.body).toContain('This link was cancelled');
  });
});

describe('connecting through a session', () => {
  it('connects, lands on the redirect URI with session=, records who connected, and is used up', async () => {
    const { session } = (await mint(apiToken, { allowedProviders: ['github'], endUser: { id: 'customer-7', displayName: 'Seven' } })).json();
    const { res, redirect } = await runFlow(session.url, gh, 'enduser');
    expect(res.statusCode, res.body).toBe(302);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(`${redirect?.origin}${redirect?.pathname}`).toBe(RETURN);
    const integrationId = redirect?.searchParams.get('integration');
    expect(Object.fromEntries(redirect?.searchParams ?? [])).toEqual({ status: 'connected', provider: 'github', integration: expect.stringMatching(/^[0-9A-HJKMNP-TV-Z]{26}$/), session: session.id });

    const read = await t.fastify.inject({ url: `/v1/connect/sessions/${session.id}`, headers: bearer(apiToken) });
    expect(read.json().session).toMatchObject({ id: session.id, status: 'completed', integrationId, endUser: { id: 'customer-7', displayName: 'Seven' } });
    const listed = (await t.fastify.inject({ url: '/v1/integrations', headers: bearer(owner.token) })).json().integrations.find((i: { id: string }) => i.id === integrationId);
    expect(listed.connectedVia).toEqual({ sessionId: session.id, endUser: { id: 'customer-7', displayName: 'Seven' } });
    const graph = await gql(owner.token, `{ integration(id: "${integrationId}") { connectedVia { sessionId endUser { id displayName email } } } }`);
    expect(graph.integration.connectedVia).toEqual({ sessionId: session.id, endUser: { id: 'customer-7', displayName: 'Seven', email: null } });

    const [event] = await queryRows<{ data: Record<string, unknown> }>(t.database.db, sql`SELECT data FROM events WHERE organization_id = ${owner.organizationId} AND type = 'integration.connected' ORDER BY id DESC LIMIT 1`);
    expect(event?.data).toMatchObject({ integration: { id: integrationId, provider: 'github' }, sessionId: session.id, endUser: { id: 'customer-7' } });
    const [audit] = await queryRows<{ action: string; detail: Record<string, unknown> }>(t.database.db, sql`SELECT action, detail FROM audit_logs WHERE organization_id = ${owner.organizationId} AND target_id = ${integrationId} AND action LIKE 'integration.%connected' ORDER BY id DESC LIMIT 1`);
    const [token] = await queryRows<{ id: string }>(t.database.db, sql`SELECT id FROM api_tokens WHERE organization_id = ${owner.organizationId} AND name = 'backend'`);
    expect(audit?.detail).toMatchObject({ connectSession: session.id, sessionCreatedBy: { credentialKind: 'api_token', credentialId: token?.id } });

    // Used: the page says so, and no second integration can come through it.
    const again = await t.fastify.inject({ url: pathOf(session.url) });
    expect(again.statusCode).toBe(410);
    expect(again.body).toContain('This link has been used');
  });

  it('stays usable after a failed attempt (the person declined), until it expires', async () => {
    const { session } = (await mint(apiToken, { allowedProviders: ['github'] })).json();
    const declined = await runFlow(session.url, gh, 'enduser', { deny: true });
    expect(Object.fromEntries(declined.redirect?.searchParams ?? [])).toEqual({ status: 'error', provider: 'github', error: 'ACCESS_DENIED', session: session.id });
    const read = await t.fastify.inject({ url: `/v1/connect/sessions/${session.id}`, headers: bearer(apiToken) });
    expect(read.json().session).toMatchObject({ status: 'pending', error: 'ACCESS_DENIED' });
    expect((await t.fastify.inject({ url: pathOf(session.url) })).statusCode).toBe(200);
    const second = await runFlow(session.url, gh, 'enduser');
    expect(second.redirect?.searchParams.get('status')).toBe('connected');
    expect((await t.fastify.inject({ url: `/v1/connect/sessions/${session.id}`, headers: bearer(apiToken) })).json().session.status).toBe('completed');
  });

  it('tells the product of a failed attempt: integration.connect_failed with the provider, the session, its end user and the code', async () => {
    const { session } = (await mint(apiToken, { allowedProviders: ['github'], endUser: { id: 'cust-failed', displayName: 'Failing customer' } })).json();
    await runFlow(session.url, gh, 'enduser', { deny: true });
    const failed = await queryRows<{ data: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT data FROM events WHERE organization_id = ${owner.organizationId} AND type = 'integration.connect_failed' AND data->>'sessionId' = ${session.id}`,
    );
    expect(failed.map((row) => row.data)).toEqual([
      { organizationId: owner.organizationId, externalId: null, provider: 'github', endUser: { id: 'cust-failed', displayName: 'Failing customer' }, sessionId: session.id, code: 'ACCESS_DENIED' },
    ]);

    // A flow an owner started from Tessera's own page: no session, no end user.
    const started = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/start', headers: bearer(owner.token), payload: { provider: 'github', redirectUri: RETURN } });
    const cookie = started.cookies.find((c) => c.name === 'oauth_tx')?.value;
    const back = new URL(gh.deny(started.json().authUrl).location);
    await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${cookie}` } });
    const pageFailures = await queryRows<{ data: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT data FROM events WHERE organization_id = ${owner.organizationId} AND type = 'integration.connect_failed' AND data->'sessionId' = 'null'::jsonb`,
    );
    expect(pageFailures.map((row) => row.data)).toEqual([{ organizationId: owner.organizationId, externalId: null, provider: 'github', endUser: null, sessionId: null, code: 'ACCESS_DENIED' }]);
  });

  it('connects one integration at most: of two flows of one session, the second to finish is refused', async () => {
    const { session } = (await mint(apiToken)).json();
    const { started: first, tx: cookie } = await startThroughPage(t.fastify, session.url, 'github');
    // The form posts under the cookie's path, so a browser sends the cookie to the second start.
    expect((await openPage(t.fastify, session.url)).action.startsWith(`${first.cookies.find((c) => c.name === 'oauth_tx')?.path}/`)).toBe(true);
    const { started: second, tx: shared } = await startThroughPage(t.fastify, session.url, 'slack', { tx: cookie });
    expect(shared).toBe(cookie);
    const ghBack = new URL(gh.authorize(first.headers.location as string, 'enduser').location);
    const slackBack = new URL(slack.authorize(second.headers.location as string, 'slacker').location);
    const one = await t.fastify.inject({ url: `${ghBack.pathname}${ghBack.search}`, headers: { cookie: `oauth_tx=${cookie}` } });
    expect(new URL(one.headers.location as string).searchParams.get('status')).toBe('connected');
    const two = await t.fastify.inject({ url: `${slackBack.pathname}${slackBack.search}`, headers: { cookie: `oauth_tx=${cookie}` } });
    expect(Object.fromEntries(new URL(two.headers.location as string).searchParams)).toMatchObject({ status: 'error', provider: 'slack', error: 'CONFLICT', session: session.id });
    const slackIntegrations = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM integrations WHERE organization_id = ${owner.organizationId} AND provider = 'slack'`);
    expect(slackIntegrations[0]?.n).toBe(0);
  });

  it('does not take whoever is signed in to Tessera in that browser as the actor of a session’s connection', async () => {
    const bystander = await registerAndLogin(t.fastify, 'bystander');
    const { session } = (await mint(apiToken, { allowedProviders: ['github'] })).json();
    const { tx, authUrl } = await startThroughPage(t.fastify, session.url, 'github');
    const back = new URL(gh.authorize(authUrl, 'enduser').location);
    const res = await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}; session=${bystander.cookies.session}` } });
    const integrationId = new URL(res.headers.location as string).searchParams.get('integration');
    expect(integrationId).toBeTruthy();
    const [audit] = await queryRows<{ actor_user_id: string | null; credential_id: string | null }>(
      t.database.db,
      sql`SELECT actor_user_id, credential_id FROM audit_logs WHERE organization_id = ${owner.organizationId} AND target_id = ${integrationId} AND action LIKE 'integration.%connected' ORDER BY id DESC LIMIT 1`,
    );
    expect(audit).toEqual({ actor_user_id: null, credential_id: null });
  });

  it('remembers why an attempt completed by the POST callback failed, and stays usable', async () => {
    const { session } = (await mint(apiToken, { allowedProviders: ['github'] })).json();
    const { tx, authUrl } = await startThroughPage(t.fastify, session.url, 'github');
    const state = new URL(authUrl).searchParams.get('state');
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers: { cookie: `oauth_tx=${tx}` }, payload: { provider: 'github', code: 'not-a-code-github-issued', state } });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('OAUTH_EXCHANGE_FAILED');
    const read = await t.fastify.inject({ url: `/v1/connect/sessions/${session.id}`, headers: bearer(apiToken) });
    expect(read.json().session).toMatchObject({ status: 'pending', error: 'OAUTH_EXCHANGE_FAILED' });
    expect((await runFlow(session.url, gh, 'enduser')).redirect?.searchParams.get('status')).toBe('connected');
  });

  it('reconnecting through a session keeps the integration’s id', async () => {
    const ids = [];
    for (let i = 0; i < 2; i++) {
      const { session } = (await mint(apiToken, { allowedProviders: ['github'] })).json();
      ids.push((await runFlow(session.url, gh, 'enduser')).redirect?.searchParams.get('integration'));
    }
    expect(ids[0]).toBe(ids[1]);
  });

  it('enforces allowedProviders: a provider outside the list is not started, however the link is tampered with', async () => {
    const { session } = (await mint(apiToken, { allowedProviders: ['slack'] })).json();
    const [before] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM oauth_states`);
    for (const provider of ['github', 'gitlab', 'Slack', '', 'slack%00', 'slack\u0000', '../github']) {
      const res = await press(t.fastify, await openPage(t.fastify, session.url), provider);
      expect(res.statusCode, provider).toBe(400);
      expect(res.headers.location).toBeUndefined();
      expect(res.cookies).toEqual([]);
    }
    const [after] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM oauth_states`);
    expect(after?.n).toBe(before?.n);
  });

  it('keeps sessions to their organization (404 elsewhere), and revokes only pending ones', async () => {
    const { session } = (await mint(apiToken)).json();
    const other = await registerAndLogin(t.fastify, 'other-product');
    const otherToken = (await gql(other.token, 'mutation { createAPIToken(name: "theirs") { token } }')).createAPIToken.token;
    expect((await t.fastify.inject({ url: `/v1/connect/sessions/${session.id}`, headers: bearer(otherToken) })).statusCode).toBe(404);
    expect((await t.fastify.inject({ method: 'DELETE', url: `/v1/connect/sessions/${session.id}`, headers: bearer(otherToken) })).statusCode).toBe(404);
    expect((await t.fastify.inject({ url: '/v1/connect/sessions/not-an-id', headers: bearer(apiToken) })).statusCode).toBe(404);
    const used = (await mint(apiToken, { allowedProviders: ['github'] })).json().session;
    await runFlow(used.url, gh, 'enduser');
    const revokeUsed = await t.fastify.inject({ method: 'DELETE', url: `/v1/connect/sessions/${used.id}`, headers: bearer(apiToken) });
    expect(revokeUsed.statusCode).toBe(409);
    expect((await t.fastify.inject({ method: 'DELETE', url: `/v1/connect/sessions/${session.id}`, headers: bearer(apiToken) })).statusCode).toBe(200);
    expect((await t.fastify.inject({ method: 'DELETE', url: `/v1/connect/sessions/${session.id}`, headers: bearer(apiToken) })).json().session.status).toBe('revoked');
  });

  it('never writes a session’s secret to a log line', async () => {
    const { session } = (await mint(apiToken, { allowedProviders: ['github'] })).json();
    const secret = session.url.split('/').at(-1) as string;
    await t.fastify.inject({ url: pathOf(session.url) });
    await t.fastify.inject({ url: `/v1/integrations/oauth/connect/${secret}/start?provider=nope` });
    await press(t.fastify, await openPage(t.fastify, session.url), 'nope');
    await runFlow(session.url, gh, 'enduser');
    expect(t.logs.text).not.toContain(secret);
    expect(t.logs.text).toContain('/connect/[REDACTED]');
  });
});
