// Whatever value a secret setting holds, no configuration problem shows any run of 8 of its
// characters (docs/contract.md §1: a config error never prints any part of a secret value).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SCALE } from './world.ts';

describe('a configuration problem never shows a secret', () => {
  it('no config problem shows any run of 8 characters of a secret setting, whatever its value', async () => {
    const { loadConfig, ConfigError } = await import('../../src/config/load.ts');
    const { settingsOf } = await import('../../src/config/schema.ts');
    const secretEnv = settingsOf()
      .filter((setting) => setting.secret && setting.env)
      .map((setting) => setting.env as string);
    expect(secretEnv).toEqual(expect.arrayContaining(['ENCRYPTION_KEYS', 'JWT_SECRET', 'JWT_SECRETS', 'DATABASE_URL', 'BOOTSTRAP_ADMIN_PASSWORD']));
    const names = [...secretEnv, 'INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET', 'INTEGRATION_OAUTH_SLACK_CLIENT_SECRET', 'INTEGRATION_OAUTH_SLACK_EVENTS_SECRET', 'EVENTS_WEBHOOK_SECRET', 'EVENTS_WEBHOOK_URL'];
    const value = fc.oneof(
      fc.string({ minLength: 8, maxLength: 120 }),
      fc.stringMatching(/^[A-Za-z0-9+/=]{8,88}$/),
      fc.stringMatching(/^[a-z0-9]{1,8}:[A-Za-z0-9+/=]{8,60}(,[A-Za-z0-9+/=:]{8,60})?$/),
      fc.stringMatching(/^[a-z]{2,10}:\/\/[a-z]{1,8}:[A-Za-z0-9]{8,30}@[a-z.]{1,20}(:[0-9]{1,5})?\/[a-z]{0,10}$/),
    );
    fc.assert(
      fc.property(fc.constantFrom(...names), value, fc.boolean(), (name, secret, withEmail) => {
        const env: Record<string, string> = { [name]: secret };
        if (withEmail) Object.assign(env, { BOOTSTRAP_ADMIN_EMAIL: 'x', EVENTS_WEBHOOK_URL: env.EVENTS_WEBHOOK_URL ?? 'https://hooks.example.com/x' });
        if (name !== 'ENCRYPTION_KEYS') env.PORT = 'not a port'; // a problem elsewhere, so every run has output
        let text = '';
        try {
          loadConfig({ env, persistGeneratedSecrets: false });
        } catch (error) {
          if (!(error instanceof ConfigError)) throw error;
          text = error.problems.join('\n');
        }
        for (let at = 0; at + 8 <= secret.length; at++) {
          const run = secret.slice(at, at + 8);
          if (run.trim().length === 8 && !/^[a-z ]+$/.test(run)) expect(text, `${name}=${JSON.stringify(secret)}`).not.toContain(run);
        }
      }),
      { numRuns: Math.ceil(400 * SCALE) },
    );
  });
});
