// The console in a real browser (docs/contract.md §11), one flow per section: members invited and
// accepting, an API token shown once and revoked, a connect link minted and completed, the audit
// log filtered; as a system administrator, a failed webhook delivery retried once its receiver
// is fixed, and one of fifty organizations found by externalId, its health seen, and entered.
// Each section is also checked at phone width, and photographed for docs/screenshots/ (written
// when missing or with UPDATE_SCREENSHOTS=1, so a test run leaves the work tree clean).
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import { CONTENT_SECURITY_POLICY } from '../src/http/html.ts';
import { CONSOLE_SECTIONS } from '../src/web/routes.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { launchChromium } from './helpers/browser.ts';
import { startThroughPage } from './helpers/connect-page.ts';
import { invitationDelivery } from './helpers/invitations.ts';
import { FormBrowser, pkce } from './helpers/mcp-oauth.ts';
import { freePort } from './helpers/process.ts';
import { providerEnv } from './helpers/providers.ts';

const SCREENSHOTS = fileURLToPath(new URL('../docs/screenshots/', import.meta.url));
const OWNER = { email: 'console-owner@example.com', password: 'console owner password', name: 'Olga Owner' };
const ADMIN = { email: 'console-admin@example.com', password: 'console admin password' };
const WAIT = { timeout: 15_000 };
const FLOW_TIMEOUT = 90_000;

let browser: Browser;
let t: TestApp;
let gh: FakeProvider;
let origin: string;
/** What the webhook receiver answers; the deliveries test "fixes" it. */
let receiverStatus = 500;
let closeReceiver: () => Promise<void> = async () => {};

beforeAll(async () => {
  browser = await launchChromium();
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  for (const login of ['octocat', 'customer7', 'customer42']) gh.addUser({ login, email: `${login}@example.com` });
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(receiverStatus).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  closeReceiver = () =>
    new Promise<void>((resolve) => {
      receiver.closeAllConnections();
      receiver.close(() => resolve());
    });
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  t = await createTestApp({
    env: {
      ...providerEnv(gh),
      HOST: '127.0.0.1',
      PORT: String(port),
      PUBLIC_URL: origin,
      RATE_LIMIT_MAX: '0',
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      EVENTS_WEBHOOK_URL: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/tessera-events`,
      EVENTS_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 3).toString('base64')}`,
      // Deliveries to the failing receiver give up within seconds.
      EVENTS_WEBHOOK_MAX_AGE: '2',
      EVENTS_RETRY_BASE: '1',
      EVENTS_RETRY_MAX: '1',
      EVENTS_POLL_INTERVAL: '1',
    },
  });
  await ensureBootstrapAdmin(t.app.services);
  await t.fastify.listen({ host: '127.0.0.1', port });
  await call('/v1/register', OWNER);
});

afterAll(async () => {
  await browser?.close();
  await t?.close();
  await gh?.close();
  await closeReceiver();
});

// biome-ignore lint/suspicious/noExplicitAny: each call reads the fields its own request asked for
type Answer = any;

/** A JSON call from the test itself (not the page), with a bearer token and an organization when given. */
async function call(path: string, body?: unknown, token?: string, organization?: string): Promise<Answer> {
  const res = await fetch(`${origin}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: {
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(organization ? { 'x-organization-id': organization } : {}),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const answer = (await res.json()) as Answer;
  expect(res.status, JSON.stringify(answer)).toBeLessThan(300);
  expect(answer.errors, JSON.stringify(answer)).toBeUndefined();
  return answer;
}

async function tokenOf(who: { email: string; password: string }): Promise<string> {
  return (await call('/v1/login', { email: who.email, password: who.password })).accessToken;
}

interface Opened {
  context: BrowserContext;
  page: Page;
  /** Errors the page threw and CSP violations it reported: none expected. */
  errors: string[];
}

async function newPage(): Promise<Opened> {
  const context = await browser.newContext({ locale: 'en-US', timezoneId: 'UTC', viewport: { width: 1000, height: 800 } });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) errors.push(message.text());
  });
  return { context, page, errors };
}

/** Signs in with the keyboard only, as page.test.ts does. */
async function signIn(page: Page, who: { email: string; password: string }): Promise<void> {
  await page.goto(`${origin}/`);
  await page.getByLabel('E-mail', { exact: true }).focus();
  await page.keyboard.type(who.email);
  await page.keyboard.press('Tab');
  await page.keyboard.type(who.password);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor(WAIT);
}

/** Opens a section from the navigation, with the keyboard: focus its link, press Enter; the heading gets focus. */
async function open(page: Page, title: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Console sections' }).getByRole('link', { name: title, exact: true }).focus();
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: title }).waitFor(WAIT);
  await expect.poll(() => page.evaluate('document.activeElement?.tagName')).toBe('H1');
}

const notice = (page: Page, text: string) => page.locator('#notice', { hasText: text }).waitFor(WAIT);

/** Nothing wider than a phone's screen, then back. */
async function readableOnPhone(page: Page): Promise<void> {
  const size = page.viewportSize();
  await page.setViewportSize({ width: 360, height: 740 });
  expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(360);
  if (size) await page.setViewportSize(size);
}

/** The section's picture for the README, when missing or asked for. */
async function photograph(page: Page, name: string): Promise<void> {
  await page.mouse.move(0, 0);
  await page.evaluate('document.activeElement?.blur()');
  const shot = await page.screenshot({ fullPage: true });
  expect(shot.subarray(1, 4).toString()).toBe('PNG');
  const file = `${SCREENSHOTS}${name}.png`;
  if (process.env.UPDATE_SCREENSHOTS === '1' || !existsSync(file)) {
    mkdirSync(SCREENSHOTS, { recursive: true });
    writeFileSync(file, shot);
  }
}

/** At the fake provider's consent page: pick the account and approve; back at `back`'s origin. */
async function consent(page: Page, login: string): Promise<void> {
  await page.waitForURL((url) => url.href.startsWith(gh.authUrl), WAIT);
  await page.getByLabel('Sign in as').selectOption(login);
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.waitForURL((url) => url.origin === origin && url.pathname === '/', WAIT);
}

describe('the console’s modules', () => {
  it('are each served as JavaScript from this origin, under the pages’ headers, with no inline code in the page', async () => {
    const modules = ['app', 'api', 'ui', 'account', 'outcome', ...CONSOLE_SECTIONS.map((name) => `sections/${name}`)];
    for (const name of modules) {
      const res = await fetch(`${origin}/assets/${name}.js`);
      expect(res.status, name).toBe(200);
      expect(res.headers.get('content-type'), name).toBe('text/javascript; charset=utf-8');
      expect(res.headers.get('x-content-type-options'), name).toBe('nosniff');
      expect(res.headers.get('content-security-policy'), name).toBe(CONTENT_SECURITY_POLICY);
      // Text goes in as text: no module writes HTML.
      expect(await res.text(), name).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
    }
  });
});

describe('the console, as an organization’s owner', () => {
  it('invites a member, who accepts through the link; the member list shows them', async () => {
    const invitee = { email: 'console-invitee@example.com', password: 'console invitee password', name: 'Ines Invitee' };
    await call('/v1/register', invitee);
    const { page, context, errors } = await newPage();
    await signIn(page, OWNER);
    await open(page, 'Members');
    await page.getByLabel("Invitee's e-mail").fill(invitee.email);
    await page.getByLabel('Role').selectOption('member');
    await page.getByRole('button', { name: 'Invite', exact: true }).click();
    await notice(page, `${invitee.email} is invited as member until`);
    await expect.poll(() => page.locator('#org-invitation-list').textContent()).toContain(`${invitee.email} as member`);

    const { data } = await call('/query', { query: '{ invitations { id email } }' }, await tokenOf(OWNER));
    const invitation = data.invitations.find((i: { email: string }) => i.email === invitee.email);
    const { acceptUrl } = await invitationDelivery(t, invitation.id);
    const them = await newPage();
    await them.page.goto(acceptUrl);
    await them.page.getByLabel('E-mail', { exact: true }).fill(invitee.email);
    await them.page.getByLabel('Password').fill(invitee.password);
    await them.page.keyboard.press('Enter');
    await them.page.getByRole('button', { name: 'Accept' }).click();
    await notice(them.page, 'You joined');
    await them.context.close();

    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Members' }).waitFor(WAIT);
    await expect.poll(() => page.locator(`li[data-member="${invitee.email}"]`).textContent()).toContain('Member');
    await page.getByText('No invitation is waiting for an answer.').waitFor(WAIT);
    await readableOnPhone(page);
    await photograph(page, 'members');
    expect(errors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);

  it('creates an API token shown once, which works, then revokes it after a confirmation', async () => {
    const { page, context, errors } = await newPage();
    await signIn(page, OWNER);
    await open(page, 'API tokens');
    await page.getByLabel('Name').fill('CI pipeline');
    await page.getByLabel('Expires').selectOption('90');
    await page.getByRole('button', { name: 'Create API token' }).click();
    await notice(page, 'The API token CI pipeline is created.');
    const value = (await page.locator('#api-tokens-value').textContent()) ?? '';
    expect(value).toMatch(/^tsa_/);
    expect(await page.evaluate('document.activeElement?.textContent')).toContain('Copy');
    expect((await fetch(`${origin}/v1/integrations`, { headers: { authorization: `Bearer ${value}` } })).status).toBe(200);

    // Shown once: after a reload the list has its prefix and last four only.
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'API tokens' }).waitFor(WAIT);
    const row = page.locator('li.row', { hasText: 'CI pipeline' });
    await expect.poll(() => row.textContent()).toContain(`tsa_…${value.slice(-4)}`);
    expect(await page.content()).not.toContain(value);
    await readableOnPhone(page);
    await photograph(page, 'api-tokens');

    const dialogs: string[] = [];
    page.once('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.accept();
    });
    await row.getByRole('button', { name: 'Revoke the API token CI pipeline' }).click();
    await notice(page, 'The API token CI pipeline is revoked.');
    expect(dialogs).toEqual([expect.stringMatching(/^Revoke the API token "CI pipeline"/)]);
    expect((await fetch(`${origin}/v1/integrations`, { headers: { authorization: `Bearer ${value}` } })).status).toBe(401);
    expect(errors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);

  it('mints a connect link for an end user, who connects GitHub through it; the session shows completed and the connection appears', async () => {
    const { page, context, errors } = await newPage();
    await signIn(page, OWNER);
    await open(page, 'Connect sessions');
    await page.getByLabel('End user id (optional)').fill('cust-7');
    await page.getByLabel('End user name (optional)').fill('Customer Seven');
    await page.getByRole('button', { name: 'Create connect link' }).click();
    await notice(page, 'The connect link is ready.');
    const url = (await page.locator('#session-url').textContent()) ?? '';
    expect(url).toMatch(new RegExp(`^${origin}/connect/[A-Za-z0-9_-]{43}$`));
    const pending = page.locator('li.row', { hasText: 'For Customer Seven' });
    await expect.poll(() => pending.locator('.badge').textContent()).toContain('Pending');

    // The end user, in a browser of their own.
    const them = await newPage();
    await them.page.goto(url);
    await them.page.getByRole('button', { name: 'Connect GitHub' }).click();
    // Where the callback sent the browser (the console then tidies its address bar).
    const landed = them.page.waitForRequest((request) => request.url().startsWith(`${origin}/?`), WAIT);
    await consent(them.page, 'customer7');
    const back = new URL((await landed).url());
    expect(back.searchParams.get('status')).toBe('connected');
    expect(back.searchParams.get('session')).toBeTruthy();
    await them.context.close();

    await page.getByRole('button', { name: 'Show sessions' }).click();
    await expect.poll(() => pending.locator('.badge').textContent(), WAIT).toContain('Completed');
    await readableOnPhone(page);
    await photograph(page, 'sessions');

    await open(page, 'Integrations');
    await page.getByRole('heading', { level: 2, name: "End users' connections" }).waitFor(WAIT);
    const card = page.locator('li.card', { hasText: 'GitHub · Customer Seven' });
    await expect.poll(() => card.locator('.badge').textContent()).toContain('Connected');
    await card.getByRole('button', { name: 'Check status of GitHub of Customer Seven' }).click();
    await expect.poll(() => card.locator('.message').textContent(), WAIT).toBe('GitHub is connected.');
    await readableOnPhone(page);
    await photograph(page, 'integrations');
    expect(errors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);

  it('filters the audit log by action and by integration, page by page', async () => {
    const { page, context, errors } = await newPage();
    await signIn(page, OWNER);
    await open(page, 'Audit log');
    await page.locator('#audit-list li.row').first().waitFor(WAIT);
    await page.getByLabel('Action').selectOption({ label: 'API token created' });
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(() => page.locator('#audit-list li.row').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-action'))), WAIT).toEqual(['api_token.created']);
    await expect.poll(() => page.locator('#audit-list').textContent()).toContain(`By${OWNER.email}, with a signed-in session`);

    await page.getByLabel('Action').selectOption('');
    await page.getByLabel('Integration').selectOption({ label: 'GitHub · Customer Seven' });
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(async () => {
      const actions = await page.locator('#audit-list li.row').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-action')));
      return actions.length > 0 && actions.every((action) => action?.startsWith('integration.')) && actions.includes('integration.connected');
    }, WAIT).toBe(true);
    await readableOnPhone(page);
    await photograph(page, 'audit');
    expect(errors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);

  it("shows an agent's request down its chain: the agent, its capability, the credential that granted it (docs/contract.md §9)", async () => {
    const { id, token } = (await call('/query', { query: 'mutation { createAPIToken(name: "agents") { id token } }' }, await tokenOf(OWNER))).data.createAPIToken;
    const minted = await fetch(`${origin}/v1/oauth/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        subject_token: token,
        subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        scope: 'integrations:github:read',
        agent: 'console-agent',
      }),
    });
    expect(minted.status).toBe(200);
    const capability = ((await minted.json()) as { access_token: string }).access_token;
    // A refused use is recorded too: it needs no provider.
    expect((await fetch(`${origin}/v1/integrations`, { headers: { authorization: `Bearer ${capability}` } })).status).toBe(403);

    const { page, context, errors } = await newPage();
    await signIn(page, OWNER);
    await open(page, 'Audit log');
    await page.locator('#audit-list li.row').first().waitFor(WAIT);
    await page.getByLabel('Action').selectOption({ label: 'Agent request' });
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(() => page.locator('#audit-list li.row').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-action'))), WAIT).toEqual(['capability.request']);
    const text = await page.locator('#audit-list').textContent();
    expect(text).toMatch(new RegExp(`Agent "console-agent", with capability [0-9A-Z]{26}, granted by an API token ${id}`));
    expect(text).not.toContain(capability.slice(4));
    expect(errors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);
});

describe('the console, connected MCP hosts (docs/contract.md §9a)', () => {
  it('lists the MCP host a person connected by OAuth and revokes it after a confirmation; its token stops working', async () => {
    const ownerToken = await tokenOf(OWNER);
    // GitHub connected for the organization itself, through the API.
    const started = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/start', headers: { authorization: `Bearer ${ownerToken}` }, payload: { provider: 'github', redirectUri: `${origin}/` } });
    expect(started.statusCode, started.body).toBe(200);
    const approved = gh.authorize(started.json().authUrl, 'octocat');
    const tx = started.cookies.find((cookie) => cookie.name === 'oauth_tx')?.value ?? '';
    const callback = await t.fastify.inject({ method: 'POST', url: '/v1/integrations/oauth/callback', headers: { cookie: `oauth_tx=${tx}` }, payload: { provider: 'github', code: approved.code, state: approved.state } });
    expect(callback.statusCode, callback.body).toBe(200);
    // An MCP host registers and the owner consents on Tessera's page (no JavaScript needed there).
    const redirect = 'http://127.0.0.1:33419/callback';
    const client = await call('/oauth/register', { client_name: 'Console Host', redirect_uris: [redirect] });
    const { verifier, challenge } = pkce();
    const query = new URLSearchParams({ response_type: 'code', client_id: client.client_id, redirect_uri: redirect, code_challenge: challenge, code_challenge_method: 'S256', state: 's', scope: 'integrations:github:read', resource: `${origin}/mcp` });
    const host = new FormBrowser();
    const signInPage = await host.get(`${origin}/oauth/authorize?${query}`);
    const consentPage = await host.post(`${origin}/oauth/authorize`, { nonce: signInPage.hidden('nonce'), request: signInPage.hidden('request'), step: 'signin', email: OWNER.email, password: OWNER.password });
    const organizationId = (await call('/v1/account/access', undefined, ownerToken)).organization.id;
    const done = await host.post(`${origin}/oauth/authorize`, { nonce: consentPage.hidden('nonce'), request: consentPage.hidden('request'), step: 'approve', organization: organizationId, 'access.github': 'read', duration: '604800' });
    expect(done.status, done.html).toBe(303);
    const code = new URL(done.location ?? '').searchParams.get('code') ?? '';
    const pair = (await (
      await fetch(`${origin}/v1/oauth/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: client.client_id, redirect_uri: redirect }) })
    ).json()) as { access_token: string };
    const toolsList = () =>
      fetch(`${origin}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${pair.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      }).then((res) => res.status);
    expect(await toolsList()).toBe(200);

    const { page, context, errors } = await newPage();
    await signIn(page, OWNER);
    await open(page, 'Connected MCP hosts');
    const row = page.locator('li.row', { hasText: 'Console Host' });
    await expect.poll(() => row.textContent(), WAIT).toContain('GitHub');
    expect(await row.textContent()).toContain('Read');
    await readableOnPhone(page);
    await photograph(page, 'grants');
    const dialogs: string[] = [];
    page.once('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.accept();
    });
    await row.getByRole('button', { name: 'Revoke access for Console Host' }).click();
    await notice(page, 'Access for Console Host is revoked.');
    expect(dialogs).toEqual([expect.stringMatching(/^Revoke access for Console Host\?/)]);
    await expect.poll(() => page.locator('#grant-list').textContent()).toContain('No MCP host is connected.');
    expect(await toolsList()).toBe(401);
    // The audit chain: the host's request, down to the owner's consent.
    await open(page, 'Audit log');
    await page.locator('#audit-list li.row').first().waitFor(WAIT);
    await page.getByLabel('Action').selectOption({ label: 'Agent request' });
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(() => page.locator('#audit-list').textContent(), WAIT).toMatch(/Agent "Console Host", with capability [0-9A-Z]{26}, signed in as MCP host \(grant [0-9A-Z]{26}\), granted by the consent of /);
    expect(await page.locator('#audit-list').textContent()).not.toContain(pair.access_token.slice(4));
    expect(errors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);
});

describe('the console, as a system administrator', () => {
  it('shows a failed delivery (the receiver answered 500); once the receiver is fixed, a retry delivers it', async () => {
    const { page, context, errors } = await newPage();
    await signIn(page, ADMIN);
    await open(page, 'Webhook deliveries');
    // The endpoints the deliveries go to (docs/contract.md §7): here, the settings' one, never its secret.
    const settingsEndpoint = page.locator('#endpoint-list li[data-endpoint="settings-0"]');
    await expect.poll(() => settingsEndpoint.textContent(), WAIT).toContain('the settings (EVENTS_WEBHOOK_URL)');
    expect(await settingsEndpoint.locator('.badge').textContent()).toContain('Enabled');
    expect(await page.locator('#endpoint-list').textContent()).not.toContain('whsec_');
    await page.getByLabel('Status').selectOption('failed');
    await expect
      .poll(async () => {
        await page.getByRole('button', { name: 'Filter' }).click();
        return page.locator('#delivery-list li.row', { hasText: 'HTTP 500' }).count();
      }, { timeout: 20_000, interval: 500 })
      .toBeGreaterThan(0);
    const failed = page.locator('#delivery-list li.row').first();
    const id = await failed.getAttribute('data-delivery');
    expect(await failed.locator('.badge').textContent()).toContain('Failed');
    await readableOnPhone(page);
    await photograph(page, 'deliveries');

    receiverStatus = 204;
    await failed.getByRole('button', { name: /^Retry now/ }).click();
    await notice(page, 'Delivered: the receiver answered HTTP 204');
    await expect.poll(() => page.locator(`li[data-delivery="${id}"]`).count()).toBe(0);
    await page.getByLabel('Status').selectOption('delivered');
    await page.getByRole('button', { name: 'Filter' }).click();
    const delivered = page.locator(`li[data-delivery="${id}"]`);
    await expect.poll(() => delivered.locator('.badge').textContent(), WAIT).toContain('Delivered');
    expect(await delivered.locator('.attempts').textContent()).toContain('HTTP 204');
    expect(errors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);

  it('finds one of fifty organizations by externalId, sees its integrations’ health, and enters it to read', async () => {
    const admin = await tokenOf(ADMIN);
    const service = (await call('/query', { query: 'mutation { createServiceToken(name: "product backend") { token } }' }, admin)).data.createServiceToken.token;
    const ids = new Map<string, string>();
    for (let n = 1; n <= 50; n++) {
      const externalId = `cust-${String(n).padStart(4, '0')}`;
      // Three customers named alike, as a product's customers often are: the externalId tells them apart.
      ids.set(externalId, (await call('/v1/organizations', { name: 'Acme Corp', externalId }, service)).organization.id);
    }
    const target = ids.get('cust-0042') as string;
    // Its end user connects GitHub through a link the product mints with the organization's API token.
    const apiToken = (await call('/query', { query: `mutation { createAPIToken(name: "backend", organizationId: "${target}") { token } }` }, service, target)).data.createAPIToken.token;
    const { session } = await call('/v1/connect/sessions', { redirectUri: `${origin}/`, endUser: { id: 'eu-42', displayName: 'Customer 42' } }, apiToken);
    const { tx, authUrl } = await startThroughPage(t.fastify, session.url, 'github');
    const back = new URL(gh.authorize(authUrl, 'customer42').location);
    expect((await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}` } })).statusCode).toBe(302);

    const { page, context, errors } = await newPage();
    await signIn(page, ADMIN);
    await open(page, 'Organizations');
    const rows = page.locator('#organization-list li.row');
    await expect.poll(() => rows.count(), WAIT).toBe(20);
    await page.getByRole('button', { name: 'Next page of organizations' }).click();
    await expect.poll(async () => (await rows.first().getAttribute('data-organization')) !== null && (await page.locator('.pager').textContent())?.includes('Page 2')).toBe(true);

    await page.getByLabel('Name or external id').fill('CUST-0042');
    await page.keyboard.press('Enter');
    await expect.poll(() => rows.count(), WAIT).toBe(1);
    const row = rows.first();
    expect(await row.getAttribute('data-organization')).toBe(target);
    expect(await row.locator('.row-title').textContent()).toBe('Acme Corpcust-0042');
    expect(await row.locator('.health').textContent()).toBe('1 connected');
    await readableOnPhone(page);
    await photograph(page, 'organizations');

    await row.getByRole('button', { name: 'Enter Acme Corp (cust-0042)' }).click();
    await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor(WAIT);
    await expect.poll(() => page.locator('#entered').textContent()).toContain('You are viewing Acme Corp (cust-0042) as a system administrator');
    const card = page.locator('li.card', { hasText: 'GitHub · Customer 42' });
    await expect.poll(() => card.locator('.badge').textContent(), WAIT).toContain('Connected');
    // Read-only: no way to connect, refresh or delete from here.
    expect(await card.getByRole('button', { name: /^(Refresh|Delete)/ }).count()).toBe(0);
    expect(await page.getByRole('button', { name: /^Connect / }).count()).toBe(0);
    await open(page, 'Audit log');
    await expect.poll(() => page.locator('#audit-list').textContent(), WAIT).toContain('System administrator read');
    await readableOnPhone(page);

    await page.getByRole('button', { name: 'Leave Acme Corp' }).click();
    await page.getByRole('heading', { level: 1, name: 'Organizations' }).waitFor(WAIT);
    expect(await page.locator('#entered').isHidden()).toBe(true);
    expect(errors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);

  it('creates a service token shown once and revokes it', async () => {
    const { page, context, errors } = await newPage();
    await signIn(page, ADMIN);
    await open(page, 'Service tokens');
    await page.getByLabel('Name').fill('billing backend');
    await page.getByRole('button', { name: 'Create service token' }).click();
    await notice(page, 'The service token billing backend is created.');
    const value = (await page.locator('#service-tokens-value').textContent()) ?? '';
    expect(value).toMatch(/^tss_/);
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Service tokens' }).waitFor(WAIT);
    const row = page.locator('li.row', { hasText: 'billing backend' });
    await row.waitFor(WAIT);
    expect(await page.content()).not.toContain(value);
    await readableOnPhone(page);
    await photograph(page, 'service-tokens');
    page.once('dialog', (dialog) => void dialog.accept());
    await row.getByRole('button', { name: 'Revoke the service token billing backend' }).click();
    await notice(page, 'The service token billing backend is revoked.');
    expect((await fetch(`${origin}/v1/organizations`, { headers: { authorization: `Bearer ${value}` } })).status).toBe(401);
    expect(errors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);
});
