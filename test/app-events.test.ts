// Provider events per app (docs/contract.md §5e): `POST /v1/apps/{id}/events` checks that app's
// events secret and acts only on the integrations that app made; `/v1/providers/{p}/events` is
// the default deployment app's. HTTP in (signed Slack deliveries over real HTTP); statuses, audit
// rows, events and metrics out. One Slack user is connected by three organizations, each through
// another app: the default deployment app, a second deployment app (CONFIG_FILE), and the third
// organization's own app — so an event naming that user would reach all three were it not scoped.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { appSecretBinding } from '../src/integrations/apps/catalog.ts';
import { newId } from '../src/lib/ids.ts';
import { seal } from '../src/secrets/crypto.ts';
import type { FakeProvider } from './fakes/common.ts';
import { type FakeGitHubUser, startFakeGitHub } from './fakes/github.ts';
import { deliver, githubEvents, linearEvents, type SignedDelivery, slackEvents } from './fakes/provider-events.ts';
import { startFakeLinear } from './fakes/providers/linear.ts';
import type { FakeSlackUser } from './fakes/slack.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, registerAndLogin } from './helpers/identity.ts';
import { changeRecords, listen, metric, statuses } from './helpers/provider-events.ts';
import { providerEnv, startFlow } from './helpers/providers.ts';

const SECRET = {
  slack: 'slack-default-signing-secret-000001',
  slackB: 'slack-b-signing-secret-00000000002',
  own: 'slack-own-app-signing-secret-00003',
  linear: 'linear-default-webhook-secret-0004',
  linearB: 'linear-b-webhook-secret-0000000005',
  github: 'github-default-webhook-secret-0006',
  githubB: 'github-b-webhook-secret-0000000007',
};
/** The Linear organization the fake's users belong to. */
const LINEAR_ORG = 'org-fake-0001';
const TEAM = 'T0FAKE0001';

let slack: FakeProvider<FakeSlackUser>;
let linear: FakeProvider;
let gh: FakeProvider<FakeGitHubUser>;
let t: TestApp;
let base: string;
let acme: Account;
let globex: Account;
let initech: Account;
let quiet: Account;
let ownApp: string;
let ownQuietApp: string;
let alice: string;
const ids: Record<string, string> = {};
const linearIds: Record<string, string> = {};
const githubIds: Record<string, string> = {};

const dir = mkdtempSync(join(tmpdir(), 'tessera-app-events-'));
let env: Record<string, string>;

/** An organization's own Slack app, as `POST /v1/apps` stores it: a row and its sealed secrets. */
async function insertOwnApp(organizationId: string, secrets: { clientSecret: string; eventsSecret?: string }): Promise<string> {
  const id = newId();
  const sealed = seal(t.config.keyring, appSecretBinding(organizationId, id), JSON.stringify(secrets));
  await t.database.db.execute(
    sql`INSERT INTO oauth_apps (organization_id, id, provider, name, client_id, has_events_secret) VALUES (${organizationId}, ${id}, 'slack', 'Own Slack', ${slack.clientId}, ${secrets.eventsSecret !== undefined})`,
  );
  await t.database.db.execute(sql`INSERT INTO oauth_app_secrets (organization_id, app_id, key_id, envelope) VALUES (${organizationId}, ${id}, ${sealed.keyId}, ${sealed.envelope})`);
  return id;
}

/** Connects `account`'s own integration of `fake` (Slack unless given) as `login` through `app` (start, the fake's consent, callback); its id. */
async function connectVia(account: Account, app: string | undefined, login: string, fake: FakeProvider = slack): Promise<string> {
  const started = await startFlow(t.fastify, account.token, fake.id, app === undefined ? {} : { app });
  const approved = fake.authorize(started.authUrl, login);
  const res = await t.fastify.inject({
    method: 'POST',
    url: '/v1/integrations/oauth/callback',
    headers: { cookie: `oauth_tx=${started.txCookie}` },
    payload: { provider: fake.id, code: approved.code, state: approved.state },
  });
  expect(res.statusCode, res.body).toBe(200);
  const id = res.json().integration.id as string;
  const [row] = await queryRows<{ app_id: string }>(t.database.db, sql`SELECT app_id FROM integrations WHERE id = ${id}`);
  expect(row?.app_id).toBe(app ?? fake.id);
  return id;
}

async function byName(): Promise<Record<string, string>> {
  const found = await statuses(t, Object.values(ids));
  return Object.fromEntries(Object.entries(ids).map(([name, id]) => [name, found[id] as string]));
}
const connected = () => Object.fromEntries(Object.keys(ids).map((name) => [name, 'connected']));

const APPS: Record<string, () => string | undefined> = { viaDefault: () => undefined, viaB: () => 'slack-b', viaOwn: () => ownApp, viaQuiet: () => 'slack-quiet' };
const OWNERS: Record<string, () => Account> = { viaDefault: () => acme, viaB: () => globex, viaOwn: () => initech, viaQuiet: () => quiet };

/** Reconnects whatever is not connected, through the app it was made with; ids are kept. */
async function reconnectAll(): Promise<void> {
  for (const [name, status] of Object.entries(await byName())) {
    if (status !== 'connected') expect(await connectVia((OWNERS[name] as () => Account)(), (APPS[name] as () => string | undefined)(), 'alice')).toBe(ids[name]);
  }
  expect(await byName()).toEqual(connected());
}

const toApp = (app: string, delivery: SignedDelivery) => deliver(`${base}/v1/apps/${app}/events`, delivery);
const toProvider = (provider: string, delivery: SignedDelivery) => deliver(`${base}/v1/providers/${provider}/events`, delivery);

beforeAll(async () => {
  [slack, linear, gh] = await Promise.all([startFakeSlack(), startFakeLinear(), startFakeGitHub()]);
  // Two deployment apps of Slack besides the default, both of the fake's one registration: what tells them apart here is their events secret.
  const file = join(dir, 'apps.yaml');
  writeFileSync(
    file,
    [
      'integrationOauthApps:',
      '  - id: slack-b',
      '    provider: slack',
      `    clientId: ${JSON.stringify(slack.clientId)}`,
      `    clientSecret: ${JSON.stringify(slack.clientSecret)}`,
      `    eventsSecret: ${JSON.stringify(SECRET.slackB)}`,
      '  - id: slack-quiet',
      '    provider: slack',
      `    clientId: ${JSON.stringify(slack.clientId)}`,
      `    clientSecret: ${JSON.stringify(slack.clientSecret)}`,
      '  - id: linear-b',
      '    provider: linear',
      `    clientId: ${JSON.stringify(linear.clientId)}`,
      `    clientSecret: ${JSON.stringify(linear.clientSecret)}`,
      `    eventsSecret: ${JSON.stringify(SECRET.linearB)}`,
      '  - id: github-b',
      '    provider: github',
      `    clientId: ${JSON.stringify(gh.clientId)}`,
      `    clientSecret: ${JSON.stringify(gh.clientSecret)}`,
      `    eventsSecret: ${JSON.stringify(SECRET.githubB)}`,
      '',
    ].join('\n'),
  );
  env = {
    ...providerEnv(slack),
    ...providerEnv(linear),
    ...providerEnv(gh),
    INTEGRATION_OAUTH_SLACK_EVENTS_SECRET: SECRET.slack,
    INTEGRATION_OAUTH_LINEAR_EVENTS_SECRET: SECRET.linear,
    INTEGRATION_OAUTH_GITHUB_EVENTS_SECRET: SECRET.github,
    CONFIG_FILE: file,
  };
  t = await createTestApp({ env: { ...env, METRICS_ENABLED: 'true', RATE_LIMIT_MAX: '0' } });
  base = await listen(t);
  alice = String(slack.addUser({ login: 'alice', email: 'alice@example.com' }).id);
  [acme, globex, initech, quiet] = [await registerAndLogin(t.fastify, 'acme'), await registerAndLogin(t.fastify, 'globex'), await registerAndLogin(t.fastify, 'initech'), await registerAndLogin(t.fastify, 'quiet')];
  ownApp = await insertOwnApp(initech.organizationId, { clientSecret: slack.clientSecret, eventsSecret: SECRET.own });
  ownQuietApp = await insertOwnApp(quiet.organizationId, { clientSecret: slack.clientSecret });
  ids.viaDefault = await connectVia(acme, undefined, 'alice');
  ids.viaB = await connectVia(globex, 'slack-b', 'alice');
  ids.viaOwn = await connectVia(initech, ownApp, 'alice');
  ids.viaQuiet = await connectVia(quiet, 'slack-quiet', 'alice');
  linear.addUser({ login: 'lin', email: 'lin@example.com' });
  linearIds.viaDefault = await connectVia(acme, undefined, 'lin', linear);
  linearIds.viaB = await connectVia(globex, 'linear-b', 'lin', linear);
  gh.addUser({ login: 'octo', email: 'octo@example.com' });
  githubIds.viaDefault = await connectVia(acme, undefined, 'octo', gh);
  githubIds.viaB = await connectVia(globex, 'github-b', 'octo', gh);
});

afterAll(async () => {
  await t?.close();
  await Promise.all([slack?.close(), linear?.close(), gh?.close()]);
});

describe('provider events per app', () => {
  it("an event signed with app B's secret at /v1/apps/B/events makes only B's integration invalid, with audit, event and metrics", async () => {
    const delivery = slackEvents(SECRET.slackB).tokensRevoked(TEAM, [alice]);
    const before = await changeRecords(t);
    const res = await toApp('slack-b', delivery);
    expect(res.status, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect(await byName()).toEqual({ ...connected(), viaB: 'invalid' });
    expect(await changeRecords(t)).toEqual({ audits: before.audits + 1, events: before.events + 1 });
    const [audit] = await queryRows<{ organization_id: string; detail: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT organization_id, detail FROM audit_logs WHERE action = 'integration.status_changed' AND target_id = ${ids.viaB} ORDER BY id DESC LIMIT 1`,
    );
    expect(audit).toMatchObject({ organization_id: globex.organizationId, detail: { to: 'invalid', source: 'provider_event', deliveryId: JSON.parse(delivery.body).event_id } });
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'slack', type: 'tokens_revoked', outcome: 'matched' })).toBe(1);
    await reconnectAll();
  });

  it("the same body signed with the default app's secret at B's route, or B's at the default's: 401 and nothing changes", async () => {
    const before = await changeRecords(t);
    const signedByDefault = slackEvents(SECRET.slack).tokensRevoked(TEAM, [alice]);
    const signedByB = slackEvents(SECRET.slackB).sign(signedByDefault.body);
    const signedByOwn = slackEvents(SECRET.own).sign(signedByDefault.body);
    for (const [send, delivery] of [
      [() => toApp('slack-b', signedByDefault), 'default → B'],
      [() => toApp('slack-b', signedByOwn), 'own → B'],
      [() => toProvider('slack', signedByB), 'B → default'],
      [() => toApp('slack', signedByB), 'B → default (by id)'],
      [() => toApp(ownApp, signedByB), 'B → own'],
      [() => toApp(ownApp, signedByDefault), 'default → own'],
    ] as const) {
      const res = await send();
      expect(res.status, `${delivery}: ${res.body}`).toBe(401);
      expect(res.json()).toMatchObject({ success: false, code: 'UNAUTHENTICATED' });
    }
    expect(await byName()).toEqual(connected());
    expect(await changeRecords(t)).toEqual(before);
    // The refusal's log line names where the app's secret is set, never a secret.
    const logs = t.logs.text;
    expect(logs).toContain('check integrationOauthApps \\"slack-b\\" eventsSecret');
    for (const secret of Object.values(SECRET)) expect(logs).not.toContain(secret);
  });

  it("at /v1/providers/slack/events — and /v1/apps/slack/events, the same route — only the default app's integrations are touched", async () => {
    for (const send of [(d: SignedDelivery) => toProvider('slack', d), (d: SignedDelivery) => toApp('slack', d)]) {
      const res = await send(slackEvents(SECRET.slack).appUninstalled(TEAM));
      expect(res.status, res.body).toBe(200);
      expect(await byName()).toEqual({ ...connected(), viaDefault: 'invalid' });
      await reconnectAll();
    }
  });

  it("an organization's own app: its sealed events secret, and only its integrations", async () => {
    const res = await toApp(ownApp, slackEvents(SECRET.own).appUninstalled(TEAM));
    expect(res.status, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true });
    expect(await byName()).toEqual({ ...connected(), viaOwn: 'invalid' });
    const [event] = await queryRows<{ organization_id: string }>(
      t.database.db,
      sql`SELECT organization_id FROM events WHERE type = 'integration.status_changed' AND data->'integration'->>'id' = ${ids.viaOwn} ORDER BY id DESC LIMIT 1`,
    );
    expect(event?.organization_id).toBe(initech.organizationId);
    // Its URL check is answered too: the app's route is where its provider is told to deliver.
    const check = await toApp(ownApp, slackEvents(SECRET.own).urlVerification('challenge-of-the-own-app'));
    expect(check.status, check.body).toBe(200);
    expect(check.json()).toEqual({ challenge: 'challenge-of-the-own-app' });
    await reconnectAll();
  });

  it('an app without an events secret (a deployment app, an organization\'s own), an unknown app or provider: 404 NOT_FOUND, and nothing changes', async () => {
    const before = await changeRecords(t);
    // Even a delivery that a secret-less app would "verify" with an empty key is never read.
    const emptyKeyed = slackEvents('').appUninstalled(TEAM);
    const signed = slackEvents(SECRET.slack).appUninstalled(TEAM);
    for (const app of ['slack-quiet', ownQuietApp, newId(), 'no-such-app', 'gitlab']) {
      for (const delivery of [emptyKeyed, signed]) {
        const res = await toApp(app, delivery);
        expect(res.status, `${app}: ${res.body}`).toBe(404);
        expect(res.json()).toMatchObject({ success: false, code: 'NOT_FOUND' });
      }
    }
    // A deployment app that is not the default has no provider route: /v1/providers/{id} names providers only.
    expect((await toProvider('slack-b', slackEvents(SECRET.slackB).appUninstalled(TEAM))).status).toBe(404);
    expect(await byName()).toEqual(connected());
    expect(await changeRecords(t)).toEqual(before);
  });

  it("a delivery id is the provider's: the same Slack event at another app's route (apps sharing a secret) is a duplicate", async () => {
    // Slack's event ids are unique across its apps, so a second sight of one is a replay, whichever route it reaches (decision 297).
    const first = slackEvents(SECRET.slackB).tokensRevoked(TEAM, ['U0NOBODY00']);
    expect((await toApp('slack-b', first)).status).toBe(200);
    const duplicates = await metric(t.fastify, 'tessera_provider_events_total', { provider: 'slack', type: 'tokens_revoked', outcome: 'duplicate' });
    const replayed = await toProvider('slack', slackEvents(SECRET.slack).sign(first.body.replace(`"${'U0NOBODY00'}"`, `"${alice}"`)));
    expect(replayed.status, replayed.body).toBe(200);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'slack', type: 'tokens_revoked', outcome: 'duplicate' })).toBe(duplicates + 1);
    expect(await byName()).toEqual(connected());
  });
});

describe("provider events' rate limit", () => {
  it("counts each app's deliveries apart: one app over its budget is 429, another app's route still answers", async () => {
    // RATE_LIMIT_MAX 1: one request per address, ten signed deliveries per app — from ten addresses, as a provider delivers.
    const limited = await createTestApp({ background: false, env: { ...env, RATE_LIMIT_MAX: '1', RATE_LIMIT_WINDOW: '60' } });
    try {
      let address = 0;
      const post = (url: string, delivery: SignedDelivery) => {
        address += 1;
        return limited.fastify.inject({ method: 'POST', url, headers: delivery.headers, payload: delivery.body, remoteAddress: `10.0.0.${address}` });
      };
      const toB = () => post('/v1/apps/slack-b/events', slackEvents(SECRET.slackB).urlVerification());
      for (let i = 0; i < 10; i += 1) expect((await toB()).statusCode).toBe(200);
      const over = await toB();
      expect(over.statusCode, over.body).toBe(429);
      expect(over.json()).toMatchObject({ code: 'RATE_LIMITED' });
      // The default app's budget is its own (keyed by provider it would be spent): both of its routes still answer.
      expect((await post('/v1/providers/slack/events', slackEvents(SECRET.slack).urlVerification())).statusCode).toBe(200);
      expect((await post('/v1/apps/slack/events', slackEvents(SECRET.slack).urlVerification())).statusCode).toBe(200);
      // A wrong signature is refused before any budget is read.
      expect((await post('/v1/apps/slack-b/events', slackEvents(SECRET.slack).urlVerification())).statusCode).toBe(401);
    } finally {
      await limited.close();
    }
  });
});

describe('Linear: the revocation names the app by its client id', () => {
  const linearStatuses = async () => {
    const found = await statuses(t, Object.values(linearIds));
    return Object.fromEntries(Object.entries(linearIds).map(([name, id]) => [name, found[id] as string]));
  };

  it("an OAuthApp revocation naming another client id acts on nothing (unmatched); naming the app's, on that app's integrations only", async () => {
    const before = await changeRecords(t);
    const foreign = await toProvider('linear', linearEvents(SECRET.linear).oauthAppRevoked(LINEAR_ORG, 'someone-elses-linear-client-id'));
    expect(foreign.status, foreign.body).toBe(200);
    expect(foreign.json()).toEqual({ success: true });
    expect(await linearStatuses()).toEqual({ viaDefault: 'connected', viaB: 'connected' });
    expect(await changeRecords(t)).toEqual(before);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'linear', type: 'oauth_app_revoked', outcome: 'unmatched' })).toBe(1);

    // linear-b is a registration of the same client here: its client id matches, and still only its own integrations are touched.
    const res = await toApp('linear-b', linearEvents(SECRET.linearB).oauthAppRevoked(LINEAR_ORG, linear.clientId));
    expect(res.status, res.body).toBe(200);
    expect(await linearStatuses()).toEqual({ viaDefault: 'connected', viaB: 'invalid' });
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'linear', type: 'oauth_app_revoked', outcome: 'matched' })).toBe(1);
    expect(await connectVia(globex, 'linear-b', 'lin', linear)).toBe(linearIds.viaB);

    const atDefault = await toProvider('linear', linearEvents(SECRET.linear).oauthAppRevoked(LINEAR_ORG, linear.clientId));
    expect(atDefault.status, atDefault.body).toBe(200);
    expect(await linearStatuses()).toEqual({ viaDefault: 'invalid', viaB: 'connected' });
    expect(await connectVia(acme, undefined, 'lin', linear)).toBe(linearIds.viaDefault);
  });

  it("Linear's signature: another app's secret, or a webhookTimestamp over 60 seconds old, is 401 and nothing changes", async () => {
    const before = await changeRecords(t);
    for (const delivery of [
      linearEvents(SECRET.linearB).oauthAppRevoked(LINEAR_ORG, linear.clientId),
      linearEvents(SECRET.linear).oauthAppRevoked(LINEAR_ORG, linear.clientId, { webhookTimestamp: Date.now() - 61_000 }),
    ]) {
      const res = await toProvider('linear', delivery);
      expect(res.status, res.body).toBe(401);
      expect(res.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
    }
    expect(await linearStatuses()).toEqual({ viaDefault: 'connected', viaB: 'connected' });
    expect(await changeRecords(t)).toEqual(before);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'linear', outcome: 'stale' })).toBe(1);
  });
});

describe('GitHub: a body digest is the provider\'s', () => {
  it("the same revocation bytes signed for another app, under a new delivery id, act only if GitHub confirms (it does not: nothing changes)", async () => {
    const octo = await queryRows<{ provider_account_id: string }>(t.database.db, sql`SELECT provider_account_id FROM integrations WHERE id = ${githubIds.viaB}`);
    const sender = { id: Number(octo[0]?.provider_account_id), login: 'octo' };
    const first = githubEvents(SECRET.github).authorizationRevoked(sender);
    const res = await toProvider('github', first);
    expect(res.status, res.body).toBe(200);
    const ghStatuses = async () => {
      const found = await statuses(t, Object.values(githubIds));
      return Object.fromEntries(Object.entries(githubIds).map(([name, id]) => [name, found[id] as string]));
    };
    expect(await ghStatuses()).toEqual({ viaDefault: 'invalid', viaB: 'connected' });
    // Captured and re-signed by an app sharing nothing but the provider: B's secret over the very bytes, a new delivery id.
    const before = await changeRecords(t);
    const replay = githubEvents(SECRET.githubB).sign('github_app_authorization', first.body);
    const again = await toApp('github-b', replay);
    expect(again.status, again.body).toBe(200);
    // B's token still works at GitHub: the live check refutes the revocation, so B's integration stays connected.
    expect(await ghStatuses()).toEqual({ viaDefault: 'invalid', viaB: 'connected' });
    expect(await changeRecords(t)).toEqual(before);
    expect(await metric(t.fastify, 'tessera_provider_events_total', { provider: 'github', type: 'github_app_authorization', outcome: 'duplicate' })).toBe(1);
    expect(await connectVia(acme, undefined, 'octo', gh)).toBe(githubIds.viaDefault);
  });
});
