// Microsoft's claims challenge (docs/contract.md §5b "Microsoft, which pushes nothing to an app"):
// Tessera declares the `cp1` client capability on every Microsoft token request; a Graph 401 whose
// `WWW-Authenticate` carries `error="insufficient_claims"` and `claims` (continuous access
// evaluation) is answered by ONE refresh carrying those claims — refused → `invalid`, unreachable →
// `warning`, a new token → the call retried once — and a second challenge makes the integration
// `invalid`: never a loop. HTTP in (the proxy), the fake's token requests and statuses out; the
// fake (test/fakes/providers/microsoft.ts) challenges as Microsoft's CAE documentation says.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import type { FakeProvider } from './fakes/common.ts';
import { type FakeCae, fakeCae, startFakeMicrosoft } from './fakes/providers/microsoft.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv } from './helpers/providers.ts';

const CP1 = { access_token: { xms_cc: { values: ['cp1'] } } };

let ms: FakeProvider;
let cae: FakeCae;
let t: TestApp;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A new organization whose Microsoft integration is connected as `login`; its account and the integration's id. */
async function connected(login: string): Promise<{ account: Account; id: string }> {
  ms.addUser({ login, email: `${login}@contoso.example` });
  const account = await registerAndLogin(t.fastify, login);
  const res = await connect(t.fastify, account.token, ms, login);
  expect(res.statusCode, res.body).toBe(200);
  // The CAE event comes after the token was issued (the fake compares milliseconds).
  await sleep(5);
  return { account, id: res.json().integration.id as string };
}

const proxy = (account: Account) => t.fastify.inject({ url: '/v1/integrations/microsoft/proxy/me/messages', headers: bearer(account.token) });
const statusOf = async (account: Account) => (await t.fastify.inject({ url: '/v1/integrations/microsoft/status', headers: bearer(account.token) })).json().status;
/** Requests to the fake's token endpoint so far. */
const tokenRequests = () => ms.requests.filter((request) => request.path === new URL(ms.tokenUrl).pathname).length;
/** The last token request's `claims`, decoded. */
const lastClaims = () => cae.tokenClaims.at(-1);

beforeAll(async () => {
  cae = fakeCae();
  ms = await startFakeMicrosoft({ cae });
  t = await createTestApp({ env: { ...providerEnv(ms), METRICS_ENABLED: 'true', RATE_LIMIT_MAX: '0' } });
});

afterAll(async () => {
  await t?.close();
  await ms?.close();
});

describe("Microsoft's claims challenge", () => {
  it('declares the cp1 client capability on the code exchange', async () => {
    await connected('mira');
    expect(lastClaims()).toEqual(CP1);
  });

  it('a challenge → one refresh carrying its claims merged with cp1 → the call retried once and served', async () => {
    const { account, id } = await connected('ann');
    cae.events.set('ann', Date.now());
    const [requestsBefore, refreshesBefore, challengesBefore] = [tokenRequests(), ms.stats.refreshes, cae.challenges.length];
    const res = await proxy(account);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ value: [] });
    expect(ms.stats.refreshes).toBe(refreshesBefore + 1);
    expect(tokenRequests()).toBe(requestsBefore + 1);
    expect(cae.challenges.length).toBe(challengesBefore + 1);
    // The refresh carried the challenge's claims (decoded JSON), merged with the capability.
    const since = Math.floor((cae.events.get('ann') as number) / 1000);
    expect(lastClaims()).toEqual({ access_token: { xms_cc: { values: ['cp1'] }, nbf: { essential: true, value: String(since) } } });
    expect((await statusOf(account)).status).toBe('connected');
    // The next call uses the new token: no challenge, no token request.
    expect((await proxy(account)).statusCode).toBe(200);
    expect(tokenRequests()).toBe(requestsBefore + 1);
    const [row] = await queryRows<{ status: string }>(t.database.db, sql`SELECT status FROM integrations WHERE id = ${id}`);
    expect(row?.status).toBe('connected');
  });

  it('challenged again after that refresh → invalid, with its audit row and event; never a loop', async () => {
    const { account, id } = await connected('bob');
    cae.always.add('bob');
    const [requestsBefore, refreshesBefore, apiBefore] = [tokenRequests(), ms.stats.refreshes, ms.stats.apiCalls];
    const res = await proxy(account);
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json()).toMatchObject({ code: 'TOKEN_VALIDATION_FAILED' });
    // Exactly one refresh; Graph asked at most three times (the call, the new token's check, nothing more).
    expect(ms.stats.refreshes).toBe(refreshesBefore + 1);
    expect(tokenRequests()).toBe(requestsBefore + 1);
    expect(ms.stats.apiCalls - apiBefore).toBeLessThanOrEqual(3);
    expect(await statusOf(account)).toMatchObject({ status: 'invalid', actions: ['reconnect'] });
    const [audit] = await queryRows<{ detail: Record<string, unknown> }>(
      t.database.db,
      sql`SELECT detail FROM audit_logs WHERE action = 'integration.status_changed' AND target_id = ${id} ORDER BY id DESC LIMIT 1`,
    );
    expect(audit?.detail).toMatchObject({ from: 'connected', to: 'invalid' });
    const [event] = await queryRows<{ n: number }>(
      t.database.db,
      sql`SELECT count(*)::int AS n FROM events WHERE type = 'integration.status_changed' AND data->'integration'->>'id' = ${id} AND data->>'to' = 'invalid'`,
    );
    expect(event?.n).toBe(1);
    // Once invalid, further calls never reach Microsoft.
    const [requestsAfter, apiAfter] = [tokenRequests(), ms.stats.apiCalls];
    for (let i = 0; i < 3; i += 1) expect((await proxy(account)).statusCode).toBe(409);
    expect([tokenRequests(), ms.stats.apiCalls]).toEqual([requestsAfter, apiAfter]);
    cae.always.delete('bob');
  });

  it('the refresh refused (interaction_required) → invalid after one token request', async () => {
    const { account } = await connected('cara');
    cae.events.set('cara', Date.now());
    cae.refresh = 'interaction_required';
    try {
      const requestsBefore = tokenRequests();
      const res = await proxy(account);
      expect(res.statusCode, res.body).toBe(409);
      expect(tokenRequests()).toBe(requestsBefore + 1);
      expect(await statusOf(account)).toMatchObject({ status: 'invalid', actions: ['reconnect'] });
    } finally {
      cae.refresh = 'ok';
    }
  });

  it('the token endpoint unreachable (503) during that refresh → warning, 502, one token request', async () => {
    const { account } = await connected('dan');
    cae.events.set('dan', Date.now());
    cae.refresh = 'unavailable';
    try {
      const requestsBefore = tokenRequests();
      const res = await proxy(account);
      expect(res.statusCode, res.body).toBe(502);
      expect(res.json()).toMatchObject({ code: 'PROVIDER_ERROR' });
      expect(tokenRequests()).toBe(requestsBefore + 1);
      expect((await statusOf(account)).status).toBe('warning');
    } finally {
      cae.refresh = 'ok';
    }
    // Microsoft back: the next call is challenged again and answered by one refresh.
    expect((await proxy(account)).statusCode).toBe(200);
    expect((await statusOf(account)).status).toBe('connected');
  });

  it('a live status check challenged → one refresh with the claims, then valid', async () => {
    const { account, id } = await connected('eve');
    cae.events.set('eve', Date.now());
    // Last checked an hour ago: the status route validates live (OAUTH_STATUS_MAX_AGE).
    await t.database.db.execute(sql`UPDATE integrations SET last_validated_at = now() - interval '1 hour' WHERE id = ${id}`);
    const refreshesBefore = ms.stats.refreshes;
    const res = await t.fastify.inject({ url: '/v1/integrations/microsoft/status', headers: bearer(account.token) });
    expect(res.statusCode, res.body).toBe(200);
    expect(ms.stats.refreshes).toBe(refreshesBefore + 1);
    expect(lastClaims()).toMatchObject({ access_token: { xms_cc: { values: ['cp1'] }, nbf: { essential: true } } });
    expect(res.json().status.status).toBe('connected');
  });
});
