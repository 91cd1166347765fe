// One table of words per error code (issue 36, decision 277): served to the browser pages as
// /assets/error-words.js, imported by the console (ui.js), the connect outcome (outcome.js) and the
// invitation page, and read on the server by the hosted credential form.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES, type ErrorCode } from '../src/ground/errors.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';

type Place = 'console' | 'invitation' | 'connect' | 'form';
type ErrorLike = { code?: string; message?: string; retryAfter?: string | null; requestId?: string | null };
interface WordsModule {
  ERROR_WORDS: Record<string, { text: string }>;
  errorWords(place: Place, error: ErrorLike, name?: string): string;
}

let t: TestApp;
let dir: string;
/** The modules as the browser gets them: fetched from the app, imported from a folder of their own. */
let words: WordsModule;
let ui: { describeError(error: ErrorLike, name?: string): string };
let outcome: { describeOutcome(ctx: { providerName(id: string): string }, result: { status: string; provider: string; error: string }): { ok: boolean; text: string } };

async function served(name: string): Promise<string> {
  const res = await t.fastify.inject({ method: 'GET', url: `/assets/${name}` });
  expect(res.statusCode, name).toBe(200);
  expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
  // Under the pages' policy: a module of this origin, nothing inline.
  expect(res.headers['content-security-policy']).toMatch(/script-src 'self'(;|$)/);
  writeFileSync(join(dir, name), res.body);
  return res.body;
}

beforeAll(async () => {
  t = await createTestApp({ background: false });
  dir = mkdtempSync(join(tmpdir(), 'tessera-words-'));
  for (const name of ['error-words.js', 'ui.js', 'outcome.js']) await served(name);
  words = await import(pathToFileURL(join(dir, 'error-words.js')).href);
  ui = await import(pathToFileURL(join(dir, 'ui.js')).href);
  outcome = await import(pathToFileURL(join(dir, 'outcome.js')).href);
});
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const CODES = Object.keys(ERROR_CODES) as ErrorCode[];

describe('the words per error code', () => {
  it('are served once, as a module every page imports, and cover every error code of the contract', async () => {
    for (const code of CODES) expect(words.ERROR_WORDS[code]?.text, code).toMatch(/\w/);
    for (const name of ['ui.js', 'outcome.js', 'invitation.js']) expect(await served(name), name).toContain("from './error-words.js'");
  });

  it('read as words, never a raw code or a placeholder, on every page for every code', () => {
    for (const place of ['console', 'invitation', 'connect', 'form'] as const) {
      for (const code of CODES) {
        const text = words.errorWords(place, { code, message: ERROR_CODES[code].message, retryAfter: '30', requestId: 'req-1' }, 'GitHub');
        expect(text, `${place} ${code}`).toMatch(/^[A-Z].*\.$/);
        expect(text, `${place} ${code}`).not.toMatch(/[{}]/);
      }
    }
  });

  it('give the console words for PROVIDER_MISCONFIGURED and INVALID_CREDENTIALS, not the raw message', () => {
    const misconfigured = ui.describeError({ code: 'PROVIDER_MISCONFIGURED', message: ERROR_CODES.PROVIDER_MISCONFIGURED.message }, 'GitHub');
    expect(misconfigured).toBe("GitHub refused this Tessera's client credentials. An administrator must check its configuration (the provider's client id and secret).");
    const invalid = ui.describeError({ code: 'INVALID_CREDENTIALS', message: ERROR_CODES.INVALID_CREDENTIALS.message }, 'Stripe');
    expect(invalid).toBe('Stripe did not accept these credentials. Check each field and try again.');
  });

  it("keep each page's own words: the console's, a connect outcome's, with the answer's own reason where it has one", () => {
    expect(ui.describeError({ code: 'PROVIDER_RATE_LIMITED', retryAfter: '30' }, 'Slack')).toBe('Slack is limiting requests right now. Try again in 30 seconds.');
    expect(ui.describeError({ code: 'PROVIDER_NOT_CONFIGURED' })).toBe('That provider is not configured on this Tessera.');
    expect(ui.describeError({ code: 'FORBIDDEN', message: 'Forbidden' })).toBe('You are not allowed to do that here. Owners and admins of the organization can.');
    expect(ui.describeError({ code: 'FORBIDDEN', message: 'Only owners can remove an owner' })).toBe('Only owners can remove an owner.');
    expect(ui.describeError({ code: 'INTERNAL', requestId: 'req-9' })).toBe('Something went wrong inside Tessera. Reference: req-9.');
    const ctx = { providerName: (id: string) => (id === 'slack' ? 'Slack' : 'the provider') };
    expect(outcome.describeOutcome(ctx, { status: 'error', provider: 'slack', error: 'ACCESS_DENIED' }).text).toBe('You declined access at Slack, so nothing was connected.');
    expect(outcome.describeOutcome(ctx, { status: 'error', provider: 'slack', error: 'PROVIDER_MISCONFIGURED' }).text).toMatch(/^Slack refused this Tessera's client credentials/);
    expect(outcome.describeOutcome(ctx, { status: 'error', provider: '', error: '' }).text).toBe('Connecting the provider failed. Try again.');
  });
});
