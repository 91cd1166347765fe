// The local commands of `tessera` (docs/contract.md §10): migrate, rotate-keys and doctor on the
// configured database (PGlite, or PostgreSQL when TEST_DATABASE_URL is set), human and --json.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS_DIR } from '../src/db/client.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { emptyStore, KEY_NEW, KEY_OLD, runCli, type Store, seededStore, storedKeyIds } from './helpers/cli.ts';
import { TEST_DATABASE_URL } from './helpers/database.ts';
import { freePort, ROOT } from './helpers/process.ts';
import { providerEnv } from './helpers/providers.ts';

const MIGRATIONS = (JSON.parse(readFileSync(join(MIGRATIONS_DIR, 'meta', '_journal.json'), 'utf8')) as { entries: unknown[] }).entries.length;
const JWT = { JWT_SECRET: 'l'.repeat(40) };

let gh: FakeProvider;
let slack: FakeProvider;
const stores: Store[] = [];

/** A store of this file's, dropped at the end. */
async function store(seeded = false, options: { initdb?: boolean } = {}): Promise<Store> {
  const made = seeded ? await seededStore(gh, 'keeper') : await emptyStore(options);
  stores.push(made);
  return made;
}

/** Accepts connections and never answers: a provider that hangs. */
async function silentServer(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => sockets.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

beforeAll(async () => {
  gh = await startFakeGitHub({ tokenExpiresIn: 3600 });
  gh.addUser({ login: 'keeper' });
  slack = await startFakeSlack();
});

afterAll(async () => {
  for (const made of stores) await made.drop();
  await gh?.close();
  await slack?.close();
});

describe('tessera migrate', () => {
  it('applies the migrations to a new database, then finds it up to date', async () => {
    const fresh = await store();
    const env = { ...fresh.env, ENCRYPTION_KEYS: KEY_NEW, ...JWT };
    const first = await runCli(['migrate'], env);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(new RegExp(`: ${MIGRATIONS} migrations applied\\n$`));
    expect(await fresh.created()).toBe(true);
    const again = await runCli(['migrate', '--json'], env);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({ applied: 0, database: TEST_DATABASE_URL ? 'pg' : 'pglite' });
  });

  it('fails naming DATABASE_URL (never its password) with the fix when the database is down', async () => {
    const port = await freePort();
    const down = await runCli(['migrate'], { DATABASE_URL: `postgres://tessera:hunter2-secret@127.0.0.1:${port}/tessera`, ENCRYPTION_KEYS: KEY_NEW, ...JWT });
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(new RegExp(`^error: cannot reach the database at DATABASE_URL \\(127\\.0\\.0\\.1:${port}\\): connection refused`, 'm'));
    expect(down.stderr).toMatch(/^fix: start PostgreSQL there, or set DATABASE_URL/m);
    expect(down.stdout + down.stderr).not.toContain('hunter2');
  });
});

describe('tessera rotate-keys', () => {
  it('re-encrypts every secret under the first key, with plain progress lines off a terminal; a rerun has nothing to do', async () => {
    const seeded = await store(true);
    const before = await storedKeyIds(seeded);
    expect(new Set(before)).toEqual(new Set(['old']));
    const env = { ...seeded.env, ENCRYPTION_KEYS: `${KEY_NEW},${KEY_OLD}`, ...JWT };
    const rotated = await runCli(['rotate-keys'], env);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stdout).toMatch(new RegExp(`^rotated ${before.length} secrets to key "new" in \\d+\\.\\d s$`, 'm'));
    expect(rotated.stderr).toContain(`${before.length}/${before.length} secrets re-encrypted\n`);
    expect(rotated.stderr).not.toContain('\r');
    expect(await storedKeyIds(seeded)).toEqual(before.map(() => 'new'));
    const rerun = await runCli(['rotate-keys', '--json'], env);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(JSON.parse(rerun.stdout)).toEqual({ rotated: 0, keyId: 'new', seconds: expect.any(Number) });
  });

  it('draws a progress bar on a terminal', async () => {
    const seeded = await store(true);
    const count = (await storedKeyIds(seeded)).length;
    // util-linux `script` gives the command a pseudo-terminal, as a person's shell would.
    const { stdout } = await promisify(execFile)('script', ['-qec', `${process.execPath} bin/tessera.mjs rotate-keys`, '/dev/null'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...seeded.env, ENCRYPTION_KEYS: `${KEY_NEW},${KEY_OLD}`, ...JWT },
    });
    expect(stdout).toContain(`\r[${'#'.repeat(30)}] ${count}/${count} secrets re-encrypted`);
    expect(stdout).toMatch(/\r\[\.{30}\] 0\/\d+ secrets re-encrypted/);
    expect(await storedKeyIds(seeded)).toEqual(Array(count).fill('new'));
  });

  it('refuses, naming the key, when a stored secret is under a key ENCRYPTION_KEYS lacks', async () => {
    const seeded = await store(true);
    const refused = await runCli(['rotate-keys'], { ...seeded.env, ENCRYPTION_KEYS: KEY_NEW, ...JWT });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^error: stored secrets are encrypted under key id\(s\) missing from ENCRYPTION_KEYS: old$/m);
    expect(refused.stderr).toMatch(/^fix: list the old key/m);
    expect(new Set(await storedKeyIds(seeded))).toEqual(new Set(['old']));
  });
});

describe('tessera doctor', () => {
  const providers = () => ({ ...providerEnv(gh), ...providerEnv(slack) });

  it('passes when the configuration, the database, the keyring and every provider endpoint are fine', async () => {
    const seeded = await store(true);
    const env = { ...seeded.env, ENCRYPTION_KEYS: KEY_OLD, ...JWT, ...providers() };
    const human = await runCli(['doctor'], env);
    expect(human.code, human.stdout + human.stderr).toBe(0);
    const lines = human.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^OK\s+configuration\s+development mode, PUBLIC_URL http:\/\/127\.0\.0\.1:8080$/);
    expect(lines[1]).toMatch(new RegExp(`^OK\\s+database\\s+${TEST_DATABASE_URL ? 'PostgreSQL at 127\\.0\\.0\\.1:\\d+/\\w+' : 'the embedded database under DATA_DIR \\(.+\\)'} answers; schema up to date \\(${MIGRATIONS} migrations\\)$`));
    expect(lines[2]).toMatch(/^OK\s+keyring\s+1 key in ENCRYPTION_KEYS, "old" encrypts; every stored secret can be decrypted$/);
    for (const [fake, paths] of [
      [gh, ['authorize', 'token', 'api']],
      [slack, ['authorize', 'token', 'api']],
    ] as const) {
      for (const endpoint of paths) expect(human.stdout).toMatch(new RegExp(`^OK\\s+${fake.id} ${endpoint}\\s+${fake.url.replaceAll('.', '\\.')}/\\S* answered HTTP \\d{3} in \\d+ ms$`, 'm'));
    }
    expect(lines.at(-1)).toBe('9 ok, 0 warnings, 0 failed');

    const json = await runCli(['doctor', '--json'], env);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.stdout) as { ok: boolean; checks: { check: string; status: string }[] };
    expect(report.ok).toBe(true);
    expect(report.checks.map((check) => check.status)).toEqual(Array(9).fill('ok'));

    // Secrets under an older key still listed: a warning that says to rotate, not a failure.
    const older = await runCli(['doctor'], { ...env, ENCRYPTION_KEYS: `${KEY_NEW},${KEY_OLD}` });
    expect(older.code).toBe(0);
    expect(older.stdout).toMatch(/^WARN\s+keyring\s+2 keys in ENCRYPTION_KEYS, "new" encrypts; \d+ secrets are under older keys — fix: run `tessera rotate-keys`/m);
  });

  it('fails on a provider endpoint on a closed port or one that never answers, with the setting to fix', async () => {
    // A DATA_DIR with nothing in it yet: the embedded database is "not created yet", which is fine.
    const fresh = await store(false, { initdb: true });
    const silent = await silentServer();
    try {
      const closed = await freePort();
      const env = {
        ...fresh.env,
        ENCRYPTION_KEYS: KEY_NEW,
        ...JWT,
        ...providers(),
        INTEGRATION_OAUTH_GITHUB_API_URL: `http://127.0.0.1:${closed}/api`,
        INTEGRATION_OAUTH_SLACK_TOKEN_URL: `${silent.url}/api/oauth.v2.access`,
      };
      const human = await runCli(['doctor', '--timeout', '1'], env);
      expect(human.code).toBe(1);
      expect(human.stdout).toMatch(
        new RegExp(`^FAIL\\s+github api\\s+http://127\\.0\\.0\\.1:${closed}/api: connection failed \\(ECONNREFUSED\\) — fix: nothing accepts connections at 127\\.0\\.0\\.1:${closed} from here: check INTEGRATION_OAUTH_GITHUB_API_URL`, 'm'),
      );
      expect(human.stdout).toMatch(/^FAIL\s+slack token\s+http:\/\/127\.0\.0\.1:\d+\/api\/oauth\.v2\.access: no answer within 1 s — fix: .*check the network path.*--timeout/m);
      expect(human.stdout).toMatch(/^OK\s+github token\s/m);
      // An empty PostgreSQL database is there but unmigrated (a warning); an embedded one is simply not created yet.
      if (TEST_DATABASE_URL) expect(human.stdout).toMatch(new RegExp(`^WARN\\s+database\\s+.* answers; ${MIGRATIONS} migrations pending — fix: run \`tessera migrate\``, 'm'));
      expect(human.stdout.trimEnd().split('\n').at(-1)).toBe(TEST_DATABASE_URL ? '6 ok, 1 warning, 2 failed' : '7 ok, 0 warnings, 2 failed');
      // Nothing was created by looking.
      expect(await fresh.created()).toBe(false);

      const json = await runCli(['doctor', '--json', '--timeout', '1'], env);
      expect(json.code).toBe(1);
      const report = JSON.parse(json.stdout) as { ok: boolean; checks: { check: string; status: string; fix?: string }[] };
      expect(report.ok).toBe(false);
      expect(report.checks.filter((check) => check.status === 'fail')).toEqual([
        expect.objectContaining({ check: 'github api', fix: expect.stringContaining('INTEGRATION_OAUTH_GITHUB_API_URL') }),
        expect.objectContaining({ check: 'slack token', fix: expect.stringContaining('--timeout') }),
      ]);
    } finally {
      await silent.close();
    }
  });

  it('fails when the database is down, naming DATABASE_URL with the fix', async () => {
    const port = await freePort();
    const down = await runCli(['doctor'], { DATABASE_URL: `postgres://tessera:hunter2-secret@127.0.0.1:${port}/tessera`, ENCRYPTION_KEYS: KEY_NEW, ...JWT, ...providers() });
    expect(down.code).toBe(1);
    expect(down.stdout).toMatch(
      new RegExp(`^FAIL\\s+database\\s+cannot reach the database at DATABASE_URL \\(127\\.0\\.0\\.1:${port}\\): connection refused.* — fix: start PostgreSQL there, or set DATABASE_URL`, 'm'),
    );
    expect(down.stdout).toMatch(/^SKIP\s+keyring\s+.*not checked \(needs the database\)$/m);
    expect(down.stdout).not.toContain('hunter2');
  });

  it('fails when a stored secret is under a key ENCRYPTION_KEYS lacks, and on invalid settings, one line each', async () => {
    const seeded = await store(true);
    const missing = await runCli(['doctor'], { ...seeded.env, ENCRYPTION_KEYS: KEY_NEW, ...JWT, ...providers() });
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(/^FAIL\s+keyring\s+1 key in ENCRYPTION_KEYS, "new" encrypts; stored secrets use key id\(s\) missing from it: old — fix: add those keys back to ENCRYPTION_KEYS/m);

    const invalid = await runCli(['doctor'], { ...seeded.env, ENCRYPTION_KEYS: 'k1:c2hvcnQ=', PUBLIC_URL: 'ftp://tessera.example.com', ...JWT, ...providers() });
    expect(invalid.code).toBe(1);
    expect(invalid.stdout).toMatch(/^FAIL\s+configuration\s+PUBLIC_URL: must use https:.* — fix: correct PUBLIC_URL /m);
    expect(invalid.stdout).toMatch(/^FAIL\s+configuration\s+ENCRYPTION_KEYS \(secrets\.keys\): expected "keyId:base64\(32 bytes\)".* — fix: correct ENCRYPTION_KEYS /m);
    expect(invalid.stdout).toMatch(/^SKIP\s+database\s+not checked \(needs a valid configuration\)$/m);
    expect(invalid.stdout).not.toContain('c2hvcnQ');
  });
});
