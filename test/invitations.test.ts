import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlRequest } from './helpers/graphql.ts';
import { type Account, bearer, browser, registerAndLogin } from './helpers/identity.ts';

let t: TestApp;

beforeAll(async () => {
  t = await createTestApp({ env: { RATE_LIMIT_MAX: '0' } });
});
afterAll(async () => {
  await t?.close();
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

async function invite(auth: string, email: string, role = 'member'): Promise<InvitationAnswer> {
  return (await ok(auth, `mutation($e: String!, $r: String!) { addMember(email: $e, role: $r) { ${INVITATION_FIELDS} } }`, { e: email, r: role })).addMember;
}

const accept = (auth: string | Record<string, string>, id: string) => gql(auth, 'mutation($id: ID!) { acceptInvitation(id: $id) { id name role } }', { id });

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
  expect((await accept(account.token, invitation.id)).body.errors).toBeUndefined();
  return switchTo(account, organizationId);
}

async function eventsOf(organizationId: string) {
  return queryRows<{
    id: string;
    type: string;
    data: { invitation: { id: string; email: string; role: string; expiresAt: string }; organization: { id: string; name: string }; invitedBy: string | null };
  }>(
    t.database.db,
    sql`SELECT id, type, data FROM events WHERE organization_id = ${organizationId} AND type = 'organization.member_invited' ORDER BY id`,
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

  it('queues organization.member_invited with the invitation, in the same transaction as the change', async () => {
    const owner = await registerAndLogin(t.fastify, 'event-owner');
    const before = Date.now();
    const invitation = await invite(owner.token, 'event-invitee@example.com', 'admin');
    const expiresIn = new Date(invitation.expiresAt).getTime() - before;
    expect(expiresIn).toBeGreaterThan(7 * DAY_MS - 60_000);
    expect(expiresIn).toBeLessThan(7 * DAY_MS + 60_000);
    expect(invitation.expiresAt).toBe(new Date(invitation.expiresAt).toISOString());
    const events = await eventsOf(owner.organizationId);
    expect(events).toHaveLength(1);
    expect(events[0]?.data).toEqual({
      organizationId: owner.organizationId,
      externalId: null,
      invitation: { id: invitation.id, email: 'event-invitee@example.com', role: 'admin', expiresAt: invitation.expiresAt },
      organization: { id: owner.organizationId, name: invitation.organization.name },
      invitedBy: owner.userId,
    });
    expect(events[0]?.id).toMatch(/^evt_/);

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

  it('accepts with her own session and becomes a member with the role; nobody else can accept it', async () => {
    const owner = await registerAndLogin(t.fastify, 'accept-owner');
    const alice = await registerAndLogin(t.fastify, 'accept-alice');
    const bob = await registerAndLogin(t.fastify, 'accept-bob');
    const invitation = await invite(owner.token, alice.email, 'admin');

    // Bob gets exactly the answer of an id that does not exist.
    const bobs = await accept(bob.token, invitation.id);
    const unknown = await accept(bob.token, '01JAAAAAAAAAAAAAAAAAAAAAAA');
    expect(bobs.body.errors?.[0]?.extensions.code).toBe('NOT_FOUND');
    expect(bobs.body.errors?.[0]?.message).toBe(unknown.body.errors?.[0]?.message);
    expect(bobs.raw).not.toContain(owner.organizationId);
    expect(await code(bob.token, 'mutation($id: ID!) { declineInvitation(id: $id) { id } }', { id: invitation.id })).toBe('NOT_FOUND');
    // The inviting owner cannot accept on her behalf either.
    expect((await accept(owner.token, invitation.id)).body.errors?.[0]?.extensions.code).toBe('NOT_FOUND');

    // Alice's personal access token, an API token, and an impersonating admin cannot consent for her.
    const pat = (await ok(alice.token, 'mutation { createPersonalAccessToken(name: "script") { token } }')).createPersonalAccessToken.token;
    expect((await accept(pat, invitation.id)).body.errors?.[0]?.extensions.code).toBe('FORBIDDEN');
    const apiToken = (await ok(alice.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
    expect((await accept(apiToken, invitation.id)).body.errors?.[0]?.extensions.code).toBe('FORBIDDEN');
    const admin = await registerAndLogin(t.fastify, 'accept-sysadmin');
    await t.database.db.execute(sql`UPDATE users SET system_admin = true WHERE id = ${admin.userId}`);
    const impersonating = { ...bearer(admin.token), 'x-impersonate-user': alice.userId };
    expect((await mine(impersonating)).map((i) => i.id)).toEqual([invitation.id]);
    expect((await accept(impersonating, invitation.id)).body.errors?.[0]?.extensions.code).toBe('FORBIDDEN');
    expect(await code(pat, 'mutation($id: ID!) { declineInvitation(id: $id) { id } }', { id: invitation.id })).toBe('FORBIDDEN');
    expect((await access(alice.token)).body.organizations).toHaveLength(1);

    const accepted = await accept(alice.token, invitation.id);
    expect(accepted.body.errors).toBeUndefined();
    const organizationName = (await ok(owner.token, '{ organization { name } }')).organization.name;
    expect(accepted.body.data?.acceptInvitation).toEqual({ id: owner.organizationId, name: organizationName, role: 'admin' });
    expect((await access(alice.token)).body.organizations).toContainEqual({ id: owner.organizationId, name: organizationName, role: 'admin' });
    const there = await switchTo(alice, owner.organizationId);
    expect((await access(there)).body.organization).toEqual({ id: owner.organizationId, name: organizationName, role: 'admin' });
    expect(await mine(alice.token)).toEqual([]);
    expect(await pending(owner.token)).toEqual([]);

    // Used up: a second acceptance is refused.
    expect((await accept(alice.token, invitation.id)).body.errors?.[0]?.extensions.code).toBe('CONFLICT');
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
    expect((await accept(alice.token, declined.id)).body.errors?.[0]).toMatchObject({ message: 'This invitation was declined', extensions: { code: 'CONFLICT' } });
    expect(await mine(alice.token)).toEqual([]);
    expect(await pending(owner.token)).toEqual([]);
    await stillOutsider();

    const revoked = await invite(owner.token, alice.email);
    expect(revoked.id).not.toBe(declined.id);
    expect((await ok(owner.token, 'mutation($id: ID!) { revokeInvitation(id: $id) { id status } }', { id: revoked.id })).revokeInvitation).toEqual({ id: revoked.id, status: 'revoked' });
    expect(await mine(alice.token)).toEqual([]);
    expect((await accept(alice.token, revoked.id)).body.errors?.[0]).toMatchObject({ message: 'This invitation was revoked', extensions: { code: 'CONFLICT' } });
    expect(await code(alice.token, 'mutation($id: ID!) { declineInvitation(id: $id) { id } }', { id: revoked.id })).toBe('CONFLICT');
    expect(await code(owner.token, 'mutation($id: ID!) { revokeInvitation(id: $id) { id } }', { id: revoked.id })).toBe('CONFLICT');
    await stillOutsider();

    const expired = await invite(owner.token, alice.email);
    await t.database.db.execute(sql`UPDATE invitations SET expires_at = now() - interval '1 second' WHERE organization_id = ${owner.organizationId} AND id = ${expired.id}`);
    expect(await mine(alice.token)).toEqual([]);
    expect(await pending(owner.token)).toEqual([]);
    expect((await accept(alice.token, expired.id)).body.errors?.[0]).toMatchObject({ message: expect.stringMatching(/expired/), extensions: { code: 'CONFLICT' } });
    await stillOutsider();

    // Renewing revives it under the same id, for another 7 days.
    const renewed = await invite(owner.token, alice.email);
    expect(renewed.id).toBe(expired.id);
    expect(new Date(renewed.expiresAt).getTime()).toBeGreaterThan(Date.now() + 7 * DAY_MS - 60_000);
    expect((await accept(alice.token, renewed.id)).body.data?.acceptInvitation).toMatchObject({ id: owner.organizationId, role: 'member' });

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
    expect((await accept(alice.token, first.id)).body.data?.acceptInvitation).toMatchObject({ role: 'admin' });
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

    // An API token acts as an admin: it invites (no inviting user), but not owners.
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
