import { existsSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { storeGeneratedSecrets } from './generated-secrets.ts';
import { ConfigError, loadConfig } from './load.ts';

const KEY = Buffer.alloc(32, 3).toString('base64');
const base = { ENCRYPTION_KEYS: `k1:${KEY}`, JWT_SECRET: 'j'.repeat(32) };

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig({ env, persistGeneratedSecrets: false });
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('loadConfig', () => {
  it('applies the contract defaults', () => {
    const config = loadConfig({ env: base });
    expect(config.server).toMatchObject({ host: '127.0.0.1', port: 8080, publicUrl: 'http://127.0.0.1:8080' });
    expect(config.oauth).toMatchObject({ stateExpiry: 300, validationInterval: 14400, statusMaxAge: 60, redirectOrigins: ['http://127.0.0.1:8080'] });
    expect(config.rateLimit).toEqual({ max: 600, window: 60, organizationMax: 2400, serviceMax: 6000 });
    expect(config.limits).toEqual({ organizationsPerUser: 20, apiTokens: 20, appsPerOrganization: 20 });
    expect(config.auth).toMatchObject({ sessionTtl: 3600, passwordCost: 17 });
    expect(config.csrf.enabled).toBe(true);
    expect(config.keyring.activeId).toBe('k1');
    expect(config.jwtKeys).toEqual([{ kid: 'default', secret: Buffer.from('j'.repeat(32)) }]);
  });

  it('takes the MCP sign-in settings (§9a): registration open in development and closed in production by default; the handoff URL under the https rule', () => {
    expect(loadConfig({ env: base }).mcp).toEqual({ clientRegistration: 'open' });
    expect(loadConfig({ env: base }).oauth.consentHandoffUrl).toBeNull();
    const production = loadConfig({ env: { ...base, APP_ENV: 'production', PUBLIC_URL: 'https://tessera.example', OAUTH_CONSENT_HANDOFF_URL: 'https://product.example/consent' } });
    expect(production.mcp).toEqual({ clientRegistration: 'closed' });
    expect(production.oauth.consentHandoffUrl).toBe('https://product.example/consent');
    expect(loadConfig({ env: { ...base, APP_ENV: 'production', PUBLIC_URL: 'https://tessera.example', MCP_CLIENT_REGISTRATION: 'open' } }).mcp.clientRegistration).toBe('open');
    expect(problems({ ...base, APP_ENV: 'production', PUBLIC_URL: 'https://tessera.example', OAUTH_CONSENT_HANDOFF_URL: 'http://product.example/consent' }).join('\n')).toMatch(/OAUTH_CONSENT_HANDOFF_URL.*https/);
    expect(problems({ ...base, MCP_CLIENT_REGISTRATION: 'sometimes' }).join('\n')).toContain('MCP_CLIENT_REGISTRATION');
  });

  it('warns of a half-configured provider and an INTEGRATION_OAUTH_* variable that is no setting, naming them and never their values', () => {
    const config = loadConfig({
      env: {
        ...base,
        INTEGRATION_OAUTH_SLACK_CLIENT_ID: 'id',
        INTEGRATION_OAUTH_SLACK_CLIENT_SECRET: 'complete-secret',
        INTEGRATION_OAUTH_GITHUB_CLIENT_ID: 'id',
        INTEGRATION_OAUTH_GITLAB_CLIENT_SECRET: 'lonely-secret-value',
        INTEGRATION_OAUTH_NOTION_SCOPES: 'read',
        INTEGRATION_OAUTH_ZOOM_CLIENTSECRET: 'misspelt-secret-value',
        INTEGRATION_OAUTH_LINEAR_COLOUR: 'blue',
      },
    });
    expect(config.warnings).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^INTEGRATION_OAUTH_GITHUB_CLIENT_ID \(integrationOauthProvider\.github\.clientId\): set, but INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET is not, so provider "github" is not configured/),
        expect.stringMatching(/^INTEGRATION_OAUTH_GITLAB_CLIENT_SECRET \(integrationOauthProvider\.gitlab\.clientSecret\): set, but INTEGRATION_OAUTH_GITLAB_CLIENT_ID is not/),
        expect.stringMatching(/^INTEGRATION_OAUTH_NOTION_\* \(integrationOauthProvider\.notion\): settings given, but neither INTEGRATION_OAUTH_NOTION_CLIENT_ID nor INTEGRATION_OAUTH_NOTION_CLIENT_SECRET/),
        'INTEGRATION_OAUTH_ZOOM_CLIENTSECRET: not a setting, ignored; did you mean INTEGRATION_OAUTH_ZOOM_CLIENT_SECRET?',
        expect.stringMatching(/^INTEGRATION_OAUTH_LINEAR_COLOUR: not a setting, ignored; a provider's settings are INTEGRATION_OAUTH_<P>_\{CLIENT_ID,CLIENT_SECRET,/),
      ]),
    );
    expect(config.warnings).toHaveLength(5);
    expect(config.warnings.join('\n')).not.toMatch(/secret-value|complete-secret/);
    expect(loadConfig({ env: { ...base, INTEGRATION_OAUTH_SLACK_CLIENT_ID: 'id', INTEGRATION_OAUTH_SLACK_CLIENT_SECRET: 's' } }).warnings).toEqual([]);
  });

  it('reads the config file, then lets env vars override it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-config-'));
    const file = join(dir, 'tessera.yaml');
    writeFileSync(
      file,
      [
        'server:',
        '  port: 9000',
        '  host: 127.0.0.2',
        'rateLimit:',
        '  max: 5',
        'integrationOauthProvider:',
        '  github:',
        '    clientId: from-file',
        '    scopes: [repo, read:user]',
      ].join('\n'),
    );
    const config = loadConfig({ env: { ...base, CONFIG_FILE: file, PORT: '9100', INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET: 's3cret' } });
    expect(config.server.port).toBe(9100);
    expect(config.server.host).toBe('127.0.0.2');
    expect(config.rateLimit.max).toBe(5);
    expect(config.providers.github).toEqual({ clientId: 'from-file', clientSecret: 's3cret', scopes: ['repo', 'read:user'] });
  });

  it('reads provider settings and list values from env vars', () => {
    const config = loadConfig({
      env: {
        ...base,
        INTEGRATION_OAUTH_SLACK_CLIENT_ID: 'id',
        INTEGRATION_OAUTH_SLACK_SCOPES: 'chat:write, users:read',
        INTEGRATION_OAUTH_SLACK_API_URL: 'http://127.0.0.1:9999/api/',
        TRUST_PROXY: '10.0.0.0/8, 127.0.0.1',
        JWT_SECRETS: `new:${Buffer.alloc(32, 1).toString('base64')},old:${Buffer.alloc(40, 2).toString('base64')}`,
      },
    });
    expect(config.providers.slack).toEqual({ clientId: 'id', scopes: ['chat:write', 'users:read'], apiUrl: 'http://127.0.0.1:9999/api' });
    expect(config.server.trustProxy).toEqual(['10.0.0.0/8', '127.0.0.1']);
    expect(config.jwtKeys.map((key) => key.kid)).toEqual(['new', 'old']);
  });

  it('names each bad setting and how to fix it, one line each', () => {
    const found = problems({
      ...base,
      ENCRYPTION_KEYS: `k1:${Buffer.alloc(12).toString('base64')}`,
      OAUTH_STATE_EXPIRY: '0',
      CSRF_ENABLED: 'maybe',
      PUBLIC_URL: 'ftp://example.com',
      TRUST_PROXY: 'not-an-ip',
    });
    expect(found).toEqual(
      expect.arrayContaining([
        'CSRF_ENABLED: expected true or false, got "maybe"',
      ]),
    );
    const all = problems({ ...base, ENCRYPTION_KEYS: `k1:${Buffer.alloc(12).toString('base64')}`, PUBLIC_URL: 'ftp://example.com', TRUST_PROXY: 'nope' });
    expect(all).toEqual([
      expect.stringMatching(/^PUBLIC_URL: must use https:/),
      expect.stringMatching(/^TRUST_PROXY: expected a comma list of IP addresses or CIDRs/),
      'ENCRYPTION_KEYS (secrets.keys): expected "keyId:base64(32 bytes)", got 12 bytes; generate one with: openssl rand -base64 32',
    ]);
    expect(problems({ ...base, OAUTH_STATE_EXPIRY: '0' })).toEqual(['OAUTH_STATE_EXPIRY (oauth.stateExpiry): must be >= 1']);
  });

  it('allows plain http only for loopback, and only in development', () => {
    expect(problems({ ...base, PUBLIC_URL: 'http://localhost:8080' })).toEqual([]);
    expect(problems({ ...base, PUBLIC_URL: 'http://example.com' })).toEqual([expect.stringMatching(/^PUBLIC_URL: must use https:/)]);
    expect(problems({ ...base, APP_ENV: 'production', PUBLIC_URL: 'http://127.0.0.1:8080' })).toEqual([
      expect.stringMatching(/^PUBLIC_URL: must use https:/),
    ]);
  });

  it('in production requires the encryption keys and JWT secret instead of generating them', () => {
    expect(problems({ APP_ENV: 'production', PUBLIC_URL: 'https://t.example' })).toEqual([
      expect.stringMatching(/^ENCRYPTION_KEYS \(secrets.keys\): required in production/),
      expect.stringMatching(/^JWT_SECRET \(auth.jwtSecret\): required in production/),
    ]);
  });

  it('refuses a damaged generated-secrets file in words, quoting none of it', () => {
    for (const content of ['{}', '{"encryptionKeys": 5, "jwtSecret": "x"}', '{"encryptionKeys": "dev1:SECRETSECRETSECRET", "jwt', 'null']) {
      const dataDir = mkdtempSync(join(tmpdir(), 'tessera-dev-'));
      writeFileSync(join(dataDir, 'generated-secrets.json'), content);
      let thrown: unknown;
      try {
        loadConfig({ env: { DATA_DIR: dataDir } });
      } catch (error) {
        thrown = error;
      }
      expect(thrown, content).toBeInstanceOf(ConfigError);
      expect((thrown as ConfigError).problems).toEqual([`${join(dataDir, 'generated-secrets.json')}: unreadable generated secrets; set ENCRYPTION_KEYS and JWT_SECRET, or delete the file (what it encrypted becomes unreadable)`]);
      expect((thrown as Error).message).not.toContain('SECRETSECRET');
    }
  });

  it('in development generates missing secrets and says so', () => {
    const config = loadConfig({ env: { DATA_DIR: mkdtempSync(join(tmpdir(), 'tessera-dev-')) }, persistGeneratedSecrets: false });
    expect(config.generatedSecrets).toEqual(['ENCRYPTION_KEYS', 'JWT_SECRET']);
    expect(config.keyring.keys.get(config.keyring.activeId)?.length).toBe(32);
  });

  it('only reads DATA_DIR: generated secrets are written by start-up, 0600, and read back by the next load', () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), 'tessera-dev-')), 'data');
    const first = loadConfig({ env: { DATA_DIR: dataDir } });
    expect(existsSync(dataDir)).toBe(false);
    expect(first.generatedSecrets).toEqual(['ENCRYPTION_KEYS', 'JWT_SECRET']);
    expect(first.secretsToStore?.file).toBe(join(dataDir, 'generated-secrets.json'));

    storeGeneratedSecrets(first.secretsToStore);
    expect(readdirSync(dataDir)).toEqual(['generated-secrets.json']);
    expect(statSync(join(dataDir, 'generated-secrets.json')).mode & 0o777).toBe(0o600);

    const second = loadConfig({ env: { DATA_DIR: dataDir } });
    expect(second.secretsToStore).toBeNull();
    expect(second.generatedSecrets).toEqual(['ENCRYPTION_KEYS', 'JWT_SECRET']);
    expect(second.keyring).toEqual(first.keyring);
    expect(second.jwtKeys).toEqual(first.jwtKeys);
    expect(loadConfig({ env: { ...base, DATA_DIR: dataDir } }).secretsToStore).toBeNull();
  });

  it('rejects unknown settings in the config file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-config-'));
    const file = join(dir, 'c.json');
    writeFileSync(file, JSON.stringify({ server: { prot: 1 } }));
    expect(problems({ ...base, CONFIG_FILE: file })).toEqual(['server.prot: unknown setting; remove it or check its spelling']);
  });
});

describe('loadConfig and secrets', () => {
  const SECRET_VALUE = fc.stringMatching(/^[A-Za-z0-9+/=:_.,@-]{12,80}$/);
  /** Every secret setting, as an environment variable or a config-file entry. */
  const secretSettings: { name: string; env: (value: string) => Record<string, string>; file?: (value: string) => unknown }[] = [
    { name: 'ENCRYPTION_KEYS', env: (value) => ({ ENCRYPTION_KEYS: value }) },
    { name: 'ENCRYPTION_KEYS (second key)', env: (value) => ({ ENCRYPTION_KEYS: `k1:${KEY},${value}` }) },
    { name: 'JWT_SECRET', env: (value) => ({ JWT_SECRET: value.slice(0, 31) }) },
    { name: 'JWT_SECRETS', env: (value) => ({ JWT_SECRETS: value }) },
    { name: 'BOOTSTRAP_ADMIN_PASSWORD', env: (value) => ({ BOOTSTRAP_ADMIN_EMAIL: 'root@example.com', BOOTSTRAP_ADMIN_PASSWORD: `${value}${'x'.repeat(260)}` }) },
    { name: 'DATABASE_URL', env: (value) => ({ DATABASE_URL: `postgres//admin:${value}@db.internal/tessera` }) },
    { name: 'EVENTS_WEBHOOK_SECRET', env: (value) => ({ EVENTS_WEBHOOK_URL: 'https://hooks.example.com/in', EVENTS_WEBHOOK_SECRET: value }) },
    { name: 'EVENTS_WEBHOOK_URL', env: (value) => ({ EVENTS_WEBHOOK_URL: `http://hooks.example.com/services/${value}`, EVENTS_WEBHOOK_SECRET: `whsec_${KEY}` }) },
    { name: 'INTEGRATION_OAUTH_<P>_CLIENT_SECRET', env: (value) => ({ INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET: value, INTEGRATION_OAUTH_GITHUB_CLIENT_ID: 'id', INTEGRATION_OAUTH_GITHUB_TOKEN_URL: 'ftp://nope' }) },
    // A '/' would end the authority: what follows is a path, not a password.
    { name: 'a password in a URL setting not marked secret (PUBLIC_URL)', env: (value) => ({ PUBLIC_URL: `https://admin:${value.replaceAll('/', '')}@exa mple.com` }) },
    { name: 'a password in a list of URLs (OAUTH_REDIRECT_ORIGINS)', env: (value) => ({ OAUTH_REDIRECT_ORIGINS: `https://ok.example, https://admin:${value.replaceAll(/[/,]/g, '')}@bad host` }) },
    { name: 'secrets.keys in a file', env: () => ({}), file: (value) => ({ secrets: { keys: value } }) },
    { name: 'a client secret in a file', env: () => ({}), file: (value) => ({ integrationOauthProvider: { github: { clientSecret: { value } } } }) },
    { name: 'a YAML file that does not parse', env: () => ({}), file: (value) => `secrets:\n  keys: "${value}\n  : - [` },
  ];

  it('never shows any part of a secret value, whatever the malformation', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-config-'));
    for (const setting of secretSettings) {
      fc.assert(
        fc.property(SECRET_VALUE, (value) => {
          const env: Record<string, string> = { ...(setting.file ? { JWT_SECRET: base.JWT_SECRET } : base), ...setting.env(value) };
          if (setting.file) {
            const file = join(dir, 'c.yaml');
            const content = setting.file(value);
            writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
            env.CONFIG_FILE = file;
          }
          const text = problems(env).join('\n');
          expect(text, setting.name).not.toBe('');
          // No run of 8 characters of the value: neither the whole nor a prefix, suffix or middle.
          for (let at = 0; at + 8 <= value.length; at++) expect(text, `${setting.name}: ${text}`).not.toContain(value.slice(at, at + 8));
        }),
        { numRuns: 40 },
      );
    }
  });

  it('names the setting and the expected shape when a key has no id (the reproduction: a bare 44-character key)', () => {
    const bare = Buffer.alloc(32, 9).toString('base64');
    expect(problems({ ...base, ENCRYPTION_KEYS: bare })).toEqual([
      'ENCRYPTION_KEYS (secrets.keys): expected "keyId:base64(32 bytes)", got an entry that is not "keyId:base64"; generate one with: openssl rand -base64 32',
    ]);
  });
});
