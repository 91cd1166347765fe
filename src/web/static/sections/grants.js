// Connected MCP hosts (docs/contract.md §9a): the grants people gave AI assistants and IDEs that
// signed in by OAuth. A member sees and revokes their own; owners and admins see and revoke the
// organization's. Revoking one ends every token of it at once.

import { actionButton, badge, clearMessages, confirmed, describeError, facts, focusedKey, h, pagedList, refocus, say, sectionHead, time } from '../ui.js';

export default {
  id: 'grants',
  title: 'Connected MCP hosts',
  visible: () => true,
  async render(ctx, root) {
    const view = new GrantsView(ctx, root);
    await view.load();
  },
};

class GrantsView {
  constructor(ctx, root) {
    this.ctx = ctx;
    this.root = root;
    this.grants = [];
    this.page = 0;
    this.listBlock = h('div', { id: 'grant-list' });
    root.append(
      sectionHead('grants', 'Connected MCP hosts'),
      h('p', {
        class: 'note',
        text: ctx.canWrite()
          ? "Assistants and IDEs people connected to this organization by signing in (OAuth). Each reaches only the providers and access chosen at the consent page, while the person who approved it still belongs here."
          : 'Assistants and IDEs you connected to this organization by signing in (OAuth). Each reaches only the providers and access you chose.',
      }),
      h('h2', { id: 'grants-title', tabindex: '-1', text: 'Active grants' }),
      this.listBlock,
    );
  }

  async load() {
    try {
      this.grants = (await this.ctx.api('GET', '/v1/oauth/grants')).grants;
      this.page = Math.min(this.page, Math.max(0, Math.ceil(this.grants.length / 20) - 1));
    } catch (error) {
      if (error.status === 401) return this.ctx.signedOut(describeError(error));
      this.listBlock.replaceChildren(h('p', { class: 'message-error', text: `The grants could not be loaded: ${describeError(error)}` }));
      return;
    }
    this.render();
  }

  render() {
    const key = focusedKey(this.listBlock);
    const { ctx } = this;
    this.listBlock.replaceChildren(
      pagedList({
        label: 'Connected MCP hosts',
        items: this.grants,
        empty: 'No MCP host is connected.',
        page: this.page,
        onPage: (step) => {
          this.page += step;
          this.render();
        },
        render: (grant) =>
          h(
            'li',
            { class: 'row', 'data-grant': grant.id },
            h('p', { class: 'row-title' }, h('strong', { text: grant.client.name }), ' ', badge(grant.access === 'write' ? 'warning' : 'connected', grant.access === 'write' ? 'Read and write' : 'Read', 'Access: ')),
            facts([
              ['Providers', grant.providers.map((id) => ctx.providerName(id)).join(', ')],
              ['End user', grant.endUser ? grant.endUser.id : null],
              ['Connected', time(grant.createdAt)],
              ['Last used', grant.lastUsedAt ? time(grant.lastUsedAt) : 'never'],
              ['Expires', time(grant.expiresAt)],
              ['Client', grant.client.id],
            ]),
            ctx.entered ? null : h('div', { class: 'actions' }, actionButton('Revoke', ` access for ${grant.client.name}`, `revoke:${grant.id}`, (button) => this.revoke(grant, button), { danger: true })),
          ),
      }),
    );
    refocus(this.listBlock, key);
  }

  revoke(grant, button) {
    if (!confirmed(`Revoke access for ${grant.client.name}?\n\nIts tokens stop working at once; it must sign in again to reconnect.`)) return;
    return this.ctx.run(
      button,
      async () => {
        clearMessages();
        await this.ctx.api('DELETE', `/v1/oauth/grants/${encodeURIComponent(grant.id)}`);
        await this.load();
        say(`Access for ${grant.client.name} is revoked.`);
        this.root.querySelector('#grants-title')?.focus();
      },
      { onRefresh: () => this.load() },
    );
  }
}
