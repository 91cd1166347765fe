import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listAudit } from '../src/audit/audit.ts';
import { queryRows } from '../src/db/client.ts';
import type { Principal } from '../src/ground/principal.ts';
import { createApiToken, createPersonalAccessToken, listApiTokens, listPersonalAccessTokens, revokeApiToken, revokePersonalAccessToken } from '../src/identity/access-tokens.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import { acceptInvitation, inviteMember } from '../src/organizations/invitations.ts';
import { addMembership, listMembers, removeMember, setMemberRole } from '../src/organizations/organizations.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, browser, login, registerAndLogin } from './helpers/identity.ts';
import { acceptTokenOf } from './helpers/invitations.ts';

const ADMIN_EMAIL = 'root@example.com';
const ADMIN_PASSWORD = 'bootstrap admin password';
const WEBHOOK_SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;

interface Received {
  headers: Record<string, string | string[] | undefined>;
  body: string;
}
const received: Received[] = [];
let receiver: Server;
let t: TestApp;

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const port = (receiver.address() as AddressInfo).port;
  t = await createTestApp({
    env: {
      BOOTSTRAP_ADMIN_EMAIL: ADMIN_EMAIL,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN_PASSWORD,
      EVENTS_WEBHOOK_URL: `http://127.0.0.1:${port}/hook`,
      EVENTS_WEBHOOK_SECRET: WEBHOOK_SECRET,
      EVENTS_POLL_INTERVAL: '1',
    },
  });
  await ensureBootstrapAdmin(t.app.services);
});

afterAll(async () => {
  await t?.close();
  receiver?.close();
});

function jwtPrincipal(account: Account, role: Principal['role'] = 'owner'): Principal {
  const sid = JSON.parse(Buffer.from(account.token.split('.')[1] ?? '', 'base64url').toString()).sid as string;
  return { kind: 'jwt', userId: account.userId, organizationId: account.organizationId, role, credentialId: sid, systemAdmin: false, viaCookie: false };
}

async function access(headers: Record<string, string>) {
  return t.fastify.inject({ method: 'GET', url: '/v1/account/access', headers });
}

describe('registration and login', () => {
  it('registers a user with a personal organization they own', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/register', payload: { email: 'Ada@Example.com', password: 'a long enough password', name: 'Ada' } });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      success: true,
      user: { id: expect.stringMatching(/^[0-9A-Z]{26}$/), email: 'Ada@Example.com', name: 'Ada' },
      organization: { id: expect.any(String), name: "Ada's organization" },
    });
    const account = await login(t.fastify, 'ada@example.com', 'a long enough password');
    expect(account.organizationId).toBe(body.organization.id);
    const me = (await access(bearer(account.token))).json();
    expect(me).toMatchObject({ authMethod: 'jwt', organization: { id: body.organization.id, role: 'owner' }, user: { email: 'Ada@Example.com', systemAdmin: false } });
  });

  it('refuses a duplicate e-mail in any letter case with 409', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/register', payload: { email: 'ADA@example.COM', password: 'another long password' } });
    expect(res.statusCode).toBe(409);
    expect(res.json().code).toBe('CONFLICT');
  });

  it('refuses a weak password with 400 naming the field', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/register', payload: { email: 'weak@example.com', password: 'short' } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'INVALID_INPUT', details: [{ path: 'body.password' }] });
  });

  it('answers a wrong password and an unknown e-mail with the same 401 body', async () => {
    const wrong = await t.fastify.inject({ method: 'POST', url: '/v1/login', payload: { email: 'ada@example.com', password: 'not the password' }, headers: { 'x-request-id': 'same' } });
    const unknown = await t.fastify.inject({ method: 'POST', url: '/v1/login', payload: { email: 'nobody@example.com', password: 'not the password' }, headers: { 'x-request-id': 'same' } });
    expect(wrong.statusCode).toBe(401);
    expect(unknown.statusCode).toBe(401);
    expect(wrong.body).toBe(unknown.body);
  });

  it('sets an HttpOnly session cookie and a csrf_token cookie on login', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/login', payload: { email: 'ada@example.com', password: 'a long enough password' } });
    const session = res.cookies.find((cookie) => cookie.name === 'session');
    const csrf = res.cookies.find((cookie) => cookie.name === 'csrf_token');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/', value: res.json().accessToken });
    expect(csrf?.httpOnly).toBeFalsy();
    expect(csrf?.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});

describe('credentials', () => {
  it('authenticates a session JWT from the header and from the cookie', async () => {
    const account = await registerAndLogin(t.fastify, 'jwt');
    expect((await access(bearer(account.token))).json().authMethod).toBe('jwt');
    expect((await access({ cookie: `session=${account.cookies.session}` })).statusCode).toBe(200);
  });

  it('never falls back to the cookie when an Authorization header is sent', async () => {
    const account = await registerAndLogin(t.fastify, 'fallback');
    const res = await access({ authorization: 'Bearer nonsense', cookie: `session=${account.cookies.session}` });
    expect(res.statusCode).toBe(401);
    expect((await access({ authorization: 'Basic abc', cookie: `session=${account.cookies.session}` })).statusCode).toBe(401);
  });

  it('refuses a tampered, expired or foreign-signed JWT with 401', async () => {
    const account = await registerAndLogin(t.fastify, 'tamper');
    const [header, payload, signature] = account.token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const forged = `${header}.${Buffer.from(JSON.stringify({ ...claims, org: 'another-org' })).toString('base64url')}.${signature}`;
    expect((await access(bearer(forged))).statusCode).toBe(401);
    const expiredPayload = Buffer.from(JSON.stringify({ ...claims, exp: Math.floor(Date.now() / 1000) - 120 })).toString('base64url');
    const resigned = createHmac('sha256', 'test-jwt-secret-that-is-at-least-32-characters-long').update(`${header}.${expiredPayload}`).digest('base64url');
    expect((await access(bearer(`${header}.${expiredPayload}.${resigned}`))).statusCode).toBe(401);
    const otherKey = createHmac('sha256', 'x'.repeat(40)).update(`${header}.${payload}`).digest('base64url');
    expect((await access(bearer(`${header}.${payload}.${otherKey}`))).statusCode).toBe(401);
  });

  it('ends every token of a session at once on logout', async () => {
    const account = await registerAndLogin(t.fastify, 'logout');
    const other = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(account.token), payload: { name: 'Second' } });
    const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(account.token), payload: { organizationId: other.json().organization.id } });
    expect(switched.statusCode).toBe(200);
    const out = await t.fastify.inject({ method: 'POST', url: '/v1/logout', headers: bearer(account.token) });
    expect(out.statusCode).toBe(200);
    expect((await access(bearer(account.token))).statusCode).toBe(401);
    expect((await access(bearer(switched.json().accessToken))).statusCode).toBe(401);
  });

  it('authenticates personal access tokens, per listed organization, and refuses revoked or expired ones', async () => {
    const account = await registerAndLogin(t.fastify, 'pat');
    const second = (await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(account.token), payload: { name: 'Other' } })).json().organization.id;
    const third = (await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(account.token), payload: { name: 'Unlisted' } })).json().organization.id;
    const deps = { db: t.database.db, actor: { principal: jwtPrincipal(account), requestId: null } };
    const pat = await createPersonalAccessToken(deps, { name: 'ci', organizationIds: [account.organizationId, second] });
    expect(pat.token).toMatch(/^tsp_[A-Za-z0-9_-]{43}$/);

    const first = (await access(bearer(pat.token))).json();
    expect(first).toMatchObject({ authMethod: 'pat', organization: { id: account.organizationId } });
    const picked = await access({ ...bearer(pat.token), 'x-organization-id': second });
    expect(picked.json().organization.id).toBe(second);
    const refused = await access({ ...bearer(pat.token), 'x-organization-id': third });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().code).toBe('FORBIDDEN');

    const listed = await listPersonalAccessTokens(deps);
    expect(listed[0]).toMatchObject({ id: pat.id, display: `tsp_…${pat.token.slice(-4)}` });
    expect(JSON.stringify(listed)).not.toContain(pat.token);
    await expect.poll(async () => (await listPersonalAccessTokens(deps))[0]?.lastUsedAt).toBeInstanceOf(Date);

    await revokePersonalAccessToken(deps, { id: pat.id });
    expect((await access(bearer(pat.token))).statusCode).toBe(401);

    const expiring = await createPersonalAccessToken(deps, { name: 'short', expiresAt: new Date(Date.now() + 1500) });
    expect((await access(bearer(expiring.token))).statusCode).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1600));
    expect((await access(bearer(expiring.token))).statusCode).toBe(401);
    expect((await access(bearer(`${expiring.token}x`))).statusCode).toBe(401);
  });

  it('authenticates API tokens as the organization with admin rights, and refuses revoked ones', async () => {
    const account = await registerAndLogin(t.fastify, 'apitoken');
    const deps = { db: t.database.db, actor: { principal: jwtPrincipal(account), requestId: null } };
    const created = await createApiToken(deps, { name: 'backend' });
    expect(created.token).toMatch(/^tsa_/);
    const me = (await access(bearer(created.token))).json();
    expect(me).toMatchObject({ user: null, authMethod: 'api_token', organization: { id: account.organizationId, role: 'admin' } });
    expect((await listApiTokens(deps, { organizationId: account.organizationId })).map((token) => token.id)).toEqual([created.id]);
    const org = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(created.token), payload: { name: 'No' } });
    expect(org.statusCode).toBe(403);
    await revokeApiToken(deps, { organizationId: account.organizationId, id: created.id });
    expect((await access(bearer(created.token))).statusCode).toBe(401);
  });

  it('creates PATs and API tokens only for signed-in users, not API tokens or impersonators', async () => {
    const account = await registerAndLogin(t.fastify, 'creator');
    const apiPrincipal: Principal = { ...jwtPrincipal(account), kind: 'api_token', userId: null, role: 'admin' };
    await expect(createApiToken({ db: t.database.db, actor: { principal: apiPrincipal, requestId: null } }, { name: 'x' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    const impersonated: Principal = { ...jwtPrincipal(account), impersonatorId: 'someone' };
    await expect(createPersonalAccessToken({ db: t.database.db, actor: { principal: impersonated, requestId: null } }, { name: 'x' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    const member: Principal = { ...jwtPrincipal(account), role: 'member' };
    await expect(createApiToken({ db: t.database.db, actor: { principal: member, requestId: null } }, { name: 'x' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
  });
});

describe('organizations and memberships', () => {
  it('creates an organization with 201 and makes the creator its owner', async () => {
    const account = await registerAndLogin(t.fastify, 'orgs');
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(account.token), payload: { name: '  Acme  ' } });
    expect(res.statusCode).toBe(201);
    // docs/contract.md §3: the answer carries externalId (null when none was given).
    expect(res.json()).toEqual({ success: true, organization: { id: expect.any(String), name: 'Acme', externalId: null } });
    const organizations = (await access(bearer(account.token))).json().organizations;
    expect(organizations).toContainEqual({ id: res.json().organization.id, name: 'Acme', role: 'owner' });
    const blank = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(account.token), payload: { name: '   ' } });
    expect(blank.statusCode).toBe(400);
  });

  it('switches organization: member only, same session, old token keeps its organization', async () => {
    const account = await registerAndLogin(t.fastify, 'switch');
    const stranger = await registerAndLogin(t.fastify, 'stranger');
    const org = (await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(account.token), payload: { name: 'Target' } })).json().organization.id;
    const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(account.token), payload: { organizationId: org } });
    expect(switched.json()).toMatchObject({ success: true, tokenType: 'Bearer', organizationId: org });
    expect((await access(bearer(switched.json().accessToken))).json().organization.id).toBe(org);
    expect((await access(bearer(account.token))).json().organization.id).toBe(account.organizationId);
    const denied = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(stranger.token), payload: { organizationId: org } });
    expect(denied.statusCode).toBe(403);
    // The last organization switched to is the default at the next login.
    expect((await login(t.fastify, account.email, account.password)).organizationId).toBe(org);
  });

  it('manages members by e-mail, with role rules and the last owner protected', async () => {
    const owner = await registerAndLogin(t.fastify, 'owner');
    const alice = await registerAndLogin(t.fastify, 'alice');
    const bob = await registerAndLogin(t.fastify, 'bob');
    const org = owner.organizationId;
    const events = { outbox: t.app.services.outbox, afterCommit: (fn: () => unknown) => void fn() };
    const ownerDeps = { db: t.database.db, actor: { principal: jwtPrincipal(owner), requestId: null }, ...events };
    const { publicUrl } = t.config.server;
    // Membership by invitation: each accepts with their own session and the invitation's token; e-mails match in any letter case.
    const toAlice = await inviteMember(ownerDeps, { organizationId: org, email: alice.email.toUpperCase(), role: 'admin', publicUrl });
    await acceptInvitation({ db: t.database.db, actor: { principal: jwtPrincipal(alice), requestId: null } }, { id: toAlice.id, token: await acceptTokenOf(t, toAlice.id) });
    const toBob = await inviteMember(ownerDeps, { organizationId: org, email: bob.email, role: 'member', publicUrl });
    await acceptInvitation({ db: t.database.db, actor: { principal: jwtPrincipal(bob), requestId: null } }, { id: toBob.id, token: await acceptTokenOf(t, toBob.id) });
    await expect(inviteMember(ownerDeps, { organizationId: org, email: bob.email, role: 'member', publicUrl })).rejects.toMatchObject({ code: 'CONFLICT' });
    // An address without an account is invited like any other: no error that would tell it apart.
    expect(await inviteMember(ownerDeps, { organizationId: org, email: 'ghost@example.com', role: 'member', publicUrl })).toMatchObject({ email: 'ghost@example.com', role: 'member', status: 'pending' });
    expect((await listMembers(ownerDeps, { organizationId: org })).map((m) => [m.user.email, m.role])).toEqual([
      [owner.email, 'owner'],
      [alice.email, 'admin'],
      [bob.email, 'member'],
    ]);

    const aliceDeps = { db: t.database.db, actor: { principal: { ...jwtPrincipal(alice), organizationId: org, role: 'admin' as const }, requestId: null } };
    await expect(setMemberRole(aliceDeps, { organizationId: org, email: bob.email, role: 'owner' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await expect(removeMember(aliceDeps, { organizationId: org, email: owner.email })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    const bobDeps = { db: t.database.db, actor: { principal: { ...jwtPrincipal(bob), organizationId: org, role: 'member' as const }, requestId: null }, ...events };
    await expect(inviteMember(bobDeps, { organizationId: org, email: alice.email, role: 'member', publicUrl })).rejects.toMatchObject({ code: 'FORBIDDEN' });

    await expect(setMemberRole(ownerDeps, { organizationId: org, email: owner.email, role: 'admin' })).rejects.toMatchObject({ code: 'CONFLICT' });
    await expect(removeMember(ownerDeps, { organizationId: org, email: owner.email })).rejects.toMatchObject({ code: 'CONFLICT' });
    await setMemberRole(ownerDeps, { organizationId: org, email: alice.email, role: 'owner' });
    await setMemberRole(ownerDeps, { organizationId: org, email: owner.email, role: 'member' });
    expect((await listMembers(ownerDeps, { organizationId: org })).find((m) => m.user.email === owner.email)?.role).toBe('member');
  });

  it('takes access away from a removed member at once', async () => {
    const owner = await registerAndLogin(t.fastify, 'remover');
    const member = await registerAndLogin(t.fastify, 'removed');
    const deps = { db: t.database.db, actor: { principal: jwtPrincipal(owner), requestId: null } };
    await addMembership(t.database.db, owner.organizationId, member.userId, 'member');
    const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(member.token), payload: { organizationId: owner.organizationId } });
    const token = switched.json().accessToken as string;
    expect((await access(bearer(token))).json().organization.role).toBe('member');
    await removeMember(deps, { organizationId: owner.organizationId, email: member.email });
    const after = await access(bearer(token));
    expect(after.statusCode).toBe(403);
  });
});

describe('impersonation', () => {
  it('lets a system admin act as a user, and audits every such request with both users', async () => {
    const admin = await login(t.fastify, ADMIN_EMAIL, ADMIN_PASSWORD);
    const target = await registerAndLogin(t.fastify, 'target');
    const res = await access({ ...bearer(admin.token), 'x-impersonate-user': target.userId, 'x-request-id': 'imp-1' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ user: { id: target.userId }, organization: { id: target.organizationId }, impersonator: { id: admin.userId, email: ADMIN_EMAIL } });
    const entries = await listAudit(t.database.db, target.organizationId, { first: 20 });
    expect(entries).toContainEqual(
      expect.objectContaining({ action: 'impersonation.request', actorUserId: target.userId, impersonatorUserId: admin.userId, requestId: 'imp-1' }),
    );
  });

  it('refuses impersonation by non-admins, onto system admins, and with non-session credentials', async () => {
    const admin = await login(t.fastify, ADMIN_EMAIL, ADMIN_PASSWORD);
    const user = await registerAndLogin(t.fastify, 'plain');
    const other = await registerAndLogin(t.fastify, 'victim');
    const byUser = await access({ ...bearer(user.token), 'x-impersonate-user': other.userId });
    expect(byUser.statusCode).toBe(403);
    const ontoAdmin = await access({ ...bearer(admin.token), 'x-impersonate-user': admin.userId });
    expect(ontoAdmin.statusCode).toBe(403);
    const adminPat = await createPersonalAccessToken(
      { db: t.database.db, actor: { principal: { ...jwtPrincipal(admin), systemAdmin: true }, requestId: null } },
      { name: 'admin pat' },
    );
    expect((await access({ ...bearer(adminPat.token), 'x-impersonate-user': other.userId })).statusCode).toBe(403);
  });
});

describe('CSRF', () => {
  it('refuses a cookie-authenticated text/plain body with 403 CSRF_INVALID, before the body is read (415)', async () => {
    const account = await registerAndLogin(t.fastify, 'csrf-text');
    const headers = { ...browser(account), 'content-type': 'text/plain' };
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers, payload: JSON.stringify({ name: 'x' }) });
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('CSRF_INVALID');
    const withHeaderCredentials = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: { ...bearer(account.token), 'content-type': 'text/plain' }, payload: '{}' });
    expect(withHeaderCredentials.statusCode).toBe(415);
  });

  it('requires the token for cookie-authenticated unsafe requests, and not for header credentials', async () => {
    const account = await registerAndLogin(t.fastify, 'csrf');
    const cookieOnly = { cookie: `session=${account.cookies.session}; csrf_token=${account.cookies.csrf_token}` };
    const missing = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: cookieOnly, payload: { name: 'x' } });
    expect(missing.statusCode).toBe(403);
    expect(missing.json().code).toBe('CSRF_INVALID');
    const wrong = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: { ...cookieOnly, 'x-csrf-token': 'forged' }, payload: { name: 'x' } });
    expect(wrong.statusCode).toBe(403);
    const badOrigin = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: browser(account, 'https://evil.example'), payload: { name: 'x' } });
    expect(badOrigin.statusCode).toBe(403);
    const ok = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: browser(account), payload: { name: 'x' } });
    expect(ok.statusCode).toBe(201);
    const header = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(account.token), payload: { name: 'y' } });
    expect(header.statusCode).toBe(201);
  });

  it('binds the CSRF token to the session', async () => {
    const a = await registerAndLogin(t.fastify, 'csrf-a');
    const b = await registerAndLogin(t.fastify, 'csrf-b');
    const mixed = { ...browser(a), cookie: `session=${a.cookies.session}; csrf_token=${b.cookies.csrf_token}`, 'x-csrf-token': b.cookies.csrf_token ?? '' };
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: mixed, payload: { name: 'x' } });
    expect(res.statusCode).toBe(403);
    const csrf = await t.fastify.inject({ method: 'GET', url: '/v1/csrf', headers: { cookie: `session=${a.cookies.session}` } });
    expect(csrf.json().csrf).toBe(a.cookies.csrf_token);
  });

  it('refuses login from another site (login CSRF)', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/login', headers: { origin: 'https://evil.example' }, payload: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    expect(res.statusCode).toBe(403);
    const form = await t.fastify.inject({ method: 'POST', url: '/v1/login', headers: { 'content-type': 'text/plain' }, payload: JSON.stringify({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD }) });
    expect(form.statusCode).toBe(415);
  });
});

describe('events', () => {
  it('delivers organization.created once, signed, after the commit', async () => {
    const account = await registerAndLogin(t.fastify, 'events');
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: bearer(account.token), payload: { name: 'Evented' } });
    const orgId = res.json().organization.id as string;
    await expect.poll(() => received.filter((r) => r.body.includes(orgId)).length, { timeout: 10_000 }).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const deliveries = received.filter((r) => r.body.includes(orgId));
    expect(deliveries).toHaveLength(1);
    const [delivery] = deliveries as [Received];
    const event = JSON.parse(delivery.body);
    expect(event).toMatchObject({ id: expect.stringMatching(/^evt_/), type: 'organization.created', data: { organization: { id: orgId, name: 'Evented' } } });
    const id = delivery.headers['webhook-id'] as string;
    const timestamp = delivery.headers['webhook-timestamp'] as string;
    expect(id).toBe(event.id);
    const key = Buffer.from(WEBHOOK_SECRET.slice('whsec_'.length), 'base64');
    const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${delivery.body}`).digest('base64');
    expect(delivery.headers['webhook-signature']).toBe(`v1,${expected}`);
  });

  it('queues organization.created at registration too', async () => {
    const account = await registerAndLogin(t.fastify, 'reg-event');
    await expect.poll(() => received.some((r) => r.body.includes(account.organizationId) && r.body.includes('organization.created')), { timeout: 10_000 }).toBe(true);
  });
});

describe('secrets stay out', () => {
  it('never shows a password, token or hash in a response or a log line', async () => {
    const password = 'very secret password 123';
    const email = `leak-${Date.now()}@example.com`;
    const registered = await t.fastify.inject({ method: 'POST', url: '/v1/register', payload: { email, password } });
    const account = await login(t.fastify, email, password);
    const pat = await createPersonalAccessToken({ db: t.database.db, actor: { principal: jwtPrincipal(account), requestId: null } }, { name: 'leak' });
    const responses = [
      registered.body,
      (await access(bearer(account.token))).body,
      (await access(bearer(pat.token))).body,
      (await t.fastify.inject({ method: 'POST', url: '/v1/login', payload: { email, password: 'wrong password here' } })).body,
    ].join('\n');
    const [row] = await queryRows<{ password_hash: string }>(t.database.db, sql`SELECT password_hash FROM users WHERE email = ${email}`);
    const [patRow] = await queryRows<{ token_hash: string }>(t.database.db, sql`SELECT token_hash FROM personal_access_tokens WHERE id = ${pat.id}`);
    const hashPart = row?.password_hash.split('$').pop() ?? 'missing';
    for (const secret of [password, hashPart, pat.token, patRow?.token_hash ?? 'missing']) {
      expect(responses).not.toContain(secret);
      expect(t.logs.text).not.toContain(secret);
    }
    expect(t.logs.text).not.toContain(account.token);
  });
});

describe('rate limiting', () => {
  it('answers 429 with Retry-After past the limit, per credential and per e-mail', async () => {
    const limited = await createTestApp({ env: { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW: '60' } });
    try {
      const statuses: number[] = [];
      let last: Awaited<ReturnType<typeof limited.fastify.inject>> | undefined;
      for (let i = 0; i < 5; i++) {
        last = await limited.fastify.inject({ method: 'GET', url: '/v1/csrf' });
        statuses.push(last.statusCode);
      }
      expect(statuses).toEqual([200, 200, 200, 429, 429]);
      expect(last?.json().code).toBe('RATE_LIMITED');
      expect(Number(last?.headers['retry-after'])).toBeGreaterThan(0);
      // Per e-mail and address together (docs/contract.md §4): other addresses keep their own budget for that e-mail.
      const perEmail: number[] = [];
      for (const address of ['10.0.0.1', '10.0.0.2', '10.0.0.2', '10.0.0.2', '10.0.0.2', '10.0.0.3']) {
        const res = await limited.fastify.inject({ method: 'POST', url: '/v1/login', payload: { email: 'same@example.com', password: 'x' }, remoteAddress: address });
        perEmail.push(res.statusCode);
      }
      expect(perEmail).toEqual([401, 401, 401, 401, 429, 401]);
    } finally {
      await limited.close();
    }
  });

  it('counts a credential once across routes, whether the route checks it itself or not', async () => {
    const limited = await createTestApp({ env: { RATE_LIMIT_MAX: '4', RATE_LIMIT_WINDOW: '60' } });
    try {
      const account = await registerAndLogin(limited.fastify, 'bucket');
      const sid = JSON.parse(Buffer.from(account.token.split('.')[1] ?? '', 'base64url').toString()).sid;
      const principal: Principal = { kind: 'jwt', userId: account.userId, organizationId: account.organizationId, role: 'owner', credentialId: sid, systemAdmin: false, viaCookie: false };
      const api = await createApiToken({ db: limited.database.db, actor: { principal, requestId: null } }, { name: 'bucket' });
      for (const token of [account.token, api.token]) {
        const statuses: number[] = [];
        // The token read defers its credential check to its own statement; the listing does not. One bucket, from any address.
        for (const [i, url] of ['/v1/integrations/github/token', '/v1/integrations', '/v1/integrations/github/token', '/v1/integrations', '/v1/integrations/github/token'].entries()) {
          statuses.push((await limited.fastify.inject({ method: 'GET', url, headers: bearer(token), remoteAddress: `10.1.0.${i + 1}` })).statusCode);
        }
        expect(statuses).toEqual([404, 200, 404, 200, 429]);
      }
      // A made-up API token is checked before the limiter, as on every route: it never gets a counter of its own;
      // it counts as a failed authentication of its address, which is refused once over the limit.
      const junk = `${api.token.slice(0, 4)}${'x'.repeat(40)}`;
      const junkStatuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        junkStatuses.push((await limited.fastify.inject({ method: 'GET', url: '/v1/integrations/github/token', headers: bearer(junk), remoteAddress: '10.2.0.1' })).statusCode);
      }
      expect(junkStatuses).toEqual([401, 401, 401, 401, 429, 429]);
    } finally {
      await limited.close();
    }
  });

  it('is off with RATE_LIMIT_MAX=0', async () => {
    const open = await createTestApp({ env: { RATE_LIMIT_MAX: '0' } });
    try {
      for (let i = 0; i < 8; i++) expect((await open.fastify.inject({ method: 'GET', url: '/v1/csrf' })).statusCode).toBe(200);
    } finally {
      await open.close();
    }
  });
});

describe('production cookies and proxies', () => {
  it('marks cookies Secure in production and believes X-Forwarded-For only from TRUST_PROXY', async () => {
    const prod = await createTestApp({
      env: { APP_ENV: 'production', PUBLIC_URL: 'https://tessera.example', TRUST_PROXY: '127.0.0.1', RATE_LIMIT_MAX: '2', REGISTRATION: 'open' },
    });
    try {
      await prod.fastify.inject({ method: 'POST', url: '/v1/register', payload: { email: 'prod@example.com', password: 'production password' } });
      const res = await prod.fastify.inject({ method: 'POST', url: '/v1/login', payload: { email: 'prod@example.com', password: 'production password' }, headers: { 'x-forwarded-for': '203.0.113.9' } });
      expect(res.statusCode).toBe(200);
      for (const cookie of res.cookies) expect(cookie.secure, cookie.name).toBe(true);
      // Two clients behind the trusted proxy have separate budgets.
      const statuses = [];
      for (const ip of ['198.51.100.1', '198.51.100.1', '198.51.100.1', '198.51.100.2']) {
        statuses.push((await prod.fastify.inject({ method: 'GET', url: '/v1/csrf', headers: { 'x-forwarded-for': ip } })).statusCode);
      }
      expect(statuses).toEqual([200, 200, 429, 200]);
    } finally {
      await prod.close();
    }
  });

  it('ignores X-Forwarded-For without TRUST_PROXY', async () => {
    const plain = await createTestApp({ env: { RATE_LIMIT_MAX: '2' } });
    try {
      const statuses = [];
      for (const ip of ['198.51.100.1', '198.51.100.2', '198.51.100.3']) {
        statuses.push((await plain.fastify.inject({ method: 'GET', url: '/v1/csrf', headers: { 'x-forwarded-for': ip } })).statusCode);
      }
      expect(statuses).toEqual([200, 200, 429]);
    } finally {
      await plain.close();
    }
  });
});

describe('review fixes', () => {
  it('promotes an existing user to bootstrap admin only with that user’s password', async () => {
    const squatter = await registerAndLogin(t.fastify, 'squatter');
    const services = { ...t.app.services, config: { ...t.app.services.config, auth: { ...t.app.services.config.auth, bootstrapAdmin: { email: squatter.email, password: 'not the squatter password' } } } };
    await expect(ensureBootstrapAdmin(services)).rejects.toMatchObject({ name: 'ConfigError', problems: [expect.stringMatching(/^BOOTSTRAP_ADMIN_EMAIL/)] });
    expect((await access(bearer(squatter.token))).json().user.systemAdmin).toBe(false);
    const owned = { ...services, config: { ...services.config, auth: { ...services.config.auth, bootstrapAdmin: { email: squatter.email, password: squatter.password } } } };
    await ensureBootstrapAdmin(owned);
    expect((await access(bearer(squatter.token))).json().user.systemAdmin).toBe(true);
  });

  it('exempts header credentials from the Origin check', async () => {
    const account = await registerAndLogin(t.fastify, 'origin');
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/organizations', headers: { ...bearer(account.token), origin: 'https://other.example' }, payload: { name: 'ok' } });
    expect(res.statusCode).toBe(201);
  });

  it('lets a browser sign out with a body-less JSON POST', async () => {
    const account = await registerAndLogin(t.fastify, 'bodyless');
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/logout', headers: { ...browser(account), 'content-type': 'application/json' } });
    expect(res.statusCode).toBe(200);
    expect((await access({ cookie: `session=${account.cookies.session}` })).statusCode).toBe(401);
  });

  it('answers 401, not 403, to an unauthenticated request that asks to impersonate', async () => {
    const res = await access({ 'x-impersonate-user': '' });
    expect(res.statusCode).toBe(401);
  });

  it('sends session tokens with Cache-Control: no-store', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/v1/login', payload: { email: ADMIN_EMAIL, password: ADMIN_PASSWORD } });
    expect(res.headers['cache-control']).toBe('no-store');
  });
});
