// The GitHub App's `installation` webhook (docs/contract.md §5b, §5c), HTTP in over real HTTP as
// GitHub delivers it (test/fakes/provider-events.ts); statuses, audit rows and events out:
// `deleted` and `suspend` make that installation's integration `invalid` (only that one),
// `unsuspend` validates it again — `connected` only once GitHub mints for it again.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { type FakeGitHubApp, type FakeInstallation, startFakeGitHubApp } from './fakes/githubapp.ts';
import { githubEvents } from './fakes/provider-events.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { registerAndLogin } from './helpers/identity.ts';
import { changeRecords, listen, send, statuses } from './helpers/provider-events.ts';
import { startFlow } from './helpers/providers.ts';

const CALLBACK = 'http://127.0.0.1:8080/v1/integrations/oauth/callback';
const SECRET = 'githubapp-webhook-secret-0123456789';
const sender = githubEvents(SECRET);

let t: TestApp;
let fake: FakeGitHubApp;
let base: string;
const installed: Record<string, { installation: FakeInstallation; integrationId: string; admin: { id: number; login: string } }> = {};

beforeAll(async () => {
  fake = await startFakeGitHubApp({ callbackUrl: CALLBACK });
  t = await createTestApp({ env: { ...fake.env(), INTEGRATION_OAUTH_GITHUBAPP_EVENTS_SECRET: SECRET, RATE_LIMIT_MAX: '0' } });
  base = await listen(t);
  for (const name of ['acme', 'globex', 'initech']) {
    const owner = await registerAndLogin(t.fastify, name);
    const admin = fake.addUser(`${name}-admin`);
    const started = await startFlow(t.fastify, owner.token, 'githubapp');
    const done = fake.install(started.authUrl, admin.login, { account: `${name}-org`, type: 'Organization' });
    const back = new URL(done.location);
    const res = await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${started.txCookie}` } });
    const landed = new URL(res.headers.location as string);
    expect(landed.searchParams.get('status'), landed.href).toBe('connected');
    installed[name] = { installation: done.installation, integrationId: landed.searchParams.get('integration') as string, admin };
  }
});

afterAll(async () => {
  await t?.close();
  await fake?.close();
});

const of = (name: string) => installed[name] as (typeof installed)[string];
const event = (action: string, name: string) => sender.installation(action, of(name).installation, of(name).admin);

async function byName(): Promise<Record<string, string>> {
  const found = await statuses(
    t,
    Object.values(installed).map((entry) => entry.integrationId),
  );
  return Object.fromEntries(Object.entries(installed).map(([name, entry]) => [name, found[entry.integrationId] as string]));
}

async function lastChange(integrationId: string) {
  const [audit] = await queryRows<{ credential_kind: string | null; credential_id: string | null; detail: Record<string, unknown> }>(
    t.database.db,
    sql`SELECT credential_kind, credential_id, detail FROM audit_logs WHERE action = 'integration.status_changed' AND target_id = ${integrationId} ORDER BY id DESC LIMIT 1`,
  );
  const [emitted] = await queryRows<{ data: Record<string, unknown> }>(
    t.database.db,
    sql`SELECT data FROM events WHERE type = 'integration.status_changed' AND data->'integration'->>'id' = ${integrationId} ORDER BY id DESC LIMIT 1`,
  );
  return { audit, data: emitted?.data };
}

describe('the installation webhook', () => {
  it('keeps each installation id where its events find it', async () => {
    const rows = await queryRows<{ id: string; provider_workspace_id: string | null }>(t.database.db, sql`SELECT id, provider_workspace_id FROM integrations WHERE provider = 'githubapp'`);
    expect(Object.fromEntries(rows.map((row) => [row.id, row.provider_workspace_id]))).toEqual(
      Object.fromEntries(Object.values(installed).map((entry) => [entry.integrationId, String(entry.installation.id)])),
    );
  });

  it('deleted: that installation’s integration is invalid, and only that one; the same delivery again changes nothing', async () => {
    fake.remove(of('acme').installation.id);
    const delivery = event('deleted', 'acme');
    const res = await send(base, 'githubapp', delivery);
    expect(res.status, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect(await byName()).toEqual({ acme: 'invalid', globex: 'connected', initech: 'connected' });
    const { audit, data } = await lastChange(of('acme').integrationId);
    expect(audit).toMatchObject({ credential_kind: 'provider', credential_id: 'githubapp', detail: { source: 'provider_event', deliveryId: delivery.headers['x-github-delivery'] } });
    expect(data).toMatchObject({ source: 'provider_event', to: 'invalid' });

    const before = await changeRecords(t);
    const again = await send(base, 'githubapp', sender.redeliver(delivery));
    expect(again.status, again.body).toBe(200);
    expect(await changeRecords(t)).toEqual(before);
  });

  it('suspend: invalid; unsuspend while GitHub still refuses: stays invalid; unsuspend once GitHub mints again: connected', async () => {
    fake.suspend(of('globex').installation.id);
    expect((await send(base, 'githubapp', event('suspend', 'globex'))).status).toBe(200);
    expect(await byName()).toEqual({ acme: 'invalid', globex: 'invalid', initech: 'connected' });

    // An unsuspend GitHub does not (yet) stand behind: the mint is refused, nothing changes.
    const early = await send(base, 'githubapp', event('unsuspend', 'globex'));
    expect(early.status, early.body).toBe(200);
    expect(await byName()).toEqual({ acme: 'invalid', globex: 'invalid', initech: 'connected' });

    fake.unsuspend(of('globex').installation.id);
    const mintsBefore = fake.mintedFor(of('globex').installation.id).length;
    const delivery = event('unsuspend', 'globex');
    const back = await send(base, 'githubapp', delivery);
    expect(back.status, back.body).toBe(200);
    expect(await byName()).toEqual({ acme: 'invalid', globex: 'connected', initech: 'connected' });
    expect(fake.mintedFor(of('globex').installation.id)).toHaveLength(mintsBefore + 1);
    const { data } = await lastChange(of('globex').integrationId);
    expect(data).toMatchObject({ from: 'invalid', to: 'connected' });

    // The same unsuspend again: a duplicate, not another mint.
    const before = await changeRecords(t);
    expect((await send(base, 'githubapp', sender.redeliver(delivery))).status).toBe(200);
    expect(fake.mintedFor(of('globex').installation.id)).toHaveLength(mintsBefore + 1);
    expect(await changeRecords(t)).toEqual(before);
  });

  it('an installation Tessera does not hold, or an action it does not act on: 200 and nothing changes', async () => {
    const before = await changeRecords(t);
    const stranger = { id: 99_999_999, account: { id: 123, login: 'nobody-org', type: 'Organization' as const } };
    for (const delivery of [sender.installation('deleted', stranger, { id: 5, login: 'nobody' }), event('new_permissions_accepted', 'initech'), event('created', 'initech')]) {
      const res = await send(base, 'githubapp', delivery);
      expect(res.status, res.body).toBe(200);
    }
    expect(await byName()).toEqual({ acme: 'invalid', globex: 'connected', initech: 'connected' });
    expect(await changeRecords(t)).toEqual(before);
  });

  it('a wrong or missing signature: 401 and nothing changes', async () => {
    const before = await changeRecords(t);
    const genuine = event('deleted', 'initech');
    const { 'x-hub-signature-256': _dropped, ...unsigned } = genuine.headers;
    for (const delivery of [githubEvents('another-webhook-secret-00000000').installation('deleted', of('initech').installation, of('initech').admin), { headers: unsigned, body: genuine.body }]) {
      const res = await send(base, 'githubapp', delivery);
      expect(res.status, res.body).toBe(401);
      expect(res.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    }
    expect(await byName()).toEqual({ acme: 'invalid', globex: 'connected', initech: 'connected' });
    expect(await changeRecords(t)).toEqual(before);
  });
});
