// A captured GitHub revocation replayed (docs/contract.md §5b): GitHub signs neither a timestamp
// nor X-GitHub-Delivery, and its revocation bodies name only the user or the installation, so
// the same signed bytes under a new delivery id never act alone — Tessera checks live first (the
// user's token on GET /user; a mint for an installation). HTTP in over real HTTP as GitHub
// delivers (test/fakes/provider-events.ts); statuses, audit rows, events, metrics and the
// fakes' records out. Each shape: the replay after a reconnect changes nothing and emits
// nothing (`duplicate`); the grant really revoked at GitHub, the same bytes land; GitHub giving
// no verdict (rate limited, unreachable) leaves the status, answers 200 (`unverified`) and makes
// the next validation due now.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { runRetentionPass } from '../src/jobs/retention.ts';
import type { FakeProvider } from './fakes/common.ts';
import type { FakeGitHubUser } from './fakes/github.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { type FakeGitHubApp, type FakeInstallation, startFakeGitHubApp } from './fakes/githubapp.ts';
import { githubEvents, type SignedDelivery } from './fakes/provider-events.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, registerAndLogin } from './helpers/identity.ts';
import { changeRecords, connectOwn, eventsEnv, listen, metric, SECRETS, send, statuses } from './helpers/provider-events.ts';
import { providerEnv, startFlow } from './helpers/providers.ts';

const CALLBACK = 'http://127.0.0.1:8080/v1/integrations/oauth/callback';
const APP_SECRET = 'githubapp-webhook-secret-0123456789';
const github = githubEvents(SECRETS.github);
const app = githubEvents(APP_SECRET);

let t: TestApp;
let base: string;
let gh: FakeProvider<FakeGitHubUser>;
let ghApp: FakeGitHubApp;
let a: Account;
let b: Account;
let octo: { id: number; login: string };
const ids: Record<string, string> = {};
const installed: Record<string, { installation: FakeInstallation; admin: { id: number; login: string } }> = {};

beforeAll(async () => {
  [gh, ghApp] = await Promise.all([startFakeGitHub(), startFakeGitHubApp({ callbackUrl: CALLBACK })]);
  t = await createTestApp({
    background: false,
    env: { ...providerEnv(gh), ...eventsEnv('github'), ...ghApp.env(), INTEGRATION_OAUTH_GITHUBAPP_EVENTS_SECRET: APP_SECRET, METRICS_ENABLED: 'true', RATE_LIMIT_MAX: '0' },
  });
  base = await listen(t);
  [a, b] = [await registerAndLogin(t.fastify, 'acme'), await registerAndLogin(t.fastify, 'globex')];
  const user = gh.addUser({ login: 'octo', email: 'octo@example.com' });
  octo = { id: Number(user.id), login: 'octo' };
  gh.addUser({ login: 'other', email: 'other@example.com' });
  // The same GitHub account connected by two organizations, and another account (a third organization's) that no event names.
  ids.ghA = await connectOwn(t.fastify, a.token, gh, 'octo');
  ids.ghB = await connectOwn(t.fastify, b.token, gh, 'octo');
  ids.ghOther = await connectOwn(t.fastify, (await registerAndLogin(t.fastify, 'initech')).token, gh, 'other');
  for (const [name, owner] of [
    ['acme', a],
    ['globex', b],
  ] as const) {
    const admin = ghApp.addUser(`${name}-admin`);
    const { installation, integrationId } = await install(owner, admin.login, `${name}-org`);
    installed[name] = { installation, admin };
    ids[`app${name}`] = integrationId;
  }
});

afterAll(async () => {
  await t?.close();
  await Promise.all([gh?.close(), ghApp?.close()]);
});

/** Installs (or updates) the app on `account` as `login` and connects it for `owner`: the installation and the integration's id. */
async function install(owner: Account, login: string, account: string): Promise<{ installation: FakeInstallation; integrationId: string }> {
  const started = await startFlow(t.fastify, owner.token, 'githubapp');
  const done = ghApp.install(started.authUrl, login, { account, type: 'Organization' });
  const back = new URL(done.location);
  const res = await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${started.txCookie}` } });
  const landed = new URL(res.headers.location as string);
  expect(landed.searchParams.get('status'), landed.href).toBe('connected');
  return { installation: done.installation, integrationId: landed.searchParams.get('integration') as string };
}

async function byName(): Promise<Record<string, string>> {
  const found = await statuses(t, Object.values(ids));
  return Object.fromEntries(Object.entries(ids).map(([name, id]) => [name, found[id] as string]));
}

const allConnected = () => Object.fromEntries(Object.keys(ids).map((name) => [name, 'connected']));

/** The same signed bytes under a new X-GitHub-Delivery: what anyone who captured the delivery can send. */
const replay = (sender: ReturnType<typeof githubEvents>, delivery: SignedDelivery): SignedDelivery => sender.sign(delivery.headers['x-github-event'] as string, delivery.body);

/** The last status change recorded for an integration: its audit row's detail and its event's data. */
async function lastChange(integrationId: string) {
  const [audit] = await queryRows<{ detail: Record<string, unknown> }>(
    t.database.db,
    sql`SELECT detail FROM audit_logs WHERE action = 'integration.status_changed' AND target_id = ${integrationId} ORDER BY id DESC LIMIT 1`,
  );
  const [emitted] = await queryRows<{ data: Record<string, unknown> }>(
    t.database.db,
    sql`SELECT data FROM events WHERE type = 'integration.status_changed' AND data->'integration'->>'id' = ${integrationId} ORDER BY id DESC LIMIT 1`,
  );
  return { audit: audit?.detail, data: emitted?.data };
}

async function nextValidationAt(integrationId: string): Promise<number> {
  const [row] = await queryRows<{ next_validation_at: Date | string | null }>(t.database.db, sql`SELECT next_validation_at FROM integrations WHERE id = ${integrationId}`);
  return new Date(row?.next_validation_at ?? 0).getTime();
}

const outcomes = (provider: string, type: string) =>
  Promise.all(['matched', 'duplicate', 'unverified'].map(async (outcome) => [outcome, await metric(t.fastify, 'tessera_provider_events_total', { provider, type, outcome })] as const)).then(Object.fromEntries);

/** Every audit row, whatever its action: a replay writes none (not even a mint's `integration.refreshed`). */
const audits = async () => (await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM audit_logs`))[0]?.n ?? 0;

/** GET /user calls the GitHub fake has answered (the live check of a user's token). */
const userCalls = () => gh.requests.filter((request) => request.path.endsWith('/user')).length;

describe('github_app_authorization replayed under a new delivery id', () => {
  let revocation: SignedDelivery;

  it('the first delivery acts at once; after a reconnect its replay asks GitHub, changes nothing and emits nothing (duplicate)', async () => {
    gh.revokeUser('octo');
    revocation = github.authorizationRevoked(octo);
    const first = await send(base, 'github', revocation);
    expect(first.status, first.body).toBe(200);
    expect(await byName()).toEqual({ ...allConnected(), ghA: 'invalid', ghB: 'invalid' });

    // Both organizations reconnect: a new grant, the same integrations.
    expect(await connectOwn(t.fastify, a.token, gh, 'octo')).toBe(ids.ghA);
    expect(await connectOwn(t.fastify, b.token, gh, 'octo')).toBe(ids.ghB);
    expect(await byName()).toEqual(allConnected());

    const before = await changeRecords(t);
    const auditsBefore = await audits();
    const metricsBefore = await outcomes('github', 'github_app_authorization');
    const callsBefore = userCalls();
    const replayed = replay(github, revocation);
    expect(replayed.headers['x-github-delivery']).not.toBe(revocation.headers['x-github-delivery']);
    expect(replayed.body).toBe(revocation.body);
    const res = await send(base, 'github', replayed);
    expect(res.status, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect(await byName()).toEqual(allConnected());
    expect(await changeRecords(t)).toEqual(before);
    expect(await audits()).toBe(auditsBefore);
    // GitHub was asked, once per integration the body names, with the reconnected token: it works.
    expect(userCalls()).toBe(callsBefore + 2);
    expect(await outcomes('github', 'github_app_authorization')).toEqual({ ...metricsBefore, duplicate: metricsBefore.duplicate + 1 });

    // Replayed again and again: the same answer, never a change.
    for (let i = 0; i < 3; i++) expect((await send(base, 'github', replay(github, revocation))).status).toBe(200);
    expect(await byName()).toEqual(allConnected());
    expect(await changeRecords(t)).toEqual(before);
    expect(await audits()).toBe(auditsBefore);
  });

  it('the same delivery id again is a duplicate without asking GitHub', async () => {
    const before = await changeRecords(t);
    const auditsBefore = await audits();
    const callsBefore = userCalls();
    const duplicatesBefore = (await outcomes('github', 'github_app_authorization')).duplicate;
    const res = await send(base, 'github', github.redeliver(revocation));
    expect(res.status, res.body).toBe(200);
    expect(await byName()).toEqual(allConnected());
    expect(await changeRecords(t)).toEqual(before);
    expect(await audits()).toBe(auditsBefore);
    expect(userCalls()).toBe(callsBefore);
    expect((await outcomes('github', 'github_app_authorization')).duplicate).toBe(duplicatesBefore + 1);
  });

  it('GitHub rate limiting or unreachable: 200, unverified, the status as it was, the next validation due now', async () => {
    for (const mode of ['rate-limited', 'down'] as const) {
      const before = await changeRecords(t);
      const auditsBefore = await audits();
      const unverifiedBefore = (await outcomes('github', 'github_app_authorization')).unverified;
      gh.mode = { token: 'ok', api: mode };
      let res: Awaited<ReturnType<typeof send>>;
      try {
        res = await send(base, 'github', replay(github, revocation));
      } finally {
        gh.mode = { token: 'ok', api: 'ok' };
      }
      expect(res.status, `${mode}: ${res.body}`).toBe(200);
      expect(res.json()).toEqual({ success: true });
      expect(await byName(), mode).toEqual(allConnected());
      expect(await changeRecords(t), mode).toEqual(before);
      expect(await audits(), mode).toBe(auditsBefore);
      expect((await outcomes('github', 'github_app_authorization')).unverified, mode).toBe(unverifiedBefore + 1);
      for (const name of ['ghA', 'ghB']) expect(await nextValidationAt(ids[name] as string), `${mode} ${name}`).toBeLessThanOrEqual(Date.now());
      // The integration no event named keeps its schedule.
      expect(await nextValidationAt(ids.ghOther as string), mode).toBeGreaterThan(Date.now());
      if (mode === 'rate-limited') {
        // While the budget is known exhausted, a replay's live check is not sent at all: no verdict, unverified again.
        const calls = userCalls();
        const again = await send(base, 'github', replay(github, revocation));
        expect(again.status, again.body).toBe(200);
        expect(userCalls()).toBe(calls);
        expect(await byName()).toEqual(allConnected());
        expect((await outcomes('github', 'github_app_authorization')).unverified).toBe(unverifiedBefore + 2);
      }
      // A rate limit is remembered for every instance (docs/contract.md §5f) until its reset, which passes here.
      const [kept] = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM provider_budgets WHERE blocked_until > now()`);
      expect(kept?.n, mode).toBe(mode === 'rate-limited' ? 1 : 0);
      await t.database.db.execute(sql`DELETE FROM provider_budgets`);
    }
  });

  it('a genuine second revocation (the grant really revoked at GitHub) lands in seconds, with its own delivery id', async () => {
    gh.revokeUser('octo');
    const matchedBefore = (await outcomes('github', 'github_app_authorization')).matched;
    const second = replay(github, revocation);
    const started = Date.now();
    const res = await send(base, 'github', second);
    expect(res.status, res.body).toBe(200);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(await byName()).toEqual({ ...allConnected(), ghA: 'invalid', ghB: 'invalid' });
    for (const name of ['ghA', 'ghB']) {
      const { audit, data } = await lastChange(ids[name] as string);
      expect(audit, name).toMatchObject({ source: 'provider_event', deliveryId: second.headers['x-github-delivery'], to: 'invalid' });
      expect(data, name).toMatchObject({ source: 'provider_event', to: 'invalid' });
    }
    expect((await outcomes('github', 'github_app_authorization')).matched).toBe(matchedBefore + 1);
    expect(await connectOwn(t.fastify, a.token, gh, 'octo')).toBe(ids.ghA);
    expect(await connectOwn(t.fastify, b.token, gh, 'octo')).toBe(ids.ghB);
  });
});

describe('installation deleted / suspend replayed under a new delivery id', () => {
  const of = (name: string) => installed[name] as (typeof installed)[string];
  const event = (action: string, name: string) => app.installation(action, of(name).installation, of(name).admin);
  const mints = (name: string) => ghApp.mintedFor(of(name).installation.id).length;
  let suspension: SignedDelivery;
  let deletion: SignedDelivery;

  it('suspend: after the unsuspend, its replay asks GitHub for a mint, changes nothing and emits nothing (duplicate)', async () => {
    ghApp.suspend(of('globex').installation.id);
    suspension = event('suspend', 'globex');
    expect((await send(base, 'githubapp', suspension)).status).toBe(200);
    expect((await byName()).appglobex).toBe('invalid');
    ghApp.unsuspend(of('globex').installation.id);
    expect((await send(base, 'githubapp', event('unsuspend', 'globex'))).status).toBe(200);
    expect(await byName()).toEqual(allConnected());

    const before = await changeRecords(t);
    const auditsBefore = await audits();
    const metricsBefore = await outcomes('githubapp', 'installation');
    const mintsBefore = mints('globex');
    const res = await send(base, 'githubapp', replay(app, suspension));
    expect(res.status, res.body).toBe(200);
    expect(await byName()).toEqual(allConnected());
    expect(await changeRecords(t)).toEqual(before);
    expect(await audits()).toBe(auditsBefore);
    expect(mints('globex')).toBe(mintsBefore + 1);
    expect(await outcomes('githubapp', 'installation')).toEqual({ ...metricsBefore, duplicate: metricsBefore.duplicate + 1 });
  });

  it('deleted: a replay while GitHub still mints for the installation changes nothing and emits nothing (duplicate)', async () => {
    // An installation GitHub deleted and its id connected again (the fake restores it: GitHub mints for it again).
    ghApp.remove(of('acme').installation.id);
    deletion = event('deleted', 'acme');
    expect((await send(base, 'githubapp', deletion)).status).toBe(200);
    expect((await byName()).appacme).toBe('invalid');
    (ghApp.installations.get(of('acme').installation.id) as FakeInstallation).deleted = false;
    const again = await install(a, of('acme').admin.login, 'acme-org');
    expect(again).toEqual({ installation: expect.objectContaining({ id: of('acme').installation.id }), integrationId: ids.appacme });
    expect(await byName()).toEqual(allConnected());

    const before = await changeRecords(t);
    const auditsBefore = await audits();
    const duplicatesBefore = (await outcomes('githubapp', 'installation')).duplicate;
    const mintsBefore = mints('acme');
    const res = await send(base, 'githubapp', replay(app, deletion));
    expect(res.status, res.body).toBe(200);
    expect(await byName()).toEqual(allConnected());
    expect(await changeRecords(t)).toEqual(before);
    expect(await audits()).toBe(auditsBefore);
    expect(mints('acme')).toBe(mintsBefore + 1);
    expect((await outcomes('githubapp', 'installation')).duplicate).toBe(duplicatesBefore + 1);

    // The same delivery id: a duplicate that asks GitHub nothing.
    expect((await send(base, 'githubapp', app.redeliver(deletion))).status).toBe(200);
    expect(mints('acme')).toBe(mintsBefore + 1);
    expect((await outcomes('githubapp', 'installation')).duplicate).toBe(duplicatesBefore + 2);
  });

  it('a mint GitHub rate-limits (429) or that cannot reach GitHub: 200, unverified, the status as it was, the next validation due now', async () => {
    for (const failure of ['rate-limited', 'unreachable'] as const) {
      const before = await changeRecords(t);
      const auditsBefore = await audits();
      const unverifiedBefore = (await outcomes('githubapp', 'installation')).unverified;
      ghApp.control.mintFailure = failure;
      let res: Awaited<ReturnType<typeof send>>;
      try {
        res = await send(base, 'githubapp', replay(app, suspension));
      } finally {
        ghApp.control.mintFailure = null;
      }
      expect(res.status, `${failure}: ${res.body}`).toBe(200);
      expect(await byName(), failure).toEqual(allConnected());
      expect(await changeRecords(t), failure).toEqual(before);
      expect(await audits(), failure).toBe(auditsBefore);
      expect((await outcomes('githubapp', 'installation')).unverified, failure).toBe(unverifiedBefore + 1);
      expect(await nextValidationAt(ids.appglobex as string), failure).toBeLessThanOrEqual(Date.now());
      expect(await nextValidationAt(ids.appacme as string), failure).toBeGreaterThan(Date.now());
    }
  });

  it('a genuine second suspension, and a genuine deletion: the same bytes land, with their own delivery ids', async () => {
    ghApp.suspend(of('globex').installation.id);
    ghApp.remove(of('acme').installation.id);
    const suspendAgain = replay(app, suspension);
    const deleteAgain = replay(app, deletion);
    for (const delivery of [suspendAgain, deleteAgain]) expect((await send(base, 'githubapp', delivery)).status).toBe(200);
    expect(await byName()).toEqual({ ...allConnected(), appacme: 'invalid', appglobex: 'invalid' });
    for (const [name, delivery] of [
      ['appglobex', suspendAgain],
      ['appacme', deleteAgain],
    ] as const) {
      const { audit, data } = await lastChange(ids[name] as string);
      expect(audit, name).toMatchObject({ source: 'provider_event', deliveryId: delivery.headers['x-github-delivery'], to: 'invalid' });
      expect(data, name).toMatchObject({ source: 'provider_event', to: 'invalid' });
    }
  });
});

describe('retention of what stops a replay', () => {
  it('keeps GitHub’s delivery ids and body digests while integrations of that provider exist; other providers’ ids go after RETENTION_DAYS', async () => {
    const db = t.database.db;
    const old = sql`now() - interval '400 days'`;
    await db.execute(sql`UPDATE provider_event_deliveries SET received_at = ${old}`);
    await db.execute(sql`UPDATE provider_event_bodies SET received_at = ${old}`);
    await db.execute(sql`INSERT INTO provider_event_deliveries (provider, delivery_id, received_at) VALUES ('slack', 'Ev-old', ${old}), ('zoom', 'old', ${old})`);
    const count = async (table: string, provider: string) =>
      (await queryRows<{ n: number }>(db, sql`SELECT count(*)::int AS n FROM ${sql.raw(table)} WHERE provider = ${provider}`))[0]?.n ?? 0;
    const githubIds = await count('provider_event_deliveries', 'github');
    const githubBodies = await count('provider_event_bodies', 'github');
    expect(githubIds).toBeGreaterThan(0);
    expect(githubBodies).toBe(1);

    const result = await runRetentionPass(db, 30, { keptWhileIntegrations: ['github', 'githubapp'] });
    expect(result).toMatchObject({ provider_deliveries: 2, provider_bodies: 0 });
    expect(await count('provider_event_deliveries', 'github')).toBe(githubIds);
    expect(await count('provider_event_bodies', 'github')).toBe(1);
    expect(await count('provider_event_deliveries', 'slack')).toBe(0);

    // The provider's last integration gone: its ids and digests go with the rest.
    await db.execute(sql`DELETE FROM integrations WHERE provider = 'github'`);
    const after = await runRetentionPass(db, 30, { keptWhileIntegrations: ['github', 'githubapp'] });
    expect(after).toMatchObject({ provider_deliveries: githubIds, provider_bodies: 1 });
    expect(await count('provider_event_deliveries', 'githubapp')).toBeGreaterThan(0);
    expect(await count('provider_event_bodies', 'githubapp')).toBeGreaterThan(0);
  });
});
