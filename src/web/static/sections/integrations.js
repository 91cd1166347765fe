// Integrations: the organization's own connections (one per provider, each with its live status
// and the actions it allows) and its end users' connections (docs/contract.md §5d; status and refresh
// address them with ?endUser=), then the providers an owner or admin may connect.

import { ApiError } from '../api.js';
import { describeOutcome, takeOutcome } from '../outcome.js';
import {
  actionButton,
  badge,
  clearMessages,
  complain,
  confirmed,
  describeError,
  facts,
  fill,
  focusedKey,
  h,
  pagedList,
  refocus,
  replaceKeepingFocus,
  say,
  sectionHead,
  setBusy,
  time,
} from '../ui.js';

const STATUS_LABELS = { connected: 'Connected', warning: 'Warning', expired: 'Expired', invalid: 'Invalid' };

/** The outcome a connect flow left in the address bar, taken once, by the first render. */
let outcome = takeOutcome();

const endUserName = (endUser) => endUser.displayName || endUser.email || endUser.id;
const query = (integration) => (integration.endUser ? `?endUser=${encodeURIComponent(integration.endUser.id)}` : '');

export default {
  id: 'integrations',
  title: 'Integrations',
  visible: () => true,
  async render(ctx, root) {
    const view = new IntegrationsView(ctx, root);
    await view.load();
    if (outcome) {
      const { ok, text } = describeOutcome(ctx, outcome);
      outcome = null;
      if (ok) say(text);
      else complain(text);
    }
  },
};

class IntegrationsView {
  constructor(ctx, root) {
    this.ctx = ctx;
    this.root = root;
    this.own = [];
    this.endUsers = [];
    this.page = 0;
    /** integration id → status object, once fetched */
    this.statuses = new Map();
    /** integration id → error text when its status could not be fetched */
    this.statusErrors = new Map();
    /** integration id → when this page last refreshed its token (the answer never carries the token) */
    this.refreshedAt = new Map();
    this.generation = 0;
    this.reloadButton = h('button', { type: 'button', id: 'reload', onclick: () => this.reload() }, 'Refresh status');
    this.updated = h('p', { id: 'updated', class: 'muted' });
    this.list = h('ul', { id: 'integration-list', class: 'cards', 'aria-labelledby': 'integrations-title' });
    this.noIntegrations = h('p', { id: 'no-integrations', class: 'muted', hidden: true, text: 'No provider is connected to this organization yet.' });
    this.endUserBlock = h('div', { id: 'end-user-integrations' });
    this.connectBlock = h('div', { id: 'connect-providers' });
    fill(
      root,
      sectionHead('integrations', 'Integrations', this.reloadButton),
      this.updated,
      ctx.canWrite() ? null : h('p', { id: 'role-note', class: 'note', text: this.roleNote() }),
      this.list,
      this.noIntegrations,
      this.endUserBlock,
      this.connectBlock,
    );
  }

  roleNote() {
    if (this.ctx.entered) return 'You are reading this organization as a system administrator: its owners and admins connect, refresh and delete integrations.';
    return 'You are a member of this organization: an owner or admin connects, refreshes and deletes integrations.';
  }

  reload() {
    if (this.reloadButton.getAttribute('aria-disabled') === 'true') return;
    clearMessages();
    void this.ctx.refreshAccount();
    return this.load({ announce: true });
  }

  /** Loads the integrations, then each of the organization's own with its live status. */
  async load({ announce = false } = {}) {
    const generation = ++this.generation;
    setBusy(this.reloadButton, true);
    this.list.setAttribute('aria-busy', 'true');
    try {
      const answer = await this.ctx.api('GET', '/v1/integrations');
      if (generation !== this.generation) return;
      this.own = answer.integrations.filter((integration) => !integration.endUser);
      this.endUsers = answer.integrations.filter((integration) => integration.endUser);
      this.statuses = new Map();
      this.statusErrors = new Map();
      this.renderOwn();
      this.renderEndUsers();
      this.renderConnect();
      await Promise.all(this.own.map((integration) => this.checkStatus(integration, generation)));
      if (generation !== this.generation) return;
      this.updated.replaceChildren('Status as of ', time(new Date().toISOString()), '.');
      if (announce) say(`Status updated: ${this.summary()}.`);
    } catch (error) {
      if (generation !== this.generation) return;
      if (error.status === 401) this.ctx.signedOut('Your session has ended. Sign in again.');
      else complain(`The integrations could not be loaded: ${describeError(error)}`);
    } finally {
      if (generation === this.generation) {
        setBusy(this.reloadButton, false);
        this.list.setAttribute('aria-busy', 'false');
      }
    }
  }

  async checkStatus(integration, generation) {
    try {
      const answer = await this.ctx.api('GET', `/v1/integrations/${encodeURIComponent(integration.provider)}/status${query(integration)}`);
      if (generation !== this.generation) return;
      this.statuses.set(integration.id, answer.status);
      this.statusErrors.delete(integration.id);
    } catch (error) {
      if (generation !== this.generation) return;
      this.statusErrors.set(integration.id, `The status could not be checked: ${describeError(error, this.ctx.providerName(integration.provider))}`);
    }
    this.updateItem(integration);
  }

  summary() {
    if (this.own.length === 0) return 'no integrations';
    return this.own
      .map((i) => `${this.ctx.providerName(i.provider)} ${(STATUS_LABELS[this.statuses.get(i.id)?.status ?? i.status] ?? i.status).toLowerCase()}`)
      .join(', ');
  }

  renderOwn() {
    const key = focusedKey(this.root);
    this.list.replaceChildren(...this.own.map((integration) => this.card(integration)));
    this.list.hidden = this.own.length === 0;
    this.noIntegrations.hidden = this.own.length !== 0;
    refocus(this.root, key);
  }

  updateItem(integration) {
    const old = this.root.querySelector(`li[data-integration="${CSS.escape(integration.id)}"]`);
    if (old) replaceKeepingFocus(old, this.card(integration));
  }

  /** One integration's card: its status, what it means, and the actions that fix it. */
  card(integration) {
    const { ctx } = this;
    const provider = integration.provider;
    const name = ctx.providerName(provider);
    const status = this.statuses.get(integration.id);
    const statusError = this.statusErrors.get(integration.id);
    const value = status?.status ?? integration.status;
    const who = integration.endUser ? ` of ${endUserName(integration.endUser)}` : '';
    const keySuffix = integration.endUser ? `${provider}:${integration.endUser.id}` : provider;
    const titleId = `integration-${integration.id}-title`;
    const actions = new Set(status?.actions ?? (value === 'invalid' ? ['reconnect'] : []));

    const buttons = [];
    if (ctx.canWrite()) {
      if (actions.has('reconnect') && !integration.endUser) {
        buttons.push(actionButton('Reconnect', ` ${name}`, `reconnect:${provider}`, (button) => this.startConnect(provider, button), { primary: true }));
      }
      // Refreshing is offered whenever the status allows it; an invalid connection only reconnects.
      if (actions.has('refresh') || value === 'connected') {
        buttons.push(actionButton('Refresh token', ` for ${name}${who}`, `refresh:${keySuffix}`, (button) => this.refresh(integration, button), { primary: actions.has('refresh') }));
      }
      buttons.push(actionButton('Delete', ` the ${name} integration${who}`, `delete:${keySuffix}`, (button) => this.remove(integration, button), { danger: true }));
    }
    if (integration.endUser && !status && !statusError) {
      buttons.push(actionButton('Check status', ` of ${name}${who}`, `check:${keySuffix}`, (button) => ctx.run(button, () => this.checkStatus(integration, this.generation))));
    }

    let message = null;
    if (status) message = h('p', { class: 'message', text: status.message });
    else if (statusError) message = h('p', { class: 'message message-error', text: statusError });
    else if (!integration.endUser) message = h('p', { class: 'message muted', text: `Checking with ${name}…` });

    return h(
      'li',
      { class: `card card-${value}`, 'data-provider': provider, 'data-integration': integration.id, 'aria-busy': status || statusError || integration.endUser ? 'false' : 'true' },
      h(
        'article',
        { 'aria-labelledby': titleId },
        h('div', { class: 'card-head' }, h(integration.endUser ? 'h3' : 'h2', { id: titleId, text: integration.endUser ? `${name} · ${endUserName(integration.endUser)}` : name }), badge(value, STATUS_LABELS[value] ?? value)),
        h('p', { class: 'integration-name', text: integration.name }),
        integration.connectedVia && !integration.endUser ? h('p', { class: 'connected-via', text: 'Connected through a connect link' }) : null,
        message,
        this.refreshedAt.has(integration.id) ? h('p', { class: 'refreshed muted', text: `Token refreshed at ${this.refreshedAt.get(integration.id).toLocaleTimeString()}` }) : null,
        actions.has('configure') ? h('p', { class: 'hint', text: `If this persists, check the app's permissions and configuration at ${name}.` }) : null,
        facts([
          ['End user', integration.endUser ? `${integration.endUser.id}${integration.endUser.email ? ` (${integration.endUser.email})` : ''}` : null],
          ['Last checked', status ? (status.lastValidated ? time(status.lastValidated) : 'Not yet') : null],
          ['Problem', status?.lastError ?? null],
          ['Since', status?.detectedAt ? time(status.detectedAt) : null],
          ['Added', time(integration.createdAt)],
        ]),
        buttons.length ? h('div', { class: 'actions' }, buttons) : null,
      ),
    );
  }

  renderEndUsers() {
    const key = focusedKey(this.endUserBlock);
    if (this.endUsers.length === 0) {
      this.endUserBlock.replaceChildren();
      return;
    }
    fill(
      this.endUserBlock,
      h('h2', { id: 'end-users-title', text: "End users' connections" }),
      h('p', { class: 'note', text: 'Connected by your product’s end users through connect links. Their status is checked when you ask.' }),
      pagedList({
        label: "End users' connections",
        items: this.endUsers,
        render: (integration) => this.card(integration),
        empty: '',
        page: this.page,
        listClass: 'cards',
        onPage: (step) => {
          this.page += step;
          this.renderEndUsers();
        },
      }),
    );
    refocus(this.endUserBlock, key);
  }

  renderConnect() {
    const { ctx } = this;
    if (!ctx.canWrite()) {
      this.connectBlock.replaceChildren();
      return;
    }
    const connected = new Set(this.own.map((i) => i.provider));
    const available = ctx.providers.filter((p) => !connected.has(p.id));
    const items = available.map((p) =>
      h('li', {}, h('button', { type: 'button', class: 'primary', 'data-focus-key': `connect:${p.id}`, onclick: (e) => this.startConnect(p.id, e.currentTarget) }, `Connect ${p.displayName}`)),
    );
    fill(
      this.connectBlock,
      h('h2', { id: 'connect-title', text: 'Connect a provider' }),
      items.length ? h('ul', { id: 'provider-list', class: 'connect-list', 'aria-labelledby': 'connect-title' }, items) : null,
      ctx.providers.length > 0 && available.length === 0 ? h('p', { class: 'muted', text: 'Every configured provider is connected.' }) : null,
      ctx.providers.length === 0
        ? h('p', { class: 'muted' }, 'No provider is configured on this Tessera. Set ', h('code', { text: 'INTEGRATION_OAUTH_<PROVIDER>_CLIENT_ID' }), ' and ', h('code', { text: '_CLIENT_SECRET' }), ' to add one.')
        : null,
    );
  }

  startConnect(provider, button) {
    const name = this.ctx.providerName(provider);
    return this.ctx.run(
      button,
      async () => {
        clearMessages();
        const answer = await this.ctx.api('POST', '/v1/integrations/oauth/start', { provider, redirectUri: `${location.origin}/` });
        const target = new URL(answer.authUrl);
        if (target.protocol !== 'https:' && target.protocol !== 'http:') throw new ApiError(0, 'UNKNOWN', 'Tessera answered with an unusable address.');
        say(`Taking you to ${name}…`);
        location.assign(target.href);
      },
      { name },
    );
  }

  refresh(integration, button) {
    const name = this.ctx.providerName(integration.provider);
    return this.ctx.run(
      button,
      async () => {
        clearMessages();
        const answer = await this.ctx.api('POST', `/v1/integrations/${encodeURIComponent(integration.provider)}/refresh${query(integration)}`);
        this.refreshedAt.set(integration.id, new Date());
        await this.load();
        say(`${answer.message}.`);
      },
      { name, refreshOn: ['INTEGRATION_NOT_FOUND', 'TOKEN_VALIDATION_FAILED'], onRefresh: () => this.load() },
    );
  }

  remove(integration, button) {
    const name = this.ctx.providerName(integration.provider);
    const who = integration.endUser ? ` of ${endUserName(integration.endUser)}` : '';
    if (button.getAttribute('aria-disabled') === 'true') return;
    if (!confirmed(`Delete the ${name} integration "${integration.name}"${who}?\n\nIts tokens are removed from Tessera and the access is revoked at ${name}.`)) return;
    return this.ctx.run(
      button,
      async () => {
        clearMessages();
        const answer = await this.ctx.api('DELETE', `/v1/integrations/${encodeURIComponent(integration.id)}`);
        await this.load();
        say(`${answer.message}.`);
        this.root.querySelector('#integrations-title')?.focus();
      },
      { name, onRefresh: () => this.load() },
    );
  }
}

