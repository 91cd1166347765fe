import { readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createPgDatabase, dropPgDatabase, newDataDir, TEST_DATABASE_URL } from './helpers/database.ts';
import { spawnService, waitFor } from './helpers/process.ts';

const dirs: string[] = [];
/** A new DATA_DIR (`newDataDir`: past PGlite's own initdb unless `initdb`, nothing of Tessera's). */
function tempDir(options: { initdb?: boolean } = {}): string {
  const dir = newDataDir('tessera-start-', options);
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(TEST_DATABASE_URL)('npm start on the embedded database', () => {
  it('serves /livez, /readyz and /api-docs, keeps its data and secrets across restarts, and exits 0 on SIGTERM', async () => {
    // A directory with nothing in it, as `npm start` finds on a new machine (PGlite's initdb included).
    const dataDir = tempDir({ initdb: true });
    const first = await spawnService({ DATA_DIR: dataDir });
    await waitFor(first);
    for (const path of ['/livez', '/readyz']) {
      const res = await fetch(first.url + path);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: 'ok' });
    }
    const docs = await fetch(`${first.url}/api-docs`);
    expect(docs.status).toBe(200);
    expect(((await docs.json()) as { openapi: string }).openapi).toBe('3.1.0');
    expect(first.output()).toMatch(/ENCRYPTION_KEYS is not set: development mode generated one/);
    expect(await first.stop()).toBe(0);

    const secretsFile = join(dataDir, 'generated-secrets.json');
    expect(statSync(secretsFile).mode & 0o777).toBe(0o600);
    const secrets = readFileSync(secretsFile, 'utf8');

    const second = await spawnService({ DATA_DIR: dataDir });
    await waitFor(second);
    expect(readFileSync(secretsFile, 'utf8')).toBe(secrets);
    expect(await second.stop('SIGINT')).toBe(0);
  }, 180_000);

  it('refuses a second process on the same DATA_DIR with a clear message', async () => {
    const dataDir = tempDir();
    const first = await spawnService({ DATA_DIR: dataDir });
    await waitFor(first);
    const second = await spawnService({ DATA_DIR: dataDir });
    expect(await second.exited).toBe(1);
    expect(second.output()).toMatch(/DATA_DIR .* is in use by process \d+/);
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
    expect(await first.stop()).toBe(0);
  }, 180_000);

  it('refuses to start in production without ENCRYPTION_KEYS and JWT_SECRET, naming both', async () => {
    const service = await spawnService({ DATA_DIR: tempDir(), APP_ENV: 'production', PUBLIC_URL: 'https://tessera.example' });
    expect(await service.exited).toBe(1);
    const lines = service.output().trim().split('\n');
    expect(lines).toEqual([
      expect.stringMatching(/^config: ENCRYPTION_KEYS \(secrets.keys\): required in production; set "keyId:base64\(32 bytes\)"/),
      expect.stringMatching(/^config: JWT_SECRET \(auth.jwtSecret\): required in production/),
    ]);
  }, 180_000);

  it('refuses invalid settings with one line per problem', async () => {
    const service = await spawnService({ DATA_DIR: tempDir(), PORT: 'eighty', RATE_LIMIT_WINDOW: '0', ENCRYPTION_KEYS: 'k1:c2hvcnQ=' }, { port: 1 });
    expect(await service.exited).toBe(1);
    const output = service.output();
    expect(output).toMatch(/^config: PORT: expected an integer, got "eighty"$/m);
    expect(output).not.toMatch(/c2hvcnQ/);
  }, 180_000);
});

describe('a config error', () => {
  it('exits 1 naming the setting and the expected shape, and never prints any part of a secret value', async () => {
    const bareKey = Buffer.alloc(32, 0x5a).toString('base64'); // a key pasted without "keyId:"
    const secrets = {
      ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 1).toString('base64')},${bareKey}`,
      JWT_SECRETS: 'sig1:c2hvcnQtYnV0LXNlY3JldA==',
      DATABASE_URL: 'postgres//tessera:Sup3rS3cretPassw0rd@db.internal:5432/tessera',
      EVENTS_WEBHOOK_URL: 'http://hooks.example.com/services/T0001/B0001/XyZsecretPathToken',
      EVENTS_WEBHOOK_SECRET: 'whsec_not-base64-at-all-but-secret',
    };
    const service = await spawnService({ DATA_DIR: tempDir(), ...secrets });
    expect(await service.exited).toBe(1);
    const output = service.output();
    for (const name of ['ENCRYPTION_KEYS', 'JWT_SECRETS', 'DATABASE_URL', 'EVENTS_WEBHOOK_URL', 'EVENTS_WEBHOOK_SECRET']) {
      expect(output).toMatch(new RegExp(`^config: ${name}`, 'm'));
    }
    for (const value of [bareKey, 'c2hvcnQtYnV0LXNlY3JldA==', 'Sup3rS3cretPassw0rd', 'XyZsecretPathToken', 'not-base64-at-all-but-secret']) {
      for (let at = 0; at + 8 <= value.length; at++) expect(output).not.toContain(value.slice(at, at + 8));
    }
  }, 180_000);
});

describe.skipIf(TEST_DATABASE_URL)('readiness during start-up', () => {
  it('never answers /readyz 200 when a start-up step after listening fails, and exits 1 with one line naming it', async () => {
    const dataDir = tempDir();
    const first = await spawnService({ DATA_DIR: dataDir });
    await waitFor(first);
    const registered = await fetch(`${first.url}/v1/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'dave@example.com', password: 'daves own password' }),
    });
    expect(registered.status).toBe(201);
    expect(await first.stop()).toBe(0);

    // Someone registered the bootstrap e-mail first: the bootstrap step (after migrations,
    // with the listener open) refuses to promote them without their password.
    const second = await spawnService({ DATA_DIR: dataDir, BOOTSTRAP_ADMIN_EMAIL: 'dave@example.com', BOOTSTRAP_ADMIN_PASSWORD: 'not daves password at all' });
    const seen = new Set<number>();
    let listened = false;
    while (second.child.exitCode === null && second.child.signalCode === null) {
      try {
        const res = await fetch(`${second.url}/readyz`, { signal: AbortSignal.timeout(1000) });
        await res.arrayBuffer();
        seen.add(res.status);
        listened = true;
      } catch {
        // not listening yet, or gone
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(await second.exited).toBe(1);
    expect(listened).toBe(true);
    expect([...seen]).toEqual([503]);
    const problems = second.output().split('\n').filter((line) => line && !line.startsWith('{'));
    expect(problems).toEqual([expect.stringMatching(/^config: BOOTSTRAP_ADMIN_EMAIL \(auth.bootstrapAdmin.email\): a user with this e-mail already exists/)]);
  }, 180_000);
});

describe.runIf(TEST_DATABASE_URL)('npm start on PostgreSQL', () => {
  it('uses DATABASE_URL, and two instances started at once migrate once', async () => {
    const url = await createPgDatabase();
    try {
      const env = { DATABASE_URL: url, ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 1).toString('base64')}`, JWT_SECRET: 'x'.repeat(40) };
      const [a, b] = await Promise.all([spawnService(env), spawnService(env)]);
      await Promise.all([waitFor(a), waitFor(b)]);
      expect(a.output()).toMatch(/"db":"pg"/);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      const applied = await client.query('SELECT hash FROM drizzle.__drizzle_migrations');
      await client.end();
      const journal = JSON.parse(readFileSync(new URL('../src/db/migrations/meta/_journal.json', import.meta.url), 'utf8'));
      expect(applied.rowCount).toBe(journal.entries.length);
      expect(await a.stop()).toBe(0);
      expect(await b.stop()).toBe(0);
    } finally {
      await dropPgDatabase(url);
    }
  }, 180_000);
});

describe.runIf(TEST_DATABASE_URL)('a fleet starting together on PostgreSQL', () => {
  it('brings every instance up with the same bootstrap admin settings, and creates that admin once', async () => {
    const url = await createPgDatabase();
    try {
      const env = {
        DATABASE_URL: url,
        ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 1).toString('base64')}`,
        JWT_SECRET: 'x'.repeat(40),
        BOOTSTRAP_ADMIN_EMAIL: 'root@example.com',
        BOOTSTRAP_ADMIN_PASSWORD: 'the fleet admin password',
      };
      const fleet = await Promise.all([spawnService(env), spawnService(env), spawnService(env)]);
      await Promise.all(fleet.map((instance) => waitFor(instance)));
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      const admins = await client.query("SELECT id, system_admin FROM users WHERE lower(email) = 'root@example.com'");
      const organizations = await client.query('SELECT o.name FROM organizations o JOIN memberships m ON m.organization_id = o.id WHERE m.user_id = $1', [admins.rows[0]?.id]);
      await client.end();
      expect(admins.rows).toEqual([{ id: expect.any(String), system_admin: true }]);
      expect(organizations.rows).toEqual([{ name: 'Administration' }]);
      for (const instance of fleet) {
        const login = await fetch(`${instance.url}/v1/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email: 'root@example.com', password: 'the fleet admin password' }),
        });
        expect(login.status).toBe(200);
      }
      expect(await Promise.all(fleet.map((instance) => instance.stop()))).toEqual([0, 0, 0]);
    } finally {
      await dropPgDatabase(url);
    }
  }, 180_000);
});

describe.skipIf(TEST_DATABASE_URL)('npm run rotate-keys', () => {
  it('re-encrypts under the first key, with a progress line, and exits 0', async () => {
    const { spawn } = await import('node:child_process');
    const { ROOT } = await import('./helpers/process.ts');
    const dataDir = tempDir();
    const run = (keys: string) =>
      new Promise<{ code: number | null; output: string }>((resolve) => {
        const child = spawn(process.execPath, ['scripts/rotate-keys.ts'], {
          cwd: ROOT,
          env: { PATH: process.env.PATH ?? '', DATA_DIR: dataDir, ENCRYPTION_KEYS: keys, JWT_SECRET: 'j'.repeat(40), ...(TEST_DATABASE_URL ? {} : {}) },
        });
        let output = '';
        child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.on('exit', (code) => resolve({ code, output }));
      });
    const result = await run(`new:${Buffer.alloc(32, 2).toString('base64')},old:${Buffer.alloc(32, 1).toString('base64')}`);
    expect(result.code, result.output).toBe(0);
    expect(result.output).toMatch(/rotated 0 secrets to key "new"/);
  }, 180_000);
});
