// `--help` on every command of `tessera` (docs/contract.md §10) prints the command's usage and runs
// nothing: not a key rotation (once `npm run rotate-keys -- --help` rotated the keys), not a
// migration, not a server, not a provider probe, not a call to a running Tessera.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { type CliResult, emptyStore, KEY_NEW, KEY_OLD, runCli, type Store, seededStore, storedKeyIds } from './helpers/cli.ts';
import { freePort } from './helpers/process.ts';

/** Every command the contract names, as `tessera <path> --help` reaches it. */
const CONTRACT_COMMANDS = [
  'serve',
  'migrate',
  'doctor',
  'rotate-keys',
  'fakes',
  'providers',
  'integrations list',
  'integrations status',
  'integrations refresh',
  'integrations delete',
  'sessions create',
  'orgs create',
  'api-tokens create',
  // docs/contract.md §10: the operator's commands on the database.
  'service-tokens create',
  'service-tokens list',
  'service-tokens revoke',
  // docs/contract.md §7: webhook endpoints.
  'webhooks list',
  'webhooks add',
  'webhooks rotate',
  'webhooks test',
  'webhooks delete',
  // docs/contract.md §5e: an organization's OAuth apps.
  'apps list',
  'apps add',
  'apps update',
  'apps delete',
];

let gh: FakeProvider;
let seeded: Store;
let empty: Store;
let recorder: Server;
const seen: string[] = [];
let env: Record<string, string>;

beforeAll(async () => {
  gh = await startFakeGitHub();
  gh.addUser({ login: 'helpful' });
  seeded = await seededStore(gh, 'helpful');
  empty = await emptyStore();
  // Stands in for a running Tessera and for every provider endpoint: any request at all means an action ran.
  recorder = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    res.writeHead(500).end();
  });
  await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
  const at = `http://127.0.0.1:${(recorder.address() as AddressInfo).port}`;
  env = {
    ...empty.env,
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    ENCRYPTION_KEYS: `${KEY_NEW},${KEY_OLD}`,
    JWT_SECRET: 'h'.repeat(40),
    INTEGRATION_OAUTH_GITHUB_CLIENT_ID: 'id',
    INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET: 'secret',
    INTEGRATION_OAUTH_GITHUB_AUTH_URL: `${at}/authorize`,
    INTEGRATION_OAUTH_GITHUB_TOKEN_URL: `${at}/token`,
    INTEGRATION_OAUTH_GITHUB_API_URL: `${at}/api`,
    TESSERA_URL: at,
    TESSERA_TOKEN: `tsa_${'h'.repeat(43)}`,
  };
}, 120_000);

afterAll(async () => {
  await new Promise((resolve) => recorder?.close(resolve));
  await gh?.close();
  await seeded?.drop();
  await empty?.drop();
});

/** The command names listed under "Commands:" in a help text (without `help` itself). */
function listedCommands(help: string): string[] {
  const section = help.split(/^Commands:$/m)[1]?.split(/\n\s*\n/)[0] ?? '';
  return [...section.matchAll(/^ {2}([a-z][a-z-]*)/gm)].map((match) => match[1] as string).filter((name) => name !== 'help');
}

/** Asserts that the run printed `path`'s usage, exited 0 at once, and said nothing else. */
function expectUsage(result: CliResult, path: string): void {
  expect(result.code, result.stderr).toBe(0);
  expect(result.stdout).toMatch(new RegExp(`^Usage: tessera ${path ? `${path} ` : ''}`));
  expect(result.stdout).toContain('-h, --help');
  expect(result.stderr).toBe('');
}

describe('tessera --help', () => {
  it('lists every command of the contract, and each command and subcommand answers --help with its usage', async () => {
    const root = await runCli(['--help'], env);
    expectUsage(root, '');
    const found: string[] = [];
    const queue = listedCommands(root.stdout).map((name) => [name]);
    for (let path = queue.shift(); path; path = queue.shift()) {
      // rotate-keys on the store whose secrets are under the old key: a rotation would move them.
      const commandEnv = path[0] === 'rotate-keys' ? { ...env, ...seeded.env } : env;
      const result = await runCli([...path, '--help'], commandEnv, { timeoutMs: 20_000 });
      expectUsage(result, path.join(' '));
      const children = listedCommands(result.stdout);
      if (children.length === 0) found.push(path.join(' '));
      queue.push(...children.map((child) => [...path, child]));
    }
    expect(found.sort()).toEqual([...CONTRACT_COMMANDS].sort());

    // Nothing ran: no request reached the stand-in Tessera or provider, no database was created or migrated, no key rotated.
    expect(seen).toEqual([]);
    expect(await empty.created()).toBe(false);
    expect(await storedKeyIds(seeded)).toEqual(expect.arrayContaining(['old']));
    expect(await storedKeyIds(seeded)).not.toContain('new');
  }, 300_000);

  it('answers -h and `help <command>` the same way, wherever the flag stands', async () => {
    expectUsage(await runCli(['rotate-keys', '-h'], { ...env, ...seeded.env }), 'rotate-keys');
    expectUsage(await runCli(['help', 'rotate-keys'], { ...env, ...seeded.env }), 'rotate-keys');
    expectUsage(await runCli(['integrations', 'status', 'github', '--json', '--help'], env), 'integrations status');
    expectUsage(await runCli(['sessions', 'create', '--redirect-uri', 'https://example.com/', '--help'], env), 'sessions create');
    expectUsage(await runCli(['serve', '--help'], env), 'serve');
    expect(seen).toEqual([]);
    expect(await empty.created()).toBe(false);
    expect(await storedKeyIds(seeded)).not.toContain('new');
  }, 120_000);

  it('leaves the keys alone for `npm run rotate-keys -- --help` and the old script path', async () => {
    const npm = await runCli(['run', '--silent', 'rotate-keys', '--', '--help'], { ...env, ...seeded.env }, { command: ['npm'] });
    expectUsage(npm, 'rotate-keys');
    const script = await runCli(['--help'], { ...env, ...seeded.env }, { command: [process.execPath, 'scripts/rotate-keys.ts'] });
    expectUsage(script, 'rotate-keys');
    expect(await storedKeyIds(seeded)).toEqual(expect.arrayContaining(['old']));
    expect(await storedKeyIds(seeded)).not.toContain('new');
  }, 120_000);
});
