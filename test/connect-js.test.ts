// connect.js in a real browser: a product's page opens a session's link in a popup, the end
// user approves at the (fake) provider, and the page's promise resolves with the outcome; with
// the popup blocked, the whole page goes through the flow and lands on the redirect URI.
import { createServer, type Server } from 'node:http';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { webRoutes } from '../src/web/routes.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { launchChromium } from './helpers/browser.ts';
import { bearer, registerAndLogin } from './helpers/identity.ts';
import { freePort } from './helpers/process.ts';
import { providerEnv } from './helpers/providers.ts';

const WAIT = { timeout: 20_000 };

let browser: Browser;
let t: TestApp;
let gh: FakeProvider;
let product: Server;
let tessera = '';
let productOrigin = '';
let apiToken = '';
let owner: Awaited<ReturnType<typeof registerAndLogin>>;

/** The product's own page: a button that hands the session's link to connect.js, and the result as text. */
function productPage(sessionUrl: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>Product</title>
<script src="${tessera}/connect.js"></script></head>
<body><button id="connect">Connect GitHub</button><output id="result"></output>
<script>
document.getElementById('connect').addEventListener('click', () => {
  Tessera.connect(${JSON.stringify(sessionUrl)}).then((result) => { document.getElementById('result').textContent = JSON.stringify(result); });
});
</script></body></html>`;
}

beforeAll(async () => {
  browser = await launchChromium();
  gh = await startFakeGitHub();
  gh.addUser({ login: 'enduser', email: 'end@example.com' });
  const productPort = await freePort();
  productOrigin = `http://127.0.0.1:${productPort}`;
  const pages = new Map<string, string>();
  product = createServer((req, res) => {
    const body = pages.get(new URL(req.url ?? '/', productOrigin).pathname) ?? '<!doctype html><title>Back in the product</title><p>Back in the product</p>';
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(body);
  });
  await new Promise<void>((resolve) => product.listen(productPort, '127.0.0.1', resolve));
  (product as Server & { pages: Map<string, string> }).pages = pages;
  const port = await freePort();
  tessera = `http://127.0.0.1:${port}`;
  t = await createTestApp({ env: { ...providerEnv(gh), HOST: '127.0.0.1', PORT: String(port), PUBLIC_URL: tessera, OAUTH_REDIRECT_ORIGINS: `${tessera},${productOrigin}`, RATE_LIMIT_MAX: '0' }, routes: (app) => webRoutes(app) });
  await t.fastify.listen({ host: '127.0.0.1', port });
  owner = await registerAndLogin(t.fastify, 'embedding');
  const created = await t.fastify.inject({ method: 'POST', url: '/query', headers: bearer(owner.token), payload: { query: 'mutation { createAPIToken(name: "product") { token } }' } });
  apiToken = created.json().data.createAPIToken.token;
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  await gh?.close();
  await new Promise<void>((resolve) => (product ? product.close(() => resolve()) : resolve()));
});

async function sessionFor(path: string): Promise<{ id: string; url: string }> {
  const res = await t.fastify.inject({
    method: 'POST',
    url: '/v1/connect/sessions',
    headers: bearer(apiToken),
    payload: { redirectUri: `${productOrigin}/done`, allowedProviders: ['github'], endUser: { id: 'cust-1', displayName: 'Grace from Customer One' } },
  });
  expect(res.statusCode, res.body).toBe(201);
  const session = res.json().session;
  (product as Server & { pages: Map<string, string> }).pages.set(path, productPage(session.url));
  return session;
}

describe('connect.js', () => {
  it('is a small script served to any page', async () => {
    const res = await fetch(`${tessera}/connect.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect((await res.text()).length).toBeLessThan(4096);
  });

  it('opens the session in a popup and resolves with the outcome once the end user approved', { timeout: 60_000 }, async () => {
    const session = await sessionFor('/app');
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${productOrigin}/app`);
      const [popup] = await Promise.all([context.waitForEvent('page', WAIT), page.getByRole('button', { name: 'Connect GitHub' }).click()]);
      await popup.waitForLoadState();
      // The person presses the page's button: only the page's own form starts a flow.
      await popup.getByRole('button', { name: 'Connect GitHub' }).click();
      await popup.waitForURL((url) => url.href.startsWith(gh.authUrl), WAIT);
      await popup.getByLabel('Sign in as').selectOption('enduser');
      await popup.getByRole('button', { name: 'Approve' }).click();
      await popup.waitForEvent('close', WAIT);
      await page.locator('#result').filter({ hasText: 'connected' }).waitFor(WAIT);
      const result = JSON.parse((await page.locator('#result').textContent()) ?? '{}');
      expect(result).toEqual({ status: 'connected', provider: 'github', integration: expect.stringMatching(/^[0-9A-HJKMNP-TV-Z]{26}$/), error: null, session: session.id });
      // The product page never left.
      expect(page.url()).toBe(`${productOrigin}/app`);
      // The console lists the end user's own connection under their name.
      const own = await context.newPage();
      await own.goto(`${tessera}/`);
      await own.locator('#email').fill(owner.email);
      await own.locator('#password').fill(owner.password);
      await own.getByRole('button', { name: 'Sign in' }).click();
      await own.getByRole('heading', { name: 'GitHub · Grace from Customer One' }).waitFor(WAIT);
    } finally {
      await context.close();
    }
  });

  it('falls back to a full-page redirect when the popup is blocked', { timeout: 60_000 }, async () => {
    const session = await sessionFor('/blocked');
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      // A popup blocker: window.open answers null.
      await page.addInitScript(() => {
        (globalThis as unknown as { open: () => null }).open = () => null;
      });
      await page.goto(`${productOrigin}/blocked`);
      await page.getByRole('button', { name: 'Connect GitHub' }).click();
      await page.waitForURL((url) => url.pathname.startsWith('/connect/'), WAIT);
      await page.getByRole('button', { name: 'Connect GitHub' }).click();
      await page.waitForURL((url) => url.href.startsWith(gh.authUrl), WAIT);
      await page.getByLabel('Sign in as').selectOption('enduser');
      await page.getByRole('button', { name: 'Approve' }).click();
      await page.waitForURL((url) => url.origin === productOrigin && url.pathname === '/done', WAIT);
      expect(Object.fromEntries(new URL(page.url()).searchParams)).toEqual({ status: 'connected', provider: 'github', integration: expect.any(String), session: session.id });
    } finally {
      await context.close();
    }
  });
});
