// Discord's webhook events (docs/contract.md §5b, §5e): `APPLICATION_DEAUTHORIZED`, signed with
// Ed25519 over `X-Signature-Timestamp` + the raw body and checked with the application's public
// key (the `eventsSecret` of `discord`, hex). HTTP in (deliveries signed as Discord signs them,
// over real HTTP); statuses, audit rows, events and metrics out. One Discord user is connected by
// two organizations, each through another app of the same client: the default deployment app and
// a second one (CONFIG_FILE) with a key pair of its own — so an event reaching both were it not
// scoped per app would show.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { buildProviderRegistry } from '../src/integrations/providers/registry.ts';
import type { FakeProvider } from './fakes/common.ts';
import { deliver, discordEvents, type SignedDelivery } from './fakes/provider-events.ts';
import { startFakeDiscord } from './fakes/providers/discord.ts';
import { createTestApp, type TestApp, testConfig } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { changeRecords, listen, metric, statuses } from './helpers/provider-events.ts';
import { providerEnv, startFlow } from './helpers/providers.ts';

let discord: FakeProvider;
let t: TestApp;
let base: string;
let acme: Account;
let globex: Account;
let dana: string;
const ids: Record<string, string> = {};
/** The default app's key pair, and the second deployment app's. */
const keys = discordEvents({ applicationId: '1100000000000000001' });
const keysB = discordEvents({ applicationId: '1100000000000000001' });

const dir = mkdtempSync(join(tmpdir(), 'tessera-discord-events-'));

const toProvider = (delivery: SignedDelivery) => deliver(`${base}/v1/providers/discord/events`, delivery);
const toApp = (app: string, delivery: SignedDelivery) => deliver(`${base}/v1/apps/${app}/events`, delivery);
const events = (outcome: string, type = 'application_deauthorized') => metric(t.fastify, 'tessera_provider_events_total', { provider: 'discord', type, outcome });

/** Connects `account`'s integration of Discord as `login` through `app` (the default when undefined); its id. */
async function connectVia(account: Account, app: string | undefined, login: string): Promise<string> {
  const started = await startFlow(t.fastify, account.token, 'discord', app === undefined ? {} : { app });
  const approved = discord.authorize(started.authUrl, login);
  const res = await t.fastify.inject({
    method: 'POST',
    url: '/v1/integrations/oauth/callback',
    headers: { cookie: `oauth_tx=${started.txCookie}` },
    payload: { provider: 'discord', code: approved.code, state: approved.state },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().integration.id as string;
}

async function byName(): Promise<Record<string, string>> {
  const found = await statuses(t, Object.values(ids));
  return Object.fromEntries(Object.entries(ids).map(([name, id]) => [name, found[id] as string]));
}
const allConnected = () => Object.fromEntries(Object.keys(ids).map((name) => [name, 'connected']));

async function reconnectAll(): Promise<void> {
  const status = await byName();
  if (status.viaDefault !== 'connected') expect(await connectVia(acme, undefined, 'dana')).toBe(ids.viaDefault);
  if (status.viaB !== 'connected') expect(await connectVia(globex, 'discord-b', 'dana')).toBe(ids.viaB);
  expect(await byName()).toEqual(allConnected());
}

/** No body at all: Discord expects 204 and nothing else. */
function expectNoContent(res: { status: number; body: string }): void {
  expect(res.status, res.body).toBe(204);
  expect(res.body).toBe('');
}

beforeAll(async () => {
  discord = await startFakeDiscord();
  const file = join(dir, 'apps.yaml');
  writeFileSync(
    file,
    [
      'integrationOauthApps:',
      '  - id: discord-b',
      '    provider: discord',
      `    clientId: ${JSON.stringify(discord.clientId)}`,
      `    clientSecret: ${JSON.stringify(discord.clientSecret)}`,
      `    eventsSecret: ${JSON.stringify(keysB.publicKey)}`,
      '',
    ].join('\n'),
  );
  t = await createTestApp({ env: { ...providerEnv(discord), INTEGRATION_OAUTH_DISCORD_EVENTS_SECRET: keys.publicKey, CONFIG_FILE: file, METRICS_ENABLED: 'true', RATE_LIMIT_MAX: '0' } });
  base = await listen(t);
  dana = String(discord.addUser({ login: 'dana', email: 'dana@example.com' }).id);
  [acme, globex] = [await registerAndLogin(t.fastify, 'acme'), await registerAndLogin(t.fastify, 'globex')];
  ids.viaDefault = await connectVia(acme, undefined, 'dana');
  ids.viaB = await connectVia(globex, 'discord-b', 'dana');
});

afterAll(async () => {
  await t?.close();
  await discord?.close();
});

describe("Discord's webhook events", () => {
  it('answers the PING with 204 and no body, changing nothing; a PING badly signed is 401', async () => {
    const before = await changeRecords(t);
    expectNoContent(await toProvider(keys.ping()));
    expectNoContent(await toApp('discord-b', keysB.ping()));
    // Discord checks that the endpoint refuses a bad signature before it saves the URL.
    const forged = await toProvider(keysB.ping());
    expect(forged.status, forged.body).toBe(401);
    expect(forged.json()).toMatchObject({ success: false, code: 'UNAUTHENTICATED' });
    expect(await byName()).toEqual(allConnected());
    expect(await changeRecords(t)).toEqual(before);
  });

  it('APPLICATION_DEAUTHORIZED naming the user: 204, invalid, with its audit row, event and metrics', async () => {
    const before = await changeRecords(t);
    const at = new Date(Date.now() - 4000);
    const delivery = keys.deauthorized(dana, { at });
    const res = await toProvider(delivery);
    expectNoContent(res);
    expect(await byName()).toEqual({ viaDefault: 'invalid', viaB: 'connected' });
    expect(await changeRecords(t)).toEqual({ audits: before.audits + 1, events: before.events + 1 });
    const [audit] = await queryRows<{ organization_id: string; credential_kind: string; credential_id: string; detail: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT organization_id, credential_kind, credential_id, detail FROM audit_logs WHERE action = 'integration.status_changed' AND target_id = ${ids.viaDefault} ORDER BY id DESC LIMIT 1`,
    );
    // The actor is the provider.
    expect(audit).toMatchObject({ organization_id: acme.organizationId, credential_kind: 'provider', credential_id: 'discord', detail: { from: 'connected', to: 'invalid', source: 'provider_event' } });
    // The delivery id is a digest of the signature: Discord sends none of its own.
    expect(audit?.detail.deliveryId).toMatch(/^sha256:[0-9a-f]{64}$/);
    const [event] = await queryRows<{ organization_id: string; data: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT organization_id, data FROM events WHERE type = 'integration.status_changed' AND data->'integration'->>'id' = ${ids.viaDefault} ORDER BY id DESC LIMIT 1`,
    );
    expect(event?.organization_id).toBe(acme.organizationId);
    expect(event?.data).toMatchObject({ provider: 'discord', from: 'connected', to: 'invalid', source: 'provider_event' });
    const status = await t.fastify.inject({ url: '/v1/integrations/discord/status', headers: bearer(acme.token) });
    expect(status.json().status).toMatchObject({ status: 'invalid', lastError: 'access revoked at the provider', actions: ['reconnect'] });
    expect(await events('matched')).toBe(1);
    expect(await metric(t.fastify, 'tessera_revocations_detected_total', { provider: 'discord', source: 'provider_event' })).toBe(1);
    // Discord says when (event.timestamp, UTC without an offset): the exact histogram, about 4 seconds.
    const sum = await metric(t.fastify, 'tessera_revocation_detection_seconds_sum', { provider: 'discord', source: 'provider_event' });
    expect(await metric(t.fastify, 'tessera_revocation_detection_seconds_count', { provider: 'discord', source: 'provider_event' })).toBe(1);
    expect(sum).toBeGreaterThanOrEqual(3.9);
    expect(sum).toBeLessThan(60);
    await reconnectAll();
  });

  it('the same delivery resent changes nothing and emits nothing (duplicate)', async () => {
    const delivery = keys.deauthorized(dana);
    expectNoContent(await toProvider(delivery));
    expect(await byName()).toEqual({ viaDefault: 'invalid', viaB: 'connected' });
    await reconnectAll();
    const before = await changeRecords(t);
    const duplicates = await events('duplicate');
    expectNoContent(await toProvider(keys.resend(delivery)));
    expect(await byName()).toEqual(allConnected());
    expect(await changeRecords(t)).toEqual(before);
    expect(await events('duplicate')).toBe(duplicates + 1);
  });

  it('an unknown user, or an event Tessera does not act on: 204 and nothing changes', async () => {
    const before = await changeRecords(t);
    const unmatched = await events('unmatched');
    expectNoContent(await toProvider(keys.deauthorized('999999999999999999')));
    expect(await events('unmatched')).toBe(unmatched + 1);
    expectNoContent(await toProvider(keys.authorized(dana)));
    expect(await events('unmatched', 'other')).toBeGreaterThanOrEqual(1);
    expect(await byName()).toEqual(allConnected());
    expect(await changeRecords(t)).toEqual(before);
  });

  it('a wrong signature, another key, a missing header or a stale timestamp: 401, and nothing changes', async () => {
    const before = await changeRecords(t);
    const rejected = await metric(t.fastify, 'tessera_provider_events_total', { provider: 'discord', type: 'unverified', outcome: 'rejected_signature' });
    const good = keys.deauthorized(dana);
    const flipped = good.headers['x-signature-ed25519'] as string;
    const tampered: SignedDelivery[] = [
      // Signed by the other app's key.
      keysB.deauthorized(dana),
      // One bit of the signature changed.
      { headers: { ...good.headers, 'x-signature-ed25519': `${flipped.slice(0, -1)}${flipped.endsWith('0') ? '1' : '0'}` }, body: good.body },
      // The body changed after signing.
      { headers: good.headers, body: good.body.replace('APPLICATION_DEAUTHORIZED', 'APPLICATION_DEAUTHORIZED ') },
      // The timestamp changed after signing.
      { headers: { ...good.headers, 'x-signature-timestamp': String(Number(good.headers['x-signature-timestamp']) - 1) }, body: good.body },
      // No signature; no timestamp; a signature that is not hex.
      { headers: { 'content-type': 'application/json', 'x-signature-timestamp': good.headers['x-signature-timestamp'] as string }, body: good.body },
      { headers: { 'content-type': 'application/json', 'x-signature-ed25519': flipped }, body: good.body },
      { headers: { ...good.headers, 'x-signature-ed25519': 'z'.repeat(128) }, body: good.body },
    ];
    for (const delivery of tampered) {
      const res = await toProvider(delivery);
      expect(res.status, res.body).toBe(401);
      expect(res.json()).toMatchObject({ success: false, code: 'UNAUTHENTICATED' });
    }
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'discord', type: 'unverified', outcome: 'rejected_signature' })).toBe(rejected + tampered.length);
    // Well signed, but signed over six minutes ago: a replay.
    const stale = await toProvider(keys.deauthorized(dana, { timestamp: Math.floor(Date.now() / 1000) - 360 }));
    expect(stale.status, stale.body).toBe(401);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'discord', type: 'unverified', outcome: 'stale' })).toBe(1);
    expect(await byName()).toEqual(allConnected());
    expect(await changeRecords(t)).toEqual(before);
    // The log line names the setting, never the key.
    expect(t.logs.text).toContain('INTEGRATION_OAUTH_DISCORD_EVENTS_SECRET');
  });

  it("per app: an event at the second app's route, signed with its key, acts only on that app's integrations", async () => {
    expectNoContent(await toApp('discord-b', keysB.deauthorized(dana)));
    expect(await byName()).toEqual({ viaDefault: 'connected', viaB: 'invalid' });
    const [audit] = await queryRows<{ organization_id: string }>(
      t.database.db,
      sql`SELECT organization_id FROM audit_logs WHERE action = 'integration.status_changed' AND target_id = ${ids.viaB} ORDER BY id DESC LIMIT 1`,
    );
    expect(audit?.organization_id).toBe(globex.organizationId);
    await reconnectAll();
    // And the default app's key at the second app's route is refused.
    expect((await toApp('discord-b', keys.deauthorized(dana))).status).toBe(401);
    expect(await byName()).toEqual(allConnected());
  });

  it('a well-signed body that is not what Discord sends: 400 INVALID_INPUT, nothing changes', async () => {
    const before = await changeRecords(t);
    for (const body of ['not json', JSON.stringify({ version: 1, type: 1, event: { type: 'APPLICATION_DEAUTHORIZED', timestamp: new Date().toISOString(), data: {} } })]) {
      const res = await toProvider(keys.sign(body));
      expect(res.status, res.body).toBe(400);
      expect(res.json()).toMatchObject({ code: 'INVALID_INPUT' });
    }
    expect(await byName()).toEqual(allConnected());
    expect(await changeRecords(t)).toEqual(before);
  });
});

describe("Discord's events secret is the application's public key", () => {
  it('a value that is not 64 hex characters refuses the start, naming the setting and never the value', () => {
    const bad = 'discord-client-secret-not-a-key-0000';
    const env = { ...providerEnv(discord), INTEGRATION_OAUTH_DISCORD_EVENTS_SECRET: bad };
    expect(() => buildProviderRegistry(testConfig(env))).toThrow(/INTEGRATION_OAUTH_DISCORD_EVENTS_SECRET.*64 hexadecimal characters/);
    try {
      buildProviderRegistry(testConfig(env));
    } catch (error) {
      expect(String((error as Error).message)).not.toContain(bad);
    }
    expect(() => buildProviderRegistry(testConfig({ ...providerEnv(discord), INTEGRATION_OAUTH_DISCORD_EVENTS_SECRET: keys.publicKey }))).not.toThrow();
  });

  it("an organization's own app: an events secret that is not a public key is 400; a public key is taken and checks its deliveries", async () => {
    const bad = await t.fastify.inject({
      method: 'POST',
      url: '/v1/apps',
      headers: bearer(acme.token),
      payload: { provider: 'discord', clientId: discord.clientId, clientSecret: discord.clientSecret, eventsSecret: 'g'.repeat(64) },
    });
    expect(bad.statusCode, bad.body).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'INVALID_INPUT' });
    expect(bad.body).not.toContain('g'.repeat(64));
    const own = discordEvents();
    const created = await t.fastify.inject({
      method: 'POST',
      url: '/v1/apps',
      headers: bearer(acme.token),
      payload: { provider: 'discord', clientId: discord.clientId, clientSecret: discord.clientSecret, eventsSecret: own.publicKey },
    });
    expect(created.statusCode, created.body).toBe(201);
    const app = created.json().app as { id: string; hasEventsSecret: boolean };
    expect(app.hasEventsSecret).toBe(true);
    const patched = await t.fastify.inject({ method: 'PATCH', url: `/v1/apps/${app.id}`, headers: bearer(acme.token), payload: { eventsSecret: 'abc'.repeat(20) } });
    expect(patched.statusCode, patched.body).toBe(400);
    expectNoContent(await toApp(app.id, own.ping()));
    expect((await toApp(app.id, keys.ping())).status).toBe(401);
    // It made no integration: its deauthorization names nobody of its own, whoever else the user connected.
    expectNoContent(await toApp(app.id, own.deauthorized(dana)));
    expect(await byName()).toEqual(allConnected());
  });
});
