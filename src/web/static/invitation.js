// The page an invitation's link opens: /invitations/<id>#token=<token>. The token stays in the
// fragment, so it reaches no server log and no Referer; it leaves the browser only in the body of
// the acceptInvitation call. The person signs in (or registers) with the invited e-mail, sees the
// invitation and accepts or declines it.

import { api, graphql } from './api.js';
import { errorWords } from './error-words.js';

const ID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const TOKEN = /^[A-Za-z0-9_-]{43}$/;
const ROLE_NAMES = { owner: 'owner', admin: 'admin', member: 'member' };

const el = (id) => document.getElementById(id);
const ui = {
  title: el('title'),
  notice: el('notice'),
  problem: el('problem'),
  loading: el('loading'),
  account: el('account'),
  who: el('who'),
  signOut: el('sign-out'),
  signIn: el('sign-in'),
  signInTitle: el('sign-in-title'),
  signInForm: el('sign-in-form'),
  signInSubmit: el('sign-in-submit'),
  mode: el('mode'),
  nameField: el('name-field'),
  name: el('name'),
  email: el('email'),
  password: el('password'),
  invitation: el('invitation'),
  invitationText: el('invitation-text'),
  invitationExpiry: el('invitation-expiry'),
  accept: el('accept'),
  decline: el('decline'),
  done: el('done'),
};

const id = decodeURIComponent(location.pathname.split('/').pop() ?? '');
const token = new URLSearchParams(location.hash.slice(1)).get('token') ?? '';
let registering = false;
let invitation = null;

const show = (node, visible) => {
  node.hidden = !visible;
};

function say(text) {
  ui.problem.textContent = '';
  ui.notice.textContent = text;
}

function complain(text) {
  ui.notice.textContent = '';
  ui.problem.textContent = text;
}

/** A failure in words a person can act on (the one table: error-words.js). */
function describe(error) {
  return errorWords('invitation', error);
}

function showSignIn() {
  show(ui.loading, false);
  show(ui.account, false);
  show(ui.invitation, false);
  show(ui.signIn, true);
}

function setRegistering(on) {
  registering = on;
  show(ui.nameField, on);
  ui.signInTitle.textContent = on ? 'Create your account to answer the invitation' : 'Sign in to answer the invitation';
  ui.signInSubmit.textContent = on ? 'Create account' : 'Sign in';
  ui.mode.textContent = on ? 'Already have an account? Sign in' : 'No account yet? Create one';
  ui.password.autocomplete = on ? 'new-password' : 'current-password';
}

/** Who is signed in, then this link's invitation among theirs. */
async function load() {
  show(ui.loading, true);
  let access;
  try {
    access = await api('GET', '/v1/account/access');
  } catch (error) {
    if (error.code === 'UNAUTHENTICATED') return showSignIn();
    show(ui.loading, false);
    return complain(describe(error));
  }
  show(ui.signIn, false);
  show(ui.account, true);
  const email = access.user?.email ?? '';
  ui.who.textContent = `Signed in as ${email}`;
  const { myInvitations } = await graphql('{ myInvitations { id role expiresAt organization { name } } }').catch((error) => {
    complain(describe(error));
    return { myInvitations: null };
  });
  show(ui.loading, false);
  if (!myInvitations) return;
  invitation = myInvitations.find((item) => item.id === id) ?? null;
  if (!invitation) {
    complain(
      `No open invitation for ${email} matches this link. It may have been answered, revoked or expired, or it was sent to another address: then choose "Use another account".`,
    );
    return;
  }
  const role = ROLE_NAMES[invitation.role] ?? 'member';
  const organization = document.createElement('strong');
  organization.textContent = invitation.organization.name;
  ui.invitationText.replaceChildren(organization, ` invites you to join as ${role}.`);
  ui.invitationExpiry.textContent = `Open until ${new Date(invitation.expiresAt).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })}.`;
  show(ui.invitation, true);
  ui.accept.focus();
}

async function signIn(event) {
  event.preventDefault();
  ui.signInSubmit.disabled = true;
  complain('');
  const email = ui.email.value.trim();
  const password = ui.password.value;
  try {
    // Public routes: no session yet, so no CSRF header; the Origin check still applies.
    if (registering) {
      const name = ui.name.value.trim();
      await api('POST', '/v1/register', { email, password, ...(name ? { name } : {}) }, { csrf: false });
    }
    await api('POST', '/v1/login', { email, password }, { csrf: false });
    ui.password.value = '';
    await load();
  } catch (error) {
    if (error.code === 'UNAUTHENTICATED') complain('The e-mail or password is not right. Try again.');
    else if (registering && error.code === 'INVALID_INPUT') complain('Enter an e-mail address and a password of 12 to 256 characters.');
    else complain(describe(error));
    ui.password.focus();
  } finally {
    ui.signInSubmit.disabled = false;
  }
}

/** Runs an answer (accept or decline) with both buttons held, then shows what it did. */
async function answer(run) {
  ui.accept.disabled = true;
  ui.decline.disabled = true;
  complain('');
  try {
    say(await run());
    show(ui.invitation, false);
    show(ui.done, true);
    // The token is spent: it need not stay in the address bar or the history.
    history.replaceState(null, '', location.pathname);
    ui.title.focus();
  } catch (error) {
    if (error.code === 'UNAUTHENTICATED') showSignIn();
    // Listed for this account, yet refused: the link's token is not this invitation's current one.
    if (error.code === 'NOT_FOUND') complain('This link no longer opens the invitation: a newer invitation e-mail has replaced it. Use the link in the latest one.');
    else complain(describe(error));
  } finally {
    ui.accept.disabled = false;
    ui.decline.disabled = false;
  }
}

const accept = () =>
  answer(async () => {
    const mutation = 'mutation($id: ID!, $token: String!) { acceptInvitation(id: $id, token: $token) { id name role } }';
    const { acceptInvitation: joined } = await graphql(mutation, { id, token });
    return `You joined ${joined.name} as ${ROLE_NAMES[joined.role] ?? 'member'}.`;
  });

const decline = () =>
  answer(async () => {
    await graphql('mutation($id: ID!) { declineInvitation(id: $id) { id } }', { id });
    return `You declined the invitation to ${invitation?.organization.name ?? 'the organization'}.`;
  });

async function signOut() {
  try {
    await api('POST', '/v1/logout');
  } catch {
    // Signed out already, or unreachable: the form is the way on either way.
  }
  say('');
  complain('');
  showSignIn();
  ui.signInTitle.focus();
}

ui.signInForm.addEventListener('submit', signIn);
ui.mode.addEventListener('click', () => setRegistering(!registering));
ui.signOut.addEventListener('click', signOut);
ui.accept.addEventListener('click', accept);
ui.decline.addEventListener('click', decline);
// A link pasted over this one in the same tab changes only the fragment: start again with it.
window.addEventListener('hashchange', () => location.reload());

if (ID.test(id) && TOKEN.test(token)) void load();
else {
  show(ui.loading, false);
  complain('This invitation link is incomplete. Open the link in the invitation e-mail again, copying all of it.');
}
