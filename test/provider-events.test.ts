// Provider events (docs/contract.md §5b), HTTP in; statuses, audit rows, events and metrics out.
// Slack, GitHub and Zoom deliver signed events over real HTTP, built the way each provider's
// documentation says (test/fakes/provider-events.ts); two organizations hold integrations of the
// same provider accounts, one of them an end user's.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import type { FakeProvider } from './fakes/common.ts';
import type { FakeGitHubUser } from './fakes/github.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { githubEvents, slackEvents, zoomEvents } from './fakes/provider-events.ts';
import { startFakeZoom } from './fakes/providers/zoom.ts';
import type { FakeSlackUser } from './fakes/slack.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { changeRecords, connectEndUser, connectOwn, eventsEnv, listen, metric, SECRETS, send, statuses } from './helpers/provider-events.ts';
import { providerEnv } from './helpers/providers.ts';

let t: TestApp;
let base: string;
let slack: FakeProvider<FakeSlackUser>;
let gh: FakeProvider<FakeGitHubUser>;
let zoom: FakeProvider;
let a: Account;
let b: Account;
let apiA: string;
let apiB: string;
const ids: Record<string, string> = {};
const slackSender = slackEvents(SECRETS.slack);
const githubSender = githubEvents(SECRETS.github);
const zoomSender = zoomEvents(SECRETS.zoom);
const ZOOM_ACCOUNT = 'fakeAccount0001';

const all = () => Object.values(ids);
/** Statuses of every integration here, by the names given in `beforeAll`. */
async function byName(): Promise<Record<string, string>> {
  const found = await statuses(t, all());
  return Object.fromEntries(Object.entries(ids).map(([name, id]) => [name, found[id] as string]));
}
const everyConnected = (names: string[]) => Object.fromEntries(names.map((name) => [name, 'connected']));

const users = new Map<string, { id: string | number }>();
function addUser(fake: FakeProvider, login: string): void {
  users.set(`${fake.id}:${login}`, fake.addUser({ login, email: `${login}@example.com` }));
}

beforeAll(async () => {
  [slack, gh, zoom] = await Promise.all([startFakeSlack(), startFakeGitHub(), startFakeZoom()]);
  t = await createTestApp({
    env: { ...providerEnv(slack), ...providerEnv(gh), ...providerEnv(zoom), ...eventsEnv('slack', 'github', 'zoom'), METRICS_ENABLED: 'true', RATE_LIMIT_MAX: '0' },
  });
  base = await listen(t);
  [a, b] = [await registerAndLogin(t.fastify, 'acme'), await registerAndLogin(t.fastify, 'globex')];
  apiA = (await graphqlData(t.fastify, a.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
  apiB = (await graphqlData(t.fastify, b.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
  for (const login of ['alice', 'bob', 'carol']) addUser(slack, login);
  for (const login of ['octo', 'other']) addUser(gh, login);
  for (const login of ['zed', 'zoe']) addUser(zoom, login);
  ids.slackA = await connectOwn(t.fastify, a.token, slack, 'alice');
  ids.slackCarol = await connectEndUser(t.fastify, apiA, slack, 'carol-1', 'carol');
  ids.slackB = await connectOwn(t.fastify, b.token, slack, 'bob');
  // The same GitHub account connected by two organizations, and another account as an end user's.
  ids.ghA = await connectOwn(t.fastify, a.token, gh, 'octo');
  ids.ghB = await connectOwn(t.fastify, b.token, gh, 'octo');
  ids.ghOther = await connectEndUser(t.fastify, apiB, gh, 'someone', 'other');
  ids.ghOctoEndUser = await connectEndUser(t.fastify, apiB, gh, 'octo-as-end-user', 'octo');
  ids.zoomA = await connectOwn(t.fastify, a.token, zoom, 'zed');
  ids.zoomB = await connectOwn(t.fastify, b.token, zoom, 'zoe');
});

afterAll(async () => {
  await t?.close();
  await Promise.all([slack?.close(), gh?.close(), zoom?.close()]);
});

/** Reconnects whatever is not connected, as its owner or end user would; every id is kept. */
async function reconnectAll(): Promise<void> {
  const now = await byName();
  const again: Record<string, () => Promise<string>> = {
    slackA: () => connectOwn(t.fastify, a.token, slack, 'alice'),
    slackCarol: () => connectEndUser(t.fastify, apiA, slack, 'carol-1', 'carol'),
    slackB: () => connectOwn(t.fastify, b.token, slack, 'bob'),
    ghA: () => connectOwn(t.fastify, a.token, gh, 'octo'),
    ghB: () => connectOwn(t.fastify, b.token, gh, 'octo'),
    ghOther: () => connectEndUser(t.fastify, apiB, gh, 'someone', 'other'),
    ghOctoEndUser: () => connectEndUser(t.fastify, apiB, gh, 'octo-as-end-user', 'octo'),
    zoomA: () => connectOwn(t.fastify, a.token, zoom, 'zed'),
    zoomB: () => connectOwn(t.fastify, b.token, zoom, 'zoe'),
  };
  for (const [name, status] of Object.entries(now)) {
    if (status === 'connected') continue;
    // Reconnecting returns it to connected under the same id (docs/contract.md §5b).
    expect(await again[name]?.()).toBe(ids[name]);
  }
  expect(await byName()).toEqual(everyConnected(Object.keys(ids)));
}

async function auditOf(integrationId: string) {
  return queryRows<{ credential_kind: string | null; credential_id: string | null; actor_user_id: string | null; detail: Record<string, unknown> }>(
    t.database.db,
    sql`SELECT credential_kind, credential_id, actor_user_id, detail FROM audit_logs WHERE action = 'integration.status_changed' AND target_id = ${integrationId} ORDER BY id DESC LIMIT 1`,
  );
}

async function lastEventOf(integrationId: string) {
  const rows = await queryRows<{ organization_id: string; data: Record<string, unknown> }>(
    t.database.db,
    sql`SELECT organization_id, data FROM events WHERE type = 'integration.status_changed' AND data->'integration'->>'id' = ${integrationId} ORDER BY id DESC LIMIT 1`,
  );
  return rows[0];
}

describe('Slack (Events API)', () => {
  it('answers the url_verification handshake with its challenge, and changes nothing', async () => {
    const before = await changeRecords(t);
    const res = await send(base, 'slack', slackSender.urlVerification('3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P'));
    expect(res.status, res.body).toBe(200);
    expect(res.json()).toEqual({ challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' });
    expect(await changeRecords(t)).toEqual(before);
  });

  it('tokens_revoked makes exactly the named users’ integrations invalid — an end user’s too — with audit, event and metrics', async () => {
    const team = 'T0FAKE0001';
    const aliceId = (await userId(slack, 'alice')) as string;
    const carolId = (await userId(slack, 'carol')) as string;
    const delivery = slackSender.tokensRevoked(team, [aliceId, carolId], { botIds: ['U0FAKEBOT'], eventTime: Math.floor(Date.now() / 1000) - 2 });
    const before = await changeRecords(t);
    const res = await send(base, 'slack', delivery);
    expect(res.status, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect(await byName()).toEqual({ ...everyConnected(Object.keys(ids)), slackA: 'invalid', slackCarol: 'invalid' });
    expect(await changeRecords(t)).toEqual({ audits: before.audits + 2, events: before.events + 2 });

    const eventId = JSON.parse(delivery.body).event_id;
    const [audit] = await auditOf(ids.slackCarol as string);
    expect(audit).toMatchObject({ credential_kind: 'provider', credential_id: 'slack', actor_user_id: null, detail: { from: 'connected', to: 'invalid', source: 'provider_event', deliveryId: eventId } });
    const event = await lastEventOf(ids.slackCarol as string);
    expect(event?.organization_id).toBe(a.organizationId);
    expect(event?.data).toMatchObject({ provider: 'slack', from: 'connected', to: 'invalid', source: 'provider_event', endUser: { id: 'carol-1' } });

    const status = await t.fastify.inject({ url: '/v1/integrations/slack/status', headers: bearer(apiA) });
    expect(status.json().status).toMatchObject({ status: 'invalid', lastError: 'access revoked at the provider', actions: ['reconnect'] });
    expect(status.json().status.detectedAt).toEqual(expect.any(String));

    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'slack', type: 'tokens_revoked', outcome: 'matched' })).toBe(1);
    expect(await metric(t.fastify, 'tessera_revocations_detected_total', { provider: 'slack', source: 'provider_event' })).toBe(2);
    // Slack says when (event_time): the exact histogram, not the bound.
    expect(await metric(t.fastify, 'tessera_revocation_detection_seconds_count', { provider: 'slack', source: 'provider_event' })).toBe(2);
    expect(await metric(t.fastify, 'tessera_revocation_detection_seconds_bucket', { provider: 'slack', source: 'provider_event', le: '10' })).toBe(2);

    // Slack retries a delivery it thinks failed: same event_id, new timestamp. Once reconnected, the retry changes nothing.
    await reconnectAll();
    const afterReconnect = await changeRecords(t);
    const retried = await send(base, 'slack', slackSender.retry(delivery));
    expect(retried.status, retried.body).toBe(200);
    expect(retried.json()).toEqual({ success: true });
    expect(await byName()).toEqual(everyConnected(Object.keys(ids)));
    expect(await changeRecords(t)).toEqual(afterReconnect);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'slack', type: 'tokens_revoked', outcome: 'duplicate' })).toBe(1);
  });

  it('app_uninstalled makes every Slack integration of the workspace invalid, in both organizations', async () => {
    const res = await send(base, 'slack', slackSender.appUninstalled('T0FAKE0001'));
    expect(res.status, res.body).toBe(200);
    expect(await byName()).toEqual({ ...everyConnected(Object.keys(ids)), slackA: 'invalid', slackCarol: 'invalid', slackB: 'invalid' });
    await reconnectAll();
  });

  it('an unknown user, another workspace or an event type not acted on: 200, and nothing changes', async () => {
    const before = await changeRecords(t);
    const botsOnly = slackSender.tokensRevoked('T0FAKE0001', [], { botIds: ['U0FAKEBOT'] });
    for (const delivery of [slackSender.tokensRevoked('T0FAKE0001', ['U0NOBODY00']), botsOnly, slackSender.appUninstalled('T0OTHERTEAM'), slackSender.other('T0FAKE0001', 'message')]) {
      const res = await send(base, 'slack', delivery);
      expect(res.status, res.body).toBe(200);
      expect(res.json()).toEqual({ success: true });
    }
    expect(await byName()).toEqual(everyConnected(Object.keys(ids)));
    expect(await changeRecords(t)).toEqual(before);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'slack', type: 'tokens_revoked', outcome: 'unmatched' })).toBe(2);
  });

  it('a wrong or missing signature, or a stale timestamp: 401 and nothing changes', async () => {
    const aliceId = (await userId(slack, 'alice')) as string;
    const genuine = slackSender.tokensRevoked('T0FAKE0001', [aliceId]);
    const forged = slackEvents('not-the-signing-secret-000000000').tokensRevoked('T0FAKE0001', [aliceId]);
    const unsigned = { headers: { ...genuine.headers, 'x-slack-signature': '' }, body: genuine.body };
    const tampered = { headers: genuine.headers, body: genuine.body.replace('"tokens_revoked"', '"tokens_revoked" ') };
    const stale = slackSender.tokensRevoked('T0FAKE0001', [aliceId], { timestamp: Math.floor(Date.now() / 1000) - 6 * 60 });
    const before = await changeRecords(t);
    for (const delivery of [forged, unsigned, tampered, stale]) {
      const res = await send(base, 'slack', delivery);
      expect(res.status, res.body).toBe(401);
      expect(res.json()).toMatchObject({ success: false, code: 'UNAUTHENTICATED' });
    }
    expect(await byName()).toEqual(everyConnected(Object.keys(ids)));
    expect(await changeRecords(t)).toEqual(before);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'slack', outcome: 'rejected_signature' })).toBe(3);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'slack', outcome: 'stale' })).toBe(1);
  });

  it('a body over 1 MiB: 413', async () => {
    const big = slackSender.sign(JSON.stringify({ type: 'event_callback', team_id: 'T0FAKE0001', padding: 'x'.repeat(1024 * 1024) }));
    const res = await send(base, 'slack', big);
    expect(res.status).toBe(413);
    expect(res.json()).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
  });

  it('a well-signed body that is not what Slack sends: 400', async () => {
    const res = await send(base, 'slack', slackSender.sign('not json'));
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ code: 'INVALID_INPUT' });
  });
});

describe('GitHub (a GitHub App’s webhook)', () => {
  it('github_app_authorization revoked makes the sender’s integrations invalid in every organization, and only theirs', async () => {
    const sender = { id: Number(await userId(gh, 'octo')), login: 'octo' };
    const delivery = githubSender.authorizationRevoked(sender);
    const res = await send(base, 'github', delivery);
    expect(res.status, res.body).toBe(200);
    expect(await byName()).toEqual({ ...everyConnected(Object.keys(ids)), ghA: 'invalid', ghB: 'invalid', ghOctoEndUser: 'invalid' });
    const [audit] = await auditOf(ids.ghB as string);
    expect(audit).toMatchObject({ credential_kind: 'provider', credential_id: 'github', detail: { source: 'provider_event', deliveryId: delivery.headers['x-github-delivery'] } });
    expect((await lastEventOf(ids.ghB as string))?.organization_id).toBe(b.organizationId);
    // GitHub says not when: the bound from the last validation, not the exact histogram.
    expect(await metric(t.fastify, 'tessera_revocation_detection_bound_seconds_count', { provider: 'github', source: 'provider_event' })).toBe(3);
    expect(await metric(t.fastify, 'tessera_revocation_detection_seconds_count', { provider: 'github', source: 'provider_event' })).toBe(0);

    // A redelivery (same X-GitHub-Delivery) after reconnecting: GitHub signs no timestamp, the id stops the replay.
    await reconnectAll();
    const before = await changeRecords(t);
    const again = await send(base, 'github', githubSender.redeliver(delivery));
    expect(again.status, again.body).toBe(200);
    expect(await byName()).toEqual(everyConnected(Object.keys(ids)));
    expect(await changeRecords(t)).toEqual(before);
  });

  it('ping, an unknown sender: 200 and nothing changes; a wrong or missing signature: 401', async () => {
    const before = await changeRecords(t);
    for (const delivery of [githubSender.ping(), githubSender.authorizationRevoked({ id: 987654321, login: 'stranger' })]) {
      const res = await send(base, 'github', delivery);
      expect(res.status, res.body).toBe(200);
    }
    const sender = { id: Number(await userId(gh, 'octo')), login: 'octo' };
    const genuine = githubSender.authorizationRevoked(sender);
    const { 'x-hub-signature-256': _dropped, ...withoutSignature } = genuine.headers;
    for (const delivery of [githubEvents('wrong-webhook-secret-000000000').authorizationRevoked(sender), { headers: withoutSignature, body: genuine.body }]) {
      const res = await send(base, 'github', delivery);
      expect(res.status, res.body).toBe(401);
    }
    expect(await byName()).toEqual(everyConnected(Object.keys(ids)));
    expect(await changeRecords(t)).toEqual(before);
  });

  it('a body over 1 MiB: 413', async () => {
    const res = await send(base, 'github', githubSender.sign('push', JSON.stringify({ padding: 'x'.repeat(1024 * 1024 + 1) })));
    expect(res.status).toBe(413);
  });
});

describe('Zoom (app_deauthorized)', () => {
  it('answers endpoint.url_validation with the plain token and its HMAC', async () => {
    const res = await send(base, 'zoom', zoomSender.urlValidation('qgg8vlvZRS6UYooatFL8Aw'));
    expect(res.status, res.body).toBe(200);
    const { createHmac } = await import('node:crypto');
    expect(res.json()).toEqual({ plainToken: 'qgg8vlvZRS6UYooatFL8Aw', encryptedToken: createHmac('sha256', SECRETS.zoom).update('qgg8vlvZRS6UYooatFL8Aw').digest('hex') });
  });

  it('makes the deauthorizing user’s integration invalid, only in its account; a duplicate changes nothing', async () => {
    const zed = (await userId(zoom, 'zed')) as string;
    const wrongAccount = zoomSender.appDeauthorized('someOtherAccount', zed);
    expect((await send(base, 'zoom', wrongAccount)).status).toBe(200);
    expect(await byName()).toEqual(everyConnected(Object.keys(ids)));

    const delivery = zoomSender.appDeauthorized(ZOOM_ACCOUNT, zed, { deauthorizedAt: new Date(Date.now() - 1500) });
    const res = await send(base, 'zoom', delivery);
    expect(res.status, res.body).toBe(200);
    expect(await byName()).toEqual({ ...everyConnected(Object.keys(ids)), zoomA: 'invalid' });
    expect(await metric(t.fastify, 'tessera_revocation_detection_seconds_count', { provider: 'zoom', source: 'provider_event' })).toBe(1);
    expect(await metric(t.fastify, 'tessera_revocation_detection_seconds_bucket', { provider: 'zoom', source: 'provider_event', le: '1' })).toBe(0);

    await reconnectAll();
    const before = await changeRecords(t);
    // Zoom retries with the same body under a new timestamp.
    const retried = zoomSender.sign(delivery.body);
    expect((await send(base, 'zoom', retried)).status).toBe(200);
    expect(await byName()).toEqual(everyConnected(Object.keys(ids)));
    expect(await changeRecords(t)).toEqual(before);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'zoom', type: 'app_deauthorized', outcome: 'duplicate' })).toBe(1);
  });

  it('a wrong or missing signature or a stale timestamp: 401; a body over 1 MiB: 413', async () => {
    const zed = (await userId(zoom, 'zed')) as string;
    const forged = zoomEvents('wrong-secret-token-00000000000').appDeauthorized(ZOOM_ACCOUNT, zed);
    const stale = zoomSender.appDeauthorized(ZOOM_ACCOUNT, zed, { timestamp: Math.floor(Date.now() / 1000) - 10 * 60 });
    const genuine = zoomSender.appDeauthorized(ZOOM_ACCOUNT, zed);
    const { 'x-zm-signature': _dropped, ...withoutSignature } = genuine.headers;
    for (const delivery of [forged, stale, { headers: withoutSignature, body: genuine.body }]) expect((await send(base, 'zoom', delivery)).status).toBe(401);
    expect(await byName()).toEqual(everyConnected(Object.keys(ids)));
    expect((await send(base, 'zoom', zoomSender.sign(JSON.stringify({ event: 'x', padding: 'x'.repeat(1024 * 1024) })))).status).toBe(413);
  });
});

describe('revocations detected otherwise', () => {
  it('a proxied call meeting a revoked token counts as source "proxy", with the bound since its last proof', async () => {
    gh.revokeUser('other');
    const res = await t.fastify.inject({ url: '/v1/integrations/github/proxy/user?endUser=someone', headers: bearer(apiB) });
    expect(res.statusCode, res.body).toBe(409);
    expect((await byName()).ghOther).toBe('invalid');
    expect(await metric(t.fastify, 'tessera_revocations_detected_total', { provider: 'github', source: 'proxy' })).toBe(1);
    expect(await metric(t.fastify, 'tessera_revocation_detection_bound_seconds_count', { provider: 'github', source: 'proxy' })).toBe(1);
    await reconnectAll();
  });
});

describe('providers that cannot be reached this way', () => {
  it('404 NOT_FOUND for a provider without events, an unconfigured or unknown one', async () => {
    for (const provider of ['gitlab', 'nosuch', 'google']) {
      const res = await send(base, provider, slackSender.urlVerification());
      expect(res.status, provider).toBe(404);
      expect(res.json()).toMatchObject({ code: 'NOT_FOUND' });
    }
  });

  it('404 NOT_FOUND for Slack, GitHub and Zoom configured without an events secret, however well signed', async () => {
    const bare = await createTestApp({ background: false, env: { ...providerEnv(slack), ...providerEnv(gh), ...providerEnv(zoom), RATE_LIMIT_MAX: '0' } });
    try {
      const sender = { id: Number(await userId(gh, 'octo')), login: 'octo' };
      const deliveries: [string, ReturnType<typeof slackSender.sign>][] = [
        ['slack', slackSender.urlVerification()],
        ['github', githubSender.authorizationRevoked(sender)],
        ['zoom', zoomSender.urlValidation()],
      ];
      for (const [provider, delivery] of deliveries) {
        const res = await bare.fastify.inject({ method: 'POST', url: `/v1/providers/${provider}/events`, headers: delivery.headers, payload: delivery.body });
        expect(res.statusCode, provider).toBe(404);
        expect(res.json()).toMatchObject({ code: 'NOT_FOUND' });
      }
    } finally {
      await bare.close();
    }
  });
});

/** The provider's id of a user added to a fake here. */
async function userId(fake: FakeProvider, login: string): Promise<string | number | undefined> {
  return users.get(`${fake.id}:${login}`)?.id;
}
