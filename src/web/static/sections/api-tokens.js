// API tokens (owners and admins) and, with the same view, service tokens (system
// administrators): listed by name and their prefix and last four characters, created with the
// value shown once, revoked after a confirmation.

import { actionButton, clearMessages, confirmed, describeError, facts, field, focusedKey, h, pagedList, refocus, say, sectionHead, select, shownOnce, time } from '../ui.js';

const FIELDS = 'id name display createdAt expiresAt lastUsedAt revokedAt';
const DAY = 24 * 60 * 60 * 1000;
const EXPIRY_CHOICES = [
  ['', 'Never'],
  ['30', 'In 30 days'],
  ['90', 'In 90 days'],
  ['365', 'In a year'],
];

/** The view of one kind of token: its GraphQL names and its words. */
export class TokensView {
  /**
   * @param {object} kind `{ id, noun, list, create, revoke, createdType, deployment, explain }`:
   * the section's id, "API token" or "service token", and its GraphQL fields.
   */
  constructor(ctx, root, kind) {
    this.ctx = ctx;
    this.root = root;
    this.kind = kind;
    this.tokens = [];
    this.page = 0;
    // System administrators' tokens belong to the deployment, not to an organization entered.
    this.call = kind.deployment ? ctx.deployment.graphql : ctx.graphql;
    this.created = h('div', { id: `${kind.id}-created`, 'aria-live': 'polite' });
    this.listBlock = h('div', { id: `${kind.id}-list` });
    root.append(sectionHead(kind.id, kind.title), h('p', { class: 'note', text: kind.explain }), this.buildForm(), this.created, h('h2', { text: `Your ${kind.noun}s` }), this.listBlock);
  }

  async load() {
    try {
      this.tokens = (await this.call(`{ ${this.kind.list} { ${FIELDS} } }`))[this.kind.list];
    } catch (error) {
      if (error.status === 401) return this.ctx.signedOut(describeError(error));
      this.listBlock.replaceChildren(h('p', { class: 'message-error', text: `The ${this.kind.noun}s could not be loaded: ${describeError(error)}` }));
      return;
    }
    this.render();
  }

  render() {
    const key = focusedKey(this.listBlock);
    const { noun } = this.kind;
    this.listBlock.replaceChildren(
      pagedList({
        label: `${noun}s`.replace(/^./, (c) => c.toUpperCase()),
        items: this.tokens,
        empty: `No ${noun} yet.`,
        page: this.page,
        onPage: (step) => {
          this.page += step;
          this.render();
        },
        render: (token) => {
          const state = token.revokedAt ? 'revoked' : token.expiresAt && Date.parse(token.expiresAt) <= Date.now() ? 'expired' : 'active';
          return h(
            'li',
            { class: `row row-${state}`, 'data-token': token.id },
            h('p', { class: 'row-title' }, h('strong', { text: token.name }), ' ', h('code', { text: token.display }), state === 'active' ? null : h('span', { class: `badge badge-${state === 'revoked' ? 'invalid' : 'expired'}`, text: state === 'revoked' ? 'Revoked' : 'Expired' })),
            facts([
              ['Created', time(token.createdAt)],
              ['Last used', token.lastUsedAt ? time(token.lastUsedAt) : 'Never'],
              ['Expires', token.expiresAt ? time(token.expiresAt) : 'Never'],
              ['Revoked', token.revokedAt ? time(token.revokedAt) : null],
            ]),
            state === 'active'
              ? h('div', { class: 'actions' }, actionButton('Revoke', ` the ${noun} ${token.name}`, `revoke:${token.id}`, (button) => this.revoke(token, button), { danger: true }))
              : null,
          );
        },
      }),
    );
    refocus(this.listBlock, key);
  }

  buildForm() {
    const { id, noun } = this.kind;
    const name = h('input', { id: `${id}-name`, name: 'name', maxlength: '100', required: true, autocomplete: 'off' });
    const expiry = select(`${id}-expiry`, EXPIRY_CHOICES, '');
    const form = h('form', { id: `${id}-form`, class: 'inline-form' }, field('Name', name), field('Expires', expiry), h('button', { type: 'submit', class: 'primary' }, `Create ${noun}`));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.ctx.run(form.querySelector('button[type="submit"]'), async () => {
        clearMessages();
        const days = Number(expiry.value);
        const variables = { name: name.value.trim(), expiresAt: days ? new Date(Date.now() + days * DAY).toISOString() : null };
        const answer = await this.call(`mutation($name: String!, $expiresAt: String) { ${this.kind.create}(name: $name, expiresAt: $expiresAt) { id name token } }`, variables);
        const created = answer[this.kind.create];
        name.value = '';
        this.created.replaceChildren(shownOnce(`new ${noun} "${created.name}"`, created.token, `${id}-value`));
        await this.load();
        say(`The ${noun} ${created.name} is created. Copy its value now: it is not shown again.`);
        this.created.querySelector('button')?.focus();
      });
    });
    return form;
  }

  revoke(token, button) {
    const { noun } = this.kind;
    if (!confirmed(`Revoke the ${noun} "${token.name}" (${token.display})?\n\nEverything using it is refused from the next request on. This cannot be undone.`)) return;
    return this.ctx.run(
      button,
      async () => {
        clearMessages();
        await this.call(`mutation($id: ID!) { ${this.kind.revoke}(id: $id) { id } }`, { id: token.id });
        // A revoked token's value shown above is of no use any more.
        if (this.created.textContent.includes(token.name)) this.created.replaceChildren();
        await this.load();
        say(`The ${noun} ${token.name} is revoked.`);
        this.root.querySelector(`#${this.kind.id}-title`)?.focus();
      },
      { onRefresh: () => this.load() },
    );
  }
}

export default {
  id: 'api-tokens',
  title: 'API tokens',
  visible: (ctx) => ctx.canWrite(),
  async render(ctx, root) {
    const view = new TokensView(ctx, root, {
      id: 'api-tokens',
      title: 'API tokens',
      noun: 'API token',
      list: 'apiTokens',
      create: 'createAPIToken',
      revoke: 'revokeAPIToken',
      explain: `Your product's backend uses an API token to read tokens, mint connect sessions and manage this organization's integrations (it acts as an admin of ${ctx.access.organization.name}).`,
    });
    await view.load();
  },
};
