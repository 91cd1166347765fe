// Apps (docs/contract.md §5e, §11): the registrations at providers that connections go through.
// The deployment's apps are read-only here; the organization's own show first the redirect URI
// to register at the provider, then what they are. Owners and admins add one (a GitHub App with
// its id, slug and private key), rotate its secrets, choose the default app of a provider
// (deployment apps included) and delete one nothing uses. Secrets are write-only: typed into
// password fields, sent once, cleared after every submit, and never read back (no answer has them).

import {
  actionButton,
  badge,
  clearMessages,
  confirmed,
  copyButton,
  describeError,
  facts,
  field,
  focusedKey,
  h,
  refocus,
  say,
  sectionHead,
  time,
} from '../ui.js';

/** Modes whose credentials a person enters (§5c): no app of theirs exists. */
const ENTERED_MODES = new Set(['api_key', 'basic', 'client_credentials']);
/** The select's value for a provider typed by its id: one offered to organizations' own apps only (decision 299). */
const OTHER = '';
const FIELD_NAMES = {
  provider: 'Provider',
  name: 'Name',
  clientId: 'Client id',
  clientSecret: 'Client secret',
  scopes: 'Scopes',
  eventsSecret: 'Events secret',
  appId: 'GitHub App id',
  slug: 'Slug',
  privateKey: 'Private key',
};

export default {
  id: 'apps',
  title: 'Apps',
  visible: (ctx) => Boolean(ctx.access?.organization),
  async render(ctx, root) {
    const view = new AppsView(ctx, root);
    await view.load();
  },
};

/** Scopes as typed (commas or spaces between them); none → null (the provider's configured set). */
function parseScopes(text) {
  const scopes = text.split(/[\s,]+/).filter(Boolean);
  return scopes.length ? scopes : null;
}

/**
 * A refused input in words: the answer's `details` name the field and say why (never a secret);
 * the error keeps its code, so the console's one table still decides the rest.
 */
function withDetails(error) {
  if (error?.code !== 'INVALID_INPUT' || !error.details?.length) return error;
  const said = error.details.map(({ path, message }) => `${FIELD_NAMES[String(path).split('.').at(-1)] ?? path}: ${message}`).join('; ');
  return Object.assign(new Error(said), { code: error.code, status: error.status });
}

class AppsView {
  constructor(ctx, root) {
    this.ctx = ctx;
    this.root = root;
    this.apps = [];
    this.ownBlock = h('div', { id: 'own-apps' });
    this.deploymentBlock = h('div', { id: 'deployment-apps' });
    const writer = ctx.canWrite();
    root.append(
      sectionHead('apps', 'Apps', actionButton('Reload', ' the apps', 'reload-apps', (button) => this.ctx.run(button, () => this.load()))),
      h(
        'p',
        { class: 'note', text: 'An app is a registration of this Tessera at a provider: the name people see on its consent screen, its client id and secret. Each connection keeps the app it was made through; new ones use the default app of their provider.' },
      ),
      h('h2', { id: 'own-apps-title', tabindex: '-1', text: 'Your organization’s apps' }),
      h('p', { class: 'note', text: 'Register an app of your own at the provider with the redirect URI shown here, then enter its client id and secret below. Secrets are never shown again, here or anywhere.' }),
      this.ownBlock,
      writer ? h('h2', { id: 'new-app-title', text: 'Add an app' }) : null,
      writer ? this.buildForm() : null,
      h('h2', { id: 'deployment-apps-title', tabindex: '-1', text: 'This deployment’s apps' }),
      h('p', { class: 'note', text: 'Set up by whoever runs this Tessera; read-only here. Your organization may still make one of them the default of its provider.' }),
      this.deploymentBlock,
    );
  }

  providerLabel(id) {
    return this.ctx.providers.find((p) => p.id === id)?.displayName ?? id;
  }

  isGitHubApp(providerId) {
    return this.ctx.providers.find((p) => p.id === providerId)?.authMode === 'app_installation';
  }

  async load() {
    try {
      this.apps = (await this.ctx.api('GET', '/v1/apps')).apps;
    } catch (error) {
      if (error.status === 401) return this.ctx.signedOut(describeError(error));
      this.ownBlock.replaceChildren(h('p', { class: 'message-error', text: `The apps could not be loaded: ${describeError(error)}` }));
      this.deploymentBlock.replaceChildren();
      return;
    }
    this.render();
  }

  /** The app new connections of `provider` use: the organization's choice, else the deployment app named after the provider. */
  inEffect(provider) {
    const ofProvider = this.apps.filter((app) => app.provider === provider);
    return (ofProvider.find((app) => app.default) ?? ofProvider.find((app) => app.owner === 'deployment' && app.id === provider))?.id ?? null;
  }

  render() {
    const own = this.apps.filter((app) => app.owner === 'organization');
    const deployment = this.apps.filter((app) => app.owner === 'deployment');
    for (const [block, apps, empty, render] of [
      [this.ownBlock, own, 'Your organization has no app of its own: its connections go through this deployment’s apps.', (app) => this.ownItem(app)],
      [this.deploymentBlock, deployment, 'This deployment offers no app to your organization.', (app) => this.deploymentItem(app)],
    ]) {
      const key = focusedKey(block);
      block.replaceChildren(apps.length ? h('ul', { class: 'rows', 'aria-label': block === this.ownBlock ? 'Your organization’s apps' : 'This deployment’s apps' }, apps.map(render)) : h('p', { class: 'muted', text: empty }));
      refocus(block, key);
    }
  }

  /** The default badge: chosen, or in effect because nothing was chosen. */
  defaultBadge(app) {
    if (app.default) return badge('connected', `Default for ${this.providerLabel(app.provider)}`, '');
    if (this.inEffect(app.provider) === app.id) return badge('pending', `Default for ${this.providerLabel(app.provider)} (none chosen)`, '');
    return null;
  }

  /** What both kinds of app show after their first lines. */
  details(app) {
    return facts([
      ['App id', h('code', { text: app.id })],
      ['Client id', h('code', { text: app.clientId })],
      ['Scopes', app.scopes?.length ? app.scopes.join(' ') : 'The provider’s configured scopes'],
      ['Events URL', app.eventsUrl ? h('code', { text: app.eventsUrl }) : null],
      ['Events secret', app.eventsUrl && app.owner === 'organization' ? (app.hasEventsSecret ? 'Set' : 'Not set') : null],
      ['Created', app.owner === 'organization' ? time(app.createdAt) : null],
      ['Changed', app.owner === 'organization' && app.updatedAt !== app.createdAt ? time(app.updatedAt) : null],
    ]);
  }

  /** The redirect URI to register, before anything else of the app: selectable, with a Copy button. */
  redirect(app) {
    const id = `app-redirect-${app.id}`;
    const shown = h('code', { id, class: 'secret', text: app.redirectUri });
    return h(
      'div',
      { class: 'register', role: 'group', 'aria-labelledby': `${id}-label` },
      h('p', { id: `${id}-label`, class: 'shown-once-label' }, h('strong', { text: 'Redirect URI' }), ` — register it at ${this.providerLabel(app.provider)} for this app:`),
      shown,
      h('div', { class: 'actions' }, copyButton(`redirect URI of ${app.name}`, app.redirectUri, shown, `copy:${app.id}`)),
    );
  }

  ownItem(app) {
    const writer = this.ctx.canWrite();
    return h(
      'li',
      { class: 'row', 'data-app': app.id },
      this.redirect(app),
      h('p', { class: 'row-title' }, h('strong', { text: app.name }), h('span', { class: 'muted', text: this.providerLabel(app.provider) }), this.defaultBadge(app)),
      this.details(app),
      writer ? this.rotateForm(app) : null,
      writer
        ? h(
            'div',
            { class: 'actions' },
            app.default ? null : actionButton('Make default', ` for ${this.providerLabel(app.provider)}: ${app.name}`, `default:${app.id}`, (button) => this.makeDefault(app, button)),
            actionButton('Delete', ` the app ${app.name}`, `delete:${app.id}`, (button) => this.remove(app, button), { danger: true }),
          )
        : null,
    );
  }

  deploymentItem(app) {
    return h(
      'li',
      { class: 'row', 'data-app': app.id },
      h('p', { class: 'row-title' }, h('strong', { text: app.name }), h('span', { class: 'muted', text: this.providerLabel(app.provider) }), this.defaultBadge(app)),
      this.details(app),
      facts([['Redirect URI', h('code', { text: app.redirectUri })]]),
      this.ctx.canWrite() && !app.default
        ? h('div', { class: 'actions' }, actionButton('Make default', ` for ${this.providerLabel(app.provider)}: ${app.name}`, `default:${app.id}`, (button) => this.makeDefault(app, button)))
        : null,
    );
  }

  /** New secrets for an app: each typed, sent once, then cleared (kept nowhere on the page). */
  rotateForm(app) {
    const id = `app-rotate-${app.id}`;
    const secret = h('input', { id: `${id}-client`, name: 'clientSecret', type: 'password', autocomplete: 'off', spellcheck: 'false' });
    const events = app.eventsUrl ? h('input', { id: `${id}-events`, name: 'eventsSecret', type: 'password', autocomplete: 'off', spellcheck: 'false' }) : null;
    const key = this.isGitHubApp(app.provider) ? h('textarea', { id: `${id}-key`, name: 'privateKey', rows: '3', autocomplete: 'off', spellcheck: 'false', class: 'secret-input' }) : null;
    const inputs = [secret, events, key].filter(Boolean);
    const form = h(
      'form',
      { id, class: 'inline-form rotate', 'aria-label': `New secrets for ${app.name}` },
      field('New client secret', secret),
      events ? field('New events secret', events) : null,
      key ? field('New private key (PEM)', key) : null,
      h('button', { type: 'submit' }, 'Rotate secret', h('span', { class: 'visually-hidden', text: ` of ${app.name}` })),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const body = {};
      if (secret.value) body.clientSecret = secret.value;
      if (events?.value) body.eventsSecret = events.value;
      if (key?.value.trim()) body.privateKey = key.value.trim();
      for (const input of inputs) input.value = '';
      void this.ctx.run(
        form.querySelector('button[type="submit"]'),
        async () => {
          clearMessages();
          const changed = Object.keys(body);
          if (changed.length === 0) throw Object.assign(new Error('Enter the new secret first.'), { code: 'INVALID_INPUT' });
          await this.patch(app, body);
          await this.load();
          say(`The ${changed.map((name) => FIELD_NAMES[name].toLowerCase()).join(' and ')} of ${app.name} ${changed.length > 1 ? 'are' : 'is'} changed. Connections through it use the new one from their next refresh on.`);
          this.ownBlock.querySelector(`#${CSS.escape(`${id}-client`)}`)?.focus();
        },
        { onRefresh: () => this.load() },
      );
    });
    return form;
  }

  patch(app, body) {
    return this.ctx.api('PATCH', `/v1/apps/${encodeURIComponent(app.id)}`, body).catch((error) => {
      throw withDetails(error);
    });
  }

  makeDefault(app, button) {
    return this.ctx.run(
      button,
      async () => {
        clearMessages();
        await this.patch(app, { default: true });
        await this.load();
        say(`${app.name} is now the default app for ${this.providerLabel(app.provider)}: new connections go through it.`);
        this.root.querySelector(app.owner === 'organization' ? '#own-apps-title' : '#deployment-apps-title')?.focus();
      },
      { onRefresh: () => this.load() },
    );
  }

  remove(app, button) {
    if (!confirmed(`Delete the app "${app.name}" (${this.providerLabel(app.provider)})?\n\nOnly an app nothing uses can be deleted. This cannot be undone.`)) return;
    return this.ctx.run(
      button,
      async () => {
        clearMessages();
        await this.ctx.api('DELETE', `/v1/apps/${encodeURIComponent(app.id)}`);
        await this.ctx.refreshProviders();
        await this.load();
        say(`The app ${app.name} is deleted.`);
        this.root.querySelector('#own-apps-title')?.focus();
      },
      // 409 CONFLICT says what still uses it (the server's words); the list is read again.
      { onRefresh: () => this.load() },
    );
  }

  /** The providers an app may be added for: those connected through apps (not entered credentials). */
  providerChoices() {
    return this.ctx.providers.filter((p) => !ENTERED_MODES.has(p.authMode));
  }

  buildForm() {
    const choices = this.providerChoices();
    const provider = h(
      'select',
      { id: 'app-provider', name: 'provider' },
      choices.map((p) => h('option', { value: p.id, text: p.displayName })),
      h('option', { value: OTHER, selected: choices.length === 0, text: 'Another provider (enter its id)' }),
    );
    const otherId = h('input', { id: 'app-provider-id', name: 'providerId', autocomplete: 'off', spellcheck: 'false', pattern: '[a-z][a-z0-9]{1,31}', 'aria-describedby': 'app-provider-id-hint' });
    const otherField = field('Provider id', otherId, 'A provider this Tessera offers to organizations’ own apps only, by its id (e.g. githubapp).');
    const name = h('input', { id: 'app-name', name: 'name', maxlength: '100', autocomplete: 'off' });
    const clientId = h('input', { id: 'app-client-id', name: 'clientId', maxlength: '255', required: true, autocomplete: 'off', spellcheck: 'false' });
    const clientSecret = h('input', { id: 'app-client-secret', name: 'clientSecret', type: 'password', autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'app-client-secret-hint' });
    const scopes = h('input', { id: 'app-scopes', name: 'scopes', autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'app-scopes-hint' });
    const eventsSecret = h('input', { id: 'app-events-secret', name: 'eventsSecret', type: 'password', autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'app-events-secret-hint' });
    const appId = h('input', { id: 'app-github-app-id', name: 'appId', inputmode: 'numeric', pattern: '[0-9]+', autocomplete: 'off' });
    const slug = h('input', { id: 'app-slug', name: 'slug', maxlength: '100', autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'app-slug-hint' });
    const privateKey = h('textarea', { id: 'app-private-key', name: 'privateKey', rows: '4', autocomplete: 'off', spellcheck: 'false', class: 'secret-input', 'aria-describedby': 'app-private-key-hint' });
    const makeDefault = h('input', { id: 'app-default', name: 'default', type: 'checkbox' });
    const gitHubApp = h(
      'fieldset',
      { id: 'app-github-app', class: 'choices github-app' },
      h('legend', { text: 'GitHub App' }),
      field('GitHub App id', appId),
      field('Slug', slug, 'The name in the app’s public address, github.com/apps/<slug>.'),
      field('Private key (PEM)', privateKey, 'The key GitHub generated for the app, from -----BEGIN to END…-----.'),
    );
    const secrets = [clientSecret, eventsSecret, privateKey];
    const form = h(
      'form',
      { id: 'app-form' },
      field('Provider', provider),
      otherField,
      field('Name', name, 'What people here see (optional; default: the provider’s name).'),
      field('Client id', clientId),
      field('Client secret', clientSecret, 'Write-only: sent once, never shown again.'),
      field('Scopes', scopes, 'Separated by spaces or commas; empty: the provider’s configured scopes. A connection may ask for these or fewer.'),
      field('Events secret (optional)', eventsSecret, 'For a provider that signs its events (§5b): the secret it signs them with, at this app’s events URL.'),
      gitHubApp,
      h('p', { class: 'field' }, h('label', { class: 'choice' }, makeDefault, ' Make it the default for its provider: new connections go through it')),
      h('button', { type: 'submit', class: 'primary' }, 'Add app'),
    );
    const chosen = () => (provider.value === OTHER ? otherId.value.trim() : provider.value);
    // A GitHub App's fields where the provider is one; for a provider typed by id, offered as optional.
    const arrange = () => {
      const other = provider.value === OTHER;
      otherField.hidden = !other;
      otherId.required = other;
      gitHubApp.hidden = !(other || this.isGitHubApp(provider.value));
    };
    provider.addEventListener('change', arrange);
    arrange();
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const body = { provider: chosen(), clientId: clientId.value.trim() };
      if (name.value.trim()) body.name = name.value.trim();
      if (clientSecret.value) body.clientSecret = clientSecret.value;
      const scopeList = parseScopes(scopes.value);
      if (scopeList) body.scopes = scopeList;
      if (eventsSecret.value) body.eventsSecret = eventsSecret.value;
      if (!gitHubApp.hidden) {
        if (appId.value.trim()) body.appId = appId.value.trim();
        if (slug.value.trim()) body.slug = slug.value.trim();
        if (privateKey.value.trim()) body.privateKey = privateKey.value.trim();
      }
      if (makeDefault.checked) body.default = true;
      // Sent once; from here on the page keeps no secret.
      for (const input of secrets) input.value = '';
      void this.ctx.run(
        form.querySelector('button[type="submit"]'),
        async () => {
          clearMessages();
          const { app } = await this.ctx.api('POST', '/v1/apps', body).catch((error) => {
            throw withDetails(error);
          });
          for (const input of [name, clientId, scopes, appId, slug, otherId]) input.value = '';
          makeDefault.checked = false;
          await this.ctx.refreshProviders();
          await this.load();
          say(`The app ${app.name} is added. Register its redirect URI, shown first below, at ${this.providerLabel(app.provider)}.`);
          this.ownBlock.querySelector(`li[data-app="${CSS.escape(app.id)}"] button`)?.focus();
        },
        { name: this.providerLabel(body.provider) },
      );
    });
    return form;
  }
}
