// Google's Cross-Account Protection (docs/contract.md §5b, §5e): security event tokens pushed per
// RFC 8935, signed RS256 by a key of the JWKS that the RISC configuration names. HTTP in (a fake
// transmitter written from Google's documentation, test/fakes/google-risc.ts, pushing over real
// HTTP); statuses, audit rows, events, metrics and the transmitter's key-set requests out.
// One Google account is connected by three organizations, each through another app — the default
// deployment app, a second deployment app (CONFIG_FILE) and the third organization's own app — so
// an event for that account would reach all three were it not scoped by its `aud`.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { EventKeySets } from '../src/integrations/events/security-event-token.ts';
import type { FakeProvider } from './fakes/common.ts';
import { type FakeRisc, RISC, startFakeRisc } from './fakes/google-risc.ts';
import { startFakeGoogle } from './fakes/providers/google.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { changeRecords, listen, metric } from './helpers/provider-events.ts';
import { providerEnv, startFlow } from './helpers/providers.ts';

const B = { clientId: '2222222222-appb.apps.googleusercontent.com', clientSecret: 'GOCSPX-fakeGoogleClientSecretB002' };
const OWN = { clientId: '3333333333-own.apps.googleusercontent.com', clientSecret: 'GOCSPX-fakeGoogleClientSecretO003' };

let google: FakeProvider;
let risc: FakeRisc;
let t: TestApp;
let base: string;
let acme: Account;
let globex: Account;
let initech: Account;
let ownApp: string;
/** Alice's Google account id (`sub`), connected by all three organizations; Bob's, by acme's end user. */
let alice: string;
let bob: string;
const ids: Record<string, string> = {};
/** The fake clock of the key sets' refetch rule (epoch ms). */
let clock = Date.now();

const dir = mkdtempSync(join(tmpdir(), 'tessera-google-risc-'));

async function connectVia(account: Account, app: string | undefined, login: string): Promise<string> {
  const started = await startFlow(t.fastify, account.token, 'google', app === undefined ? {} : { app });
  const approved = google.authorize(started.authUrl, login);
  const res = await t.fastify.inject({
    method: 'POST',
    url: '/v1/integrations/oauth/callback',
    headers: { cookie: `oauth_tx=${started.txCookie}` },
    payload: { provider: 'google', code: approved.code, state: approved.state },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().integration.id as string;
}

async function byName(): Promise<Record<string, string>> {
  const rows = await queryRows<{ id: string; status: string }>(t.database.db, sql`SELECT id, status FROM integrations WHERE id IN ${Object.values(ids)}`);
  const found = Object.fromEntries(rows.map((row) => [row.id, row.status]));
  return Object.fromEntries(Object.entries(ids).map(([name, id]) => [name, found[id] as string]));
}
const connected = () => Object.fromEntries(Object.keys(ids).map((name) => [name, 'connected']));

/** Sets every integration connected again (a reconnect's effect on the row; reconnecting is §5's, tested elsewhere). */
async function reset(): Promise<void> {
  await t.database.db.execute(sql`UPDATE integrations SET status = 'connected', last_error = NULL, detected_at = NULL, token_valid = true WHERE id IN ${Object.values(ids)}`);
}

const toProvider = (token: string, contentType?: string) => risc.push(`${base}/v1/providers/google/events`, token, contentType);
const toApp = (app: string, token: string) => risc.push(`${base}/v1/apps/${app}/events`, token);
/** A fresh key-set cache on the test's clock: as if the process had just started. */
function freshKeys(): void {
  t.app.services.eventKeys = new EventKeySets(() => clock);
}

beforeAll(async () => {
  [google, risc] = await Promise.all([startFakeGoogle(), startFakeRisc()]);
  google.registerClient(B);
  google.registerClient(OWN);
  const file = join(dir, 'apps.yaml');
  writeFileSync(
    file,
    ['integrationOauthApps:', '  - id: google-b', '    provider: google', `    clientId: ${JSON.stringify(B.clientId)}`, `    clientSecret: ${JSON.stringify(B.clientSecret)}`, ''].join('\n'),
  );
  t = await createTestApp({
    env: {
      ...providerEnv(google),
      INTEGRATION_OAUTH_GOOGLE_USERINFO_URL: `${google.url}/v1/userinfo`,
      INTEGRATION_OAUTH_GOOGLE_REVOKE_URL: `${google.url}/revoke`,
      INTEGRATION_OAUTH_GOOGLE_RISC: 'true',
      INTEGRATION_OAUTH_GOOGLE_RISC_CONFIG_URL: risc.configurationUrl,
      CONFIG_FILE: file,
      METRICS_ENABLED: 'true',
      RATE_LIMIT_MAX: '0',
    },
  });
  base = await listen(t);
  freshKeys();
  alice = String(google.addUser({ login: 'alice', email: 'alice@example.com' }).id);
  bob = String(google.addUser({ login: 'bob', email: 'bob@example.com' }).id);
  [acme, globex, initech] = [await registerAndLogin(t.fastify, 'acme'), await registerAndLogin(t.fastify, 'globex'), await registerAndLogin(t.fastify, 'initech')];
  const created = await t.fastify.inject({ method: 'POST', url: '/v1/apps', headers: bearer(initech.token), payload: { provider: 'google', name: 'Initech Google', ...OWN } });
  expect(created.statusCode, created.body).toBe(201);
  ownApp = created.json().app.id as string;
  ids.viaDefault = await connectVia(acme, undefined, 'alice');
  ids.viaB = await connectVia(globex, 'google-b', 'alice');
  ids.viaOwn = await connectVia(initech, ownApp, 'alice');
  // Another account through app B: an event naming alice leaves bob alone.
  ids.bobViaB = await connectVia(await registerAndLogin(t.fastify, 'hooli'), 'google-b', 'bob');
});

afterAll(async () => {
  await t?.close();
  await Promise.all([google?.close(), risc?.close()]);
});

describe('Google Cross-Account Protection (RISC)', () => {
  it("an account-disabled event for the default app's client id: 202 with no body; only that app's integration of the account → invalid, with audit row, event and metrics", async () => {
    const before = await changeRecords(t);
    const claims = risc.accountEvent(google.clientId, RISC.accountDisabled, alice);
    const res = await toProvider(risc.sign(claims));
    expect(res.status, res.body).toBe(202);
    expect(res.body).toBe('');
    expect(await byName()).toEqual({ ...connected(), viaDefault: 'invalid' });
    expect(await changeRecords(t)).toEqual({ audits: before.audits + 1, events: before.events + 1 });
    const [audit] = await queryRows<{ organization_id: string; detail: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT organization_id, detail FROM audit_logs WHERE action = 'integration.status_changed' AND target_id = ${ids.viaDefault} ORDER BY id DESC LIMIT 1`,
    );
    expect(audit).toMatchObject({ organization_id: acme.organizationId, detail: { from: 'connected', to: 'invalid', source: 'provider_event', deliveryId: claims.jti } });
    const [event] = await queryRows<{ data: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT data FROM events WHERE type = 'integration.status_changed' AND data->'integration'->>'id' = ${ids.viaDefault} ORDER BY id DESC LIMIT 1`,
    );
    expect(event?.data).toMatchObject({ organizationId: acme.organizationId, provider: 'google', from: 'connected', to: 'invalid', source: 'provider_event' });
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'google', type: 'account_disabled', outcome: 'matched' })).toBe(1);
    // Google says when (`iat`): the exact histogram.
    expect(await metric(t.fastify, 'tessera_revocation_detection_seconds_count', { provider: 'google', source: 'provider_event' })).toBe(1);
    expect(await metric(t.fastify, 'tessera_revocations_detected_total', { provider: 'google', source: 'provider_event' })).toBe(1);
    await reset();
  });

  it('tokens-revoked acts the same; the same jti again changes nothing (duplicate)', async () => {
    const token = risc.sign(risc.accountEvent(google.clientId, RISC.tokensRevoked, alice));
    expect((await toProvider(token)).status).toBe(202);
    expect(await byName()).toEqual({ ...connected(), viaDefault: 'invalid' });
    await reset();
    const before = await changeRecords(t);
    const again = await toProvider(token);
    expect(again.status, again.body).toBe(202);
    expect(await byName()).toEqual(connected());
    expect(await changeRecords(t)).toEqual(before);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'google', type: 'tokens_revoked', outcome: 'duplicate' })).toBe(1);
  });

  it('an account nobody connected, and an event type Tessera does not act on: 202, nothing changes', async () => {
    const before = await changeRecords(t);
    expect((await toProvider(risc.sign(risc.accountEvent(google.clientId, RISC.accountDisabled, '100000000000000000999')))).status).toBe(202);
    expect((await toProvider(risc.sign(risc.accountEvent(google.clientId, RISC.sessionsRevoked, alice)))).status).toBe(202);
    expect(await byName()).toEqual(connected());
    expect(await changeRecords(t)).toEqual(before);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'google', type: 'account_disabled', outcome: 'unmatched' })).toBe(1);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'google', type: 'other', outcome: 'unmatched' })).toBe(1);
  });

  it('the verification event: 202, nothing changes, its state logged', async () => {
    const before = await changeRecords(t);
    const res = await toProvider(risc.sign(risc.verification(google.clientId, 'state-from-the-stream-test-42')));
    expect(res.status, res.body).toBe(202);
    expect(res.body).toBe('');
    expect(await byName()).toEqual(connected());
    expect(await changeRecords(t)).toEqual(before);
    expect(t.logs.text).toContain('state-from-the-stream-test-42');
  });

  it('signature failures — another key, alg none, HS256 with the public key, tampered claims, not a JWT: 400 in RFC 8935 shape, nothing changes', async () => {
    const before = await changeRecords(t);
    const claims = risc.accountEvent(google.clientId, RISC.accountDisabled, alice);
    const good = risc.sign(claims);
    const [header, , signature] = good.split('.');
    const tampered = `${header}.${Buffer.from(JSON.stringify({ ...claims, events: { [RISC.accountDisabled]: { subject: { subject_type: 'iss-sub', iss: risc.issuer, sub: bob } } } })).toString('base64url')}.${signature}`;
    const hsHeader = Buffer.from(JSON.stringify({ alg: 'HS256', kid: risc.current.kid, typ: 'secevent+jwt' })).toString('base64url');
    const hsInput = `${hsHeader}.${good.split('.')[1]}`;
    const { createHmac } = await import('node:crypto');
    const confused = `${hsInput}.${createHmac('sha256', risc.current.publicKey.export({ format: 'pem', type: 'spki' })).update(hsInput).digest('base64url')}`;
    for (const [token, err, what] of [
      [risc.sign(claims, { key: risc.strangerKey(), kid: risc.current.kid }), 'invalid_key', "another key under Google's kid"],
      [risc.sign(claims, { alg: 'none', unsigned: true }), 'invalid_key', 'alg none'],
      [confused, 'invalid_key', 'HS256 keyed with the public key'],
      [tampered, 'invalid_key', 'claims changed after signing'],
      ['not-a-jwt', 'invalid_request', 'not a JWT'],
    ] as const) {
      const res = await toProvider(token);
      expect(res.status, `${what}: ${res.body}`).toBe(400);
      expect(res.json(), what).toEqual({ err, description: expect.any(String) });
    }
    expect(await byName()).toEqual(connected());
    expect(await changeRecords(t)).toEqual(before);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'google', type: 'unverified', outcome: 'rejected_signature' })).toBe(5);
  });

  it('a wrong iss (invalid_issuer), an aud of no app here (invalid_audience), an iat over 24 h old (invalid_request, stale): 400, nothing changes', async () => {
    const before = await changeRecords(t);
    const cases = [
      [risc.accountEvent(google.clientId, RISC.accountDisabled, alice, { iss: 'https://accounts.example.com/' }), 'invalid_issuer'],
      [risc.accountEvent('9999999999-stranger.apps.googleusercontent.com', RISC.accountDisabled, alice), 'invalid_audience'],
      // The organization's own app is not the default route's: its client id is heard at its own route only.
      [risc.accountEvent(OWN.clientId, RISC.accountDisabled, alice), 'invalid_audience'],
      [risc.accountEvent(google.clientId, RISC.accountDisabled, alice, { iat: Math.floor(Date.now() / 1000) - 24 * 3600 - 60 }), 'invalid_request'],
    ] as const;
    for (const [claims, err] of cases) {
      const res = await toProvider(risc.sign(claims));
      expect(res.status, res.body).toBe(400);
      expect(res.json()).toEqual({ err, description: expect.any(String) });
    }
    expect(await byName()).toEqual(connected());
    expect(await changeRecords(t)).toEqual(before);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'google', type: 'unverified', outcome: 'stale' })).toBe(1);
  });

  it("two deployment apps: an event whose aud is app B's client id, at /v1/providers/google/events, acts only on B's integrations", async () => {
    const res = await toProvider(risc.sign(risc.accountEvent(B.clientId, RISC.accountDisabled, alice)));
    expect(res.status, res.body).toBe(202);
    expect(await byName()).toEqual({ ...connected(), viaB: 'invalid' });
    await reset();
  });

  it("an organization's Google app: /v1/apps/{id}/events accepts its client id and acts on its integrations only; another client id there is invalid_audience", async () => {
    const res = await toApp(ownApp, risc.sign(risc.accountEvent(OWN.clientId, RISC.accountDisabled, alice)));
    expect(res.status, res.body).toBe(202);
    expect(await byName()).toEqual({ ...connected(), viaOwn: 'invalid' });
    await reset();
    for (const aud of [google.clientId, B.clientId]) {
      const refused = await toApp(ownApp, risc.sign(risc.accountEvent(aud, RISC.accountDisabled, alice)));
      expect(refused.status, refused.body).toBe(400);
      expect(refused.json()).toMatchObject({ err: 'invalid_audience' });
    }
    expect(await byName()).toEqual(connected());
  });

  it('Google apps need no events secret: they read hasEventsSecret false with an eventsUrl, and refuse one', async () => {
    const listed = await t.fastify.inject({ url: '/v1/apps?provider=google', headers: bearer(initech.token) });
    expect(listed.statusCode, listed.body).toBe(200);
    const apps = listed.json().apps as { id: string; eventsUrl: string | null; hasEventsSecret: boolean }[];
    expect(apps.map(({ id, eventsUrl, hasEventsSecret }) => ({ id, eventsUrl, hasEventsSecret }))).toEqual(
      expect.arrayContaining([
        { id: 'google', eventsUrl: expect.stringMatching(/\/v1\/providers\/google\/events$/), hasEventsSecret: false },
        { id: 'google-b', eventsUrl: expect.stringMatching(/\/v1\/apps\/google-b\/events$/), hasEventsSecret: false },
        { id: ownApp, eventsUrl: expect.stringMatching(new RegExp(`/v1/apps/${ownApp}/events$`)), hasEventsSecret: false },
      ]),
    );
    const refused = await t.fastify.inject({ method: 'PATCH', url: `/v1/apps/${ownApp}`, headers: bearer(initech.token), payload: { eventsSecret: 'an-events-secret-for-google-0001' } });
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json()).toMatchObject({ code: 'INVALID_INPUT', details: [{ path: 'eventsSecret' }] });
  });

  it("key rotation: an unknown kid fetches the key set once (never within 60 s of the last fetch), then it is known; a kid still unknown after a fetch is invalid_key", async () => {
    freshKeys();
    clock = Date.now();
    const fetched = () => risc.jwksRequests;
    const start = fetched();
    expect((await toProvider(risc.sign(risc.verification(google.clientId, 'before-rotation')))).status).toBe(202);
    expect(fetched()).toBe(start + 1);
    risc.rotate();
    // Within 60 s of the last fetch: not fetched again; the transmitter is told to retry.
    clock += 10_000;
    const early = await toProvider(risc.sign(risc.accountEvent(google.clientId, RISC.accountDisabled, alice)));
    expect(early.status, early.body).toBe(503);
    expect(Number(early.headers.get('retry-after'))).toBeGreaterThanOrEqual(50);
    expect(fetched()).toBe(start + 1);
    expect(await byName()).toEqual(connected());
    // Past the minute: five deliveries signed with the new key at once fetch it once.
    clock += 51_000;
    const answers = await Promise.all(Array.from({ length: 5 }, () => toProvider(risc.sign(risc.verification(google.clientId, 'after-rotation')))));
    expect(answers.map((answer) => answer.status)).toEqual([202, 202, 202, 202, 202]);
    expect(fetched()).toBe(start + 2);
    const res = await toProvider(risc.sign(risc.accountEvent(google.clientId, RISC.accountDisabled, alice)));
    expect(res.status, res.body).toBe(202);
    expect(await byName()).toEqual({ ...connected(), viaDefault: 'invalid' });
    await reset();
    expect(fetched()).toBe(start + 2);
    // A kid Google never published: after the minute, one fetch, then invalid_key; again at once, no fetch.
    clock += 61_000;
    const unknown = () => toProvider(risc.sign(risc.accountEvent(google.clientId, RISC.accountDisabled, alice), { key: risc.strangerKey() }));
    const refused = await unknown();
    expect(refused.status, refused.body).toBe(400);
    expect(refused.json()).toMatchObject({ err: 'invalid_key' });
    expect(fetched()).toBe(start + 3);
    expect((await unknown()).status).toBe(503);
    expect(fetched()).toBe(start + 3);
    expect(await byName()).toEqual(connected());
  });

  it('Google unreachable: 503 with Retry-After, nothing changes; once it answers again, the event acts', async () => {
    freshKeys();
    clock = Date.now();
    risc.down = true;
    const token = risc.sign(risc.accountEvent(google.clientId, RISC.accountDisabled, alice));
    const res = await toProvider(token);
    expect(res.status, res.body).toBe(503);
    expect(res.body).toBe('');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await byName()).toEqual(connected());
    risc.down = false;
    clock += 61_000;
    const retried = await toProvider(token);
    expect(retried.status, retried.body).toBe(202);
    expect(await byName()).toEqual({ ...connected(), viaDefault: 'invalid' });
    await reset();
  });
});

describe('Google RISC switched off', () => {
  it('without INTEGRATION_OAUTH_GOOGLE_RISC the route is 404, nothing is fetched, and Google apps read a null eventsUrl', async () => {
    const off = await createTestApp({ background: false, env: { ...providerEnv(google), INTEGRATION_OAUTH_GOOGLE_RISC_CONFIG_URL: risc.configurationUrl } });
    try {
      const fetched = risc.configurationRequests;
      const token = risc.sign(risc.accountEvent(google.clientId, RISC.accountDisabled, alice));
      for (const url of ['/v1/providers/google/events', '/v1/apps/google/events']) {
        const res = await off.fastify.inject({ method: 'POST', url, headers: { 'content-type': 'application/secevent+jwt' }, payload: token });
        expect(res.statusCode, res.body).toBe(404);
        expect(res.json()).toMatchObject({ success: false, code: 'NOT_FOUND' });
      }
      expect(risc.configurationRequests).toBe(fetched);
      const owner = await registerAndLogin(off.fastify, 'offco');
      const listed = await off.fastify.inject({ url: '/v1/apps?provider=google', headers: bearer(owner.token) });
      expect(listed.json().apps).toEqual([expect.objectContaining({ id: 'google', eventsUrl: null, hasEventsSecret: false })]);
    } finally {
      await off.close();
    }
  });
});
