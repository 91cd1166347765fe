// Logs an operator can follow (docs/contract.md §10 "Logs", decision 147): a line for a connect and for
// a status change, the request's id on every line written while it runs — whichever logger writes
// it — and, with LOG_FORMAT=pretty, one readable line per entry with the same redaction.
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { newDataDir, TEST_DATABASE_URL } from './helpers/database.ts';
import { bearer, registerAndLogin } from './helpers/identity.ts';
import { spawnService, waitFor } from './helpers/process.ts';
import { providerEnv, startFlow } from './helpers/providers.ts';

describe('log lines of a connect and an invalidation', () => {
  let t: TestApp;
  let gh: FakeProvider;
  beforeAll(async () => {
    gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
    t = await createTestApp({ background: false, env: { ...providerEnv(gh), RATE_LIMIT_MAX: '0' } });
  });
  afterAll(async () => {
    await t?.close();
    await gh?.close();
  });

  /** The entries logged from `request start` to `request finish` of the request with that id (requests here run one at a time). */
  function linesOf(requestId: string): Record<string, unknown>[] {
    const all = t.logs.entries;
    const start = all.findIndex((entry) => entry.msg === 'request start' && entry.requestId === requestId);
    const finish = all.findIndex((entry, index) => index > start && entry.msg === 'request finish' && entry.requestId === requestId);
    expect(start).toBeGreaterThanOrEqual(0);
    expect(finish).toBeGreaterThan(start);
    return all.slice(start, finish + 1);
  }

  it('says "integration connected" and "integration status changed to invalid" with provider and ids, within the request (its id on every line), and no token', async () => {
    const owner = await registerAndLogin(t.fastify, 'logs');
    gh.addUser({ login: 'logs-octo', email: 'logs-octo@example.com' });
    const started = await startFlow(t.fastify, owner.token, 'github');
    const approved = gh.authorize(started.authUrl, 'logs-octo');
    const callback = await t.fastify.inject({
      method: 'POST',
      url: '/v1/integrations/oauth/callback',
      headers: { cookie: `oauth_tx=${started.txCookie}`, 'x-request-id': 'callback-1' },
      payload: { provider: 'github', code: approved.code, state: approved.state },
    });
    expect(callback.statusCode, callback.body).toBe(200);
    const integrationId = callback.json().integration.id as string;

    const connectLines = linesOf('callback-1');
    expect(connectLines).toContainEqual(
      expect.objectContaining({ msg: 'integration connected', requestId: 'callback-1', provider: 'github', integrationId, organizationId: owner.organizationId, reconnected: false }),
    );
    expect(connectLines.every((entry) => entry.requestId === 'callback-1')).toBe(true);

    // The grant is revoked at GitHub: the refresh is refused and the integration becomes invalid.
    gh.revokeUser('logs-octo');
    const refresh = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/github/refresh', headers: { ...bearer(owner.token), 'x-request-id': 'refresh-1' } });
    expect(refresh.statusCode).toBe(409);
    const refreshLines = linesOf('refresh-1');
    expect(refreshLines).toContainEqual(
      expect.objectContaining({
        msg: 'integration status changed to invalid',
        requestId: 'refresh-1',
        provider: 'github',
        integrationId,
        organizationId: owner.organizationId,
        from: 'connected',
        to: 'invalid',
        reason: expect.any(String),
      }),
    );
    // The status change is written through the service logger, not the request's: it carries the id all the same.
    expect(refreshLines.every((entry) => entry.requestId === 'refresh-1')).toBe(true);

    for (const tokens of gh.tokensOf('logs-octo')) expect(t.logs.text).not.toContain(tokens.accessToken);
    expect(t.logs.text).not.toContain(owner.token);
    expect(t.logs.text).not.toContain(approved.code);
  });
});

describe.skipIf(TEST_DATABASE_URL)('LOG_FORMAT=pretty', () => {
  const dataDir = newDataDir('tessera-pretty-');
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('prints one readable line per entry — time, level, the request id, the message and its fields — redacted like JSON lines', async () => {
    const service = await spawnService({
      DATA_DIR: dataDir,
      LOG_FORMAT: 'pretty',
      ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 2).toString('base64')}`,
      JWT_SECRET: 'p'.repeat(40),
    });
    await waitFor(service);
    // A live-looking connect link (its secret in the path) and an OAuth code in the query string.
    const linkSecret = 'S3cretConnectLink0123456789abcdefghijklmnopq';
    const res = await fetch(`${service.url}/v1/integrations/oauth/connect/${linkSecret}?code=OauthCode0Secret0123`, { headers: { 'x-request-id': 'pretty-1' } });
    expect(res.status).toBe(404);
    await res.arrayBuffer();
    expect(await service.stop()).toBe(0);
    const lines = service
      .output()
      .split('\n')
      .filter((line) => line.trim() !== '');

    // Not JSON: every entry starts with its time and level.
    for (const line of lines) expect(line).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL): /);
    expect(lines).toContainEqual(expect.stringMatching(/^\[[\d:.]+\] INFO: tessera is ready, listening on /));
    const request = lines.filter((line) => line.includes('[pretty-1]'));
    expect(request).toEqual([
      expect.stringMatching(/INFO: \[pretty-1\] request start method=GET url=\/v1\/integrations\/oauth\/connect\/\[REDACTED\]$/),
      expect.stringMatching(/INFO: \[pretty-1\] request finish .*status=404 durationMs=[\d.]+$/),
    ]);
    expect(service.output()).not.toContain(linkSecret);
    expect(service.output()).not.toContain('OauthCode0Secret0123');
  }, 180_000);
});
