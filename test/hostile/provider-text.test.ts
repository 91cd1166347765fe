// Text a provider sends at its token endpoint — any string, binary, markup, our own client secret
// echoed back, 100 KB — reaches a log line only as a short identifier (docs/contract.md §2), and the
// answer is an error of the contract, whatever shape the refusal comes in.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from '../fakes/common.ts';
import { startFakeGitHub } from '../fakes/github.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { type Account, registerAndLogin } from '../helpers/identity.ts';
import { providerEnv, startFlow } from '../helpers/providers.ts';
import { SCALE } from './world.ts';

let app: TestApp;
let fake: FakeProvider;
let evil: Server;
let evilAnswer = { status: 200, body: '{}' };
let account: Account;

beforeAll(async () => {
  fake = await startFakeGitHub();
  // The token endpoint is this server, answering whatever the property says.
  evil = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(evilAnswer.status, { 'content-type': 'application/json' }).end(evilAnswer.body));
  });
  await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
  app = await createTestApp({
    background: false,
    env: { ...providerEnv(fake), INTEGRATION_OAUTH_GITHUB_TOKEN_URL: `http://127.0.0.1:${(evil.address() as AddressInfo).port}/token`, RATE_LIMIT_MAX: '0' },
  });
  account = await registerAndLogin(app.fastify, 'classes');
});

afterAll(async () => {
  await app?.close();
  await fake?.close();
  await new Promise<void>((resolve) => {
    evil?.close(() => resolve());
    evil?.closeAllConnections();
  });
});

describe('text a provider sends reaches the log only as a short identifier', () => {
  it('text a token endpoint sends reaches the log only as a short identifier, whatever it is', { timeout: 300_000 }, async () => {
    const text = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.string({ unit: 'binary', maxLength: 100 }),
      fc.stringMatching(/^[A-Za-z0-9_.:-]{1,80}$/),
      fc.constantFrom('<script>alert(1)</script>', `client_secret=${fake.clientSecret}`, 'x'.repeat(100_000), '{"nested":"json"}', '\u0000\u001b[31m', 'line\nbreak'),
    );
    const shape = fc.constantFrom(
      (error: string) => ({ status: 200, body: JSON.stringify({ error }) }),
      (error: string) => ({ status: 400, body: JSON.stringify({ error, error_description: error }) }),
      (error: string) => ({ status: 401, body: JSON.stringify({ error: 'invalid_client', error_description: error, error_uri: error }) }),
    );
    await fc.assert(
      fc.asyncProperty(text, shape, async (error, answer) => {
        evilAnswer = answer(error);
        const started = await startFlow(app.fastify, account.token, 'github');
        const marker = app.logs.lines.length;
        const res = await app.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers: { cookie: `oauth_tx=${started.txCookie}` }, payload: { provider: 'github', code: 'c', state: started.state } });
        expect([400, 502]).toContain(res.statusCode);
        const lines = app.logs.lines.slice(marker);
        const identifier = /^[A-Za-z0-9_.:-]{1,64}$/.test(error);
        for (const line of lines) {
          expect(line.length).toBeLessThan(2048);
          expect(line).not.toContain(fake.clientSecret);
          if (!identifier && error.length >= 12) expect(line).not.toContain(JSON.stringify(error).slice(1, 13));
        }
      }),
      { numRuns: Math.ceil(60 * SCALE) },
    );
  });
});
