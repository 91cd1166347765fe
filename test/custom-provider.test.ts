// Any RFC 6749 provider from configuration alone: a `definition` in CONFIG_FILE, no code.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config/load.ts';
import { buildProviderRegistry } from '../src/integrations/providers/registry.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeRfcProvider } from './fakes/providers/rfc.ts';
import type { ScreenUser } from './fakes/toolkit.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { spawnService } from './helpers/process.ts';
import { connect, startFlow } from './helpers/providers.ts';

const dir = mkdtempSync(join(tmpdir(), 'tessera-custom-'));
function configFile(name: string, lines: string[]): string {
  const file = join(dir, name);
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

let fake: FakeProvider<ScreenUser>;
let t: TestApp;
let owner: Account;

beforeAll(async () => {
  fake = await startFakeRfcProvider();
  fake.addUser({ login: 'wile', email: 'wile@acme.example', name: 'Wile E. Coyote' });
  const file = configFile('acme.yaml', [
    'integrationOauthProvider:',
    '  acme:',
    `    clientId: ${fake.clientId}`,
    `    clientSecret: ${fake.clientSecret}`,
    '    definition:',
    '      displayName: Acme',
    `      authUrl: ${fake.url}/authorize`,
    `      tokenUrl: ${fake.url}/token`,
    `      apiUrl: ${fake.url}/api`,
    '      scopes: [read, write]',
    '      userInfo:',
    `        url: ${fake.url}/userinfo`,
    '        id: sub',
    '        username: preferred_username',
    '        email: email',
    `      revokeUrl: ${fake.url}/revoke`,
  ]);
  t = await createTestApp({ background: false, env: { CONFIG_FILE: file, RATE_LIMIT_MAX: '0' } });
  owner = await registerAndLogin(t.fastify, 'acme-owner');
});

afterAll(async () => {
  await t?.close();
  await fake?.close();
});

describe('a custom provider defined in the config file only', () => {
  it('is listed with its display name', async () => {
    const res = await t.fastify.inject({ url: '/v1/providers', headers: bearer(owner.token) });
    expect(res.json().providers).toEqual([{ id: 'acme', displayName: 'Acme', defaultScopes: ['read', 'write'], authMode: 'oauth2', apps: ['acme'] }]);
  });

  it('connects, hands out the token, proxies, refreshes, detects a revocation and deletes with a revocation', async () => {
    const started = await startFlow(t.fastify, owner.token, 'acme');
    const url = new URL(started.authUrl);
    expect(url.searchParams.get('scope')).toBe('read write');
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    const approved = fake.authorize(started.authUrl, 'wile');
    const connected = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers: { cookie: `oauth_tx=${started.txCookie}` }, payload: { provider: 'acme', code: approved.code, state: approved.state } });
    expect(connected.statusCode, connected.body).toBe(200);
    expect(connected.json().integration.name).toBe('Acme Integration (wile)');
    const id = connected.json().integration.id;

    const token = await t.fastify.inject({ url: '/v1/integrations/acme/token', headers: bearer(owner.token) });
    expect(token.json().token.accessToken).toBe(fake.tokensOf('wile')[0]?.accessToken);
    expect((await t.fastify.inject({ url: '/v1/integrations/acme/proxy/things', headers: bearer(owner.token) })).json()).toEqual({ things: [] });

    const refreshed = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/acme/refresh', headers: bearer(owner.token) });
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    expect(fake.stats.refreshes).toBe(1);
    expect(refreshed.json().token.accessToken).toBe(fake.tokensOf('wile')[0]?.accessToken);

    fake.mode.api = 'rate-limited';
    const limited = await t.fastify.inject({ url: '/v1/integrations/acme/proxy/things', headers: bearer(owner.token) });
    fake.mode.api = 'ok';
    expect(limited.statusCode).toBe(429);
    expect(limited.headers['retry-after']).toBe('7');
    // Remembered for every instance until the reset (docs/contract.md §5f), which passes here.
    const remembered = await t.fastify.inject({ url: '/v1/integrations/acme/proxy/things', headers: bearer(owner.token) });
    expect(remembered.statusCode).toBe(429);
    expect(remembered.headers['tessera-attempts']).toBe('0');
    await t.database.db.execute(sql`DELETE FROM provider_budgets`);

    fake.revokeUser('wile');
    expect((await t.fastify.inject({ url: '/v1/integrations/acme/proxy/things', headers: bearer(owner.token) })).statusCode).toBe(409);
    const status = await t.fastify.inject({ url: '/v1/integrations/acme/status', headers: bearer(owner.token) });
    expect(status.json().status).toMatchObject({ status: 'invalid', actions: ['reconnect'] });

    const reconnected = await connect(t.fastify, owner.token, fake, 'wile');
    expect(reconnected.json().integration.id).toBe(id);
    expect((await t.fastify.inject({ method: 'DELETE', url: `/v1/integrations/${id}`, headers: bearer(owner.token) })).statusCode).toBe(200);
    await expect.poll(() => fake.stats.revocations, { timeout: 5000 }).toBe(1);
    expect(fake.tokensOf('wile')).toEqual([]);
  });
});

describe('a custom definition that is incomplete or malformed', () => {
  const base = { ENCRYPTION_KEYS: `k:${Buffer.alloc(32).toString('base64')}`, JWT_SECRET: 'j'.repeat(32) };
  const problemsOf = (lines: string[]) => {
    try {
      buildProviderRegistry(loadConfig({ env: { ...base, CONFIG_FILE: configFile('bad.yaml', lines) }, persistGeneratedSecrets: false }));
    } catch (error) {
      if (error instanceof ConfigError) return error.problems;
      throw error;
    }
    return [];
  };

  it('stops the start with one line per problem, naming the key', () => {
    expect(
      problemsOf([
        'integrationOauthProvider:',
        '  acme:',
        '    clientId: x',
        '    clientSecret: y',
        '    definition:',
        '      authUrl: ftp://acme.example/authorize',
        '      tokenUrl: https://acme.example/token',
        '      apiUrl: https://acme.example/api',
        '      scopeSeparator: ";"',
        '      userInfo:',
        '        url: https://acme.example/me',
        '      colour: red',
      ]),
    ).toEqual(
      expect.arrayContaining([
        'integrationOauthProvider.acme.definition.displayName: is required',
        'integrationOauthProvider.acme.definition.userInfo.id: is required',
        'integrationOauthProvider.acme.definition.colour: unknown key; remove it or check its spelling',
        expect.stringMatching(/^integrationOauthProvider\.acme\.definition\.scopeSeparator: /),
      ]),
    );
    expect(
      problemsOf([
        'integrationOauthProvider:',
        '  acme:',
        '    definition:',
        '      displayName: Acme',
        '      authUrl: ftp://acme.example/authorize',
        '      tokenUrl: https://acme.example/token',
        '      apiUrl: not a url',
        '      userInfo: { url: "https://acme.example/me", id: sub }',
      ]),
    ).toEqual([
      'integrationOauthProvider.acme.definition.authUrl: must use https: (http: only for loopback hosts in development)',
      'integrationOauthProvider.acme.definition.apiUrl: expected an absolute URL',
    ]);
    expect(problemsOf(['integrationOauthProvider:', '  github:', '    definition: { displayName: Mine }'])).toEqual([
      'integrationOauthProvider.github.definition: "github" has a built-in definition; remove the definition, or choose another id',
    ]);
  });

  it('loads the OpenID Connect example of docs/providers.md, which asks for offline access with consent', () => {
    const docs = readFileSync(new URL('../docs/providers.md', import.meta.url), 'utf8');
    const example = [...docs.matchAll(/```yaml\n([\s\S]*?)```/g)].map((match) => match[1] ?? '').find((block) => block.includes('offline_access'));
    expect(example).toBeDefined();
    const file = configFile('oidc.yaml', (example ?? '').trimEnd().split('\n'));
    const sso = buildProviderRegistry(loadConfig({ env: { ...base, CONFIG_FILE: file }, persistGeneratedSecrets: false })).get('sso');
    expect(sso?.definition.defaultScopes).toContain('offline_access');
    expect(sso?.definition.authorizeParams).toEqual({ prompt: 'consent' });
    expect(sso?.definition.revoke).toBeDefined();
  });

  it('makes npm start exit 1 with those lines', async () => {
    const file = configFile('start.yaml', ['integrationOauthProvider:', '  acme:', '    definition:', '      displayName: Acme']);
    const service = await spawnService({ DATA_DIR: mkdtempSync(join(dir, 'data-')), CONFIG_FILE: file });
    expect(await service.exited).toBe(1);
    expect(service.output()).toMatch(/^config: integrationOauthProvider\.acme\.definition\.authUrl: is required$/m);
  }, 120_000);
});
