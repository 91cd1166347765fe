// @tessera/client as a product gets it (docs/contract.md §10): `npm pack` in packages/client, the
// tarball installed into an empty project, a strict TypeScript program using every §10 method
// type-checked there (with misuses the compiler must refuse), then run against a live Tessera
// whose providers are the loopback fakes — a multi-segment proxy call through the generated
// client included.
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { openPage, press } from './helpers/connect-page.ts';
import { graphqlData } from './helpers/graphql.ts';
import { login } from './helpers/identity.ts';
import { freePort, ROOT } from './helpers/process.ts';
import { providerEnv } from './helpers/providers.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhooks.ts';

const run = promisify(execFile);
const PRODUCT = 'http://127.0.0.1:4457';
const WEBHOOK_SECRET = `whsec_${Buffer.alloc(32, 5).toString('base64')}`;
const CLIENT = join(ROOT, 'packages/client');

let t: TestApp;
let gh: FakeProvider;
let hooks: WebhookReceiver;
let url: string;
let serviceToken: string;
let work: string;
let project: string;

type Lock = { packages: Record<string, { version?: string; resolved?: string; integrity?: string; dependencies?: Record<string, string> }> };

/**
 * A lockfile for the empty project: the tarball, and its dependencies pinned to what the
 * repository's own lockfile installed. `npm ci` then takes each from npm's cache by integrity,
 * so the install runs offline, on a fresh machine too (the repository's `npm ci` filled the cache).
 */
function consumerLock(tarball: string, dependencies: Record<string, string>): Lock {
  const repo = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as Lock;
  const packages: Lock['packages'] = { 'node_modules/@tessera/client': { version: '0.1.0', resolved: `file:${tarball}`, dependencies } };
  const pending = Object.keys(dependencies);
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    if (packages[`node_modules/${name}`]) continue;
    const entry = repo.packages[`node_modules/${name}`];
    if (!entry?.version) throw new Error(`${name} is not in the repository's lockfile`);
    const file = `${name.split('/').pop()}-${entry.version}.tgz`;
    packages[`node_modules/${name}`] = { ...entry, resolved: entry.resolved ?? `https://registry.npmjs.org/${name}/-/${file}` };
    pending.push(...Object.keys(entry.dependencies ?? {}));
  }
  return { packages: { '': { dependencies: { '@tessera/client': `file:${tarball}` } }, ...packages } };
}

/** Runs the program in the project; its one line of JSON. */
async function program(args: string[], extra: Record<string, string> = {}) {
  const { stdout } = await run(process.execPath, ['program.ts', ...args], {
    cwd: project,
    env: { PATH: process.env.PATH ?? '', TESSERA_URL: url, TESSERA_SERVICE_TOKEN: serviceToken, REDIRECT_URI: `${PRODUCT}/done`, ...extra },
  });
  return JSON.parse(stdout.trim().split('\n').at(-1) as string);
}

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  gh.addUser({ login: 'dana-gh', email: 'dana@customer.example' });
  hooks = await startWebhookReceiver();
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  t = await createTestApp({
    env: {
      ...providerEnv(gh),
      PUBLIC_URL: url,
      OAUTH_REDIRECT_ORIGINS: PRODUCT,
      RATE_LIMIT_MAX: '0',
      BOOTSTRAP_ADMIN_EMAIL: 'root@example.com',
      BOOTSTRAP_ADMIN_PASSWORD: 'bootstrap admin password',
      EVENTS_WEBHOOK_URL: hooks.url,
      EVENTS_WEBHOOK_SECRET: WEBHOOK_SECRET,
    },
  });
  await t.fastify.listen({ host: '127.0.0.1', port });
  await ensureBootstrapAdmin(t.app.services);
  const admin = await login(t.fastify, 'root@example.com', 'bootstrap admin password');
  serviceToken = (await graphqlData(t.fastify, admin.token, 'mutation { createServiceToken(name: "product backend") { token } }')).createServiceToken.token;

  work = mkdtempSync(join(tmpdir(), 'tessera-client-'));
  project = join(work, 'product');
}, 120_000);

afterAll(async () => {
  await t?.close();
  await gh?.close();
  await hooks?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('the packed client in an empty project', () => {
  it('packs with its declarations and installs offline from the tarball', async () => {
    const { stdout } = await run('npm', ['pack', '--pack-destination', work, '--json'], { cwd: CLIENT });
    const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
    const files = packed?.files.map((file) => file.path) ?? [];
    expect(files).toEqual(expect.arrayContaining(['package.json', 'README.md', 'src/index.js', 'src/client.js', 'src/generated/multi-segment.js', 'types/index.d.ts', 'types/generated/openapi.d.ts']));
    // postpack leaves the repository as it was: no generated declarations beside the sources.
    expect(() => readFileSync(join(CLIENT, 'types/index.d.ts'))).toThrow();

    const manifest = JSON.parse(readFileSync(join(CLIENT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const tarball = join(work, packed?.filename as string);
    rmSync(project, { recursive: true, force: true });
    await run('mkdir', ['-p', project]);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'product', private: true, type: 'module', dependencies: { '@tessera/client': `file:${tarball}` } }));
    writeFileSync(join(project, 'package-lock.json'), JSON.stringify({ name: 'product', lockfileVersion: 3, requires: true, ...consumerLock(tarball, manifest.dependencies) }));
    await run('npm', ['ci', '--offline', '--no-audit', '--no-fund'], { cwd: project });
    const installed = JSON.parse(readFileSync(join(project, 'node_modules/@tessera/client/package.json'), 'utf8'));
    expect(installed.name).toBe('@tessera/client');
  }, 180_000);

  it('type-checks a strict program using every §10 method, and refuses the misuses', async () => {
    copyFileSync(join(ROOT, 'test/client-consumer/program.ts'), join(project, 'program.ts'));
    const tsconfig = {
      compilerOptions: {
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        // What a browser, Deno or Bun project has: no Node types.
        lib: ['es2022', 'dom', 'dom.iterable'],
        types: [],
        strict: true,
        noUncheckedIndexedAccess: true,
        exactOptionalPropertyTypes: true,
        verbatimModuleSyntax: true,
        noEmit: true,
        // The package's declarations are checked too, not only used.
        skipLibCheck: false,
      },
      files: ['program.ts'],
    };
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify(tsconfig));
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    const checked = await run(process.execPath, [tsc, '-p', project]).catch((error: { stdout: string }) => ({ stdout: error.stdout, failed: true }));
    expect(checked.stdout).toBe('');
    // The misuses are refused: without their @ts-expect-error each is an error.
    writeFileSync(join(project, 'program.ts'), readFileSync(join(project, 'program.ts'), 'utf8').replaceAll('// @ts-expect-error', '// (unchecked)'));
    const unguarded = await run(process.execPath, [tsc, '-p', project]).then(
      () => '',
      (error: { stdout: string }) => error.stdout,
    );
    expect(unguarded.match(/error TS\d+/g)).toHaveLength(5);
    expect(unguarded).toMatch(/'"FETCH"' is not assignable/);
    copyFileSync(join(ROOT, 'test/client-consumer/program.ts'), join(project, 'program.ts'));
  }, 180_000);

  it('runs against a live Tessera with the fakes: provisioning, a session, its webhook, tokens, the proxy, errors', async () => {
    const setup = await program(['setup']);
    expect(setup).toMatchObject({ organizationId: expect.any(String), sessionId: expect.any(String), sessionUrl: expect.stringMatching(/\/connect\/[A-Za-z0-9_-]{43}$/) });

    // The end user's browser: the hosted page, its GitHub button, the provider's consent, back.
    const page = await openPage(t.fastify, setup.sessionUrl);
    const started = await press(t.fastify, page, 'github');
    expect(started.statusCode, started.body).toBe(303);
    const tx = started.cookies.find((cookie) => cookie.name === 'oauth_tx')?.value as string;
    const back = new URL(gh.authorize(started.headers.location as string, 'dana-gh').location);
    const done = await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}` } });
    expect(done.statusCode, done.body).toBe(302);
    await expect.poll(() => hooks.received.filter((hook) => hook.event.type === 'integration.connected').length, { timeout: 20_000 }).toBe(1);
    const delivery = hooks.received.find((hook) => hook.event.type === 'integration.connected');
    const headers = Object.fromEntries(['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((name) => [name, String(delivery?.headers[name])]));

    const before = gh.requests.length;
    const used = await program(['use', setup.organizationId, setup.sessionId], { WEBHOOK_DELIVERY: JSON.stringify({ body: delivery?.body, headers }), WEBHOOK_SECRET });
    expect(used.event).toEqual({ type: 'integration.connected', endUser: 'dana' });
    expect(used.tokenRead).toEqual({ provider: 'github', endUser: 'dana', hasToken: true });
    expect(used.status).toBe('connected');
    // The same answer of the fake's /user/repos, through the generated client and through proxy().
    expect(used.rawRepos).toEqual([expect.objectContaining({ full_name: 'dana-gh/hello-world' })]);
    expect(used.proxy).toEqual({ status: 200, body: used.rawRepos, contentType: expect.stringMatching(/^application\/json/) });
    expect(used.login).toBe('dana-gh');
    expect(used.missing).toBe(404);
    const seen = gh.requests.slice(before).map((request) => `${request.method} ${request.path}`);
    expect(seen.filter((line) => line === 'GET /api/user/repos')).toHaveLength(2);
    expect(gh.requests.slice(before).find((request) => request.path === '/api/user/repos' && request.query.per_page)?.query).toEqual({ per_page: '5' });

    expect(used.errors).toEqual([
      { status: 404, code: 'INTEGRATION_NOT_FOUND', requestId: expect.any(String), details: [] },
      { status: 404, code: 'INTEGRATION_NOT_FOUND', requestId: expect.any(String), details: [] },
      { status: 400, code: 'INVALID_REDIRECT_URI', requestId: expect.any(String), details: expect.any(Array) },
      { status: 404, code: 'INTEGRATION_NOT_FOUND', requestId: expect.any(String), details: [] },
    ]);
    expect(used.apiToken).toEqual({ prefix: 'tsa_', lists: [expect.any(String)] });
    expect(used.deleted).toEqual({ integrations: 0 });
    const left = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM organizations WHERE id = ${setup.organizationId}`);
    expect(left[0]?.n).toBe(0);
  }, 180_000);
});
