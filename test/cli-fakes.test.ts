// `tessera fakes` and `tessera serve` (docs/contract.md §10): the fakes' printed settings point a
// Tessera of one's own — started with `tessera serve`, what `npm start` runs — at them, and an
// account connects through it end to end, with no OAuth app registered anywhere.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { emptyStore, KEY_NEW, runCli, type Store, startCli } from './helpers/cli.ts';
import { ROOT, spawnService, waitFor } from './helpers/process.ts';

const stores: Store[] = [];
afterAll(async () => {
  for (const store of stores) await store.drop();
});

/** Waits until `read()` yields something. */
async function until<T>(read: () => T | undefined, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The settings lines `tessera fakes` printed, once all ten are there. */
function settingsOf(stdout: string): Record<string, string> | undefined {
  const lines = stdout.split('\n').filter((line) => /^INTEGRATION_OAUTH_[A-Z]+_[A-Z_]+=/.test(line));
  if (lines.length < 10) return undefined;
  return Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
}

describe('npm start', () => {
  it('runs `tessera serve`', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string>; scripts: Record<string, string> };
    expect(manifest.bin).toEqual({ tessera: 'bin/tessera.mjs' });
    expect(manifest.scripts.start).toBe('node bin/tessera.mjs serve');
    expect(manifest.scripts['rotate-keys']).toBe('node bin/tessera.mjs rotate-keys');
  });
});

describe('tessera fakes', () => {
  it('prints the settings of running fakes of GitHub and Slack; a served Tessera connects through them; Ctrl-C stops them', async () => {
    const fakes = startCli(['fakes']);
    const store = await emptyStore();
    stores.push(store);
    try {
      const settings = await until(() => settingsOf(fakes.output().stdout), 'the fakes’ settings');
      // stdout is the settings and nothing else: an env file as it is.
      expect(fakes.output().stdout.trimEnd().split('\n')).toHaveLength(10);
      expect(Object.keys(settings).sort()).toEqual(
        ['GITHUB', 'SLACK'].flatMap((p) => ['CLIENT_ID', 'CLIENT_SECRET', 'AUTH_URL', 'TOKEN_URL', 'API_URL'].map((k) => `INTEGRATION_OAUTH_${p}_${k}`)).sort(),
      );
      expect(fakes.output().stderr).toMatch(/approve as "octocat" \/ "slackbot"/);

      const service = await spawnService({ ...store.env, ...settings, ENCRYPTION_KEYS: KEY_NEW, JWT_SECRET: 'f'.repeat(40), LOG_LEVEL: 'warn' }, { args: ['serve'] });
      try {
        await waitFor(service);
        const url = service.url;
        const registered = await fetch(`${url}/v1/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'dev@example.com', password: 'a developer password', name: 'Dev' }) });
        expect(registered.status).toBe(201);
        const signedIn = (await (await fetch(`${url}/v1/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'dev@example.com', password: 'a developer password' }) })).json()) as { accessToken: string };
        const auth = { authorization: `Bearer ${signedIn.accessToken}` };

        // Connect GitHub: Tessera's authorize URL leads to the fake's consent page; approving as octocat returns a code.
        const start = await fetch(`${url}/v1/integrations/oauth/start`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ provider: 'github', redirectUri: `${url}/` }) });
        expect(start.status).toBe(200);
        const { authUrl } = (await start.json()) as { authUrl: string };
        const tx = /oauth_tx=([^;]+)/.exec(start.headers.get('set-cookie') ?? '')?.[1] ?? '';
        expect(authUrl.startsWith(settings.INTEGRATION_OAUTH_GITHUB_AUTH_URL as string)).toBe(true);
        const page = await (await fetch(authUrl)).text();
        const action = /<form method="post" action="([^"]+)"/.exec(page)?.[1]?.replace(/&#(\d+);/g, (_, code: string) => String.fromCharCode(Number(code))) ?? '';
        const approved = await fetch(new URL(action, authUrl), { method: 'POST', body: new URLSearchParams({ login: 'octocat', decision: 'approve' }), redirect: 'manual' });
        expect(approved.status).toBe(302);
        const back = new URL(approved.headers.get('location') ?? '');
        const callback = await fetch(`${url}/v1/integrations/oauth/callback`, {
          method: 'POST',
          headers: { cookie: `oauth_tx=${tx}`, 'content-type': 'application/json' },
          body: JSON.stringify({ provider: 'github', code: back.searchParams.get('code'), state: back.searchParams.get('state') }),
        });
        expect(callback.status, await callback.clone().text()).toBe(200);

        // And the command line sees it, through the same Tessera.
        const listed = await runCli(['integrations', 'list', '--json'], { TESSERA_URL: url, TESSERA_TOKEN: signedIn.accessToken });
        expect(listed.code, listed.stderr).toBe(0);
        expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ provider: 'github', status: 'connected' })]);
        const doctor = await runCli(['doctor'], { ...settings, DATA_DIR: '/nonexistent/tessera-doctor', ENCRYPTION_KEYS: KEY_NEW, JWT_SECRET: 'f'.repeat(40) });
        expect(doctor.stdout).toMatch(/^OK\s+slack token\s/m);
        expect(doctor.code, doctor.stdout).toBe(0);
        expect(await service.stop()).toBe(0);
      } finally {
        await service.stop();
      }
    } finally {
      expect(await fakes.stop()).toBe(0);
    }
    const { INTEGRATION_OAUTH_GITHUB_AUTH_URL: gone } = settingsOf(fakes.output().stdout) ?? {};
    await expect(fetch(gone as string)).rejects.toThrow();
  }, 180_000);

  it('prints them as JSON with --json, on the ports asked for', async () => {
    const { freePort } = await import('./helpers/process.ts');
    let port = await freePort();
    // The fake Slack takes the next port: find a pair that is free.
    while (port > 65000) port = await freePort();
    const fakes = startCli(['fakes', '--json', '--port', String(port)]);
    try {
      const printed = await until(() => {
        try {
          return JSON.parse(fakes.output().stdout) as { providers: { id: string; url: string; user: string }[]; env: Record<string, string> };
        } catch {
          return undefined;
        }
      }, 'the JSON settings');
      expect(printed.providers).toEqual([
        { id: 'github', url: `http://127.0.0.1:${port}`, user: 'octocat' },
        { id: 'slack', url: `http://127.0.0.1:${port + 1}`, user: 'slackbot' },
      ]);
      expect(printed.env.INTEGRATION_OAUTH_GITHUB_TOKEN_URL).toBe(`http://127.0.0.1:${port}/login/oauth/access_token`);
      expect((await fetch(printed.env.INTEGRATION_OAUTH_SLACK_AUTH_URL as string)).status).toBeLessThan(500);
    } finally {
      expect(await fakes.stop()).toBe(0);
    }
  }, 60_000);
});
