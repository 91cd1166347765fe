// Service tokens (system administrators, docs/contract.md §5d): one credential for a product's
// backend across every organization. The same view as API tokens, about the deployment.

import { TokensView } from './api-tokens.js';

export default {
  id: 'service-tokens',
  title: 'Service tokens',
  visible: (ctx) => ctx.isSystemAdmin(),
  async render(ctx, root) {
    const view = new TokensView(ctx, root, {
      id: 'service-tokens',
      title: 'Service tokens',
      noun: 'service token',
      list: 'serviceTokens',
      create: 'createServiceToken',
      revoke: 'revokeServiceToken',
      deployment: true,
      explain:
        "A product's backend uses a service token across all its customers: it creates and finds organizations, and acts as an admin in the one its X-Organization-ID header names. Revoking one also revokes the connect sessions it minted.",
    });
    await view.load();
  },
};
