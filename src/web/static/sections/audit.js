// The audit log (owners and admins; a system administrator who entered the organization):
// newest first, page by page, filtered by integration, actor and action. Never holds a secret.

import { Cursor, describeError, facts, field, focusedKey, h, pagedList, refocus, sectionHead, select, time } from '../ui.js';

/** The actions the filter offers, in words. */
const ACTIONS = [
  ['integration.connected', 'Integration connected'],
  ['integration.reconnected', 'Integration reconnected'],
  ['integration.token_read', 'Token read'],
  ['integration.refreshed', 'Token refreshed'],
  ['integration.status_changed', 'Status changed'],
  ['integration.deleted', 'Integration deleted'],
  ['integration.connect_failed', 'Connect attempt failed'],
  ['connect_session.created', 'Connect session created'],
  ['connect_session.revoked', 'Connect session revoked'],
  ['invitation.created', 'Member invited'],
  ['invitation.accepted', 'Invitation accepted'],
  ['invitation.declined', 'Invitation declined'],
  ['invitation.revoked', 'Invitation revoked'],
  ['member.role_changed', 'Role changed'],
  ['member.removed', 'Member removed'],
  ['api_token.created', 'API token created'],
  ['api_token.revoked', 'API token revoked'],
  ['personal_access_token.created', 'Personal access token created'],
  ['personal_access_token.revoked', 'Personal access token revoked'],
  ['service_token.created', 'Service token created'],
  ['service_token.revoked', 'Service token revoked'],
  ['user.registered', 'Registered'],
  ['session.created', 'Signed in'],
  ['session.revoked', 'Signed out'],
  ['organization.created', 'Organization created'],
  ['organization.renamed', 'Organization renamed'],
  ['organization.external_id_changed', "Product's key changed"],
  ['organization.deleted', 'Organization offboarded'],
  ['organization.switched', 'Switched organization'],
  ['impersonation.request', 'Request while impersonating'],
  ['service_token.request', 'Service token request'],
  ['system_admin.request', 'System administrator read'],
  ['webhook_delivery.retried', 'Webhook delivery retried'],
  ['app.created', 'App added'],
  ['app.updated', 'App changed'],
  ['app.deleted', 'App deleted'],
  ['capability.created', 'Agent capability minted'],
  ['capability.request', 'Agent request'],
  ['capability.revoked', 'Agent capability revoked'],
  ['mcp.tool_call', 'Agent tool call'],
  ['oauth_authorization.approved', 'MCP host approved'],
  ['oauth_grant.created', 'MCP host connected'],
  ['oauth_grant.revoked', 'MCP host access revoked'],
];
const ACTION_WORDS = new Map(ACTIONS);

/** An action in words: the list's, else its name made readable (`thing.did_this` → "Thing: did this"), never the raw name. */
export function actionWords(action) {
  const known = ACTION_WORDS.get(action);
  if (known) return known;
  const [subject = '', verb = ''] = action.split('.');
  const words = (text) => text.replaceAll('_', ' ');
  return `${words(subject).charAt(0).toUpperCase()}${words(subject).slice(1)}${verb ? `: ${words(verb)}` : ''}`;
}
const FIELDS = 'id action actorUserId impersonatorUserId credentialKind credentialId targetType targetId requestId detail createdAt';
const CREDENTIALS = { jwt: 'a signed-in session', pat: 'a personal access token', api_token: 'an API token', service_token: 'a service token', capability: 'an agent capability' };

export default {
  id: 'audit',
  title: 'Audit log',
  visible: (ctx) => ctx.canWrite() || Boolean(ctx.entered),
  async render(ctx, root) {
    const view = new AuditView(ctx, root);
    await view.start();
  },
};

class AuditView {
  constructor(ctx, root) {
    this.ctx = ctx;
    this.root = root;
    this.cursor = new Cursor();
    this.entries = [];
    this.filter = { integrationId: '', actorUserId: '', action: '' };
    this.people = new Map();
    this.integrations = new Map();
    this.form = h('form', { id: 'audit-filter', class: 'inline-form' });
    this.listBlock = h('div', { id: 'audit-list' });
    root.append(sectionHead('audit', 'Audit log'), h('p', { class: 'note', text: 'Who did what, when: every token read, connection, refresh, deletion and status change, newest first.' }), this.form, this.listBlock);
  }

  /** Loads what the filters offer (the organization's integrations and people), then the first page. */
  async start() {
    try {
      const [list, people] = await Promise.all([this.ctx.api('GET', '/v1/integrations'), this.ctx.graphql('{ members { user { id email name } } }')]);
      for (const integration of list.integrations) {
        const name = this.ctx.providerName(integration.provider);
        this.integrations.set(integration.id, integration.endUser ? `${name} · ${integration.endUser.displayName || integration.endUser.id}` : name);
      }
      for (const member of people.members) this.people.set(member.user.id, member.user.email);
    } catch (error) {
      if (error.status === 401) return this.ctx.signedOut(describeError(error));
      // The filters then offer less; the log itself may still load.
    }
    this.buildForm();
    await this.load();
  }

  buildForm() {
    const integration = select('audit-integration', [['', 'Any integration'], ...this.integrations], '');
    const actor = select('audit-actor', [['', 'Anyone'], ...this.people], '');
    const action = select('audit-action', [['', 'Any action'], ...ACTIONS], '');
    this.form.replaceChildren(field('Integration', integration), field('Actor', actor), field('Action', action), h('button', { type: 'submit' }, 'Filter'));
    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.filter = { integrationId: integration.value, actorUserId: actor.value, action: action.value };
      this.cursor.reset();
      void this.ctx.run(this.form.querySelector('button'), () => this.load());
    });
  }

  async load() {
    const variables = { first: 20, after: this.cursor.after, ...Object.fromEntries(Object.entries(this.filter).map(([key, value]) => [key, value || null])) };
    try {
      const answer = await this.ctx.graphql(
        `query($first: Int, $after: String, $integrationId: String, $actorUserId: String, $action: String) {
          auditLogs(first: $first, after: $after, integrationId: $integrationId, actorUserId: $actorUserId, action: $action) { nodes { ${FIELDS} } pageInfo { hasNextPage endCursor } }
        }`,
        variables,
      );
      this.entries = answer.auditLogs.nodes;
      this.cursor.seen(answer.auditLogs.pageInfo);
    } catch (error) {
      if (error.status === 401) return this.ctx.signedOut(describeError(error));
      this.listBlock.replaceChildren(h('p', { class: 'message-error', text: `The audit log could not be loaded: ${describeError(error)}` }));
      return;
    }
    this.render();
  }

  who(entry) {
    if (entry.credentialKind === 'capability') return this.agentChain(entry);
    const person = entry.actorUserId ? (this.people.get(entry.actorUserId) ?? `user ${entry.actorUserId}`) : null;
    const through = CREDENTIALS[entry.credentialKind] ?? null;
    if (person && through) return `${person}, with ${through}`;
    if (person || through) return person ?? `${through.charAt(0).toUpperCase()}${through.slice(1)}`;
    // No credential: an end user through a connect link, or Tessera's own background work.
    return entry.detail.includes('"connectSession"') ? 'An end user, through a connect link' : 'Tessera itself';
  }

  /** An agent's use, down its chain (docs/contract.md §9, §9a): agent → capability (→ an MCP host's grant) → the credential that minted it or the person who consented. */
  agentChain(entry) {
    let detail = {};
    try {
      detail = JSON.parse(entry.detail);
    } catch {
      // Shown without the chain.
    }
    const subject = detail.subject ?? {};
    const person = subject.userId ? (this.people.get(subject.userId) ?? `user ${subject.userId}`) : null;
    // An MCP host's grant (docs/contract.md §9a) is a person's consent, not a credential of theirs.
    const granted =
      subject.kind === 'user'
        ? `the consent of ${person ?? 'a person'}`
        : `${CREDENTIALS[subject.kind] ?? 'a credential'}${subject.id ? ` ${subject.id}` : ''}${person ? ` of ${person}` : ''}`;
    const grant = detail.grant ? `, signed in as MCP host (grant ${detail.grant})` : '';
    return `Agent ${detail.agent ? `"${detail.agent}"` : '(unnamed)'}, with capability ${entry.credentialId ?? ''}${grant}, granted by ${granted}`;
  }

  target(entry) {
    if (!entry.targetType) return null;
    if (entry.targetType === 'integration') {
      const known = this.integrations.get(entry.targetId);
      if (known) return known;
      // Gone since (deleted): named by the provider the row recorded, not by an id nobody reads.
      const provider = parsedDetail(entry.detail).provider;
      return typeof provider === 'string' ? `${this.ctx.providerName(provider)} (an integration since deleted)` : 'An integration since deleted';
    }
    return `${entry.targetType.replaceAll('_', ' ')} ${entry.targetId ?? ''}`.trim();
  }

  render() {
    const key = focusedKey(this.listBlock);
    this.listBlock.replaceChildren(
      pagedList({
        label: 'Audit entries',
        items: this.entries,
        cursor: this.cursor.view,
        empty: 'Nothing matches these filters.',
        onPage: (step) => {
          this.cursor.move(step);
          void this.load();
        },
        render: (entry) =>
          h(
            'li',
            { class: 'row', 'data-action': entry.action },
            h('p', { class: 'row-title' }, h('strong', { text: actionWords(entry.action) }), ' ', time(entry.createdAt)),
            facts([
              ['By', this.who(entry)],
              ['Impersonated by', entry.impersonatorUserId ? (this.people.get(entry.impersonatorUserId) ?? entry.impersonatorUserId) : null],
              ['On', this.target(entry)],
              ['Details', detailText(entry.detail)],
              ['Request', entry.requestId],
            ]),
          ),
      }),
    );
    refocus(this.listBlock, key);
  }
}

/** A row's detail as an object ({} when it is not one). */
function parsedDetail(json) {
  try {
    const detail = JSON.parse(json);
    return detail && typeof detail === 'object' ? detail : {};
  } catch {
    return {};
  }
}

/** A row's detail (JSON of ids, names and outcomes) as short text. */
function detailText(json) {
  try {
    const detail = JSON.parse(json);
    const parts = Object.entries(detail)
      .filter(([, value]) => value !== null && value !== undefined && typeof value !== 'object')
      .map(([key, value]) => `${key}: ${value}`);
    return parts.join(', ') || null;
  } catch {
    return null;
  }
}
