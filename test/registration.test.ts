/**
 * Who may sign up, and where a flow may return (docs/contract.md §5d): REGISTRATION is open in
 * development and closed in production unless set; `invite` lets only invited addresses in; and
 * OAUTH_REDIRECT_ORIGINS adds origins to PUBLIC_URL's instead of replacing it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { bearer, login, registerAndLogin } from './helpers/identity.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import { providerEnv } from './helpers/providers.ts';

const PASSWORD = 'a long enough password';

async function register(t: TestApp, email: string) {
  return t.fastify.inject({ method: 'POST', url: '/v1/register', payload: { email, password: PASSWORD } });
}

describe('REGISTRATION', () => {
  it('is open in development by default', async () => {
    const t = await createTestApp();
    try {
      expect(t.config.auth.registration).toBe('open');
      expect((await register(t, 'dev@example.com')).statusCode).toBe(201);
    } finally {
      await t.close();
    }
  });

  it('is closed in production by default: 403 with the same answer whether or not the address is known', async () => {
    const t = await createTestApp({ env: { APP_ENV: 'production', PUBLIC_URL: 'https://tessera.example' } });
    try {
      expect(t.config.auth.registration).toBe('closed');
      const fresh = await register(t, 'new@example.com');
      expect(fresh.statusCode).toBe(403);
      expect(fresh.json()).toMatchObject({ success: false, code: 'FORBIDDEN' });
      expect(fresh.json().error).toMatch(/registration is closed/i);
      const again = await register(t, 'new@example.com');
      expect(again.json().error).toBe(fresh.json().error);
      const users = await t.database.db.execute('SELECT count(*)::int AS n FROM users');
      expect((users as unknown as { rows: { n: number }[] }).rows[0]?.n).toBe(0);
    } finally {
      await t.close();
    }
  });

  it('closed: nobody registers, in development either', async () => {
    const t = await createTestApp({ env: { REGISTRATION: 'closed' } });
    try {
      expect((await register(t, 'someone@example.com')).statusCode).toBe(403);
    } finally {
      await t.close();
    }
  });

  it('invite: only an address with a pending invitation registers', async () => {
    const t = await createTestApp({ env: { REGISTRATION: 'invite', BOOTSTRAP_ADMIN_EMAIL: 'root@example.com', BOOTSTRAP_ADMIN_PASSWORD: 'bootstrap password 1' } });
    try {
      // In such a deployment the first person is the operator's bootstrap administrator.
      await ensureBootstrapAdmin(t.app.services);
      const uninvited = await register(t, 'stranger@example.com');
      expect(uninvited.statusCode).toBe(403);
      expect(uninvited.json()).toMatchObject({ code: 'FORBIDDEN' });
      expect(uninvited.json().error).toMatch(/invited/i);

      const admin = await login(t.fastify, 'root@example.com', 'bootstrap password 1');
      await graphqlData(t.fastify, admin.token, 'mutation { addMember(email: "Invited@Example.com", role: "member") { id } }');
      const invited = await register(t, 'invited@example.com');
      expect(invited.statusCode, invited.body).toBe(201);
      expect((await register(t, 'stranger@example.com')).statusCode).toBe(403);
    } finally {
      await t.close();
    }
  });
});

describe('OAUTH_REDIRECT_ORIGINS', () => {
  let gh: FakeProvider;
  let t: TestApp;
  beforeAll(async () => {
    gh = await startFakeGitHub();
    t = await createTestApp({ env: { ...providerEnv(gh), PUBLIC_URL: 'http://127.0.0.1:8080', OAUTH_REDIRECT_ORIGINS: 'https://product.example' } });
  });
  afterAll(async () => {
    await t?.close();
    await gh?.close();
  });

  it("adds origins to PUBLIC_URL's, which stays allowed: Tessera's own page and the product's both work", async () => {
    expect(t.config.oauth.redirectOrigins).toEqual(['http://127.0.0.1:8080', 'https://product.example']);
    const owner = await registerAndLogin(t.fastify, 'origins');
    const start = (redirectUri: string) =>
      t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/start', headers: bearer(owner.token), payload: { provider: 'github', redirectUri } });
    expect((await start('http://127.0.0.1:8080/')).statusCode).toBe(200);
    expect((await start('https://product.example/back')).statusCode).toBe(200);
    const other = await start('https://elsewhere.example/back');
    expect(other.statusCode).toBe(400);
    expect(other.json().code).toBe('INVALID_REDIRECT_URI');
  });
});
