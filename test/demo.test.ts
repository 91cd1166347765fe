// `npm run demo` (scripts/demo.ts) as a newcomer runs it: the operator's sign-in beside the
// organization owner's, and commands that work from a pipe as from a terminal (issue 41's frictions).
import { describe, expect, it } from 'vitest';
import { spawnService } from './helpers/process.ts';

describe('npm run demo', () => {
  it('prints the operator sign-in, which signs in as a system administrator, and takes "revoke" from a pipe', async () => {
    const demo = await spawnService({}, { script: 'scripts/demo.ts', stdin: 'pipe' });
    try {
      await expect.poll(() => demo.output(), { timeout: 120_000, interval: 250 }).toContain('Tessera demo is running');
      const output = demo.output();
      const operator = /Operator\s+(\S+)\s+\/\s+(\S+)/.exec(output);
      expect(operator, output).not.toBeNull();
      expect(output).not.toMatch(/Run it in a terminal/);
      const url = /Open\s+(http:\/\/127\.0\.0\.1:\d+)\//.exec(output)?.[1];
      const login = await fetch(`${url}/v1/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: operator?.[1], password: operator?.[2] }) });
      expect(login.status).toBe(200);
      const { accessToken } = (await login.json()) as { accessToken: string };
      const access = await fetch(`${url}/v1/account/access`, { headers: { authorization: `Bearer ${accessToken}` } });
      expect(((await access.json()) as { user: { systemAdmin: boolean } }).user.systemAdmin).toBe(true);

      demo.child.stdin?.write('revoke\n');
      await expect.poll(() => demo.output(), { timeout: 10_000 }).toContain('The fake GitHub and Slack revoked every token of octocat and slackbot');
      // The pipe's end ends the commands, not the demo.
      demo.child.stdin?.end();
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect((await fetch(`${url}/livez`)).status).toBe(200);
    } finally {
      expect(await demo.stop('SIGINT')).toBe(0);
    }
  }, 180_000);
});
