import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/load.ts';
import { buildProviderRegistry } from './registry.ts';

const base = { ENCRYPTION_KEYS: `k:${Buffer.alloc(32).toString('base64')}`, JWT_SECRET: 'j'.repeat(32) };

describe('buildProviderRegistry', () => {
  it('refuses configuration naming a provider without a definition', () => {
    const config = loadConfig({ env: { ...base, INTEGRATION_OAUTH_ACME_CLIENT_ID: 'x', INTEGRATION_OAUTH_ACME_CLIENT_SECRET: 'y' }, persistGeneratedSecrets: false });
    expect(() => buildProviderRegistry(config)).toThrow(/INTEGRATION_OAUTH_ACME_\* \(integrationOauthProvider.acme\): no provider definition "acme"/);
  });

  it('gives a provider a deployment app only with a client id and secret, and applies overrides', () => {
    const config = loadConfig({
      env: {
        ...base,
        INTEGRATION_OAUTH_GITHUB_CLIENT_ID: 'id',
        INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET: 'secret',
        INTEGRATION_OAUTH_GITHUB_API_URL: 'https://ghe.example/api/v3/',
        INTEGRATION_OAUTH_GITHUB_CLIENT_ENDPOINT: 'https://tessera.example/base',
        INTEGRATION_OAUTH_SLACK_CLIENT_ID: 'only-id',
      },
      persistGeneratedSecrets: false,
    });
    const registry = buildProviderRegistry(config);
    // Slack's entry holds no secret: it is offered to organizations' own apps only (docs/contract.md §5e).
    expect(registry.list().map((p) => p.id)).toEqual(['github', 'slack']);
    expect(registry.deploymentApps().map((app) => app.ref)).toEqual([{ id: 'github', owner: 'deployment' }]);
    const github = registry.get('github');
    expect(github?.context.endpoints).toEqual({
      authUrl: 'https://github.com/login/oauth/authorize',
      tokenUrl: 'https://github.com/login/oauth/access_token',
      apiUrl: 'https://ghe.example/api/v3',
    });
    expect(github?.redirectUri).toBe('https://tessera.example/base/v1/integrations/oauth/callback');
    expect(github?.scopes).toEqual(['read:user', 'user:email', 'repo']);
    expect(registry.get('github')?.app).toEqual({ id: 'github', owner: 'deployment' });
    expect(registry.get('slack')?.app).toBeNull();
    expect(registry.deploymentApp('slack')).toBeUndefined();
  });

  it('adds the deployment apps of CONFIG_FILE, and refuses an entry naming it by its id, never a secret (docs/contract.md §5e)', () => {
    const config = (apps: unknown[]) =>
      loadConfig({
        env: { ...base, INTEGRATION_OAUTH_GITHUB_CLIENT_ID: 'id', INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET: 'secret' },
        overrides: { integrationOauthApps: apps },
        persistGeneratedSecrets: false,
      });
    const second = { id: 'gh-readonly', provider: 'github', clientId: 'Iv1.second', clientSecret: 'second-secret-value', scopes: ['read:user'], organizations: ['org-a'] };
    const registry = buildProviderRegistry(config([second]));
    expect(registry.deploymentApps().map((app) => app.ref.id)).toEqual(['github', 'gh-readonly']);
    const app = registry.deploymentApp('gh-readonly');
    expect(app).toMatchObject({ provider: 'github', clientId: 'Iv1.second', scopes: ['read:user'], organizations: ['org-a'] });
    expect(app?.configured).toMatchObject({ id: 'github', app: { id: 'gh-readonly', owner: 'deployment' }, clientId: 'Iv1.second', scopes: ['read:user'] });
    // The default app keeps the settings' client.
    expect(registry.get('github')?.clientId).toBe('id');

    const refused = (apps: unknown[]) => {
      try {
        buildProviderRegistry(config(apps));
      } catch (error) {
        return String(error);
      }
      return 'accepted';
    };
    expect(refused([{ ...second, provider: 'acme' }])).toMatch(/integrationOauthApps\["gh-readonly"\]\.provider: no provider "acme"/);
    expect(refused([{ ...second, id: 'slack' }])).toMatch(/integrationOauthApps\["slack"\]\.id: "slack" is a provider id/);
    expect(refused([second, second])).toMatch(/integrationOauthApps\["gh-readonly"\]\.id: listed twice/);
    expect(refused([{ ...second, slug: 'my-app' }])).toMatch(/integrationOauthApps\["gh-readonly"\]: appId, slug and privateKey are a GitHub App's only/);
    for (const apps of [[{ ...second, provider: 'acme' }], [second, second]]) expect(refused(apps)).not.toContain('second-secret-value');
  });

  it('refuses plain-http provider endpoints in production', () => {
    expect(() =>
      loadConfig({ env: { ...base, APP_ENV: 'production', PUBLIC_URL: 'https://t.example', INTEGRATION_OAUTH_GITHUB_TOKEN_URL: 'http://127.0.0.1:9/token' }, persistGeneratedSecrets: false }),
    ).toThrow(/INTEGRATION_OAUTH_GITHUB_TOKEN_URL: must use https:/);
  });
});
