// Members and invitations: who belongs to the organization and with which role; owners and
// admins invite people (by e-mail: the product delivers the link), see pending invitations,
// revoke them, and remove members. Tessera sends no e-mail itself.

import { actionButton, capitalized, clearMessages, confirmed, describeError, facts, field, focusedKey, h, pagedList, refocus, roleName, say, sectionHead, select, time } from '../ui.js';

const INVITATION_FIELDS = 'id email role expiresAt organization { id name }';

export default {
  id: 'members',
  title: 'Members',
  visible: (ctx) => Boolean(ctx.access?.organization),
  async render(ctx, root) {
    const view = new MembersView(ctx, root);
    await view.load();
  },
};

class MembersView {
  constructor(ctx, root) {
    this.ctx = ctx;
    this.root = root;
    this.members = [];
    this.invitations = [];
    this.memberPage = 0;
    this.invitationPage = 0;
    this.memberBlock = h('div', { id: 'member-list-block' });
    this.invitationBlock = h('div', { id: 'org-invitations' });
    root.append(sectionHead('members', 'Members'), this.memberBlock, this.invitationBlock);
  }

  async load() {
    const writer = this.ctx.canWrite();
    try {
      const answer = await this.ctx.graphql(writer ? `{ members { user { id email name } role } invitations { ${INVITATION_FIELDS} } }` : '{ members { user { id email name } role } }');
      this.members = answer.members;
      this.invitations = answer.invitations ?? [];
    } catch (error) {
      if (error.status === 401) return this.ctx.signedOut('Your session has ended. Sign in again.');
      this.memberBlock.replaceChildren(h('p', { class: 'message-error', text: `The members could not be loaded: ${describeError(error)}` }));
      return;
    }
    this.renderMembers();
    this.renderInvitations();
  }

  renderMembers() {
    const key = focusedKey(this.memberBlock);
    const me = this.ctx.access?.user?.id;
    this.memberBlock.replaceChildren(
      pagedList({
        label: 'Members',
        items: this.members,
        empty: 'Nobody is a member yet.',
        page: this.memberPage,
        onPage: (step) => {
          this.memberPage += step;
          this.renderMembers();
        },
        render: (member) => {
          const removable = this.ctx.canWrite() && member.user.id !== me && (member.role !== 'owner' || this.ctx.isOwner());
          return h(
            'li',
            { class: 'row', 'data-member': member.user.email },
            h('p', { class: 'row-title' }, h('strong', { text: member.user.name || member.user.email }), member.user.name ? h('span', { class: 'muted', text: ` ${member.user.email}` }) : null),
            facts([['Role', capitalized(roleName(member.role))]]),
            removable
              ? h('div', { class: 'actions' }, actionButton('Remove', ` ${member.user.email} from the organization`, `remove:${member.user.email}`, (button) => this.remove(member, button), { danger: true }))
              : null,
          );
        },
      }),
    );
    refocus(this.memberBlock, key);
  }

  renderInvitations() {
    if (!this.ctx.canWrite()) {
      this.invitationBlock.replaceChildren();
      return;
    }
    const key = focusedKey(this.invitationBlock);
    const firstRender = !this.inviteForm;
    if (firstRender) this.inviteForm = this.buildInviteForm();
    const isOwner = this.ctx.isOwner();
    this.invitationBlock.replaceChildren(
      h('h2', { id: 'org-invitations-title', tabindex: '-1', text: 'Pending invitations' }),
      this.inviteForm,
      h('p', { class: 'note' }, 'Tessera sends no e-mail: your product sends the invitation’s link (from the ', h('code', { text: 'organization.member_invited' }), ' event). The person joins by opening it, signed in with that e-mail, within 7 days.'),
      pagedList({
        label: 'Pending invitations',
        items: this.invitations,
        empty: 'No invitation is waiting for an answer.',
        page: this.invitationPage,
        listClass: 'invitation-list',
        onPage: (step) => {
          this.invitationPage += step;
          this.renderInvitations();
        },
        render: (invitation) => {
          // An owner invitation is the owners' to withdraw.
          const revocable = isOwner || invitation.role !== 'owner';
          return h(
            'li',
            { class: 'invitation' },
            h('p', { class: 'invitation-text' }, h('span', { class: 'invitation-email', text: invitation.email }), ` as ${roleName(invitation.role)}`),
            h('p', { class: 'muted' }, 'Open until ', time(invitation.expiresAt), '.'),
            revocable
              ? h('div', { class: 'actions' }, actionButton('Revoke', ` the invitation of ${invitation.email}`, `revoke:${invitation.id}`, (button) => this.revoke(invitation, button), { danger: true }))
              : null,
          );
        },
      }),
    );
    this.invitationBlock.querySelector('ul')?.setAttribute('id', 'org-invitation-list');
    refocus(this.invitationBlock, key);
  }

  buildInviteForm() {
    // Only owners invite owners: the choice is not offered to admins.
    const roles = this.ctx.isOwner() ? ['member', 'admin', 'owner'] : ['member', 'admin'];
    const email = h('input', { id: 'invite-email', name: 'email', type: 'email', autocomplete: 'off', required: true });
    const role = select(
      'invite-role',
      roles.map((r) => [r, capitalized(r)]),
      'member',
    );
    const form = h(
      'form',
      { id: 'invite-form', class: 'inline-form' },
      field("Invitee's e-mail", email),
      field('Role', role),
      h('button', { type: 'submit' }, 'Invite'),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const button = form.querySelector('button[type="submit"]');
      void this.ctx.run(button, async () => {
        clearMessages();
        const variables = { email: email.value.trim(), role: role.value };
        const { addMember } = await this.ctx.graphql(`mutation($email: String!, $role: String!) { addMember(email: $email, role: $role) { ${INVITATION_FIELDS} } }`, variables);
        email.value = '';
        await this.load();
        say(`${addMember.email} is invited as ${roleName(addMember.role)} until ${new Date(addMember.expiresAt).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })}.`);
        email.focus();
      });
    });
    return form;
  }

  revoke(invitation, button) {
    if (!confirmed(`Revoke the invitation of ${invitation.email}?\n\nIts link stops working; you can invite them again later.`)) return;
    return this.ctx.run(
      button,
      async () => {
        clearMessages();
        await this.ctx.graphql('mutation($id: ID!) { revokeInvitation(id: $id) { id } }', { id: invitation.id });
        await this.load();
        say(`The invitation of ${invitation.email} is revoked.`);
        this.root.querySelector('#org-invitations-title')?.focus();
      },
      { onRefresh: () => this.load() },
    );
  }

  remove(member, button) {
    if (!confirmed(`Remove ${member.user.email} from the organization?\n\nThey lose access at once; their own account stays.`)) return;
    return this.ctx.run(
      button,
      async () => {
        clearMessages();
        await this.ctx.graphql('mutation($email: String!) { removeMember(email: $email) }', { email: member.user.email });
        await this.load();
        say(`${member.user.email} is no longer a member.`);
        this.root.querySelector('#members-title')?.focus();
      },
      { onRefresh: () => this.load() },
    );
  }
}
