// Provider events that arrive together are acted on together (decision 331): one transaction and
// one statement per step for the deliveries waiting while the database is busy, every rule of a
// delivery acted on alone kept — its own audit row (delivery id, request id) and event, a delivery
// id acting once even twice in one batch, and one delivery's failure failing no other.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import type { GroupedDelivery } from '../src/integrations/events/grouped.ts';
import { judge } from '../src/integrations/tokens/policy.ts';
import type { FakeProvider } from './fakes/common.ts';
import type { FakeGitHubUser } from './fakes/github.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { githubEvents } from './fakes/provider-events.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { registerAndLogin } from './helpers/identity.ts';
import { changeRecords, connectEndUser, eventsEnv, listen, SECRETS, send, statuses } from './helpers/provider-events.ts';
import { providerEnv } from './helpers/providers.ts';

let t: TestApp;
let base: string;
let gh: FakeProvider<FakeGitHubUser>;
const sender = githubEvents(SECRETS.github);
/** Each end user's GitHub account and integration, by login. */
const accounts = new Map<string, { user: FakeGitHubUser; integrationId: string }>();
/** Statements the app's database ran. */
let statements = 0;

beforeAll(async () => {
  gh = await startFakeGitHub();
  t = await createTestApp({
    env: { ...providerEnv(gh), ...eventsEnv('github'), RATE_LIMIT_MAX: '0' },
    onQuery: () => {
      statements++;
    },
  });
  base = await listen(t);
  const owner = await registerAndLogin(t.fastify, 'acme');
  const api = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token as string;
  for (let i = 0; i < 24; i++) {
    const login = `user-${i}`;
    const user = gh.addUser({ login, email: `${login}@example.com` });
    accounts.set(login, { user, integrationId: await connectEndUser(t.fastify, api, gh, `end-user-${i}`, login) });
  }
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

const account = (login: string) => accounts.get(login) as { user: FakeGitHubUser; integrationId: string };

async function auditsOf(integrationId: string) {
  return queryRows<{ request_id: string; credential_kind: string; credential_id: string; detail: Record<string, unknown> }>(
    t.database.db,
    sql`SELECT request_id, credential_kind, credential_id, detail FROM audit_logs WHERE action = 'integration.status_changed' AND target_id = ${integrationId} ORDER BY id`,
  );
}

async function eventsOf(integrationId: string) {
  return queryRows<{ data: Record<string, unknown> }>(t.database.db, sql`SELECT data FROM events WHERE type = 'integration.status_changed' AND data->'integration'->>'id' = ${integrationId} ORDER BY id`);
}

/** A revocation of `login`'s GitHub account as receive.ts hands it to the group (the route's checks passed). */
function revocation(login: string, deliveryId: string): GroupedDelivery {
  const { transition } = judge('revoked', 'event');
  if (!transition) throw new Error('no transition for a revocation event');
  return {
    provider: 'github',
    deliveryId,
    appId: 'github',
    targets: { accounts: [String(account(login).user.id)] },
    transition: { ...transition, deliveryId },
    actor: { principal: null, requestId: `req-${deliveryId}`, provider: 'github' },
  };
}

/**
 * Hands `deliveries` to the group in one turn of the event loop. On PGlite they all go in one
 * transaction; on PostgreSQL the first one or two find a free slot and go alone, and the rest wait
 * and go together — so what a test needs in one batch goes after two others.
 */
function together(deliveries: GroupedDelivery[]) {
  return Promise.allSettled(deliveries.map((delivery) => t.app.services.providerEvents.run(delivery)));
}

describe('provider events arriving together (decision 331)', () => {
  it('deliveries sent at once run fewer statements than as many sent one by one, each with its own audit row, request id and event', async () => {
    // One delivery alone: what each costs when none arrives with it.
    const alone = sender.authorizationRevoked({ id: account('user-0').user.id, login: 'user-0' });
    let counted = statements;
    expect((await send(base, 'github', alone)).status).toBe(200);
    const perDelivery = statements - counted;
    const logins = Array.from({ length: 11 }, (_, i) => `user-${i + 1}`);
    const deliveries = logins.map((login) => sender.authorizationRevoked({ id: account(login).user.id, login }));
    const before = await changeRecords(t);
    counted = statements;
    // Injected in one turn of the event loop: they arrive together whatever else the machine is doing.
    const answers = await Promise.all(
      deliveries.map((delivery) => t.fastify.inject({ method: 'POST', url: '/v1/providers/github/events', headers: delivery.headers, payload: delivery.body })),
    );
    const ran = statements - counted;
    for (const answer of answers) {
      expect(answer.statusCode, answer.body).toBe(200);
      expect(answer.json()).toEqual({ success: true });
    }
    expect(ran).toBeLessThan(perDelivery * deliveries.length);
    const ids = logins.map((login) => account(login).integrationId);
    expect(Object.values(await statuses(t, ids))).toEqual(ids.map(() => 'invalid'));
    expect(await changeRecords(t)).toEqual({ audits: before.audits + 11, events: before.events + 11 });
    const requestIds = new Set<string>();
    for (const [index, login] of logins.entries()) {
      const [audit, ...more] = await auditsOf(account(login).integrationId);
      expect(more).toEqual([]);
      // Its own delivery's id, and its own request's: never another's of its batch.
      expect(audit).toMatchObject({
        credential_kind: 'provider',
        credential_id: 'github',
        detail: { from: 'connected', to: 'invalid', source: 'provider_event', deliveryId: deliveries[index]?.headers['x-github-delivery'] },
      });
      requestIds.add(audit?.request_id as string);
      const events = await eventsOf(account(login).integrationId);
      expect(events.map((event) => event.data)).toEqual([
        expect.objectContaining({ from: 'connected', to: 'invalid', source: 'provider_event', provider: 'github', endUser: expect.objectContaining({ id: `end-user-${index + 1}` }) }),
      ]);
    }
    expect(requestIds.size).toBe(11);
  });

  it('a delivery id twice in one batch acts once: one status change, audit row and event; the copy is a duplicate', async () => {
    const before = await changeRecords(t);
    const id = crypto.randomUUID();
    const settled = await together([revocation('user-12', crypto.randomUUID()), revocation('user-13', crypto.randomUUID()), revocation('user-14', id), revocation('user-14', id)]);
    expect(settled.map((result) => (result.status === 'fulfilled' ? result.value.outcome : result.reason))).toEqual(['matched', 'matched', 'matched', 'duplicate']);
    expect(await changeRecords(t)).toEqual({ audits: before.audits + 3, events: before.events + 3 });
    const audits = await auditsOf(account('user-14').integrationId);
    expect(audits.map((audit) => audit.detail.deliveryId)).toEqual([id]);
    expect(await eventsOf(account('user-14').integrationId)).toHaveLength(1);
    // And the same id again, later and alone: a duplicate too.
    const [again] = await together([revocation('user-14', id)]);
    expect(again).toEqual({ status: 'fulfilled', value: { outcome: 'duplicate', named: [] } });
  });

  it('a delivery the database refuses fails alone: the others of its batch commit, each once', async () => {
    const before = await changeRecords(t);
    const bad = revocation('user-17', 'bad-\u0000-id');
    const settled = await together([
      revocation('user-15', crypto.randomUUID()),
      revocation('user-16', crypto.randomUUID()),
      revocation('user-18', crypto.randomUUID()),
      bad,
      revocation('user-19', crypto.randomUUID()),
    ]);
    expect(settled.map((result) => result.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    const ids = ['user-15', 'user-16', 'user-18', 'user-19'].map((login) => account(login).integrationId);
    expect(Object.values(await statuses(t, ids))).toEqual(ids.map(() => 'invalid'));
    expect(await statuses(t, [account('user-17').integrationId])).toEqual({ [account('user-17').integrationId]: 'connected' });
    expect(await changeRecords(t)).toEqual({ audits: before.audits + 4, events: before.events + 4 });
    for (const integrationId of ids) expect(await auditsOf(integrationId)).toHaveLength(1);
  });
});
