// Start-up tells the truth (issue 26, decision 148): what a person starting Tessera reads before
// the first request. Spawned as `npm start` runs it; its output (JSON lines, stdout not a terminal) out.
import { rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { newDataDir, TEST_DATABASE_URL } from './helpers/database.ts';
import { freePort, spawnService, waitFor } from './helpers/process.ts';

const dirs: string[] = [];
/** A new DATA_DIR (`newDataDir`: past PGlite's own initdb unless `initdb`, nothing of Tessera's). */
function tempDir(options: { initdb?: boolean } = {}): string {
  const dir = newDataDir('tessera-messages-', options);
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

type Entry = { level: number; msg: string } & Record<string, unknown>;
/** The JSON log lines of an output (other lines are the exit's one-line reasons). */
const entries = (output: string): Entry[] =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Entry);
const WARN = 40;

describe.skipIf(TEST_DATABASE_URL)('start-up messages', () => {
  it('names a half-configured provider and an unknown INTEGRATION_OAUTH_* variable as warnings, lists the providers configured, and says what it migrated and generated — only when it did', async () => {
    const dataDir = tempDir();
    const secretValue = 'Half0Configured0Secret0Value';
    const env = {
      DATA_DIR: dataDir,
      // Complete: configured.
      INTEGRATION_OAUTH_SLACK_CLIENT_ID: 'slack-client',
      INTEGRATION_OAUTH_SLACK_CLIENT_SECRET: 'slack-secret-value-0001',
      // A client id without its secret, and a secret without its id: neither is configured.
      INTEGRATION_OAUTH_GITHUB_CLIENT_ID: 'github-client',
      INTEGRATION_OAUTH_GITLAB_CLIENT_SECRET: secretValue,
      // A misspelt setting: ignored, but said.
      INTEGRATION_OAUTH_GOOGLE_CLIENTID: 'google-client',
    };
    const first = await spawnService(env);
    await waitFor(first);
    expect(await first.stop()).toBe(0);
    const firstOutput = first.output();
    const firstLines = entries(firstOutput);
    const warnings = firstLines.filter((line) => line.level === WARN).map((line) => line.msg);

    expect(warnings).toContainEqual(expect.stringMatching(/^config: INTEGRATION_OAUTH_GITHUB_CLIENT_ID .*set, but INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET is not, so provider "github" is not configured/));
    expect(warnings).toContainEqual(expect.stringMatching(/^config: INTEGRATION_OAUTH_GITLAB_CLIENT_SECRET .*set, but INTEGRATION_OAUTH_GITLAB_CLIENT_ID is not, so provider "gitlab" is not configured/));
    expect(warnings).toContainEqual(expect.stringMatching(/^config: INTEGRATION_OAUTH_GOOGLE_CLIENTID: not a setting, ignored; did you mean INTEGRATION_OAUTH_GOOGLE_CLIENT_ID\?/));
    expect(firstLines).toContainEqual(expect.objectContaining({ msg: 'providers configured: slack', providers: ['slack'] }));
    // A half-configured entry has no deployment app: only organizations' own apps may connect it (docs/contract.md §5e).
    expect(firstLines).toContainEqual(expect.objectContaining({ msg: "providers offered to organizations' own apps only: github, gitlab", providers: ['github', 'gitlab'] }));
    // Never a secret's value: not the half-configured one, not the configured one.
    expect(firstOutput).not.toContain(secretValue);
    expect(firstOutput).not.toContain('slack-secret-value-0001');

    // Generated and migrated this start: said so; the first administrator is explained.
    for (const name of ['ENCRYPTION_KEYS', 'JWT_SECRET']) {
      expect(warnings).toContainEqual(expect.stringMatching(new RegExp(`^${name} is not set: development mode generated one and stored it in .*generated-secrets\\.json`)));
    }
    expect(firstLines).toContainEqual(expect.objectContaining({ msg: expect.stringMatching(/^database migrated: \d+ migrations applied$/), applied: expect.any(Number) }));
    expect(warnings).toContainEqual(expect.stringMatching(/^no user yet: to create the first administrator, set BOOTSTRAP_ADMIN_EMAIL and BOOTSTRAP_ADMIN_PASSWORD/));
    // "listening" is said once, last of the start-up lines: when it is ready.
    const listening = firstLines.findIndex((line) => /listening/i.test(line.msg));
    expect(firstLines[listening]?.msg).toMatch(/^tessera is ready, listening on 127\.0\.0\.1:\d+/);
    expect(firstLines.filter((line) => /listening/i.test(line.msg))).toHaveLength(1);
    expect(listening).toBeGreaterThan(firstLines.findIndex((line) => /^database migrated/.test(line.msg)));

    // The same DATA_DIR again: nothing is generated or migrated, and no line says it was.
    const second = await spawnService(env);
    await waitFor(second);
    expect(await second.stop()).toBe(0);
    const secondLines = entries(second.output());
    expect(second.output()).not.toMatch(/generated one/);
    expect(secondLines).toContainEqual(expect.objectContaining({ msg: expect.stringMatching(/^ENCRYPTION_KEYS and JWT_SECRET: using the values development mode generated earlier/) }));
    expect(secondLines).toContainEqual(expect.objectContaining({ msg: 'database schema is up to date', applied: 0 }));
  }, 240_000);

  it('confirms the bootstrap administrator it created, once, and never prints the password', async () => {
    const env = { DATA_DIR: tempDir(), BOOTSTRAP_ADMIN_EMAIL: 'ops@example.com', BOOTSTRAP_ADMIN_PASSWORD: 'bootstrap-password-0001' };
    const first = await spawnService(env);
    await waitFor(first);
    expect(await first.stop()).toBe(0);
    const firstLines = entries(first.output());
    expect(firstLines).toContainEqual(expect.objectContaining({ bootstrapAdmin: 'created', msg: expect.stringMatching(/^system administrator ops@example\.com created from BOOTSTRAP_ADMIN_EMAIL: sign in at http:\/\/\S+\/ with BOOTSTRAP_ADMIN_PASSWORD$/) }));
    expect(first.output()).not.toContain('bootstrap-password-0001');
    expect(first.output()).not.toMatch(/no user yet/);
    // Started again: the administrator exists, nothing is said about it.
    const second = await spawnService(env);
    await waitFor(second);
    expect(await second.stop()).toBe(0);
    expect(entries(second.output()).filter((line) => 'bootstrapAdmin' in line)).toEqual([]);
  }, 240_000);

  it('names DATABASE_URL (host and port, never its password) when the database is down, exits 1, and never says it is listening', async () => {
    const port = await freePort();
    const service = await spawnService({
      DATABASE_URL: `postgres://tessera:Sup3rS3cretPassw0rd@127.0.0.1:${port}/tessera`,
      ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 1).toString('base64')}`,
      JWT_SECRET: 'x'.repeat(40),
    });
    expect(await service.exited).toBe(1);
    const output = service.output();
    const reasons = output.split('\n').filter((line) => line && !line.startsWith('{'));
    expect(reasons).toEqual([`tessera failed to start: cannot reach the database at DATABASE_URL (127.0.0.1:${port}): connection refused (is PostgreSQL running, on that host and port?)`]);
    expect(output).not.toMatch(/listening/i);
    expect(output).not.toContain('Sup3rS3cretPassw0rd');
  }, 60_000);
});
