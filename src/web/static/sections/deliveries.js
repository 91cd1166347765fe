// Webhook deliveries (system administrators, docs/contract.md §11): every event sent to the
// configured webhooks, with each attempt's answer, filtered by status and event type, page by
// page; a failed or pending one is retried now, a delivered one sent again (marked a replay).

import { actionButton, badge, Cursor, clearMessages, confirmed, describeError, facts, field, focusedKey, h, pagedList, refocus, say, sectionHead, select, time } from '../ui.js';

const STATUS_LABELS = { pending: 'Pending', delivered: 'Delivered', failed: 'Failed' };
const BADGES = { pending: 'warning', delivered: 'connected', failed: 'invalid' };
const EVENT_TYPES = [
  'organization.created',
  'organization.deleted',
  'organization.member_invited',
  'integration.connected',
  'integration.connect_failed',
  'integration.status_changed',
  'integration.deleted',
];
/** Attempts shown per delivery; the API keeps the latest twenty. */
const ATTEMPTS_SHOWN = 5;

export default {
  id: 'deliveries',
  title: 'Webhook deliveries',
  visible: (ctx) => ctx.isSystemAdmin(),
  async render(ctx, root) {
    const view = new DeliveriesView(ctx, root);
    await view.load();
  },
};

/** One attempt in words: the receiver's answer, or why there was none. */
function attemptText(attempt) {
  const answer = attempt.responseStatus !== null ? `HTTP ${attempt.responseStatus}` : (attempt.error ?? 'no answer');
  return `${answer} after ${attempt.durationMs} ms${attempt.replay ? ' (sent again by hand)' : ''}`;
}

class DeliveriesView {
  constructor(ctx, root) {
    this.ctx = ctx;
    this.root = root;
    this.cursor = new Cursor();
    this.deliveries = [];
    this.filter = { status: '', eventType: '' };
    const status = select('delivery-status', [['', 'Any status'], ...Object.entries(STATUS_LABELS)], '');
    const type = select('delivery-type', [['', 'Any event type'], ...EVENT_TYPES.map((t) => [t, t])], '');
    const form = h('form', { id: 'delivery-filter', class: 'inline-form' }, field('Status', status), field('Event type', type), h('button', { type: 'submit' }, 'Filter'));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.filter = { status: status.value, eventType: type.value };
      this.cursor.reset();
      void this.ctx.run(form.querySelector('button'), () => this.load());
    });
    this.listBlock = h('div', { id: 'delivery-list' });
    this.endpointBlock = h('div', { id: 'endpoint-list' });
    root.append(
      sectionHead('deliveries', 'Webhook deliveries', actionButton('Reload', ' the deliveries', 'reload-deliveries', (button) => this.ctx.run(button, () => this.load()))),
      h('h3', { text: 'Endpoints' }),
      h('p', { class: 'note', text: 'Where events go: the settings’ endpoint (EVENTS_WEBHOOK_URL) and those added through the API or `tessera webhooks add`, which also change, rotate and test them.' }),
      this.endpointBlock,
      h('h3', { text: 'Deliveries' }),
      h('p', { class: 'note', text: 'Events Tessera sent to your webhooks, newest first. A delivery still failing three days (EVENTS_WEBHOOK_MAX_AGE) after its event is given up; retry it here once the receiver works.' }),
      form,
      this.listBlock,
    );
  }

  async load() {
    await this.loadEndpoints();
    const params = new URLSearchParams({ first: '20' });
    if (this.filter.status) params.set('status', this.filter.status);
    if (this.filter.eventType) params.set('eventType', this.filter.eventType);
    if (this.cursor.after) params.set('after', this.cursor.after);
    try {
      const answer = await this.ctx.deployment.api('GET', `/v1/webhooks/deliveries?${params}`);
      this.deliveries = answer.deliveries;
      this.cursor.seen(answer.pageInfo);
    } catch (error) {
      if (error.status === 401) return this.ctx.signedOut(describeError(error));
      this.listBlock.replaceChildren(h('p', { class: 'message-error', text: `The deliveries could not be loaded: ${describeError(error)}` }));
      return;
    }
    this.render();
  }

  /** The endpoints, each with where it came from, whether it is on, and what it receives. */
  async loadEndpoints() {
    let endpoints;
    try {
      endpoints = (await this.ctx.deployment.api('GET', '/v1/webhook-endpoints')).endpoints;
    } catch (error) {
      this.endpointBlock.replaceChildren(h('p', { class: 'message-error', text: `The endpoints could not be loaded: ${describeError(error)}` }));
      return;
    }
    this.endpointBlock.replaceChildren(
      endpoints.length === 0
        ? h('p', { class: 'muted', text: 'No endpoint: events are kept, and delivered to none.' })
        : h(
            'ul',
            { class: 'rows', 'aria-label': 'Webhook endpoints' },
            endpoints.map((endpoint) =>
              h(
                'li',
                { class: 'row', 'data-endpoint': endpoint.id },
                h('p', { class: 'row-title' }, h('code', { text: endpoint.url }), ' ', badge(endpoint.enabled ? 'connected' : 'warning', endpoint.enabled ? 'Enabled' : 'Disabled')),
                facts([
                  ['Id', endpoint.id],
                  ['From', endpoint.source === 'settings' ? 'the settings (EVENTS_WEBHOOK_URL)' : 'the API'],
                  ['Receives', endpoint.eventTypes.join(', ')],
                  ['Description', endpoint.description || null],
                ]),
              ),
            ),
          ),
    );
  }

  render() {
    const key = focusedKey(this.listBlock);
    this.listBlock.replaceChildren(
      pagedList({
        label: 'Deliveries',
        items: this.deliveries,
        cursor: this.cursor.view,
        empty: 'No delivery matches these filters.',
        onPage: (step) => {
          this.cursor.move(step);
          void this.load();
        },
        render: (delivery) => this.item(delivery),
      }),
    );
    refocus(this.listBlock, key);
  }

  item(delivery) {
    const attempts = delivery.attempts.slice(-ATTEMPTS_SHOWN);
    const earlier = delivery.attemptCount - attempts.length;
    const again = delivery.status === 'delivered';
    return h(
      'li',
      { class: 'row', 'data-delivery': delivery.id },
      h('p', { class: 'row-title' }, h('strong', { text: delivery.eventType }), ' ', badge(BADGES[delivery.status], STATUS_LABELS[delivery.status])),
      facts([
        ['Endpoint', h('code', { text: delivery.endpoint })],
        ['Event', delivery.eventId],
        ['Organization', delivery.organizationId],
        ['Next attempt', delivery.nextAttemptAt ? time(delivery.nextAttemptAt) : null],
      ]),
      h('p', { class: 'attempts-title', text: delivery.attemptCount === 0 ? 'Not attempted yet.' : `Attempts (${delivery.attemptCount})${earlier > 0 ? `, the latest ${attempts.length}` : ''}:` }),
      attempts.length ? h('ol', { class: 'attempts' }, attempts.map((attempt) => h('li', {}, time(attempt.at), ` — ${attemptText(attempt)}`))) : null,
      h(
        'div',
        { class: 'actions' },
        actionButton(again ? 'Send again' : 'Retry now', ` the ${delivery.eventType} delivery ${delivery.eventId}`, `retry:${delivery.id}`, (button) => this.retry(delivery, button), { primary: !again }),
      ),
    );
  }

  retry(delivery, button) {
    if (delivery.status === 'delivered' && !confirmed(`Send this ${delivery.eventType} event again to ${delivery.endpoint}?\n\nIt was delivered already: the receiver gets it a second time, with the same webhook-id.`)) return;
    return this.ctx.run(
      button,
      async () => {
        clearMessages();
        const answer = await this.ctx.deployment.api('POST', `/v1/webhooks/deliveries/${encodeURIComponent(delivery.id)}/retry`);
        const last = answer.delivery.attempts.at(-1);
        const taken = last !== undefined && last.responseStatus !== null && last.responseStatus >= 200 && last.responseStatus < 300;
        await this.load();
        say(taken ? `Delivered: the receiver answered ${attemptText(last)}.` : `Not delivered: ${last ? attemptText(last) : 'no answer'}. Check the receiver and try again.`);
      },
      { onRefresh: () => this.load() },
    );
  }
}
