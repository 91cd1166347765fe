// The console's header and banners: who is signed in, the organization switcher (external ids
// beside names: a product's customers often share names), the banner of an organization a
// system administrator entered, and the invitations waiting for the signed-in person.

import { actionButton, fill, h, hidden, roleName, show, time } from './ui.js';

/** An organization as the switcher names it. */
export function organizationLabel(org) {
  return `${org.name}${org.externalId ? ` · ${org.externalId}` : ''} (${roleName(org.role)})`;
}

/** The signed-in person and where they act: one organization's name, or the switcher. */
export function drawAccount(ui, { access, organizations, entered }) {
  const { user, organization } = access;
  fill(
    ui.who,
    hidden('Signed in as '),
    h('span', { class: 'who-name', text: user?.name || user?.email || 'API token' }),
    user?.name && user?.email ? h('span', { class: 'who-email', text: ` ${user.email}` }) : null,
  );
  const current = entered ? null : organizations.find((org) => org.id === organization.id);
  if (organizations.length > 1 || entered) {
    fill(
      ui.orgSelect,
      entered ? h('option', { value: '', selected: true, text: `${entered.name} (entered, read-only)` }) : null,
      organizations.map((org) => h('option', { value: org.id, selected: org.id === current?.id, text: organizationLabel(org) })),
    );
    show(ui.orgForm, true);
    show(ui.orgSingle, false);
  } else {
    fill(ui.orgSingle, hidden('Organization: '), organizationLabel(current ?? { ...organization, externalId: null }));
    show(ui.orgSingle, true);
    show(ui.orgForm, false);
  }
  show(ui.account, true);
}

/** The banner of an organization a system administrator entered, with the way out. */
export function drawEntered(banner, entered, onLeave) {
  show(banner, entered !== null);
  if (!entered) return;
  fill(
    banner,
    h(
      'p',
      {},
      'You are viewing ',
      h('strong', { text: entered.name }),
      entered.externalId ? ` (${entered.externalId})` : '',
      ' as a system administrator. You can read here; changes are for its own people. Each page you open is recorded in its audit log.',
    ),
    actionButton('Leave', ` ${entered.name}`, 'leave', onLeave),
  );
}

/** Invitations to the signed-in person, from any organization: declined here, accepted through their link. */
export function drawMyInvitations(ui, invitations, onDecline) {
  ui.myInvitationList.replaceChildren(
    ...invitations.map((invitation) => {
      const organization = invitation.organization.name;
      return h(
        'li',
        { class: 'invitation' },
        h('p', { class: 'invitation-text' }, h('strong', { text: organization }), ` invites you to join as ${roleName(invitation.role)}.`),
        h('p', { class: 'muted' }, 'Open until ', time(invitation.expiresAt), '.'),
        // Accepting needs the invitation's link (its token), which only the invitation's e-mail carries.
        h('p', { class: 'note' }, 'To accept, open the link in the invitation e-mail.'),
        h('div', { class: 'actions' }, actionButton('Decline', ` the invitation to ${organization}`, `decline:${invitation.id}`, (button) => onDecline(invitation, button))),
      );
    }),
  );
  show(ui.myInvitations, invitations.length > 0);
}

const ENTERED_KEY = 'tessera.entered';

/** The organization a system administrator entered in this tab, kept across reloads (a connect flow's return, F5). */
export function storedEntered() {
  try {
    const value = JSON.parse(sessionStorage.getItem(ENTERED_KEY) ?? 'null');
    return value && typeof value.id === 'string' ? value : null;
  } catch {
    return null;
  }
}

export function storeEntered(organization) {
  if (organization) sessionStorage.setItem(ENTERED_KEY, JSON.stringify(organization));
  else sessionStorage.removeItem(ENTERED_KEY);
}
