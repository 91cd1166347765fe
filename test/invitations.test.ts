import { createHash } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlRequest } from './helpers/graphql.ts';
import { type Account, bearer, browser, login, registerAndLogin } from './helpers/identity.ts';
import { type ReceivedEvent, startWebhookReceiver, type WebhookReceiver } from './helpers/webhooks.ts';

let t: TestApp;
/** The product's backend: every event arrives here, as a product would receive it. */
let hook: WebhookReceiver;

beforeAll(async () => {
  hook = await startWebhookReceiver();
  t = await createTestApp({
    env: {
      RATE_LIMIT_MAX: '0',
      EVENTS_WEBHOOK_URL: hook.url,
      EVENTS_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 5).toString('base64')}`,
      EVENTS_POLL_INTERVAL: '1',
    },
  });
});
afterAll(async () => {
  await t?.close();
  await hook?.close();
});

const DAY_MS = 24 * 60 * 60 * 1000;
const INVITATION_FIELDS = 'id email role status expiresAt organization { id name }';

const gql = (auth: string | Record<string, string>, query: string, variables?: Record<string, unknown>) => graphqlRequest(t.fastify, auth, query, variables);

type Answer = Awaited<ReturnType<typeof gql>>;

/** The data of a document that must succeed. */
async function ok(auth: string | Record<string, string>, query: string, variables?: Record<string, unknown>) {
  const answer = await gql(auth, query, variables);
  expect(answer.body.errors, answer.raw).toBeUndefined();
  expect(answer.status).toBe(200);
  return answer.body.data;
}

/** The error code of a document that must fail. */
async function code(auth: string | Record<string, string>, query: string, variables?: Record<string, unknown>): Promise<string | undefined> {
  const answer = await gql(auth, query, variables);
  expect(answer.body.errors, answer.raw).toBeDefined();
  return answer.body.errors?.[0]?.extensions.code;
}

interface InvitationAnswer {
  id: string;
  email: string;
  role: string;
  status: string;
  expiresAt: string;
  organization: { id: string; name: string };
}

/** How many times each invitation was sent through `invite`: the webhook must have received that many. */
const sendings = new Map<string, number>();

async function invite(auth: string, email: string, role = 'member'): Promise<InvitationAnswer> {
  const invitation: InvitationAnswer = (await ok(auth, `mutation($e: String!, $r: String!) { addMember(email: $e, role: $r) { ${INVITATION_FIELDS} } }`, { e: email, r: role })).addMember;
  sendings.set(invitation.id, (sendings.get(invitation.id) ?? 0) + 1);
  return invitation;
}

interface InvitedData {
  organizationId: string;
  invitationId: string;
  email: string;
  role: string;
  acceptToken: string;
  acceptUrl: string;
  invitation: { id: string; email: string; role: string; expiresAt: string };
  organization: { id: string; name: string };
  invitedBy: string | null;
}

/** The `organization.member_invited` events the webhook received for invitation `id`, oldest first, each once. */
function deliveries(id: string): (ReceivedEvent['event'] & { data: InvitedData })[] {
  const byId = new Map<string, ReceivedEvent['event']>();
  for (const { event } of hook.received) if (event.type === 'organization.member_invited' && event.data.invitationId === id) byId.set(event.id, event);
  return [...byId.values()].sort((a, b) => a.id.localeCompare(b.id)) as (ReceivedEvent['event'] & { data: InvitedData })[];
}

/** What the latest sending of invitation `id` delivered to the webhook (waits for it). */
async function delivered(id: string): Promise<InvitedData> {
  const expected = sendings.get(id) ?? 1;
  await expect.poll(() => deliveries(id).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(expected);
  return deliveries(id)[expected - 1]?.data as InvitedData;
}

/** The token of invitation `id`'s latest sending, as the product received it. */
async function tokenOf(id: string): Promise<string> {
  return (await delivered(id)).acceptToken;
}

const ACCEPT = 'mutation($id: ID!, $token: String!) { acceptInvitation(id: $id, token: $token) { id name role } }';
const accept = (auth: string | Record<string, string>, id: string, token: string) => gql(auth, ACCEPT, { id, token });

/** The invitee accepts with the token of the invitation's latest sending. */
async function acceptWithToken(auth: string | Record<string, string>, id: string) {
  return accept(auth, id, await tokenOf(id));
}

async function mine(auth: string | Record<string, string>): Promise<InvitationAnswer[]> {
  return (await ok(auth, `{ myInvitations { ${INVITATION_FIELDS} } }`)).myInvitations;
}

async function pending(auth: string): Promise<InvitationAnswer[]> {
  return (await ok(auth, `{ invitations { ${INVITATION_FIELDS} } }`)).invitations;
}

async function access(token: string) {
  const res = await t.fastify.inject({ method: 'GET', url: '/v1/account/access', headers: bearer(token) });
  return { status: res.statusCode, body: res.json() };
}

/** A token of the same session bound to `organizationId` (the caller must be a member). */
async function switchTo(account: Account, organizationId: string): Promise<string> {
  const res = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(account.token), payload: { organizationId } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().accessToken;
}

/** Invites `account` into the owner's organization with `role`; the account accepts; returns its token there. */
async function join(ownerToken: string, organizationId: string, account: Account, role: string): Promise<string> {
  const invitation = await invite(ownerToken, account.email, role);
  expect((await acceptWithToken(account.token, invitation.id)).body.errors).toBeUndefined();
  return switchTo(account, organizationId);
}

/** The organization's stored `organization.member_invited` events (the outbox rows: the token is sealed in `sealed`). */
async function eventsOf(organizationId: string) {
  return queryRows<{ id: string; type: string; data: Omit<InvitedData, 'acceptToken' | 'acceptUrl'>; sealed: unknown }>(
    t.database.db,
    sql`SELECT id, type, data, sealed FROM events WHERE organization_id = ${organizationId} AND type = 'organization.member_invited' ORDER BY id`,
  );
}

async function auditOf(organizationId: string, targetId: string) {
  return queryRows<{ action: string; actor_user_id: string | null; credential_kind: string | null; detail: Record<string, unknown> }>(
    t.database.db,
    sql`SELECT action, actor_user_id, credential_kind, detail FROM audit_logs WHERE organization_id = ${organizationId} AND target_id = ${targetId} ORDER BY id`,
  );
}

describe('consent', () => {
  it('does not let the owner of another organization make Alice a member without her consent', async () => {
    const alice = await registerAndLogin(t.fastify, 'alice');
    const mallory = await registerAndLogin(t.fastify, 'mallory');
    const invitation = await invite(mallory.token, alice.email, 'owner');
    expect(invitation).toMatchObject({ email: alice.email, role: 'owner', status: 'pending', organization: { id: mallory.organizationId } });

    // Nothing changed for Alice: not in her organizations, not in Mallory's members, no way in.
    expect((await access(alice.token)).body.organizations.map((o: { id: string }) => o.id)).toEqual([alice.organizationId]);
    expect((await ok(mallory.token, '{ members { user { id } } }')).members).toEqual([{ user: { id: mallory.userId } }]);
    const switched = await t.fastify.inject({ method: 'POST', url: '/v1/account/switch', headers: bearer(alice.token), payload: { organizationId: mallory.organizationId } });
    expect(switched.statusCode).toBe(403);
  });

  it('answers addMember identically for a registered and an unknown e-mail, with no user information', async () => {
    const owner = await registerAndLogin(t.fastify, 'oracle-owner');
    const registered = await t.fastify.inject({ method: 'POST', url: '/v1/register', payload: { email: `oracle-alice-${Date.now()}@example.com`, password: 'a long enough password', name: 'Alice Oracle' } });
    const alice = registered.json().user as { id: string; email: string };
    const unknown = `nobody-${Date.now()}@example.com`;
    const query = `mutation($e: String!) { addMember(email: $e, role: "member") { ${INVITATION_FIELDS} } }`;
    const known = await gql(owner.token, query, { e: alice.email });
    const stranger = await gql(owner.token, query, { e: unknown });
    expect(known.status).toBe(stranger.status);
    const shape = (answer: Answer) => {
      const invitation: InvitationAnswer = answer.body.data.addMember;
      return { ...invitation, id: typeof invitation.id, email: typeof invitation.email, expiresAt: typeof invitation.expiresAt };
    };
    expect(shape(known)).toEqual(shape(stranger));
    expect(Object.keys(known.body)).toEqual(Object.keys(stranger.body));
    expect(known.raw).not.toContain(alice.id);
    expect(known.raw).not.toContain('Alice Oracle');
    // The type has no field that could say who the address belongs to.
    for (const field of ['user { id }', 'userId', 'name']) {
      expect((await gql(owner.token, `mutation { addMember(email: "x@example.com", role: "member") { ${field} } }`)).status, field).toBe(400);
    }
    // Behind the answer too: the same event and audit entry for both.
    const events = await eventsOf(owner.organizationId);
    expect(events.map((e) => e.data.invitation.email)).toEqual([alice.email, unknown]);
    const [knownId, strangerId] = [known.body.data.addMember.id, stranger.body.data.addMember.id];
    const audit = [...(await auditOf(owner.organizationId, knownId)), ...(await auditOf(owner.organizationId, strangerId))];
    expect(audit.map((a) => a.action)).toEqual(['invitation.created', 'invitation.created']);
  });

  it('answers setMemberRole and removeMember the same for a registered non-member and an unknown e-mail', async () => {
    const owner = await registerAndLogin(t.fastify, 'probe-owner');
    const bystander = await registerAndLogin(t.fastify, 'probe-bystander');
    for (const query of ['mutation($e: String!) { setMemberRole(email: $e, role: "member") { role } }', 'mutation($e: String!) { removeMember(email: $e) }']) {
      const registered = await gql(owner.token, query, { e: bystander.email });
      const unknown = await gql(owner.token, query, { e: `nobody-${Date.now()}@example.com` });
      expect(registered.body.errors?.[0]).toMatchObject({ message: 'No member with that e-mail', extensions: { code: 'NOT_FOUND' } });
      expect(unknown.body.errors?.[0]).toEqual({ ...registered.body.errors?.[0] });
    }
  });

  it('queues organization.member_invited with the invitation and its accept link, in the same transaction as the change', async () => {
    const owner = await registerAndLogin(t.fastify, 'event-owner');
    const before = Date.now();
    const invitation = await invite(owner.token, 'event-invitee@example.com', 'admin');
    const expiresIn = new Date(invitation.expiresAt).getTime() - before;
    expect(expiresIn).toBeGreaterThan(7 * DAY_MS - 60_000);
    expect(expiresIn).toBeLessThan(7 * DAY_MS + 60_000);
    expect(invitation.expiresAt).toBe(new Date(invitation.expiresAt).toISOString());
    const events = await eventsOf(owner.organizationId);
    expect(events).toHaveLength(1);
    const described = {
      organizationId: owner.organizationId,
      externalId: null,
      invitationId: invitation.id,
      email: 'event-invitee@example.com',
      role: 'admin',
      invitation: { id: invitation.id, email: 'event-invitee@example.com', role: 'admin', expiresAt: invitation.expiresAt },
      organization: { id: owner.organizationId, name: invitation.organization.name },
      invitedBy: owner.userId,
    };
    // The product receives the token and the page that takes it; the stored row holds them sealed only.
    const data = await delivered(invitation.id);
    expect(data).toEqual({ ...described, acceptToken: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), acceptUrl: expect.any(String) });
    expect(data.acceptUrl).toBe(`${t.config.server.publicUrl}/invitations/${invitation.id}#token=${data.acceptToken}`);
    expect(events[0]?.data).toEqual(described);
    expect(JSON.stringify(events[0])).not.toContain(data.acceptToken);
    expect(events[0]?.id).toMatch(/^evt_/);
    expect(deliveries(invitation.id).map((event) => event.id)).toEqual([events[0]?.id]);

    // A document that fails later rolls the invitation and its event back together.
    const failed = await gql(owner.token, 'mutation { addMember(email: "rolled-back@example.com", role: "member") { id } removeMember(email: "nobody@example.com") }');
    expect(failed.body.errors?.[0]?.extensions.code).toBe('NOT_FOUND');
    expect(await eventsOf(owner.organizationId)).toHaveLength(1);
    expect((await pending(owner.token)).map((i) => i.email)).toEqual(['event-invitee@example.com']);
  });
});

describe('the invitee', () => {
  it('sees the invitation in myInvitations, matched by e-mail in any letter case; nobody else does', async () => {
    const owner = await registerAndLogin(t.fastify, 'list-owner');
    const alice = await registerAndLogin(t.fastify, 'list-alice');
    const bob = await registerAndLogin(t.fastify, 'list-bob');
    const shouted = alice.email.toUpperCase();
    const invitation = await invite(owner.token, `  ${shouted} `, 'admin');
    expect(invitation.email).toBe(shouted);
    const organizationName = (await ok(owner.token, '{ organization { name } }')).organization.name;
    expect(await mine(alice.token)).toEqual([
      { id: invitation.id, email: shouted, role: 'admin', status: 'pending', expiresAt: invitation.expiresAt, organization: { id: owner.organizationId, name: organizationName } },
    ]);
    // Through the browser's way in (session cookie and CSRF header) too.
    expect((await mine(browser(alice))).map((i) => i.id)).toEqual([invitation.id]);
    expect(await mine(bob.token)).toEqual([]);
    expect(await mine(owner.token)).toEqual([]);
  });

  it('accepts with her own session and becomes a member with the role; nobody else can accept it, even holding the token', async () => {
    const owner = await registerAndLogin(t.fastify, 'accept-owner');
    const alice = await registerAndLogin(t.fastify, 'accept-alice');
    const bob = await registerAndLogin(t.fastify, 'accept-bob');
    const invitation = await invite(owner.token, alice.email, 'admin');
    const token = await tokenOf(invitation.id);

    // Bob, with the link in hand, gets exactly the answer of an id that does not exist.
    const bobs = await accept(bob.token, invitation.id, token);
    const unknown = await accept(bob.token, '01JAAAAAAAAAAAAAAAAAAAAAAA', token);
    expect(bobs.body.errors?.[0]?.extensions.code).toBe('NOT_FOUND');
    expect(bobs.body.errors?.[0]?.message).toBe(unknown.body.errors?.[0]?.message);
    expect(bobs.raw).not.toContain(owner.organizationId);
    expect(await code(bob.token, 'mutation($id: ID!) { declineInvitation(id: $id) { id } }', { id: invitation.id })).toBe('NOT_FOUND');
    // The inviting owner cannot accept on her behalf either.
    expect((await accept(owner.token, invitation.id, token)).body.errors?.[0]?.extensions.code).toBe('NOT_FOUND');

    // Alice's personal access token, an API token, and an impersonating admin cannot consent for her.
    const pat = (await ok(alice.token, 'mutation { createPersonalAccessToken(name: "script") { token } }')).createPersonalAccessToken.token;
    expect((await accept(pat, invitation.id, token)).body.errors?.[0]?.extensions.code).toBe('FORBIDDEN');
    const apiToken = (await ok(alice.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
    expect((await accept(apiToken, invitation.id, token)).body.errors?.[0]?.extensions.code).toBe('FORBIDDEN');
    const admin = await registerAndLogin(t.fastify, 'accept-sysadmin');
    await t.database.db.execute(sql`UPDATE users SET system_admin = true WHERE id = ${admin.userId}`);
    const impersonating = { ...bearer(admin.token), 'x-impersonate-user': alice.userId };
    expect((await mine(impersonating)).map((i) => i.id)).toEqual([invitation.id]);
    expect((await accept(impersonating, invitation.id, token)).body.errors?.[0]?.extensions.code).toBe('FORBIDDEN');
    expect(await code(pat, 'mutation($id: ID!) { declineInvitation(id: $id) { id } }', { id: invitation.id })).toBe('FORBIDDEN');
    expect((await access(alice.token)).body.organizations).toHaveLength(1);

    const accepted = await accept(alice.token, invitation.id, token);
    expect(accepted.body.errors).toBeUndefined();
    const organizationName = (await ok(owner.token, '{ organization { name } }')).organization.name;
    expect(accepted.body.data?.acceptInvitation).toEqual({ id: owner.organizationId, name: organizationName, role: 'admin' });
    expect((await access(alice.token)).body.organizations).toContainEqual({ id: owner.organizationId, name: organizationName, role: 'admin' });
    const there = await switchTo(alice, owner.organizationId);
    expect((await access(there)).body.organization).toEqual({ id: owner.organizationId, name: organizationName, role: 'admin' });
    expect(await mine(alice.token)).toEqual([]);
    expect(await pending(owner.token)).toEqual([]);

    // Used up: a second acceptance is refused.
    expect((await accept(alice.token, invitation.id, token)).body.errors?.[0]?.extensions.code).toBe('CONFLICT');
    const audit = await auditOf(owner.organizationId, invitation.id);
    expect(audit).toEqual([
      { action: 'invitation.created', actor_user_id: owner.userId, credential_kind: 'jwt', detail: { email: alice.email, role: 'admin' } },
      { action: 'invitation.accepted', actor_user_id: alice.userId, credential_kind: 'jwt', detail: { role: 'admin' } },
    ]);
  });

  it('cannot accept a declined, revoked or expired invitation', async () => {
    const owner = await registerAndLogin(t.fastify, 'closed-owner');
    const alice = await registerAndLogin(t.fastify, 'closed-alice');
    const stillOutsider = async () => expect((await access(alice.token)).body.organizations.map((o: { id: string }) => o.id)).toEqual([alice.organizationId]);

    const declined = await invite(owner.token, alice.email);
    const answer = await ok(alice.token, `mutation($id: ID!) { declineInvitation(id: $id) { ${INVITATION_FIELDS} } }`, { id: declined.id });
    expect(answer.declineInvitation).toMatchObject({ id: declined.id, status: 'declined' });
    expect((await acceptWithToken(alice.token, declined.id)).body.errors?.[0]).toMatchObject({ message: 'This invitation was declined', extensions: { code: 'CONFLICT' } });
    expect(await mine(alice.token)).toEqual([]);
    expect(await pending(owner.token)).toEqual([]);
    await stillOutsider();

    const revoked = await invite(owner.token, alice.email);
    expect(revoked.id).not.toBe(declined.id);
    expect((await ok(owner.token, 'mutation($id: ID!) { revokeInvitation(id: $id) { id status } }', { id: revoked.id })).revokeInvitation).toEqual({ id: revoked.id, status: 'revoked' });
    expect(await mine(alice.token)).toEqual([]);
    expect((await acceptWithToken(alice.token, revoked.id)).body.errors?.[0]).toMatchObject({ message: 'This invitation was revoked', extensions: { code: 'CONFLICT' } });
    expect(await code(alice.token, 'mutation($id: ID!) { declineInvitation(id: $id) { id } }', { id: revoked.id })).toBe('CONFLICT');
    expect(await code(owner.token, 'mutation($id: ID!) { revokeInvitation(id: $id) { id } }', { id: revoked.id })).toBe('CONFLICT');
    await stillOutsider();

    const expired = await invite(owner.token, alice.email);
    await t.database.db.execute(sql`UPDATE invitations SET expires_at = now() - interval '1 second' WHERE organization_id = ${owner.organizationId} AND id = ${expired.id}`);
    expect(await mine(alice.token)).toEqual([]);
    expect(await pending(owner.token)).toEqual([]);
    expect((await acceptWithToken(alice.token, expired.id)).body.errors?.[0]).toMatchObject({ message: expect.stringMatching(/expired/), extensions: { code: 'CONFLICT' } });
    await stillOutsider();

    // Renewing revives it under the same id, for another 7 days.
    const renewed = await invite(owner.token, alice.email);
    expect(renewed.id).toBe(expired.id);
    expect(new Date(renewed.expiresAt).getTime()).toBeGreaterThan(Date.now() + 7 * DAY_MS - 60_000);
    expect((await acceptWithToken(alice.token, renewed.id)).body.data?.acceptInvitation).toMatchObject({ id: owner.organizationId, role: 'member' });

    const actions = await queryRows<{ action: string }>(t.database.db, sql`SELECT action FROM audit_logs WHERE organization_id = ${owner.organizationId} AND target_type = 'invitation' ORDER BY id`);
    expect(actions.map((a) => a.action)).toEqual([
      'invitation.created',
      'invitation.declined',
      'invitation.created',
      'invitation.revoked',
      'invitation.created',
      'invitation.renewed',
      'invitation.accepted',
    ]);
  });

  it('renews a pending invitation: the new role and a fresh expiry, the same id, one invitation', async () => {
    const owner = await registerAndLogin(t.fastify, 'renew-owner');
    const alice = await registerAndLogin(t.fastify, 'renew-alice');
    const first = await invite(owner.token, alice.email, 'member');
    await t.database.db.execute(sql`UPDATE invitations SET expires_at = now() + interval '1 day' WHERE organization_id = ${owner.organizationId} AND id = ${first.id}`);
    const renewed = await invite(owner.token, alice.email.toUpperCase(), 'admin');
    expect(renewed).toMatchObject({ id: first.id, role: 'admin', status: 'pending' });
    expect(new Date(renewed.expiresAt).getTime()).toBeGreaterThan(Date.now() + 7 * DAY_MS - 60_000);
    expect((await pending(owner.token)).map((i) => [i.id, i.role])).toEqual([[first.id, 'admin']]);
    expect((await mine(alice.token)).map((i) => [i.id, i.role, i.expiresAt])).toEqual([[first.id, 'admin', renewed.expiresAt]]);
    // Each sending is an event: the product sends the e-mail again.
    expect((await eventsOf(owner.organizationId)).map((e) => [e.data.invitation.id, e.data.invitation.role])).toEqual([
      [first.id, 'member'],
      [first.id, 'admin'],
    ]);
    expect((await acceptWithToken(alice.token, first.id)).body.data?.acceptInvitation).toMatchObject({ role: 'admin' });
  });
});

describe('who may invite, list and revoke', () => {
  it('refuses members; lets admins invite admins and members but not owners, nor touch owner invitations', async () => {
    const owner = await registerAndLogin(t.fastify, 'roles-owner');
    const admin = await registerAndLogin(t.fastify, 'roles-admin');
    const member = await registerAndLogin(t.fastify, 'roles-member');
    const org = owner.organizationId;
    const adminToken = await join(owner.token, org, admin, 'admin');
    const memberToken = await join(owner.token, org, member, 'member');

    const toAnyone = 'mutation { addMember(email: "someone@example.com", role: "member") { id } }';
    expect(await code(memberToken, toAnyone)).toBe('FORBIDDEN');
    expect(await code(memberToken, '{ invitations { id } }')).toBe('FORBIDDEN');

    expect(await code(adminToken, 'mutation { addMember(email: "boss@example.com", role: "owner") { id } }')).toBe('FORBIDDEN');
    const byAdmin = await invite(adminToken, 'helper@example.com', 'admin');
    expect(await code(memberToken, 'mutation($id: ID!) { revokeInvitation(id: $id) { id } }', { id: byAdmin.id })).toBe('FORBIDDEN');
    expect((await pending(adminToken)).map((i) => i.email)).toEqual(['helper@example.com']);
    expect((await ok(adminToken, 'mutation($id: ID!) { revokeInvitation(id: $id) { status } }', { id: byAdmin.id })).revokeInvitation.status).toBe('revoked');

    // An owner invitation is the owners' to change or withdraw.
    const toOwner = await invite(owner.token, 'boss@example.com', 'owner');
    expect(await code(adminToken, 'mutation { addMember(email: "boss@example.com", role: "member") { id } }')).toBe('FORBIDDEN');
    expect(await code(adminToken, 'mutation($id: ID!) { revokeInvitation(id: $id) { id } }', { id: toOwner.id })).toBe('FORBIDDEN');
    expect((await pending(owner.token)).map((i) => [i.email, i.role])).toEqual([['boss@example.com', 'owner']]);
    expect((await ok(owner.token, 'mutation($id: ID!) { revokeInvitation(id: $id) { status } }', { id: toOwner.id })).revokeInvitation.status).toBe('revoked');

    // An API token invites members (no inviting user), and nobody above that (see 'API tokens' below).
    const apiToken = (await ok(owner.token, 'mutation { createAPIToken(name: "provisioning") { token } }')).createAPIToken.token;
    const byToken = await invite(apiToken, 'from-backend@example.com', 'member');
    expect(await code(apiToken, 'mutation { addMember(email: "boss@example.com", role: "owner") { id } }')).toBe('FORBIDDEN');
    expect((await eventsOf(org)).find((e) => e.data.invitation.id === byToken.id)?.data.invitedBy).toBeNull();

    // Already a member: nothing to invite (members are listed to whoever may invite).
    expect(await code(owner.token, 'mutation($e: String!) { addMember(email: $e, role: "admin") { id } }', { e: member.email.toUpperCase() })).toBe('CONFLICT');
    expect(await code(owner.token, 'mutation { addMember(email: "not an address", role: "member") { id } }')).toBe('INVALID_INPUT');
    expect(await code(owner.token, 'mutation { addMember(email: "x@example.com", role: "king") { id } }')).toBe('INVALID_INPUT');
  });

  it("keeps each organization's invitations to itself: another organization's admin gets not-found", async () => {
    const ownerA = await registerAndLogin(t.fastify, 'iso-owner-a');
    const adminA = await registerAndLogin(t.fastify, 'iso-admin-a');
    const ownerB = await registerAndLogin(t.fastify, 'iso-owner-b');
    const adminAToken = await join(ownerA.token, ownerA.organizationId, adminA, 'admin');
    const ofA = await invite(ownerA.token, 'shared-invitee@example.com');
    const ofB = await invite(ownerB.token, 'shared-invitee@example.com');
    expect(ofA.id).not.toBe(ofB.id);

    expect((await pending(adminAToken)).map((i) => i.id)).toEqual([ofA.id]);
    expect((await pending(ownerB.token)).map((i) => i.id)).toEqual([ofB.id]);
    const revoke = await gql(adminAToken, 'mutation($id: ID!) { revokeInvitation(id: $id) { id } }', { id: ofB.id });
    expect(revoke.body.errors?.[0]).toMatchObject({ message: 'No such invitation', extensions: { code: 'NOT_FOUND' } });
    expect((await pending(ownerB.token)).map((i) => [i.id, i.status])).toEqual([[ofB.id, 'pending']]);
    // Naming the other organization does not help: the credential is bound to A.
    const other = await t.fastify.inject({
      method: 'POST',
      url: '/query',
      headers: { ...bearer(adminAToken), 'x-organization-id': ownerB.organizationId },
      payload: { query: '{ invitations { id } }' },
    });
    expect(other.body).not.toContain(ofB.id);
  });
});

describe('the accept token', () => {
  it('refuses acceptance without the token, with another invitation\'s token, with a renewed invitation\'s old token and by another e-mail; the invitee then joins with hers', async () => {
    const owner = await registerAndLogin(t.fastify, 'token-owner');
    const alice = await registerAndLogin(t.fastify, 'token-alice');
    const bob = await registerAndLogin(t.fastify, 'token-bob');
    const toAlice = await invite(owner.token, alice.email, 'admin');
    const toBob = await invite(owner.token, bob.email, 'member');
    const firstToken = await tokenOf(toAlice.id);
    const bobsToken = await tokenOf(toBob.id);
    const unknownId = await accept(alice.token, '01JAAAAAAAAAAAAAAAAAAAAAAA', firstToken);
    expect(unknownId.body.errors?.[0]?.extensions.code).toBe('NOT_FOUND');
    const looksUnknown = (answer: Answer) => expect(answer.body.errors?.[0]).toEqual(unknownId.body.errors?.[0]);

    // No token: the argument is required, and an empty or made-up one opens nothing.
    const without = await gql(alice.token, 'mutation($id: ID!) { acceptInvitation(id: $id) { id } }', { id: toAlice.id });
    expect(without.status).toBe(400);
    expect(without.body.errors?.[0]?.extensions.code).toBe('INVALID_INPUT');
    looksUnknown(await accept(alice.token, toAlice.id, ''));
    looksUnknown(await accept(alice.token, toAlice.id, 'A'.repeat(43)));
    // Another invitation's token, to the same organization.
    looksUnknown(await accept(alice.token, toAlice.id, bobsToken));
    // Renewing sends a new token: the old link stops working.
    expect((await invite(owner.token, alice.email, 'admin')).id).toBe(toAlice.id);
    const secondToken = await tokenOf(toAlice.id);
    expect(secondToken).not.toBe(firstToken);
    looksUnknown(await accept(alice.token, toAlice.id, firstToken));
    // Another e-mail, holding the right token.
    looksUnknown(await accept(bob.token, toAlice.id, secondToken));

    // Nothing was used up: Alice still sees it, joins with the current token, and only then is it spent.
    expect((await access(alice.token)).body.organizations).toHaveLength(1);
    expect((await mine(alice.token)).map((i) => [i.id, i.status])).toEqual([[toAlice.id, 'pending']]);
    expect((await accept(alice.token, toAlice.id, secondToken)).body.data?.acceptInvitation).toMatchObject({ id: owner.organizationId, role: 'admin' });
    expect((await accept(alice.token, toAlice.id, secondToken)).body.errors?.[0]?.extensions.code).toBe('CONFLICT');
    // Bob's own invitation took no harm from its token being tried elsewhere.
    expect((await accept(bob.token, toBob.id, bobsToken)).body.data?.acceptInvitation).toMatchObject({ role: 'member' });
    const actions = await queryRows<{ action: string }>(t.database.db, sql`SELECT action FROM audit_logs WHERE organization_id = ${owner.organizationId} AND action = 'invitation.accepted'`);
    expect(actions).toHaveLength(2);
  });

  it('does not let whoever registers an invited address take the invitation: e-mail addresses are not verified', async () => {
    const owner = await registerAndLogin(t.fastify, 'takeover-owner');
    const address = `not-yet-registered-${Date.now()}@example.com`;
    const invitation = await invite(owner.token, address, 'owner');
    // Mallory registers the address before its owner does; she sees the invitation, as anyone with the address would.
    const registered = await t.fastify.inject({ method: 'POST', url: '/v1/register', payload: { email: address, password: 'mallory owns this password' } });
    expect(registered.statusCode).toBe(201);
    const mallory = await login(t.fastify, address, 'mallory owns this password');
    expect((await mine(mallory.token)).map((i) => [i.id, i.role])).toEqual([[invitation.id, 'owner']]);
    // Her own invitation elsewhere gives her a real token of the right shape: it opens only that one.
    const other = await registerAndLogin(t.fastify, 'takeover-other');
    const hers = await invite(other.token, address, 'member');
    for (const token of ['', 'x', await tokenOf(hers.id)]) {
      expect((await accept(mallory.token, invitation.id, token)).body.errors?.[0]?.extensions.code, token).toBe('NOT_FOUND');
    }
    expect((await access(mallory.token)).body.organizations.map((o: { id: string }) => o.id)).not.toContain(owner.organizationId);
    expect((await ok(owner.token, '{ members { role } }')).members).toEqual([{ role: 'owner' }]);
    expect((await pending(owner.token)).map((i) => i.id)).toEqual([invitation.id]);
  });

  it('makes the invitee a member through the link the webhook delivered', async () => {
    const owner = await registerAndLogin(t.fastify, 'link-owner');
    const carol = await registerAndLogin(t.fastify, 'link-carol');
    const invitation = await invite(owner.token, carol.email, 'admin');
    await delivered(invitation.id);
    const [event] = deliveries(invitation.id);
    expect(event?.type).toBe('organization.member_invited');
    // Everything the invitee needs is in the link: the page's path names the invitation, the fragment holds the token.
    const link = new URL(event?.data.acceptUrl ?? '');
    expect(link.origin + link.pathname).toBe(`${t.config.server.publicUrl}/invitations/${invitation.id}`);
    const id = link.pathname.split('/').pop() ?? '';
    const token = new URLSearchParams(link.hash.slice(1)).get('token') ?? '';
    const joined = await accept(browser(carol), id, token);
    expect(joined.body.errors, joined.raw).toBeUndefined();
    expect(joined.body.data.acceptInvitation).toEqual({ id: owner.organizationId, name: invitation.organization.name, role: 'admin' });
    expect((await access(await switchTo(carol, owner.organizationId))).body.organization).toMatchObject({ id: owner.organizationId, role: 'admin' });
  });

  it('keeps the token out of GraphQL answers, log lines, audit rows and the database', async () => {
    const owner = await registerAndLogin(t.fastify, 'secret-owner');
    const dave = await registerAndLogin(t.fastify, 'secret-dave');
    const added = await gql(owner.token, `mutation($e: String!) { addMember(email: $e, role: "member") { ${INVITATION_FIELDS} } }`, { e: dave.email });
    const id: string = added.body.data.addMember.id;
    sendings.set(id, 1);
    const { acceptToken, acceptUrl } = await delivered(id);
    const answers = [
      added.raw,
      (await gql(owner.token, `{ invitations { ${INVITATION_FIELDS} } }`)).raw,
      (await gql(dave.token, `{ myInvitations { ${INVITATION_FIELDS} } }`)).raw,
      (await gql(owner.token, '{ auditLogs { nodes { action detail } } }')).raw,
      (await accept(dave.token, id, acceptToken)).raw,
    ];
    const stored = await queryRows<{ text: string }>(
      t.database.db,
      sql`SELECT row_to_json(i)::text AS text FROM invitations i WHERE organization_id = ${owner.organizationId}
          UNION ALL SELECT row_to_json(e)::text FROM events e WHERE organization_id = ${owner.organizationId}
          UNION ALL SELECT row_to_json(a)::text FROM audit_logs a WHERE organization_id = ${owner.organizationId}`,
    );
    expect(stored.length).toBeGreaterThanOrEqual(4);
    for (const text of [...answers, t.logs.text, ...stored.map((row) => row.text)]) {
      expect(text).not.toContain(acceptToken);
      expect(text).not.toContain(acceptUrl);
    }
    // What the invitation row keeps is the token's hash.
    const [row] = await queryRows<{ accept_token_hash: string }>(t.database.db, sql`SELECT accept_token_hash FROM invitations WHERE organization_id = ${owner.organizationId} AND id = ${id}`);
    expect(row?.accept_token_hash).toBe(createHash('sha256').update(acceptToken).digest('hex'));
  });
});

describe('API tokens', () => {
  it('invite members only: an admin or owner invitation, or a promotion, by an API token is refused', async () => {
    const owner = await registerAndLogin(t.fastify, 'machine-owner');
    const member = await registerAndLogin(t.fastify, 'machine-member');
    await join(owner.token, owner.organizationId, member, 'member');
    const apiToken = (await ok(owner.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;

    for (const role of ['admin', 'owner']) {
      const refused = await gql(apiToken, 'mutation($r: String!) { addMember(email: "leaked@example.com", role: $r) { id } }', { r: role });
      expect(refused.body.errors?.[0]?.extensions.code, role).toBe('FORBIDDEN');
    }
    // Nor around it: inviting as a member and promoting afterwards.
    expect(await code(apiToken, 'mutation($e: String!) { setMemberRole(email: $e, role: "admin") { role } }', { e: member.email })).toBe('FORBIDDEN');
    expect(await pending(owner.token)).toEqual([]);
    expect((await eventsOf(owner.organizationId)).map((e) => e.data.email)).toEqual([member.email]);
    expect((await ok(owner.token, '{ members { user { email } role } }')).members).toContainEqual({ user: { email: member.email }, role: 'member' });

    // Members, yes; and a person who is an admin still invites admins.
    const byToken = await invite(apiToken, 'new-hire@example.com', 'member');
    expect(byToken).toMatchObject({ role: 'member', status: 'pending' });
    expect((await invite(owner.token, 'second-admin@example.com', 'admin')).role).toBe('admin');
    expect((await ok(owner.token, 'mutation($e: String!) { setMemberRole(email: $e, role: "admin") { role } }', { e: member.email })).setMemberRole.role).toBe('admin');
  });
});
