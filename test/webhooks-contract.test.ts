/**
 * The webhook contract is documented where a product engineer looks (docs/contract.md §7): every
 * event type, with every field of its data, in the OpenAPI document's `webhooks` object and in
 * docs/webhooks.md.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_DATA, EVENT_TYPES } from '../src/events/types.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';

const CONTRACT_TYPES = [
  'organization.created',
  'organization.deleted',
  'organization.member_invited',
  'integration.connected',
  'integration.connect_failed',
  'integration.status_changed',
  'integration.deleted',
];

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ background: false });
});
afterAll(() => t.close());

describe('the webhook contract', () => {
  it('declares every event type of the contract, each carrying organizationId and externalId', () => {
    expect([...EVENT_TYPES].sort()).toEqual([...CONTRACT_TYPES].sort());
    for (const type of EVENT_TYPES) {
      const properties = Object.keys((EVENT_DATA[type] as { properties: object }).properties);
      expect(properties, type).toEqual(expect.arrayContaining(['organizationId', 'externalId']));
      if (type.startsWith('integration.')) expect(properties, type).toEqual(expect.arrayContaining(['provider', 'endUser']));
    }
  });

  it("lists every event and its data schema in the OpenAPI document's webhooks object", async () => {
    const document = (await t.fastify.inject({ method: 'GET', url: '/api-docs' })).json();
    // webhook.test (§7) is a type of its own: in the document, never in EVENT_TYPES (an endpoint's eventTypes refuse it).
    expect(Object.keys(document.webhooks).sort()).toEqual([...CONTRACT_TYPES, 'webhook.test'].sort());
    const test = document.webhooks['webhook.test'].post;
    expect(test.operationId).toBe('webhook_webhook_test');
    expect(Object.keys(test.requestBody.content['application/json'].schema.properties.data.properties)).toEqual(['endpointId']);
    for (const type of CONTRACT_TYPES) {
      const operation = document.webhooks[type].post;
      expect(operation.operationId).toMatch(/^webhook_/);
      const body = operation.requestBody.content['application/json'].schema;
      expect(body.properties.type.const).toBe(type);
      expect(Object.keys(body.properties.data.properties)).toEqual(Object.keys((EVENT_DATA[type as keyof typeof EVENT_DATA] as { properties: object }).properties));
      expect(operation.parameters.map((p: { name: string }) => p.name)).toEqual(['webhook-id', 'webhook-timestamp', 'webhook-signature']);
    }
  });

  it('documents every event, and every field of its data, in docs/webhooks.md', () => {
    const page = readFileSync(new URL('../docs/webhooks.md', import.meta.url), 'utf8');
    const sections = page.split(/^### /m).slice(1);
    const byType = new Map(sections.map((section) => [/^`([^`]+)`/.exec(section)?.[1] ?? '', section]));
    expect([...byType.keys()].sort()).toEqual([...CONTRACT_TYPES, 'webhook.test'].sort());
    expect(byType.get('webhook.test')).toContain('`endpointId`');
    const common = page.slice(0, page.indexOf('## Events'));
    for (const type of EVENT_TYPES) {
      const section = byType.get(type) ?? '';
      for (const field of Object.keys((EVENT_DATA[type] as { properties: object }).properties)) {
        expect(section.includes(`\`${field}`) || common.includes(`\`${field}\``), `${type}: ${field}`).toBe(true);
      }
    }
  });
});
