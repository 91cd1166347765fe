// Forced account linking, in a real browser (docs/contract.md §5a): a hostile page on another site
// tries to push a victim's browser through the attacker's own connect session — by a link to
// the start, by the session's link, by an auto-submitted form with a made-up nonce or with the
// attacker's own. Nothing starts: the provider's authorize page is never asked for, no state is
// stored, and the victim sees Tessera's page. The person's own press still connects.
import { createServer, type Server } from 'node:http';
import { sql } from 'drizzle-orm';
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { launchChromium } from './helpers/browser.ts';
import { openPage } from './helpers/connect-page.ts';
import { graphqlData } from './helpers/graphql.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { freePort } from './helpers/process.ts';
import { providerEnv } from './helpers/providers.ts';

const WAIT = { timeout: 20_000 };
/** Another site than Tessera's 127.0.0.1: a browser treats each loopback address as a site of its own. */
const HOSTILE_HOST = '127.0.0.2';

let browser: Browser;
let t: TestApp;
let gh: FakeProvider;
let servers: Server[] = [];
let tessera = '';
let hostile = '';
let product = '';
let attacker: Account;
let attackerToken = '';

async function serve(host: string, page: (url: URL) => string): Promise<string> {
  const port = await freePort();
  const origin = `http://${host}:${port}`;
  const server = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page(new URL(req.url ?? '/', origin))));
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  servers.push(server);
  return origin;
}

/** The attacker's pages: one sends the visitor to a URL, one posts a form there as soon as it loads. */
function hostilePage(url: URL): string {
  const to = JSON.stringify(url.searchParams.get('to') ?? '');
  if (url.pathname === '/navigate') return `<!doctype html><title>Win a prize</title><script>location.href = ${to};</script>`;
  const fields = [...url.searchParams].filter(([name]) => name !== 'to').map(([name, value]) => `<input type="hidden" name="${name}" value="${value}">`);
  return `<!doctype html><title>Win a prize</title><form id="f" method="post" action=${to}>${fields.join('')}</form><script>document.getElementById('f').submit();</script>`;
}

beforeAll(async () => {
  browser = await launchChromium();
  gh = await startFakeGitHub();
  gh.addUser({ login: 'victim', email: 'victim@example.com' });
  hostile = await serve(HOSTILE_HOST, hostilePage);
  product = await serve('127.0.0.1', () => '<!doctype html><title>Back in the product</title><p>Back in the product</p>');
  const port = await freePort();
  tessera = `http://127.0.0.1:${port}`;
  t = await createTestApp({ env: { ...providerEnv(gh), HOST: '127.0.0.1', PORT: String(port), PUBLIC_URL: tessera, OAUTH_REDIRECT_ORIGINS: `${tessera},${product}`, RATE_LIMIT_MAX: '0' } });
  await t.fastify.listen({ host: '127.0.0.1', port });
  attacker = await registerAndLogin(t.fastify, 'attacker');
  attackerToken = (await graphqlData(t.fastify, attacker.token, 'mutation { createAPIToken(name: "attack") { token } }')).createAPIToken.token;
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  await gh?.close();
  await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  servers = [];
});

async function attackersSession(): Promise<{ id: string; url: string }> {
  const res = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(attackerToken), payload: { redirectUri: `${product}/done`, allowedProviders: ['github'] } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().session;
}

const authorizeRequests = () => gh.requests.filter((request) => request.path === new URL(gh.authUrl).pathname).length;
const attackerStates = async () =>
  (await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM oauth_states WHERE organization_id = ${attacker.organizationId}`))[0]?.n;

/** Runs `visit` in a fresh victim browser, then checks that nothing started and the victim sees Tessera's page. */
async function expectNothingStarted(visit: (context: BrowserContext) => Promise<string>): Promise<void> {
  const before = authorizeRequests();
  const context = await browser.newContext();
  try {
    const landed = await visit(context);
    expect(new URL(landed).origin).toBe(tessera);
    // Time for a page that would forward by itself to do so.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(authorizeRequests()).toBe(before);
    expect(await attackerStates()).toBe(0);
    expect((await context.cookies()).map((cookie) => cookie.name)).not.toContain('oauth_tx');
  } finally {
    await context.close();
  }
}

describe('a hostile page cannot push a browser through someone’s connect session', () => {
  it('a navigation to the start or to the link shows Tessera’s page and starts nothing', { timeout: 60_000 }, async () => {
    const session = await attackersSession();
    // The start as a link: what the hosted page's provider links were before this was fixed.
    const start = `${tessera}/v1/integrations/oauth/connect/${session.url.split('/').at(-1)}/start?provider=github`;
    for (const to of [start, session.url]) {
      await expectNothingStarted(async (context) => {
        const page = await context.newPage();
        await page.goto(`${hostile}/navigate?to=${encodeURIComponent(to)}`);
        await page.waitForURL((url) => url.origin === tessera, WAIT);
        await page.getByRole('heading', { name: 'Connect an account' }).waitFor(WAIT);
        return page.url();
      });
    }
  });

  it('an auto-submitted form — with a made-up nonce, none, or the attacker’s own — shows Tessera’s page and starts nothing', { timeout: 60_000 }, async () => {
    const session = await attackersSession();
    const own = await openPage(t.fastify, session.url);
    for (const nonce of ['A'.repeat(43), null, own.nonce]) {
      await expectNothingStarted(async (context) => {
        const page = await context.newPage();
        const fields = new URLSearchParams({ to: `${tessera}${own.action}`, provider: 'github', ...(nonce ? { nonce } : {}) });
        await page.goto(`${hostile}/post?${fields}`);
        await page.waitForURL((url) => url.origin === tessera, WAIT);
        await page.getByText('Nothing was started.').waitFor(WAIT);
        return page.url();
      });
    }
  });

  it('the person who opens the link and presses the button reaches the provider and connects', { timeout: 60_000 }, async () => {
    const session = await attackersSession();
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(session.url);
      await page.getByRole('button', { name: 'Connect GitHub' }).click();
      await page.waitForURL((url) => url.href.startsWith(gh.authUrl), WAIT);
      await page.getByLabel('Sign in as').selectOption('victim');
      await page.getByRole('button', { name: 'Approve' }).click();
      await page.waitForURL((url) => url.origin === product && url.pathname === '/done', WAIT);
      expect(Object.fromEntries(new URL(page.url()).searchParams)).toMatchObject({ status: 'connected', provider: 'github', session: session.id });
    } finally {
      await context.close();
    }
  });
});
