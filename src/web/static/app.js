// Tessera's integrations page: a plain ES module, no framework, no dependency.
// It talks to the JSON API with the HttpOnly session cookie; every unsafe request carries
// the CSRF header. It never asks for a provider token: the token endpoints refuse cookie
// sessions, and Refresh from a cookie session answers without one (docs/decisions.md 39).
// Invitations go through GraphQL (POST /query), with the same cookie and CSRF header.

import { ApiError, api, graphql } from './api.js';

const STATUS_LABELS = { connected: 'Connected', warning: 'Warning', expired: 'Expired', invalid: 'Invalid' };
const ERROR_CODE = /^[A-Z][A-Z_]{1,49}$/;
const ROLE_NAMES = { owner: 'owner', admin: 'admin', member: 'member' };
const INVITATION_FIELDS = 'id email role expiresAt organization { id name }';

const el = (id) => document.getElementById(id);
const ui = {
  notice: el('notice'),
  problem: el('problem'),
  loading: el('loading'),
  account: el('account'),
  who: el('who'),
  orgSingle: el('org-single'),
  orgForm: el('org-form'),
  orgSelect: el('org-select'),
  signOut: el('sign-out'),
  signIn: el('sign-in'),
  signInTitle: el('sign-in-title'),
  signInForm: el('sign-in-form'),
  email: el('email'),
  password: el('password'),
  integrations: el('integrations'),
  integrationsTitle: el('integrations-title'),
  reload: el('reload'),
  updated: el('updated'),
  roleNote: el('role-note'),
  list: el('integration-list'),
  noIntegrations: el('no-integrations'),
  connectTitle: el('connect-title'),
  providerList: el('provider-list'),
  allConnected: el('all-connected'),
  noProviders: el('no-providers'),
  myInvitations: el('my-invitations'),
  myInvitationList: el('my-invitation-list'),
  orgInvitations: el('org-invitations'),
  orgInvitationsTitle: el('org-invitations-title'),
  inviteForm: el('invite-form'),
  inviteEmail: el('invite-email'),
  inviteRole: el('invite-role'),
  orgInvitationList: el('org-invitation-list'),
  noOrgInvitations: el('no-org-invitations'),
};

const state = {
  access: null,
  providers: [],
  integrations: [],
  /** provider id → status object, once fetched */
  statuses: new Map(),
  /** provider id → error text when its status could not be fetched */
  statusErrors: new Map(),
  /** Invitations to the signed-in user, from any organization. */
  myInvitations: [],
  /** Pending invitations of the current organization (owners and admins only). */
  orgInvitations: [],
  /** Bumped by every load: answers of an older load are dropped. */
  generation: 0,
};

// ---------------------------------------------------------------- words

const roleName = (role) => ROLE_NAMES[role] ?? 'member';

function providerName(id) {
  // Only configured providers have names here: an id from the address bar is never shown as one.
  return state.providers.find((p) => p.id === id)?.displayName ?? 'the provider';
}

function seconds(value, fallback) {
  const n = Number.parseInt(value ?? '', 10);
  return Number.isFinite(n) && n > 0 ? n : fallback;
}

/** An API failure in words a person can act on. */
function describeError(error, provider) {
  const name = provider ? providerName(provider) : 'The provider';
  switch (error.code) {
    case 'NETWORK':
      return error.message;
    case 'UNAUTHENTICATED':
      return 'Your session has ended. Sign in again.';
    case 'CSRF_INVALID':
      return error.message === 'Origin not allowed'
        ? `Tessera does not accept requests from ${location.origin}. Open this page at the address Tessera is configured with (PUBLIC_URL).`
        : 'The security check of this page failed. Reload the page and try again.';
    case 'FORBIDDEN':
      return error.message && error.message !== 'Forbidden'
        ? `${error.message}.`.replace(/\.\.$/, '.')
        : 'You are not allowed to do that here. Owners and admins of the organization can.';
    case 'RATE_LIMITED':
      return `Too many requests. Wait ${seconds(error.retryAfter, 60)} seconds and try again.`;
    case 'PROVIDER_RATE_LIMITED':
      return `${name} is limiting requests right now. Try again in ${seconds(error.retryAfter, 60)} seconds.`;
    case 'PROVIDER_ERROR':
      return `${name} could not be reached or answered badly. Try again in a moment.`;
    case 'TOKEN_VALIDATION_FAILED':
      return `${name} no longer accepts this connection. Reconnect ${name} to restore it.`;
    case 'INTEGRATION_NOT_FOUND':
      return 'That integration no longer exists. The list has been updated.';
    case 'INVALID_REDIRECT_URI':
      return `Tessera does not accept ${location.origin} as the address to come back to. Open this page at the address Tessera is configured with (PUBLIC_URL), or add it to OAUTH_REDIRECT_ORIGINS.`;
    case 'PROVIDER_NOT_CONFIGURED':
      return `${name} is not configured on this Tessera.`;
    case 'INTERNAL':
      return `Something went wrong inside Tessera.${error.requestId ? ` Reference: ${error.requestId}.` : ''}`;
    default:
      return error.message || 'Something went wrong.';
  }
}

/** The outcome of a connect flow, from the query string the callback redirected to. */
function describeOutcome(outcome) {
  const name = providerName(outcome.provider);
  if (outcome.status === 'connected') return { ok: true, text: `${name} is connected.` };
  const words = {
    ACCESS_DENIED: `You declined access at ${name}, so nothing was connected.`,
    OAUTH_EXCHANGE_FAILED: `${name} refused the authorization (it may have expired). Nothing was connected; try again.`,
    TOKEN_VALIDATION_FAILED: `${name} rejected the new connection. Nothing was connected; try again.`,
    PROVIDER_ERROR: `${name} could not be reached while connecting. Nothing was connected; try again in a moment.`,
    PROVIDER_RATE_LIMITED: `${name} is limiting requests right now. Nothing was connected; try again in a minute.`,
    INVALID_OAUTH_STATE: 'That connection attempt expired, was already used, or was started in another organization. Start again.',
    FORBIDDEN: `Only owners and admins can connect ${name}.`,
  };
  return { ok: false, text: words[outcome.error] ?? `Connecting ${name} failed${outcome.error ? ` (${outcome.error})` : ''}. Try again.` };
}

function formatTime(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

// ---------------------------------------------------------------- messages

function say(text) {
  ui.problem.textContent = '';
  ui.notice.textContent = text;
}

function complain(text) {
  ui.notice.textContent = '';
  ui.problem.textContent = text;
}

function clearMessages() {
  ui.notice.textContent = '';
  ui.problem.textContent = '';
}

// ---------------------------------------------------------------- DOM helpers

/** Creates an element; children are nodes or text (never parsed as HTML). */
function h(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

/** Text for screen readers only, e.g. which provider a "Delete" button is about. */
const hidden = (text) => h('span', { class: 'visually-hidden', text });

/** The focus key of the focused control inside `container`, if any. */
function focusedKey(container) {
  const focused = document.activeElement;
  return focused && container.contains(focused) ? focused.dataset?.focusKey : undefined;
}

/** Puts keyboard focus back on the control with that key, if it still exists. */
function refocus(container, key) {
  if (key) container.querySelector(`[data-focus-key="${CSS.escape(key)}"]`)?.focus();
}

/** Replaces a node, keeping keyboard focus on the "same" control if it still exists. */
function replaceKeepingFocus(oldNode, newNode) {
  const key = focusedKey(oldNode);
  oldNode.replaceWith(newNode);
  refocus(newNode, key);
}

/**
 * Marks a control busy without `disabled`: a disabled button drops keyboard focus to the
 * page, while this keeps it where the person is. Busy controls ignore clicks.
 */
function setBusy(control, busy) {
  if (!control) return;
  if (busy) control.setAttribute('aria-disabled', 'true');
  else control.removeAttribute('aria-disabled');
}

const isBusy = (control) => control?.getAttribute('aria-disabled') === 'true';

function show(node, visible) {
  node.hidden = !visible;
}

// ---------------------------------------------------------------- views

function canWrite() {
  const role = state.access?.organization?.role;
  return role === 'owner' || role === 'admin';
}

function showSignIn(message) {
  state.access = null;
  show(ui.loading, false);
  show(ui.account, false);
  show(ui.integrations, false);
  show(ui.myInvitations, false);
  show(ui.orgInvitations, false);
  show(ui.signIn, true);
  if (message) complain(message);
}

function renderAccount() {
  const { user, organization, organizations } = state.access;
  ui.who.replaceChildren(
    hidden('Signed in as '),
    h('span', { class: 'who-name', text: user?.name || user?.email || 'API token' }),
    user?.name && user?.email ? h('span', { class: 'who-email', text: ` ${user.email}` }) : null,
  );
  if (organizations.length > 1) {
    ui.orgSelect.replaceChildren(
      ...organizations.map((org) =>
        h('option', { value: org.id, selected: org.id === organization.id, text: `${org.name} (${roleName(org.role)})` }),
      ),
    );
    show(ui.orgForm, true);
    show(ui.orgSingle, false);
  } else {
    ui.orgSingle.replaceChildren(hidden('Organization: '), `${organization.name} (${roleName(organization.role)})`);
    show(ui.orgSingle, true);
    show(ui.orgForm, false);
  }
  show(ui.account, true);
  show(ui.roleNote, !canWrite());
  show(ui.connectTitle, canWrite());
  show(ui.providerList, canWrite());
  // Only owners invite owners: the choice is not offered to admins.
  const roles = organization.role === 'owner' ? ['member', 'admin', 'owner'] : ['member', 'admin'];
  const chosen = ui.inviteRole.value;
  ui.inviteRole.replaceChildren(...roles.map((role) => h('option', { value: role, selected: role === chosen, text: role.charAt(0).toUpperCase() + role.slice(1) })));
}

/** A card's button: visible `label`, and `context` for screen readers (which provider it acts on). */
function actionButton(label, context, focusKey, onClick, { primary = false, danger = false } = {}) {
  return h(
    'button',
    {
      type: 'button',
      class: [primary ? 'primary' : '', danger ? 'danger' : ''].filter(Boolean).join(' '),
      'data-focus-key': focusKey,
      onclick: (event) => onClick(event.currentTarget),
    },
    label,
    hidden(context),
  );
}

function integrationCard(integration) {
  const provider = integration.provider;
  const name = providerName(provider);
  const status = state.statuses.get(provider);
  const statusError = state.statusErrors.get(provider);
  const value = status?.status ?? integration.status;
  const label = STATUS_LABELS[value] ?? value;
  const titleId = `integration-${provider}-title`;
  const actions = new Set(status?.actions ?? []);

  const facts = [];
  if (status) {
    facts.push(
      h('dt', { text: 'Last checked' }),
      h('dd', {}, status.lastValidated ? h('time', { datetime: status.lastValidated, text: formatTime(status.lastValidated) }) : 'Not yet'),
    );
    if (status.lastError) facts.push(h('dt', { text: 'Problem' }), h('dd', { text: status.lastError }));
    if (status.detectedAt) facts.push(h('dt', { text: 'Since' }), h('dd', {}, h('time', { datetime: status.detectedAt, text: formatTime(status.detectedAt) })));
  }
  facts.push(h('dt', { text: 'Added' }), h('dd', {}, h('time', { datetime: integration.createdAt, text: formatTime(integration.createdAt) })));

  const buttons = [];
  if (canWrite()) {
    if (actions.has('reconnect')) {
      buttons.push(actionButton('Reconnect', ` ${name}`, `reconnect:${provider}`, (button) => startConnect(provider, button), { primary: true }));
    }
    // Refreshing is offered whenever the status allows it; an invalid connection only reconnects.
    if (actions.has('refresh') || value === 'connected') {
      buttons.push(
        actionButton('Refresh token', ` for ${name}`, `refresh:${provider}`, (button) => refreshToken(provider, button), { primary: actions.has('refresh') }),
      );
    }
    buttons.push(actionButton('Delete', ` the ${name} integration`, `delete:${provider}`, (button) => deleteIntegration(integration, button), { danger: true }));
  }

  let message;
  if (status) message = h('p', { class: 'message', text: status.message });
  else if (statusError) message = h('p', { class: 'message message-error', text: statusError });
  else message = h('p', { class: 'message muted', text: `Checking with ${name}…` });

  return h(
    'li',
    { class: `card card-${value}`, 'data-provider': provider, 'aria-busy': status || statusError ? 'false' : 'true' },
    h(
      'article',
      { 'aria-labelledby': titleId },
      h(
        'div',
        { class: 'card-head' },
        h('h2', { id: titleId, text: name }),
        h('span', { class: `badge badge-${value}` }, hidden('Status: '), label),
      ),
      h('p', { class: 'integration-name', text: integration.name }),
      connectedVia(integration),
      message,
      actions.has('configure')
        ? h('p', { class: 'hint', text: `If this persists, check the app's permissions and configuration at ${name}.` })
        : null,
      h('dl', { class: 'facts' }, facts),
      buttons.length ? h('div', { class: 'actions' }, buttons) : null,
    ),
  );
}

/** Which end user connected it through a connect link (CONTRACT.md §5a), if one did. */
function connectedVia(integration) {
  const via = integration.connectedVia;
  if (!via) return null;
  const who = via.endUser ? via.endUser.displayName || via.endUser.email || via.endUser.id : 'an end user';
  return h('p', { class: 'connected-via', text: `Connected by ${who} through a connect link` });
}

function renderIntegrations() {
  const key = focusedKey(ui.integrations);
  ui.list.replaceChildren(...state.integrations.map(integrationCard));
  show(ui.list, state.integrations.length > 0);
  show(ui.noIntegrations, state.integrations.length === 0);

  const connected = new Set(state.integrations.map((i) => i.provider));
  const available = state.providers.filter((p) => !connected.has(p.id));
  ui.providerList.replaceChildren(
    ...available.map((p) =>
      h(
        'li',
        {},
        h(
          'button',
          { type: 'button', class: 'primary', 'data-focus-key': `connect:${p.id}`, onclick: (e) => startConnect(p.id, e.currentTarget) },
          `Connect ${p.displayName}`,
        ),
      ),
    ),
  );
  const writer = canWrite();
  show(ui.providerList, writer && available.length > 0);
  show(ui.allConnected, writer && state.providers.length > 0 && available.length === 0);
  show(ui.noProviders, writer && state.providers.length === 0);
  refocus(ui.integrations, key);
}

function myInvitationItem(invitation) {
  const organization = invitation.organization.name;
  return h(
    'li',
    { class: 'invitation' },
    h('p', { class: 'invitation-text' }, h('strong', { text: organization }), ` invites you to join as ${roleName(invitation.role)}.`),
    h('p', { class: 'muted' }, 'Open until ', h('time', { datetime: invitation.expiresAt, text: formatTime(invitation.expiresAt) }), '.'),
    // Accepting needs the invitation's link (its token), which only the invitation's e-mail carries.
    h('p', { class: 'note' }, 'To accept, open the link in the invitation e-mail.'),
    h('div', { class: 'actions' }, actionButton('Decline', ` the invitation to ${organization}`, `decline:${invitation.id}`, (button) => declineInvitation(invitation, button))),
  );
}

function orgInvitationItem(invitation) {
  // An owner invitation is the owners' to withdraw.
  const revocable = state.access?.organization?.role === 'owner' || invitation.role !== 'owner';
  return h(
    'li',
    { class: 'invitation' },
    h('p', { class: 'invitation-text' }, h('span', { class: 'invitation-email', text: invitation.email }), ` as ${roleName(invitation.role)}`),
    h('p', { class: 'muted' }, 'Open until ', h('time', { datetime: invitation.expiresAt, text: formatTime(invitation.expiresAt) }), '.'),
    revocable
      ? h('div', { class: 'actions' }, actionButton('Revoke', ` the invitation of ${invitation.email}`, `revoke:${invitation.id}`, (button) => revokeInvitation(invitation, button), { danger: true }))
      : null,
  );
}

function renderInvitations() {
  const mine = focusedKey(ui.myInvitations);
  ui.myInvitationList.replaceChildren(...state.myInvitations.map(myInvitationItem));
  show(ui.myInvitations, state.myInvitations.length > 0);
  refocus(ui.myInvitations, mine);

  const theirs = focusedKey(ui.orgInvitations);
  ui.orgInvitationList.replaceChildren(...state.orgInvitations.map(orgInvitationItem));
  show(ui.orgInvitationList, state.orgInvitations.length > 0);
  show(ui.noOrgInvitations, state.orgInvitations.length === 0);
  show(ui.orgInvitations, canWrite());
  refocus(ui.orgInvitations, theirs);
}

function updateCard(provider) {
  const integration = state.integrations.find((i) => i.provider === provider);
  const old = ui.list.querySelector(`li[data-provider="${CSS.escape(provider)}"]`);
  if (integration && old) replaceKeepingFocus(old, integrationCard(integration));
}

// ---------------------------------------------------------------- loading

/** The signed-in user's invitations and, for owners and admins, the organization's pending ones. */
function fetchInvitations(writer) {
  const query = writer ? `{ myInvitations { ${INVITATION_FIELDS} } invitations { ${INVITATION_FIELDS} } }` : `{ myInvitations { ${INVITATION_FIELDS} } }`;
  return graphql(query);
}

async function refreshInvitations() {
  const answer = await fetchInvitations(canWrite());
  state.myInvitations = answer.myInvitations;
  state.orgInvitations = answer.invitations ?? [];
  renderInvitations();
}

/** Loads who is signed in, the providers and the integrations, then each integration's live status. */
async function loadAll({ announce = false } = {}) {
  const generation = ++state.generation;
  setBusy(ui.reload, true);
  ui.list.setAttribute('aria-busy', 'true');
  try {
    let access;
    try {
      access = await api('GET', '/v1/account/access');
    } catch (error) {
      if (generation !== state.generation) return;
      if (error.status === 401) showSignIn();
      else {
        show(ui.loading, false);
        complain(describeError(error));
      }
      return;
    }
    const writer = access.organization?.role === 'owner' || access.organization?.role === 'admin';
    let invitationsError = null;
    const [providers, list, invitations] = await Promise.all([
      api('GET', '/v1/providers'),
      api('GET', '/v1/integrations'),
      // Invitations failing to load must not take the integrations with them.
      fetchInvitations(writer).catch((error) => {
        invitationsError = error;
        return { myInvitations: [], invitations: [] };
      }),
    ]);
    if (generation !== state.generation) return;
    state.access = access;
    state.providers = providers.providers;
    state.integrations = list.integrations;
    state.statuses = new Map();
    state.statusErrors = new Map();
    state.myInvitations = invitations.myInvitations;
    state.orgInvitations = invitations.invitations ?? [];
    show(ui.loading, false);
    show(ui.signIn, false);
    show(ui.integrations, true);
    renderAccount();
    renderIntegrations();
    renderInvitations();
    if (invitationsError) complain(`The invitations could not be loaded: ${describeError(invitationsError)}`);

    await Promise.all(
      state.integrations.map(async ({ provider }) => {
        try {
          const answer = await api('GET', `/v1/integrations/${encodeURIComponent(provider)}/status`);
          if (generation !== state.generation) return;
          state.statuses.set(provider, answer.status);
        } catch (error) {
          if (generation !== state.generation) return;
          state.statusErrors.set(provider, `The status could not be checked: ${describeError(error, provider)}`);
        }
        updateCard(provider);
      }),
    );
    if (generation !== state.generation) return;
    ui.updated.replaceChildren('Status as of ', h('time', { datetime: new Date().toISOString(), text: formatTime(new Date().toISOString()) }), '.');
    if (announce) say(`Status updated: ${summary()}.`);
  } catch (error) {
    if (generation !== state.generation) return;
    if (error.status === 401) showSignIn(describeError(error));
    else complain(describeError(error));
  } finally {
    if (generation === state.generation) {
      setBusy(ui.reload, false);
      ui.list.setAttribute('aria-busy', 'false');
    }
  }
}

function summary() {
  if (state.integrations.length === 0) return 'no integrations';
  return state.integrations
    .map(({ provider, status }) => `${providerName(provider)} ${(STATUS_LABELS[state.statuses.get(provider)?.status ?? status] ?? status).toLowerCase()}`)
    .join(', ');
}

// ---------------------------------------------------------------- actions

/** Runs an action with its button busy (a second click does nothing); failures are shown in words (401 → sign in). */
async function run(button, provider, action) {
  if (isBusy(button)) return;
  setBusy(button, true);
  try {
    await action();
  } catch (error) {
    if (error.status === 401) {
      showSignIn(describeError(error));
      return;
    }
    complain(describeError(error, provider));
    // The page was out of date (an integration or invitation changed elsewhere): show what is true now.
    if (['INTEGRATION_NOT_FOUND', 'TOKEN_VALIDATION_FAILED', 'NOT_FOUND', 'CONFLICT'].includes(error.code)) await loadAll();
  } finally {
    setBusy(button, false);
  }
}

function startConnect(provider, button) {
  return run(button, provider, async () => {
    clearMessages();
    const answer = await api('POST', '/v1/integrations/oauth/start', { provider, redirectUri: `${location.origin}/` });
    const target = new URL(answer.authUrl);
    if (target.protocol !== 'https:' && target.protocol !== 'http:') throw new ApiError(0, 'UNKNOWN', 'Tessera answered with an unusable address.');
    say(`Taking you to ${providerName(provider)}…`);
    location.assign(target.href);
  });
}

function refreshToken(provider, button) {
  return run(button, provider, async () => {
    clearMessages();
    const answer = await api('POST', `/v1/integrations/${encodeURIComponent(provider)}/refresh`);
    await loadAll();
    say(`${answer.message}.`);
  });
}

function deleteIntegration(integration, button) {
  if (isBusy(button)) return;
  const name = providerName(integration.provider);
  // The browser's own dialog: keyboard and screen-reader friendly, and it cannot be styled away.
  if (!window.confirm(`Delete the ${name} integration "${integration.name}"?\n\nIts tokens are removed from Tessera and the access is revoked at ${name}.`)) return;
  return run(button, integration.provider, async () => {
    clearMessages();
    const answer = await api('DELETE', `/v1/integrations/${encodeURIComponent(integration.id)}`);
    await loadAll();
    say(`${answer.message}.`);
    ui.integrationsTitle.focus();
  });
}

function declineInvitation(invitation, button) {
  return run(button, undefined, async () => {
    clearMessages();
    await graphql(`mutation($id: ID!) { declineInvitation(id: $id) { id } }`, { id: invitation.id });
    await refreshInvitations();
    say(`You declined the invitation to ${invitation.organization.name}.`);
    if (ui.myInvitations.hidden) ui.integrationsTitle.focus();
  });
}

function revokeInvitation(invitation, button) {
  return run(button, undefined, async () => {
    clearMessages();
    await graphql(`mutation($id: ID!) { revokeInvitation(id: $id) { id } }`, { id: invitation.id });
    await refreshInvitations();
    say(`The invitation of ${invitation.email} is revoked.`);
    ui.orgInvitationsTitle.focus();
  });
}

async function invite(event) {
  event.preventDefault();
  const button = ui.inviteForm.querySelector('button[type="submit"]');
  await run(button, undefined, async () => {
    clearMessages();
    const variables = { email: ui.inviteEmail.value.trim(), role: ui.inviteRole.value };
    const { addMember } = await graphql(`mutation($email: String!, $role: String!) { addMember(email: $email, role: $role) { ${INVITATION_FIELDS} } }`, variables);
    ui.inviteEmail.value = '';
    await refreshInvitations();
    say(`${addMember.email} is invited as ${roleName(addMember.role)} until ${formatTime(addMember.expiresAt)}.`);
    ui.inviteEmail.focus();
  });
}

async function signIn(event) {
  event.preventDefault();
  const submit = ui.signInForm.querySelector('button[type="submit"]');
  submit.disabled = true;
  clearMessages();
  try {
    // Public route: no session yet, so no CSRF header; the Origin check still applies.
    await api('POST', '/v1/login', { email: ui.email.value.trim(), password: ui.password.value }, { csrf: false });
    ui.password.value = '';
    await loadAll();
    if (state.access) {
      say(`Signed in as ${state.access.user?.email ?? 'you'}.`);
      ui.integrationsTitle.focus();
    }
  } catch (error) {
    complain(error.code === 'UNAUTHENTICATED' ? 'The e-mail or password is not right. Try again.' : describeError(error));
    ui.password.focus();
  } finally {
    submit.disabled = false;
  }
}

async function signOut() {
  await run(ui.signOut, undefined, async () => {
    await api('POST', '/v1/logout');
    state.generation++;
    showSignIn();
    say('Signed out.');
    ui.signInTitle.focus();
  });
}

async function switchOrganization(event) {
  event.preventDefault();
  const organizationId = ui.orgSelect.value;
  if (organizationId === state.access?.organization?.id) return;
  const button = ui.orgForm.querySelector('button[type="submit"]');
  await run(button, undefined, async () => {
    clearMessages();
    await api('POST', '/v1/account/switch', { organizationId });
    await loadAll();
    say(`Now working in ${state.access?.organization?.name ?? 'the other organization'}.`);
  });
}

// ---------------------------------------------------------------- start

/** Reads `?status=…` left by the OAuth callback, then removes it from the address bar. */
function takeOutcome() {
  const params = new URLSearchParams(location.search);
  const status = params.get('status');
  if (status !== 'connected' && status !== 'error') return null;
  const provider = params.get('provider') ?? '';
  const error = params.get('error') ?? '';
  history.replaceState(null, '', location.pathname);
  // These values come from the address bar: anyone can craft them. The provider is only looked up among the
  // configured ones, and only an error code's shape is shown (as text).
  return { status, provider, error: ERROR_CODE.test(error) ? error : '' };
}

async function start() {
  ui.signInForm.addEventListener('submit', signIn);
  ui.signOut.addEventListener('click', signOut);
  ui.orgForm.addEventListener('submit', switchOrganization);
  ui.inviteForm.addEventListener('submit', invite);
  ui.reload.addEventListener('click', () => {
    if (isBusy(ui.reload)) return;
    clearMessages();
    void loadAll({ announce: true });
  });
  // Coming back with the Back button from the provider's page restores a stale page: reload its data.
  window.addEventListener('pageshow', (event) => {
    if (event.persisted) void loadAll();
  });

  const outcome = takeOutcome();
  await loadAll();
  if (outcome) {
    const { ok, text } = describeOutcome(outcome);
    if (ok) say(text);
    else complain(text);
  }
}

void start();
