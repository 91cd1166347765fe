import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import type { Metrics } from '../src/http/metrics.ts';
import { bearer, registerAndLogin } from './helpers/identity.ts';
import { connect, providerEnv } from './helpers/providers.ts';

let t: TestApp;
let gh: FakeProvider;

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  gh.addUser({ login: 'metric' });
  t = await createTestApp({ env: { ...providerEnv(gh), METRICS_ENABLED: 'true' } });
});
afterAll(async () => {
  await t?.close();
  await gh?.close();
});

describe('GET /metrics', () => {
  it('serves Prometheus text with requests, pool, providers, refreshes, validations, integrations and the outbox', async () => {
    const account = await registerAndLogin(t.fastify, 'metrics');
    await connect(t.fastify, account.token, gh, 'metric');
    await t.fastify.inject({ method: 'POST', url: '/v1/integrations/github/refresh', headers: bearer(account.token) });
    const res = await t.fastify.inject({ url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    const text = res.body;
    expect(text).toMatch(/tessera_http_requests_total\{method="POST",route="\/v1\/login",status="200"\} 1/);
    expect(text).toMatch(/tessera_http_request_duration_seconds_bucket\{le="0.001",method="POST",route="\/v1\/integrations\/oauth\/callback"/);
    expect(text).toMatch(/tessera_db_pool_connections\{state="total"\} \d+/);
    expect(text).toMatch(/tessera_provider_calls_total\{provider="github",outcome="200"\} \d+/);
    expect(text).toMatch(/tessera_token_refreshes_total\{provider="github",outcome="ok"\} 1/);
    expect(text).toMatch(/tessera_token_validations_total\{provider="github",outcome="valid"\} 1/);
    expect(text).toMatch(/tessera_integrations\{status="connected"\} 1/);
    expect(text).toMatch(/tessera_outbox_depth \d+/);
    expect(text).toMatch(/tessera_event_delivery_lag_seconds_count \d+/);
    expect(text).not.toMatch(/gh[our]_|tsp_|tsa_|eyJ/);
  });

  it('is not served unless enabled', async () => {
    const off = await createTestApp();
    try {
      expect((await off.fastify.inject({ url: '/metrics' })).statusCode).toBe(404);
      // Nothing can read them, so no request pays for counting them.
      const registry = (off.app.services.metrics as Metrics).registry;
      expect((await registry.getSingleMetric('tessera_http_requests_total')?.get())?.values).toEqual([]);
      expect((await registry.getSingleMetric('tessera_http_request_duration_seconds')?.get())?.values).toEqual([]);
    } finally {
      await off.close();
    }
  });
});
