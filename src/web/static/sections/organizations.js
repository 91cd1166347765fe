// Every organization (system administrators, docs/contract.md §11): searchable by name and
// externalId, each with its integrations' health, and a way in — entering one shows it as a
// member would see it, read-only, every page recorded in its audit log.

import { actionButton, badge, Cursor, describeError, facts, field, focusedKey, h, pagedList, refocus, sectionHead, time } from '../ui.js';

const HEALTH = [
  ['connected', 'connected'],
  ['warning', 'warning'],
  ['expired', 'expired'],
  ['invalid', 'invalid'],
];

export default {
  id: 'organizations',
  title: 'Organizations',
  visible: (ctx) => ctx.isSystemAdmin(),
  async render(ctx, root) {
    const view = new OrganizationsView(ctx, root);
    await view.load();
  },
};

class OrganizationsView {
  constructor(ctx, root) {
    this.ctx = ctx;
    this.root = root;
    this.cursor = new Cursor();
    this.q = '';
    this.organizations = [];
    const search = h('input', { id: 'org-search', name: 'q', type: 'search', maxlength: '128', autocomplete: 'off', 'aria-describedby': 'org-search-hint' });
    const form = h('form', { id: 'org-search-form', class: 'inline-form', role: 'search' }, field('Name or external id', search, 'Any part of it, in any letter case.'), h('button', { type: 'submit' }, 'Search'));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.q = search.value.trim();
      this.cursor.reset();
      void this.ctx.run(form.querySelector('button'), () => this.load());
    });
    this.listBlock = h('div', { id: 'organization-list' });
    root.append(sectionHead('organizations', 'Organizations'), h('p', { class: 'note', text: 'Every organization on this Tessera, newest first, with how its integrations are doing.' }), form, this.listBlock);
  }

  async load() {
    const params = new URLSearchParams({ first: '20' });
    if (this.q) params.set('q', this.q);
    if (this.cursor.after) params.set('after', this.cursor.after);
    try {
      const answer = await this.ctx.deployment.api('GET', `/v1/organizations?${params}`);
      this.organizations = answer.organizations;
      this.cursor.seen(answer.pageInfo);
    } catch (error) {
      if (error.status === 401) return this.ctx.signedOut(describeError(error));
      this.listBlock.replaceChildren(h('p', { class: 'message-error', text: `The organizations could not be loaded: ${describeError(error)}` }));
      return;
    }
    this.render();
  }

  render() {
    const key = focusedKey(this.listBlock);
    this.listBlock.replaceChildren(
      pagedList({
        label: 'Organizations',
        items: this.organizations,
        cursor: this.cursor.view,
        empty: this.q ? `No organization's name or external id contains "${this.q}".` : 'No organization yet.',
        onPage: (step) => {
          this.cursor.move(step);
          void this.load();
        },
        render: (organization) => {
          const health = organization.health;
          const total = health.connected + health.warning + health.expired + health.invalid;
          return h(
            'li',
            { class: 'row', 'data-organization': organization.id },
            h('p', { class: 'row-title' }, h('strong', { text: organization.name }), organization.externalId ? h('code', { text: organization.externalId }) : null),
            h(
              'p',
              { class: 'health', 'aria-label': `Integrations of ${organization.name}` },
              total === 0 ? h('span', { class: 'muted', text: 'No integrations' }) : HEALTH.filter(([kind]) => health[kind] > 0).map(([kind, words]) => badge(kind, `${health[kind]} ${words}`, '')),
            ),
            facts([
              ['External id', organization.externalId],
              ['Created', time(organization.createdAt)],
              ['Id', organization.id],
            ]),
            h(
              'div',
              { class: 'actions' },
              actionButton('Enter', ` ${organization.name}${organization.externalId ? ` (${organization.externalId})` : ''}`, `enter:${organization.id}`, (button) =>
                this.ctx.run(button, () => this.ctx.enter(organization)),
              ),
            ),
          );
        },
      }),
    );
    refocus(this.listBlock, key);
  }
}
