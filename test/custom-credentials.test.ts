// Custom providers (CONFIG_FILE) whose credentials people enter (docs/contract.md §5c): api_key with a
// custom header, basic from two fields, client_credentials with RFC 6749 §4.4 — configured with no
// deployment client id or secret, from configuration alone.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config/load.ts';
import { buildProviderRegistry } from '../src/integrations/providers/registry.ts';
import { basicOf, bearerOf, type EnteredFake, startEnteredFake } from './fakes/entered.ts';
import { type FakeTwilio, startFakeTwilio } from './fakes/providers/twilio.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';

const dir = mkdtempSync(join(tmpdir(), 'tessera-custom-credentials-'));
let keyco: EnteredFake;
let twilio: FakeTwilio;
let t: TestApp;
let owner: Account;
const KEY = 'kc_live_0123456789abcdef';
const CLIENT = { id: 'machine-client', secret: 'machine-secret-0123456789' };
let mints = 0;

beforeAll(async () => {
  // KeyCo, as its (imagined) documentation says: `X-KeyCo-Token: Key <key>`, `GET /me`, and RFC 6749 §4.4 at `/oauth/token`.
  keyco = await startEnteredFake({
    'GET /me': (request) => (request.headers['x-keyco-token'] === `Key ${KEY}` ? { status: 200, json: { id: 'team-42', name: 'Team 42' } } : { status: 401, json: { error: 'bad key' } }),
    'GET /things': (request) => (request.headers['x-keyco-token'] === `Key ${KEY}` ? { status: 200, json: { things: [1] } } : { status: 401, json: { error: 'bad key' } }),
    'POST /oauth/token': (request) => {
      const basic = basicOf(request);
      const form = new URLSearchParams(request.body);
      if (basic?.user !== CLIENT.id || basic.password !== CLIENT.secret) return { status: 401, json: { error: 'invalid_client' } };
      if (form.get('grant_type') !== 'client_credentials') return { status: 400, json: { error: 'unsupported_grant_type' } };
      mints += 1;
      return { status: 200, json: { access_token: `machine-token-${mints}`, token_type: 'Bearer', expires_in: 3600, scope: form.get('scope') ?? '' } };
    },
    'GET /machine/me': (request) => (bearerOf(request)?.startsWith('machine-token-') ? { status: 200, json: { client: CLIENT.id } } : { status: 401, json: { error: 'invalid_token' } }),
  });
  twilio = await startFakeTwilio();
  const file = join(dir, 'providers.yaml');
  writeFileSync(
    file,
    [
      'integrationOauthProvider:',
      '  keyco:',
      '    definition:',
      '      displayName: KeyCo',
      '      authMode: api_key',
      `      apiUrl: ${keyco.url}`,
      '      credentials:',
      '        - { name: apiKey, label: API key, secret: true }',
      '      headers: { X-KeyCo-Token: "Key {apiKey}" }',
      `      userInfo: { url: "${keyco.url}/me", id: id, username: name }`,
      '  smsco:',
      '    definition:',
      '      displayName: SmsCo',
      '      authMode: basic',
      `      apiUrl: ${twilio.url}`,
      '      credentials:',
      '        - { name: sid, label: Account SID, secret: false }',
      '        - { name: token, label: Auth token, secret: true }',
      '      basic: { username: "{sid}", password: "{token}" }',
      '      metadata: [sid]',
      `      userInfo: { url: "${twilio.url}/2010-04-01/Accounts/{sid}.json", id: sid, username: friendly_name }`,
      '  machineco:',
      '    definition:',
      '      displayName: MachineCo',
      '      authMode: client_credentials',
      `      apiUrl: ${keyco.url}/machine`,
      `      tokenUrl: ${keyco.url}/oauth/token`,
      '      scopes: [read]',
      '      credentials:',
      '        - { name: clientId, label: Client ID, secret: false }',
      '        - { name: clientSecret, label: Client secret, secret: true }',
    ].join('\n'),
  );
  t = await createTestApp({ background: false, env: { CONFIG_FILE: file, RATE_LIMIT_MAX: '0' } });
  owner = await registerAndLogin(t.fastify, 'custom-keys');
});

afterAll(async () => {
  await t?.close();
  await keyco?.close();
  await twilio?.close();
});

const post = (provider: string, credentials: Record<string, string>) =>
  t.fastify.inject({ method: 'POST', url: `/v1/integrations/${provider}/credentials`, headers: bearer(owner.token), payload: { credentials } });

describe('custom providers whose credentials people enter', () => {
  it('count as configured without a client id or secret, and list their fields', async () => {
    const providers = (await t.fastify.inject({ url: '/v1/providers', headers: bearer(owner.token) })).json().providers;
    expect(providers.map((p: { id: string; authMode: string }) => [p.id, p.authMode])).toEqual([
      ['keyco', 'api_key'],
      ['smsco', 'basic'],
      ['machineco', 'client_credentials'],
    ]);
  });

  it('api_key: carried in the custom header, for the verification call and the proxy', async () => {
    expect((await post('keyco', { apiKey: 'kc_live_wrong' })).json().code).toBe('INVALID_CREDENTIALS');
    const res = await post('keyco', { apiKey: KEY });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().integration.name).toBe('KeyCo Integration (Team 42)');
    const proxied = await t.fastify.inject({ url: '/v1/integrations/keyco/proxy/things', headers: bearer(owner.token) });
    expect(proxied.json()).toEqual({ things: [1] });
    expect(keyco.requests.at(-1)?.headers['x-keyco-token']).toBe(`Key ${KEY}`);
    expect(keyco.requests.at(-1)?.headers.authorization).toBeUndefined();
  });

  it('basic: the SID in the verification URL and in metadata', async () => {
    const account = twilio.addAccount('SmsCo Main');
    const res = await post('smsco', { sid: account.sid, token: account.authToken });
    expect(res.statusCode, res.body).toBe(201);
    const token = (await t.fastify.inject({ url: '/v1/integrations/smsco/token', headers: bearer(owner.token) })).json();
    expect(token).toMatchObject({ authMode: 'basic', credentials: { sid: account.sid, token: account.authToken }, metadata: { sid: account.sid } });
  });

  it('client_credentials: verified by minting with the client in HTTP Basic; the token read serves the minted token', async () => {
    expect((await post('machineco', { clientId: CLIENT.id, clientSecret: 'nope' })).json().code).toBe('INVALID_CREDENTIALS');
    const res = await post('machineco', { clientId: CLIENT.id, clientSecret: CLIENT.secret });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().integration.name).toBe(`MachineCo Integration (${CLIENT.id})`);
    const token = (await t.fastify.inject({ url: '/v1/integrations/machineco/token', headers: bearer(owner.token) })).json();
    expect(token).toMatchObject({ authMode: 'client_credentials', token: { accessToken: 'machine-token-1', scopes: ['read'] } });
    expect(mints).toBe(1);
  });

  it('a malformed definition stops the start naming the key', () => {
    const file = join(dir, 'broken.yaml');
    writeFileSync(file, ['integrationOauthProvider:', '  broken:', '    definition:', '      displayName: Broken', '      authMode: client_credentials', '      apiUrl: https://api.example.com', '      credentials:', '        - { name: key, label: Key, secret: true }'].join('\n'));
    const config = loadConfig({ env: { CONFIG_FILE: file, ENCRYPTION_KEYS: `k:${Buffer.alloc(32, 1).toString('base64')}`, JWT_SECRET: 'j'.repeat(40) }, persistGeneratedSecrets: false });
    let error: unknown;
    try {
      buildProviderRegistry(config);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      'integrationOauthProvider.broken.definition.tokenUrl: is required for client_credentials',
      'integrationOauthProvider.broken.definition.credentials: client_credentials needs fields named clientId and clientSecret',
    ]);
  });
});
