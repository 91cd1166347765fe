// Tenant-steered URLs (docs/contract.md §1 "The outbound guard", §5c entered values in URLs): an
// entered value fills a URL only as a host label under a fixed suffix; a definition whose
// placeholder stands for the scheme, the whole host or the port is refused at start; in production
// the address actually connected to is checked, OUTBOUND_ALLOW_CIDRS opens ranges, a refused
// verification call is 400 and a refused proxied call 502 — never the internal service's body.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, LookupFunction } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config/load.ts';
import { buildProviderRegistry } from '../src/integrations/providers/registry.ts';
import { twilio } from '../src/integrations/providers/twilio.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';

const dir = mkdtempSync(join(tmpdir(), 'tessera-outbound-'));
const KEY = 'site-key-0123456789abcdef';

/** The problems a configuration file's providers give at start (loadConfig, then the registry). */
function startProblems(lines: string[], env: Record<string, string> = {}): string[] {
  const file = join(dir, `config-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, lines.join('\n'));
  try {
    buildProviderRegistry(loadConfig({ env: { CONFIG_FILE: file, ENCRYPTION_KEYS: `k:${Buffer.alloc(32, 1).toString('base64')}`, JWT_SECRET: 'j'.repeat(40), ...env }, persistGeneratedSecrets: false }));
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

/** A custom api_key provider whose `site` (entered, metadata) fills its URLs as given. */
const siteProvider = (urls: { apiUrl: string; userInfo: string; tokenUrl?: string }) => [
  'integrationOauthProvider:',
  '  siteco:',
  '    definition:',
  '      displayName: SiteCo',
  '      authMode: api_key',
  `      apiUrl: "${urls.apiUrl}"`,
  '      credentials:',
  '        - { name: site, label: Site, secret: false }',
  '        - { name: port, label: Port, secret: false }',
  '        - { name: apiKey, label: API key, secret: true }',
  '      metadata: [site, port]',
  '      headers: { X-Api-Key: "{apiKey}" }',
  `      userInfo: { url: "${urls.userInfo}", id: id, username: name }`,
];

describe('a definition whose placeholder stands for the scheme, the host or the port is refused at start', () => {
  const key = 'integrationOauthProvider.siteco.definition';
  it.each([
    ['the whole host', { apiUrl: 'https://{site}/v1', userInfo: 'https://api.siteco.test/me' }, 'apiUrl', 'the whole host'],
    ['the whole host, in the verification call', { apiUrl: 'https://api.siteco.test', userInfo: 'https://{site}/me' }, 'userInfo.url', 'the whole host'],
    ['the port', { apiUrl: 'https://{site}.siteco.test:{port}', userInfo: 'https://api.siteco.test/me' }, 'apiUrl', 'the port'],
    ['the scheme', { apiUrl: '{site}://api.siteco.test', userInfo: 'https://api.siteco.test/me' }, 'apiUrl', 'the scheme'],
    ['a host under a one-label suffix', { apiUrl: 'https://{site}.com', userInfo: 'https://api.siteco.test/me' }, 'apiUrl', 'the whole host'],
    ['two placeholders making the host', { apiUrl: 'https://{site}.{port}', userInfo: 'https://api.siteco.test/me' }, 'apiUrl', 'the whole host'],
    ['an IP literal host', { apiUrl: 'https://10.0.{site}.1', userInfo: 'https://api.siteco.test/me' }, 'apiUrl', 'the whole host'],
    ['part of a label', { apiUrl: 'https://api-{site}.siteco.test', userInfo: 'https://api.siteco.test/me' }, 'apiUrl', 'part of a host label'],
    ['the userinfo', { apiUrl: 'https://{site}@api.siteco.test', userInfo: 'https://api.siteco.test/me' }, 'apiUrl', 'the userinfo'],
  ])('%s', (_name, urls, where, what) => {
    const problems = startProblems(siteProvider(urls));
    expect(problems.some((problem) => problem.startsWith(`${key}.${where}: `) && problem.includes(what)), problems.join('\n')).toBe(true);
  });

  it('a placeholder naming no metadata field (a secret) is refused naming the key', () => {
    const problems = startProblems(siteProvider({ apiUrl: 'https://{apiKey}.siteco.test', userInfo: 'https://api.siteco.test/me' }));
    expect(problems).toContain(`${key}.apiUrl: {apiKey} is not a metadata field: only an entered field listed under metadata may fill a URL`);
  });

  it('a built-in definition whose URL puts an entered value in the host or port is refused naming the key', () => {
    const config = loadConfig({ env: { INTEGRATION_OAUTH_TWILIO_ENABLED: 'true', ENCRYPTION_KEYS: `k:${Buffer.alloc(32, 1).toString('base64')}`, JWT_SECRET: 'j'.repeat(40) }, persistGeneratedSecrets: false });
    for (const [apiUrl, what] of [
      ['https://{accountSid}', 'the whole host'],
      ['https://api.twilio.com:{accountSid}', 'the port'],
    ] as const) {
      const steered = { ...twilio, endpoints: { ...twilio.endpoints, apiUrl } };
      let problems: string[] = [];
      try {
        buildProviderRegistry(config, [steered]);
      } catch (error) {
        problems = (error as ConfigError).problems;
      }
      expect(problems).toEqual([expect.stringMatching(new RegExp(`^integrationOauthProvider\\.twilio\\.apiUrl: \\{accountSid\\} stands for ${what}`))]);
    }
  });

  it('a label under a fixed suffix, a path segment and a query value are accepted', () => {
    expect(startProblems(siteProvider({ apiUrl: 'https://{site}.siteco.test/v1', userInfo: 'https://api.{site}.siteco.test/accounts/{port}?p={port}' }))).toEqual([]);
  });
});

describe('in production, entered values and the outbound guard', () => {
  let https: Server;
  let t: TestApp;
  let owner: Account;
  const seen: { host: string; path: string }[] = [];
  /** Every lookup the guard made, by host. */
  const lookups: string[] = [];
  const lookupCounts = new Map<string, number>();
  /** What the test's DNS answers for each site label under siteco.test (a list per lookup; the last repeats). */
  const dns: Record<string, string[]> = {
    eu: ['127.0.0.1'],
    loop: ['127.0.0.2'],
    meta: ['169.254.169.254'],
    private: ['10.0.0.7'],
    mapped: ['::ffff:127.0.0.2'],
    // Answers an allowed address to the verification call, then a loopback one it does not allow.
    rebind: ['127.0.0.1', '127.0.0.2'],
  };
  const lookup: LookupFunction = (hostname, options, callback) => {
    lookups.push(hostname);
    const count = lookupCounts.get(hostname) ?? 0;
    lookupCounts.set(hostname, count + 1);
    const answers = dns[hostname.split('.')[0] ?? ''] ?? [];
    const address = answers[Math.min(count, answers.length - 1)];
    if (!address) return callback(Object.assign(new Error('not found'), { code: 'ENOTFOUND' }), '', 4);
    const family = address.includes(':') ? 6 : 4;
    if (options.all) (callback as unknown as (error: null, all: { address: string; family: number }[]) => void)(null, [{ address, family }]);
    else callback(null, address, family);
  };

  beforeAll(async () => {
    // An https service for *.siteco.test on every interface (127.0.0.2 reaches it too: only the guard keeps calls away).
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=siteco.test', '-addext', 'subjectAltName=DNS:*.siteco.test'], { stdio: 'ignore' });
    const cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
    https = createServer({ key: readFileSync(join(dir, 'key.pem')), cert }, (request, response) => {
      seen.push({ host: request.headers.host ?? '', path: request.url ?? '' });
      response.setHeader('content-type', 'application/json');
      if (request.headers['x-api-key'] !== KEY) {
        response.statusCode = 401;
        return response.end('{"error":"bad key"}');
      }
      if (request.url === '/me') return response.end(JSON.stringify({ id: 'acct-1', name: 'Site account' }));
      response.end(JSON.stringify({ internal: 'internal-service-body' }));
    });
    await new Promise<void>((resolve) => https.listen(0, '0.0.0.0', resolve));
    const port = (https.address() as AddressInfo).port;
    const file = join(dir, 'production.yaml');
    writeFileSync(
      file,
      [
        'integrationOauthProvider:',
        '  siteco:',
        '    definition:',
        '      displayName: SiteCo',
        '      authMode: api_key',
        `      apiUrl: "https://{site}.siteco.test:${port}"`,
        '      credentials:',
        '        - { name: site, label: Site, secret: false }',
        '        - { name: apiKey, label: API key, secret: true }',
        '      metadata: [site]',
        '      headers: { X-Api-Key: "{apiKey}" }',
        `      userInfo: { url: "https://{site}.siteco.test:${port}/me", id: id, username: name }`,
      ].join('\n'),
    );
    t = await createTestApp({
      background: false,
      env: { APP_ENV: 'production', PUBLIC_URL: 'https://tessera.example', REGISTRATION: 'open', RATE_LIMIT_MAX: '0', CONFIG_FILE: file, OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32' },
      outbound: { lookup, ca: cert },
    });
    owner = await registerAndLogin(t.fastify, 'outbound');
  }, 300_000);

  afterAll(async () => {
    await t?.close();
    await new Promise<void>((resolve) => (https ? https.close(() => resolve()) : resolve()));
  });

  const post = (credentials: Record<string, string>) =>
    t.fastify.inject({ method: 'POST', url: '/v1/integrations/siteco/credentials', headers: bearer(owner.token), payload: { credentials } });
  const stored = async () => (await t.fastify.inject({ url: '/v1/integrations', headers: bearer(owner.token) })).json().integrations as unknown[];

  it('an entered value that is not a host label is 400 naming the field; nothing stored, nothing looked up or called', async () => {
    const before = seen.length;
    for (const site of ['127.0.0.1', 'evil.com/', 'a.b', '%2e', 'eu.siteco.test', 'evil.com:8080', 'bücher', 'ｅｕ', '-eu', 'eu-', 'a'.repeat(64), 'eu%00', '[::1]', 'e u']) {
      const res = await post({ site, apiKey: KEY });
      expect(res.statusCode, site).toBe(400);
      expect(res.json().code).toBe('INVALID_INPUT');
      expect(res.json().details.map((detail: { path: string }) => detail.path)).toEqual(['credentials.site']);
      expect(res.body).not.toContain(site.slice(0, 6));
    }
    expect(seen.length).toBe(before);
    expect(lookups).toEqual([]);
    expect(await stored()).toEqual([]);
  });

  it('a label whose DNS answer is loopback, link-local, private or IPv4-mapped is refused: 400 naming the field, logged, nothing stored', async () => {
    const before = seen.length;
    for (const site of ['loop', 'meta', 'private', 'mapped']) {
      const res = await post({ site, apiKey: KEY });
      expect(res.statusCode, `${site}: ${res.body}`).toBe(400);
      expect(res.json()).toMatchObject({ code: 'INVALID_INPUT', details: [{ path: 'credentials.site' }] });
      expect(lookups).toContain(`${site}.siteco.test`);
    }
    expect(seen.length).toBe(before);
    expect(await stored()).toEqual([]);
    const refused = t.logs.entries.filter((entry) => entry.msg === 'the outbound guard refused an address');
    expect(refused.map((entry) => entry.addressClass)).toEqual(expect.arrayContaining(['loopback', 'link-local', 'private']));
    expect(t.logs.text).not.toContain(KEY);
  });

  it('allowed by OUTBOUND_ALLOW_CIDRS, an upper-case label is lower-cased, reached at the answer the guard checked, and stored', async () => {
    const res = await post({ site: 'EU', apiKey: KEY });
    expect(res.statusCode, res.body).toBe(201);
    expect(seen.at(-1)).toEqual({ host: `eu.siteco.test:${(https.address() as AddressInfo).port}`, path: '/me' });
    const token = (await t.fastify.inject({ url: '/v1/integrations/siteco/token', headers: bearer(owner.token) })).json();
    expect(token.metadata).toEqual({ site: 'eu' });
    const proxied = await t.fastify.inject({ url: '/v1/integrations/siteco/proxy/things', headers: bearer(owner.token) });
    expect(proxied.statusCode, proxied.body).toBe(200);
  });

  it('the proxy with a stored value whose answer is now a refused address: 502, logged, never the internal body', async () => {
    // The verification call is answered 127.0.0.1 (allowed); every later lookup answers 127.0.0.2.
    const res = await post({ site: 'rebind', apiKey: KEY });
    expect(res.statusCode, res.body).toBe(201);
    const before = seen.length;
    const proxied = await t.fastify.inject({ url: '/v1/integrations/siteco/proxy/latest/meta-data', headers: bearer(owner.token) });
    expect(proxied.statusCode, proxied.body).toBe(502);
    expect(proxied.json().code).toBe('PROVIDER_ERROR');
    expect(proxied.body).not.toContain('internal-service-body');
    expect(seen.length).toBe(before);
    expect(lookupCounts.get('rebind.siteco.test')).toBe(2);
    expect(t.logs.entries.some((entry) => entry.msg === 'the outbound guard refused an address' && entry.host === 'rebind.siteco.test' && entry.address === '127.0.0.2')).toBe(true);
    // The integration stays: an unreachable provider is not a verdict on the credentials.
    const status = (await t.fastify.inject({ url: '/v1/integrations', headers: bearer(owner.token) })).json().integrations;
    expect(status).toHaveLength(1);
  });
});
