import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { queryRows } from '../../src/db/client.ts';
import type { FakeProvider } from '../fakes/common.ts';
import { type DeliveryAnswer, deliver, type SignedDelivery } from '../fakes/provider-events.ts';
import type { TestApp } from './app.ts';
import { startThroughPage } from './connect-page.ts';
import { bearer } from './identity.ts';
import { connect } from './providers.ts';

/** Events secrets of the fakes' apps (`INTEGRATION_OAUTH_<P>_EVENTS_SECRET`). */
export const SECRETS = { slack: 'slack-signing-secret-0123456789abcdef', github: 'github-webhook-secret-0123456789', zoom: 'zoom-secret-token-0123456789abcd' } as const;

/** The events secrets' settings for the providers given. */
export function eventsEnv(...providers: (keyof typeof SECRETS)[]): Record<string, string> {
  return Object.fromEntries(providers.map((provider) => [`INTEGRATION_OAUTH_${provider.toUpperCase()}_EVENTS_SECRET`, SECRETS[provider]]));
}

/** The app listening on loopback, so deliveries arrive over real HTTP; its base URL. */
export async function listen(t: TestApp): Promise<string> {
  return t.fastify.listen({ port: 0, host: '127.0.0.1' });
}

/** Delivers to `POST /v1/providers/{provider}/events` of the app at `base`. */
export const send = (base: string, provider: string, delivery: SignedDelivery): Promise<DeliveryAnswer> => deliver(`${base}/v1/providers/${provider}/events`, delivery);

/** Connects the organization's own integration of `fake` as `login` (owner's token); its id. */
export async function connectOwn(app: FastifyInstance, ownerToken: string, fake: FakeProvider, login: string): Promise<string> {
  const res = await connect(app, ownerToken, fake, login);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().integration.id as string;
}

/** Connects an end user's integration through a connect session minted with `apiToken`; its id. */
export async function connectEndUser(app: FastifyInstance, apiToken: string, fake: FakeProvider, endUserId: string, login: string): Promise<string> {
  const minted = await app.inject({
    method: 'POST',
    url: '/v1/connect/sessions',
    headers: bearer(apiToken),
    payload: { redirectUri: 'http://127.0.0.1:8080/app/done', allowedProviders: [fake.id], endUser: { id: endUserId } },
  });
  expect(minted.statusCode, minted.body).toBe(201);
  const { tx, authUrl } = await startThroughPage(app, minted.json().session.url, fake.id);
  const back = new URL(fake.authorize(authUrl, login).location);
  const res = await app.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}` } });
  const landed = new URL(res.headers.location as string);
  expect(landed.searchParams.get('status'), landed.href).toBe('connected');
  return landed.searchParams.get('integration') as string;
}

/** The stored status of each integration, by id. */
export async function statuses(t: TestApp, ids: string[]): Promise<Record<string, string>> {
  const rows = await queryRows<{ id: string; status: string }>(t.database.db, sql`SELECT id, status FROM integrations WHERE id IN ${ids}`);
  return Object.fromEntries(rows.map((row) => [row.id, row.status]));
}

/** Counts of audit rows and events that record status changes (across organizations). */
export async function changeRecords(t: TestApp): Promise<{ audits: number; events: number }> {
  const [audits] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM audit_logs WHERE action = 'integration.status_changed'`);
  const [events] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM events WHERE type = 'integration.status_changed'`);
  return { audits: audits?.n ?? 0, events: events?.n ?? 0 };
}

/** `GET /metrics`: the value of one sample (0 when absent). */
export async function metric(app: FastifyInstance, name: string, labels: Record<string, string>): Promise<number> {
  const text = (await app.inject({ url: '/metrics' })).body;
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const labelText = line.slice(name.length).split('}')[0] ?? '';
    if (wanted.every((pair) => labelText.includes(pair))) return Number(line.split(' ').at(-1));
  }
  return 0;
}
