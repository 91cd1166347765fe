// The API commands of `tessera` (docs/contract.md §10) against a live Tessera with the fake GitHub:
// tables for people, JSON for scripts, exit codes, the §2 code of a failure, and secrets
// printed only where they are created — never in a table.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { apiTokens } from '../src/db/schema.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { type CliResult, runCli } from './helpers/cli.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, login, registerAndLogin } from './helpers/identity.ts';
import { freePort } from './helpers/process.ts';
import { connect, providerEnv, REDIRECT_URI } from './helpers/providers.ts';

let t: TestApp;
let gh: FakeProvider;
let url: string;
let person: Account;
let serviceToken: string;
let apiToken: string;
/** Every human-readable output of this file, checked for secrets at the end. */
const tables: { args: string[]; result: CliResult }[] = [];
/** Every secret this file's Tessera and fake handed out. */
const secrets = new Set<string>();

function noteTokens(): void {
  for (const pair of gh.tokensOf('octo')) {
    secrets.add(pair.accessToken);
    if (pair.refreshToken) secrets.add(pair.refreshToken);
  }
}

/** Runs an API command with `token` (default: the organization's API token); human runs are kept for the secret check. */
async function tessera(args: string[], token = apiToken, extra: Record<string, string> = {}): Promise<CliResult> {
  const result = await runCli(args, { TESSERA_URL: url, TESSERA_TOKEN: token, ...extra });
  if (!args.includes('--json')) tables.push({ args, result });
  return result;
}

function json<T = unknown>(result: CliResult): T {
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as T;
}

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 3600 });
  gh.addUser({ login: 'octo' });
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  t = await createTestApp({
    env: { ...providerEnv(gh), PUBLIC_URL: url, OAUTH_REDIRECT_ORIGINS: new URL(REDIRECT_URI).origin, RATE_LIMIT_MAX: '0', BOOTSTRAP_ADMIN_EMAIL: 'root@example.com', BOOTSTRAP_ADMIN_PASSWORD: 'bootstrap admin password' },
  });
  await t.fastify.listen({ host: '127.0.0.1', port });
  await ensureBootstrapAdmin(t.app.services);
  const admin = await login(t.fastify, 'root@example.com', 'bootstrap admin password');
  serviceToken = (await graphqlData(t.fastify, admin.token, 'mutation { createServiceToken(name: "cli tests") { token } }')).createServiceToken.token;
  person = await registerAndLogin(t.fastify, 'cli');
  expect((await connect(t.fastify, person.token, gh, 'octo')).statusCode).toBe(200);
  noteTokens();
  secrets.add(serviceToken).add(person.token).add(admin.token).add(gh.clientSecret);
}, 120_000);

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

describe('tessera api-tokens create', () => {
  it('prints the new token once, on a line of its own after the table; --json gives it to scripts', async () => {
    const human = await tessera(['api-tokens', 'create', 'cli backend'], person.token);
    expect(human.code, human.stderr).toBe(0);
    const lines = human.stdout.trimEnd().split('\n');
    apiToken = lines.at(-1) as string;
    expect(apiToken).toMatch(/^tsa_/);
    expect(lines.filter((line) => line.includes(apiToken))).toEqual([apiToken]);
    expect(human.stdout).toMatch(/^name\s+cli backend$/m);
    expect(human.stdout).toMatch(/^display\s+tsa_…/m);

    const created = json<{ token: string }>(await tessera(['api-tokens', 'create', 'for a script', '--json'], person.token));
    expect(created).toMatchObject({ name: 'for a script', token: expect.stringMatching(/^tsa_/), display: expect.stringMatching(/^tsa_…/) });
    secrets.add(apiToken).add(created.token);
    // The new token works.
    expect((await t.fastify.inject({ url: '/v1/providers', headers: { authorization: `Bearer ${created.token}` } })).statusCode).toBe(200);
  });
});

describe('tessera providers and integrations', () => {
  it('lists the providers', async () => {
    const human = await tessera(['providers']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^ID\s+NAME\s+DEFAULT SCOPES$/m);
    expect(human.stdout).toMatch(/^github\s+GitHub\b/m);
    expect(json(await tessera(['providers', '--json']))).toEqual([expect.objectContaining({ id: 'github', displayName: 'GitHub' })]);
  });

  it("lists the organization's integrations, and filters by end user", async () => {
    const human = await tessera(['integrations', 'list']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^ID\s+PROVIDER\s+END USER\s+STATUS\s+NAME\s+UPDATED$/m);
    expect(human.stdout).toMatch(/^\S+\s+github\s+connected\s/m);
    const listed = json<{ id: string; provider: string; endUser: unknown }[]>(await tessera(['integrations', 'list', '--json']));
    expect(listed).toEqual([expect.objectContaining({ provider: 'github', endUser: null })]);
    expect(json(await tessera(['integrations', 'list', '--end-user', 'customer-7', '--json']))).toEqual([]);
    expect((await tessera(['integrations', 'list', '--end-user', 'customer-7'])).stdout).toBe('(no integration)\n');
  });

  it("shows an integration's status", async () => {
    const human = await tessera(['integrations', 'status', 'github']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^status\s+connected$/m);
    expect(human.stdout).toMatch(/^token valid\s+yes$/m);
    expect(json(await tessera(['integrations', 'status', 'github', '--json']))).toMatchObject({ provider: 'github', connected: true, status: 'connected', tokenValid: true });
  });

  it('refreshes a token without ever printing it, not even with --json', async () => {
    const human = await tessera(['integrations', 'refresh', 'github']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^expires\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/m);
    noteTokens();
    const result = await tessera(['integrations', 'refresh', 'github', '--json']);
    const refreshed = json<{ token?: object }>(result);
    noteTokens();
    expect(refreshed).toMatchObject({ message: expect.any(String), token: { tokenType: expect.any(String), expiresAt: expect.any(String) } });
    expect(refreshed.token).not.toHaveProperty('accessToken');
    for (const secret of secrets) expect(result.stdout).not.toContain(secret);
    // Two refreshes this close together are one provider call (the coalescing window); the first did reach the provider.
    expect(gh.stats.refreshes).toBeGreaterThanOrEqual(1);
  });

  it('mints a connect session and prints its link on a line of its own', async () => {
    const human = await tessera(['sessions', 'create', '--redirect-uri', `${url}/done`, '--provider', 'github', '--end-user', 'customer-7']);
    expect(human.code, human.stderr).toBe(0);
    const link = human.stdout.trimEnd().split('\n').at(-1) as string;
    expect(link.startsWith(`${url}/`)).toBe(true);
    expect(human.stdout.split('\n').filter((line) => line.includes(link))).toEqual([link]);
    expect(human.stdout).toMatch(/^end user\s+customer-7$/m);
    secrets.add(new URL(link).pathname.split('/').at(-1) as string);
    const session = json<{ url: string }>(await tessera(['sessions', 'create', '--redirect-uri', `${url}/done`, '--provider', 'github', '--json']));
    expect(session).toMatchObject({ id: expect.any(String), url: expect.stringContaining(url), allowedProviders: ['github'] });
    expect((await fetch(session.url)).status).toBe(200);
  });

  it('deletes an integration by id', async () => {
    const [integration] = json<{ id: string }[]>(await tessera(['integrations', 'list', '--json']));
    const human = await tessera(['integrations', 'delete', integration?.id as string]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain(integration?.id);
    expect(json(await tessera(['integrations', 'list', '--json']))).toEqual([]);
    const again = await tessera(['integrations', 'delete', integration?.id as string, '--json']);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stderr)).toMatchObject({ success: false, code: 'INTEGRATION_NOT_FOUND', requestId: expect.any(String) });
  });
});

describe('tessera orgs create', () => {
  it("creates a service token's customer, and acts in it with --org", async () => {
    const human = await tessera(['orgs', 'create', 'Acme', '--external-id', 'acme-1'], serviceToken);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^name\s+Acme$/m);
    expect(human.stdout).toMatch(/^external id\s+acme-1$/m);
    const organization = json<{ id: string }>(await tessera(['orgs', 'create', 'Globex', '--json'], serviceToken));
    expect(organization).toEqual({ id: expect.any(String), name: 'Globex', externalId: null });
    // A service token needs the organization for its customers' data (§5d): --org gives it.
    expect(json(await tessera(['integrations', 'list', '--org', organization.id, '--json'], serviceToken))).toEqual([]);
    const created = json<{ id: string; token: string }>(await tessera(['api-tokens', 'create', 'globex backend', '--org', organization.id, '--json'], serviceToken));
    secrets.add(created.token);
    const [row] = await t.database.db.select({ organizationId: apiTokens.organizationId }).from(apiTokens).where(eq(apiTokens.id, created.id));
    expect(row?.organizationId).toBe(organization.id);
  });
});

describe('tessera apps', () => {
  it("adds an app with its secret read from a file, lists it, makes it the default and deletes it; the secret is never printed", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-apps-'));
    const clientSecret = `cli-app-secret-${'s'.repeat(24)}`;
    secrets.add(clientSecret);
    writeFileSync(join(dir, 'secret'), `${clientSecret}\n`);
    try {
      const human = await tessera(['apps', 'add', 'github', '--client-id', 'cli-client.1', '--client-secret-file', join(dir, 'secret'), '--name', 'CLI app', '--scope', 'repo']);
      expect(human.code, human.stderr).toBe(0);
      expect(human.stdout).toMatch(/^redirect URI\s+http:\/\/127\.0\.0\.1:\d+\/v1\/integrations\/oauth\/callback$/m);
      const id = /^id\s+([0-9A-Z]{26})$/m.exec(human.stdout)?.[1] as string;
      expect(id).toBeDefined();
      // The secret went in whole, without the file's line ending.
      const [row] = await queryRows<{ organization_id: string; id: string; key_id: string; envelope: string }>(t.database.db, sql`SELECT organization_id, app_id AS id, key_id, envelope FROM oauth_app_secrets WHERE app_id = ${id}`);
      expect(t.app.services.apps.secrets(row as { organization_id: string; id: string; key_id: string; envelope: string })).toEqual({ clientSecret });
      const updated = json<{ id: string; default: boolean; scopes: string[] }>(await tessera(['apps', 'update', id, '--default', '--json']));
      expect(updated).toMatchObject({ id, default: true, scopes: ['repo'] });
      const listed = await tessera(['apps', 'list', '--provider', 'github']);
      expect(listed.stdout).toMatch(new RegExp(`^${id}\\s+github\\s+organization\\s+CLI app\\s+cli-client\\.1\\s+yes`, 'm'));
      const deleted = await tessera(['apps', 'delete', id]);
      expect([deleted.code, deleted.stdout.trim()]).toEqual([0, `deleted ${id}`]);
      const refused = await tessera(['apps', 'delete', 'github', '--json']);
      expect(refused.code).toBe(1);
      expect(JSON.parse(refused.stderr)).toMatchObject({ success: false, code: 'FORBIDDEN' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('failures', () => {
  it('print the §2 code, the request id and a fix, and exit 1', async () => {
    const unauthenticated = await tessera(['providers'], `tsa_${'x'.repeat(43)}`);
    expect(unauthenticated.code).toBe(1);
    expect(unauthenticated.stderr).toMatch(/^error UNAUTHENTICATED: /m);
    expect(unauthenticated.stderr).toMatch(/^fix: check TESSERA_TOKEN/m);
    expect(unauthenticated.stderr).toMatch(/^request id: \S+$/m);
    expect(unauthenticated.stdout).toBe('');

    const missing = await tessera(['integrations', 'status', 'github', '--end-user', 'nobody']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^error INTEGRATION_NOT_FOUND: Integration Not Found$/m);

    const invalid = await tessera(['sessions', 'create', '--redirect-uri', 'https://elsewhere.example.com/done', '--json']);
    expect(invalid.code).toBe(1);
    expect(JSON.parse(invalid.stderr)).toMatchObject({ success: false, code: 'INVALID_REDIRECT_URI', requestId: expect.any(String) });

    const unreachable = await runCli(['providers'], { TESSERA_URL: `http://127.0.0.1:${await freePort()}`, TESSERA_TOKEN: apiToken });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(/^error NETWORK_ERROR: Could not reach Tessera/m);
    expect(unreachable.stderr).toMatch(/^fix: .*TESSERA_URL/m);
  });

  it('say which setting is missing, and take --url and --token instead of the variables', async () => {
    const noUrl = await runCli(['providers'], { TESSERA_TOKEN: apiToken });
    expect(noUrl.code).toBe(1);
    expect(noUrl.stderr).toMatch(/TESSERA_URL/);
    const noToken = await runCli(['integrations', 'list'], { TESSERA_URL: url });
    expect(noToken.code).toBe(1);
    expect(noToken.stderr).toMatch(/TESSERA_TOKEN/);
    const flags = await runCli(['providers', '--url', url, '--token', apiToken, '--json'], {});
    expect(json(flags)).toEqual([expect.objectContaining({ id: 'github' })]);
    const usage = await runCli(['sessions', 'create'], { TESSERA_URL: url, TESSERA_TOKEN: apiToken });
    expect(usage.code).toBe(1);
    expect(usage.stderr).toMatch(/--redirect-uri/);
  });

  it('never print a credential', () => {
    const outputs = [...tables.map(({ result }) => result.stderr)];
    for (const output of outputs) for (const secret of secrets) expect(output).not.toContain(secret);
  });
});

describe('tables', () => {
  it('hold no secret: a new token or link appears only on its own line, where it was created', () => {
    expect(tables.length).toBeGreaterThan(10);
    for (const { args, result } of tables) {
      for (const line of result.stdout.split('\n')) {
        for (const secret of secrets) {
          if (!line.includes(secret)) continue;
          // The one place each is printed: the whole line is the new token or the new link, nothing else.
          expect(['api-tokens create', 'sessions create'], `${args.join(' ')} printed a secret`).toContain(args.slice(0, 2).join(' '));
          expect(line === secret || line.endsWith(`/${secret}`), line).toBe(true);
        }
      }
    }
  });
});
