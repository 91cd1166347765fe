// Connect sessions (docs/contract.md §5a, §11): links through which a product's end user connects a
// provider without an account here. Owners and admins mint one (its link shown once), see the
// pending and recent ones page by page, filter them by status, and revoke a pending one.

import {
  actionButton,
  badge,
  Cursor,
  clearMessages,
  confirmed,
  describeError,
  facts,
  field,
  focusedKey,
  h,
  pagedList,
  refocus,
  say,
  sectionHead,
  select,
  shownOnce,
  time,
} from '../ui.js';

const STATUS_LABELS = { pending: 'Pending', completed: 'Completed', expired: 'Expired', revoked: 'Revoked' };
const EXPIRY_CHOICES = [
  ['600', '10 minutes'],
  ['1800', '30 minutes'],
  ['3600', '1 hour'],
  ['14400', '4 hours'],
];

export default {
  id: 'sessions',
  title: 'Connect sessions',
  visible: (ctx) => ctx.canWrite(),
  async render(ctx, root) {
    const view = new SessionsView(ctx, root);
    await view.load();
  },
};

class SessionsView {
  constructor(ctx, root) {
    this.ctx = ctx;
    this.root = root;
    this.cursor = new Cursor();
    this.sessions = [];
    this.status = '';
    this.created = h('div', { id: 'session-created', 'aria-live': 'polite' });
    this.listBlock = h('div', { id: 'session-list' });
    this.filter = select(
      'session-status',
      [['', 'Any status'], ...Object.entries(STATUS_LABELS).map(([value, text]) => [value, text])],
      '',
    );
    const filterForm = h('form', { class: 'inline-form', id: 'session-filter' }, field('Show', this.filter), h('button', { type: 'submit' }, 'Show sessions'));
    filterForm.addEventListener('submit', (event) => {
      event.preventDefault();
      this.status = this.filter.value;
      this.cursor.reset();
      void this.ctx.run(filterForm.querySelector('button'), () => this.load());
    });
    root.append(
      sectionHead('sessions', 'Connect sessions'),
      h('p', { class: 'note', text: 'A connect session is a link your product gives one of its end users: it opens a page here where they connect a provider, without an account, then returns to your product.' }),
      h('h2', { id: 'new-session-title', text: 'New connect link' }),
      this.buildForm(),
      this.created,
      h('h2', { id: 'recent-sessions-title', tabindex: '-1', text: 'Recent sessions' }),
      filterForm,
      this.listBlock,
    );
  }

  async load() {
    const params = new URLSearchParams({ first: '20' });
    if (this.status) params.set('status', this.status);
    if (this.cursor.after) params.set('after', this.cursor.after);
    try {
      const answer = await this.ctx.api('GET', `/v1/connect/sessions?${params}`);
      this.sessions = answer.sessions;
      this.cursor.seen(answer.pageInfo);
    } catch (error) {
      if (error.status === 401) return this.ctx.signedOut(describeError(error));
      this.listBlock.replaceChildren(h('p', { class: 'message-error', text: `The sessions could not be loaded: ${describeError(error)}` }));
      return;
    }
    this.render();
  }

  render() {
    const key = focusedKey(this.listBlock);
    const { ctx } = this;
    const names = (ids) => ids.map((id) => ctx.providerName(id)).join(', ');
    this.listBlock.replaceChildren(
      pagedList({
        label: 'Connect sessions',
        items: this.sessions,
        cursor: this.cursor.view,
        empty: this.status ? `No ${STATUS_LABELS[this.status].toLowerCase()} session.` : 'No connect session yet.',
        onPage: (step) => {
          this.cursor.move(step);
          void this.load();
        },
        render: (session) => {
          const who = session.endUser ? session.endUser.displayName || session.endUser.email || session.endUser.id : 'the organization';
          return h(
            'li',
            { class: 'row', 'data-session': session.id },
            h('p', { class: 'row-title' }, h('strong', { text: `For ${who}` }), ' ', badge(session.status === 'completed' ? 'connected' : session.status === 'pending' ? 'pending' : session.status === 'expired' ? 'expired' : 'invalid', STATUS_LABELS[session.status])),
            facts([
              ['Created', time(session.createdAt)],
              ['Providers', names(session.allowedProviders)],
              ['End user', session.endUser ? session.endUser.id : null],
              [session.status === 'pending' ? 'Expires' : 'Expired', session.status === 'completed' ? null : time(session.expiresAt)],
              ['Connected', session.integrationId ? `Integration ${session.integrationId}` : null],
              ['Last error', session.error ?? null],
            ]),
            session.status === 'pending'
              ? h('div', { class: 'actions' }, actionButton('Revoke', ` the connect session for ${who}`, `revoke:${session.id}`, (button) => this.revoke(session, who, button), { danger: true }))
              : null,
          );
        },
      }),
    );
    refocus(this.listBlock, key);
  }

  buildForm() {
    const { ctx } = this;
    const redirect = h('input', { id: 'session-redirect', name: 'redirectUri', type: 'url', required: true, value: `${location.origin}/`, 'aria-describedby': 'session-redirect-hint' });
    const endUserId = h('input', { id: 'session-end-user', name: 'endUser', maxlength: '128', autocomplete: 'off', 'aria-describedby': 'session-end-user-hint' });
    const endUserName = h('input', { id: 'session-end-user-name', name: 'displayName', maxlength: '200', autocomplete: 'off' });
    const expiry = select('session-expiry', EXPIRY_CHOICES, '1800');
    const providers = h(
      'fieldset',
      { class: 'choices' },
      h('legend', { text: 'Providers offered' }),
      ...ctx.providers.map((provider) =>
        h('label', { class: 'choice' }, h('input', { type: 'checkbox', name: 'provider', value: provider.id, checked: true }), ` ${provider.displayName}`),
      ),
    );
    const form = h(
      'form',
      { id: 'session-form' },
      field('Return address', redirect, 'Where the person lands when done, with ?status=connected or ?status=error.'),
      field('End user id (optional)', endUserId, "Your product's own id for the person or team; their connection is then theirs, not the organization's."),
      field('End user name (optional)', endUserName),
      providers,
      field('Link valid for', expiry),
      h('button', { type: 'submit', class: 'primary' }, 'Create connect link'),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      void ctx.run(form.querySelector('button[type="submit"]'), async () => {
        clearMessages();
        const allowedProviders = [...providers.querySelectorAll('input:checked')].map((input) => input.value);
        if (allowedProviders.length === 0) throw Object.assign(new Error('Choose at least one provider to offer.'), { code: 'INVALID_INPUT' });
        const body = { redirectUri: redirect.value.trim(), allowedProviders, expiresIn: Number(expiry.value) };
        if (endUserId.value.trim()) {
          body.endUser = { id: endUserId.value.trim(), ...(endUserName.value.trim() ? { displayName: endUserName.value.trim() } : {}) };
        }
        const { session } = await ctx.api('POST', '/v1/connect/sessions', body);
        this.created.replaceChildren(
          shownOnce('connect link', session.url, 'session-url'),
          h('p', { class: 'note' }, 'Give it to the person who connects; it works once, until ', time(session.expiresAt), '.'),
        );
        this.cursor.reset();
        await this.load();
        say('The connect link is ready. Copy it now: it is not shown again.');
        this.created.querySelector('button')?.focus();
      });
    });
    return form;
  }

  revoke(session, who, button) {
    if (!confirmed(`Revoke the connect session for ${who}?\n\nIts link stops working at once.`)) return;
    return this.ctx.run(
      button,
      async () => {
        clearMessages();
        await this.ctx.api('DELETE', `/v1/connect/sessions/${encodeURIComponent(session.id)}`);
        await this.load();
        say(`The connect session for ${who} is revoked.`);
        this.root.querySelector('#recent-sessions-title')?.focus();
      },
      { onRefresh: () => this.load() },
    );
  }
}
