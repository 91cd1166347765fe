// Tessera's console: plain ES modules, no framework, no build step, no dependency. This module
// is the shell — sign-in, the account and organization switcher, invitations to the signed-in
// person, the sections' navigation and a system administrator entering an organization. Each
// section is a module of ./sections/ rendered into #view with the helpers of ./ui.js. Everything
// goes through the public JSON API and GraphQL with the HttpOnly session cookie; every unsafe
// request carries the CSRF header (./api.js). No page ever asks for a provider token.

import { drawAccount, drawEntered, drawMyInvitations, storedEntered, storeEntered } from './account.js';
import { api, graphql } from './api.js';
import apiTokens from './sections/api-tokens.js';
import apps from './sections/apps.js';
import audit from './sections/audit.js';
import deliveries from './sections/deliveries.js';
import grants from './sections/grants.js';
import integrations from './sections/integrations.js';
import members from './sections/members.js';
import organizations from './sections/organizations.js';
import serviceTokens from './sections/service-tokens.js';
import sessions from './sections/sessions.js';
import { clearMessages, complain, describeError, h, say, show, whileBusy } from './ui.js';

const SECTIONS = [integrations, apps, members, apiTokens, sessions, grants, audit, organizations, serviceTokens, deliveries];
const INVITATION_FIELDS = 'id email role expiresAt organization { id name }';

const el = (id) => document.getElementById(id);
const ui = {
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
  myInvitations: el('my-invitations'),
  myInvitationList: el('my-invitation-list'),
  nav: el('sections'),
  links: el('section-links'),
  entered: el('entered'),
  view: el('view'),
};

const state = {
  /** `GET /v1/account/access`. */
  access: null,
  /** The signed-in person's organizations, with their external ids (GraphQL). */
  organizations: [],
  /** The providers this organization may connect (`GET /v1/providers`): `{id, displayName, authMode, apps, …}`. */
  providers: [],
  myInvitations: [],
  /** The organization a system administrator entered to read: `{id, name, externalId}`, or null. */
  entered: storedEntered(),
  section: null,
  /** Bumped by every load: answers of an older load are dropped. */
  generation: 0,
};

const role = () => state.access?.organization?.role;

/** What every section gets: the caller, the API as the current view must call it, and the shell's services. */
const ctx = {
  get access() {
    return state.access;
  },
  get providers() {
    return state.providers;
  },
  get entered() {
    return state.entered;
  },
  /** Calls in the organization being viewed (a system administrator's entered one: read-only there). */
  api: (method, path, body) => api(method, path, body, { organization: state.entered?.id ?? null }),
  graphql: (query, variables) => graphql(query, variables, { organization: state.entered?.id ?? null }),
  /** Calls about the deployment itself (system administrators' sections), never inside an entered organization. */
  deployment: { api, graphql },
  canWrite: () => !state.entered && (role() === 'owner' || role() === 'admin'),
  isOwner: () => !state.entered && role() === 'owner',
  isSystemAdmin: () => state.access?.user?.systemAdmin === true,
  providerName: (id) => state.providers.find((p) => p.id === id)?.displayName ?? 'the provider',
  /**
   * Runs an action with its button busy (a second click does nothing). A failure is said in
   * words (401: sign in again); `refreshOn` codes mean the view was out of date: it is redrawn.
   */
  run: (button, action, { name, refreshOn = ['NOT_FOUND', 'CONFLICT', 'INTEGRATION_NOT_FOUND'], onRefresh } = {}) =>
    whileBusy(button, action, async (error) => {
      if (error.status === 401) return showSignIn(describeError(error));
      complain(describeError(error, name));
      if (refreshOn.includes(error.code)) await onRefresh?.();
    }),
  signedOut: (message) => showSignIn(message),
  enter,
  leave,
  go,
  reload: () => loadAll(),
  refreshAccount,
  refreshProviders,
};

/** Re-reads the providers this organization may connect (an app added or deleted changes them, docs/contract.md §5e). */
async function refreshProviders() {
  const generation = state.generation;
  try {
    const answer = await api('GET', '/v1/providers');
    if (generation === state.generation) state.providers = answer.providers;
  } catch {
    // Kept as they were: the section's own reload says what is wrong, if anything is.
  }
}

/** Re-reads the person's organizations and invitations (created or answered elsewhere) without redrawing the section. */
async function refreshAccount() {
  const generation = state.generation;
  try {
    const own = await graphql(`{ organizations { id name externalId role } myInvitations { ${INVITATION_FIELDS} } }`);
    if (generation !== state.generation || !state.access) return;
    state.organizations = own.organizations;
    state.myInvitations = own.myInvitations;
    renderAccount();
    renderMyInvitations();
  } catch {
    // The section's own reload says what is wrong, if anything is.
  }
}

// ---------------------------------------------------------------- sign-in and account

function showSignIn(message) {
  state.access = null;
  state.generation++;
  show(ui.loading, false);
  show(ui.account, false);
  show(ui.nav, false);
  show(ui.entered, false);
  show(ui.myInvitations, false);
  ui.view.replaceChildren();
  show(ui.signIn, true);
  if (message) complain(message);
}

function renderAccount() {
  drawAccount(ui, { access: state.access, organizations: state.organizations, entered: state.entered });
}

function renderEntered() {
  drawEntered(ui.entered, state.entered, (button) => ctx.run(button, leave));
}

function renderMyInvitations() {
  drawMyInvitations(ui, state.myInvitations, declineInvitation);
}

function declineInvitation(invitation, button) {
  return ctx.run(button, async () => {
    clearMessages();
    await graphql('mutation($id: ID!) { declineInvitation(id: $id) { id } }', { id: invitation.id });
    state.myInvitations = (await graphql(`{ myInvitations { ${INVITATION_FIELDS} } }`)).myInvitations;
    renderMyInvitations();
    say(`You declined the invitation to ${invitation.organization.name}.`);
    if (ui.myInvitations.hidden) el(`${state.section?.id}-title`)?.focus();
  });
}

// ---------------------------------------------------------------- sections

function visibleSections() {
  return SECTIONS.filter((section) => section.visible(ctx));
}

function renderNav() {
  const current = state.section?.id;
  ui.links.replaceChildren(
    ...visibleSections().map((section) =>
      h('li', {}, h('a', { href: `#${section.id}`, 'aria-current': section.id === current ? 'page' : null, text: section.title })),
    ),
  );
  show(ui.nav, true);
}

/** Shows section `id` (the first one when it is not for this caller); `focus` moves the reader to its heading. */
async function go(id, { focus = false } = {}) {
  const sections = visibleSections();
  const section = sections.find((s) => s.id === id) ?? sections[0];
  state.section = section;
  renderNav();
  document.title = `${section.title} · Tessera`;
  const root = h('section', { id: `section-${section.id}`, class: 'view', 'aria-labelledby': `${section.id}-title` });
  ui.view.replaceChildren(root);
  const generation = state.generation;
  await section.render(ctx, root);
  if (focus && generation === state.generation) el(`${section.id}-title`)?.focus();
}

function sectionFromHash() {
  return decodeURIComponent(location.hash.slice(1)) || 'integrations';
}

// ---------------------------------------------------------------- loading

/** Loads who is signed in, their organizations and invitations, the providers, then the current section. */
async function loadAll() {
  const generation = ++state.generation;
  let access;
  try {
    access = await ctx.api('GET', '/v1/account/access');
  } catch (error) {
    if (generation !== state.generation) return;
    // The organization entered is gone (or the person is no longer an administrator): back to their own.
    if (state.entered && (error.status === 404 || error.status === 403)) {
      setEntered(null);
      return loadAll();
    }
    if (error.status === 401) showSignIn();
    else {
      show(ui.loading, false);
      complain(describeError(error));
    }
    return;
  }
  try {
    const [own, providers] = await Promise.all([
      graphql(`{ organizations { id name externalId role } myInvitations { ${INVITATION_FIELDS} } }`),
      api('GET', '/v1/providers').catch(() => ({ providers: [] })),
    ]);
    if (generation !== state.generation) return;
    state.access = access;
    state.organizations = own.organizations;
    state.myInvitations = own.myInvitations;
    state.providers = providers.providers;
  } catch (error) {
    if (generation !== state.generation) return;
    if (error.status === 401) return showSignIn(describeError(error));
    state.access = access;
    state.organizations = access.organizations.map((org) => ({ ...org, externalId: null }));
    complain(`Part of the console could not be loaded: ${describeError(error)}`);
  }
  show(ui.loading, false);
  show(ui.signIn, false);
  renderAccount();
  renderEntered();
  renderMyInvitations();
  await go(sectionFromHash());
}

function setEntered(organization) {
  state.entered = organization;
  storeEntered(organization);
}

/** A system administrator enters `organization` to read it (docs/contract.md §11). */
async function enter(organization) {
  clearMessages();
  setEntered({ id: organization.id, name: organization.name, externalId: organization.externalId ?? null });
  history.replaceState(null, '', '#integrations');
  await loadAll();
  say(`Now viewing ${organization.name} as a system administrator (read-only).`);
  el('entered')?.querySelector('button')?.focus();
}

async function leave() {
  const name = state.entered?.name;
  setEntered(null);
  history.replaceState(null, '', '#organizations');
  await loadAll();
  say(`You left ${name ?? 'the organization'}.`);
  el(`${state.section?.id}-title`)?.focus();
}

// ---------------------------------------------------------------- actions of the shell

async function signIn(event) {
  event.preventDefault();
  const submit = ui.signInForm.querySelector('button[type="submit"]');
  submit.disabled = true;
  clearMessages();
  try {
    // Public route: no session yet, so no CSRF header; the Origin check still applies.
    await api('POST', '/v1/login', { email: ui.email.value.trim(), password: ui.password.value }, { csrf: false });
    ui.password.value = '';
    setEntered(null);
    await loadAll();
    if (state.access) {
      say(`Signed in as ${state.access.user?.email ?? 'you'}.`);
      el(`${state.section?.id}-title`)?.focus();
    }
  } catch (error) {
    complain(error.code === 'UNAUTHENTICATED' ? 'The e-mail or password is not right. Try again.' : describeError(error));
    ui.password.focus();
  } finally {
    submit.disabled = false;
  }
}

async function signOut() {
  await ctx.run(ui.signOut, async () => {
    await api('POST', '/v1/logout');
    setEntered(null);
    showSignIn();
    say('Signed out.');
    ui.signInTitle.focus();
  });
}

async function switchOrganization(event) {
  event.preventDefault();
  const organizationId = ui.orgSelect.value;
  if (!organizationId || (organizationId === state.access?.organization?.id && !state.entered)) return;
  const button = ui.orgForm.querySelector('button[type="submit"]');
  await ctx.run(button, async () => {
    clearMessages();
    await api('POST', '/v1/account/switch', { organizationId });
    setEntered(null);
    await loadAll();
    say(`Now working in ${state.access?.organization?.name ?? 'the other organization'}.`);
  });
}

async function start() {
  ui.signInForm.addEventListener('submit', signIn);
  ui.signOut.addEventListener('click', signOut);
  ui.orgForm.addEventListener('submit', switchOrganization);
  window.addEventListener('hashchange', () => {
    if (!state.access) return;
    clearMessages();
    void go(sectionFromHash(), { focus: true });
  });
  // Coming back with the Back button from a provider's page restores a stale page: reload its data.
  window.addEventListener('pageshow', (event) => {
    if (event.persisted) void loadAll();
  });
  await loadAll();
}

void start();
