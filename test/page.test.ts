import { existsSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTENT_SECURITY_POLICY } from '../src/http/html.ts';
import { webRoutes } from '../src/web/routes.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { launchChromium, recordTraffic, type Traffic } from './helpers/browser.ts';
import { invitationDelivery } from './helpers/invitations.ts';
import { freePort } from './helpers/process.ts';
import { providerEnv } from './helpers/providers.ts';

const SCREENSHOT = fileURLToPath(new URL('../docs/screenshot.png', import.meta.url));
const EMAIL = 'page-owner@example.com';
const PASSWORD = 'correct horse battery staple';
const WAIT = { timeout: 15_000 };
/** A whole browser flow; a loaded CI machine can be several times slower than a quiet one. */
const FLOW_TIMEOUT = 60_000;

let browser: Browser;
let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let origin: string;

beforeAll(async () => {
  // First, so a machine without Chromium fails at once with the fix.
  browser = await launchChromium();
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  slack = await startFakeSlack();
  gh.addUser({ login: 'octocat', email: 'octocat@example.com', name: 'The Octocat' });
  slack.addUser({ login: 'slackbot', email: 'slackbot@example.com' });
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  t = await createTestApp({
    env: {
      ...providerEnv(gh),
      ...providerEnv(slack),
      HOST: '127.0.0.1',
      PORT: String(port),
      PUBLIC_URL: origin,
      // Every status fetch older than a second validates live at the provider.
      OAUTH_STATUS_MAX_AGE: '1',
      RATE_LIMIT_MAX: '0',
    },
    routes: (app) => webRoutes(app),
  });
  await t.fastify.listen({ host: '127.0.0.1', port });
  const registered = await fetch(`${origin}/v1/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: EMAIL, password: PASSWORD, name: 'Ada Page' }),
  });
  expect(registered.status).toBe(201);
});

afterAll(async () => {
  await browser?.close();
  await t?.close();
  await gh?.close();
  await slack?.close();
});

async function newPage(): Promise<{ context: BrowserContext; page: Page; traffic: Traffic }> {
  const context = await browser.newContext({ locale: 'en-US', timezoneId: 'UTC', viewport: { width: 960, height: 760 } });
  const traffic = recordTraffic(context, origin);
  const page = await context.newPage();
  return { context, page, traffic };
}

/** Signs in with the keyboard only: type, Tab, type, Enter. */
async function signIn(page: Page, email = EMAIL, password = PASSWORD): Promise<void> {
  await page.goto(`${origin}/`);
  await page.getByLabel('E-mail', { exact: true }).focus();
  await page.keyboard.type(email);
  await page.keyboard.press('Tab');
  expect(await page.evaluate('document.activeElement?.id')).toBe('password');
  await page.keyboard.type(password);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor(WAIT);
}

const card = (page: Page, provider: string) => page.locator(`li.card[data-provider="${provider}"]`);

async function waitForBadge(page: Page, provider: string, label: string): Promise<void> {
  await card(page, provider).locator('.badge', { hasText: label }).waitFor(WAIT);
}

async function waitForNotice(page: Page, text: string): Promise<void> {
  await page.locator('#notice', { hasText: text }).waitFor(WAIT);
}

/** The fields of the answers `call` reads (login, switch, organization creation, addMember); the rest are only checked to succeed. */
interface CallAnswer {
  accessToken: string;
  organization: { id: string };
  data: { addMember: { id: string } };
  errors?: unknown;
}

/** A JSON call to the service from the test itself (not the page), with a bearer token when given. */
async function call(path: string, body: unknown, token?: string): Promise<CallAnswer> {
  const res = await fetch(`${origin}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  const answer = (await res.json()) as CallAnswer;
  expect(res.status, JSON.stringify(answer)).toBeLessThan(300);
  expect(answer.errors, JSON.stringify(answer)).toBeUndefined();
  return answer;
}

/** A new organization of the page's owner, and an owner's token bound to it. */
async function ownerOrganization(name: string): Promise<{ id: string; token: string }> {
  const { accessToken } = await call('/v1/login', { email: EMAIL, password: PASSWORD });
  const { organization } = await call('/v1/organizations', { name }, accessToken);
  const switched = await call('/v1/account/switch', { organizationId: organization.id }, accessToken);
  return { id: organization.id, token: switched.accessToken };
}

/** At the fake provider's consent page: pick the account, then Approve (or Deny). */
async function consent(page: Page, fake: FakeProvider, login: string, decision: 'Approve' | 'Deny' = 'Approve'): Promise<void> {
  await page.waitForURL((url) => url.href.startsWith(fake.authUrl), WAIT);
  await page.getByLabel('Sign in as').selectOption(login);
  await page.getByRole('button', { name: decision }).click();
  await page.waitForURL((url) => url.origin === origin && url.pathname === '/', WAIT);
}

describe('the integrations page', () => {
  it('is served with a strict CSP and the other security headers, and carries no inline code', async () => {
    const page = await fetch(`${origin}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toBe(CONTENT_SECURITY_POLICY);
    expect(CONTENT_SECURITY_POLICY).not.toContain('unsafe-inline');
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await page.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/i);
    expect(html).not.toMatch(/<style|\sstyle=|\son[a-z]+=/i);
    // The invitation page, the same for every id, under the same policy.
    const invitationPage = await fetch(`${origin}/invitations/01JAAAAAAAAAAAAAAAAAAAAAAA`);
    expect(invitationPage.status).toBe(200);
    expect(invitationPage.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(invitationPage.headers.get('content-security-policy')).toBe(CONTENT_SECURITY_POLICY);
    expect(invitationPage.headers.get('referrer-policy')).toBe('no-referrer');
    const invitationHtml = await invitationPage.text();
    expect(invitationHtml).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/i);
    expect(invitationHtml).not.toMatch(/<style|\sstyle=|\son[a-z]+=/i);

    for (const [path, type] of [
      ['/assets/app.js', 'text/javascript; charset=utf-8'],
      ['/assets/api.js', 'text/javascript; charset=utf-8'],
      ['/assets/invitation.js', 'text/javascript; charset=utf-8'],
      ['/assets/style.css', 'text/css; charset=utf-8'],
    ] as const) {
      const asset = await fetch(origin + path);
      expect(asset.status, path).toBe(200);
      expect(asset.headers.get('content-type'), path).toBe(type);
      expect(asset.headers.get('x-content-type-options'), path).toBe('nosniff');
      const again = await fetch(origin + path, { headers: { 'if-none-match': asset.headers.get('etag') ?? '' } });
      expect(again.status, path).toBe(304);
    }
    const docs = (await (await fetch(`${origin}/api-docs`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(docs.paths)).not.toContain('/');
  });

  it('connects GitHub, shows it turn invalid, reconnects, refreshes and deletes it, never holding a token', async () => {
    const { context, page, traffic } = await newPage();
    const cspViolations: string[] = [];
    const pageErrors: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') cspViolations.push(message.text());
    });
    page.on('pageerror', (error) => pageErrors.push(error.message));
    const documentHeaders = (await page.goto(`${origin}/`))?.headers() ?? {};
    expect(documentHeaders['content-security-policy']).toBe(CONTENT_SECURITY_POLICY);
    const snapshots: string[] = [];
    const tokens = new Set<string>();
    const remember = async () => {
      snapshots.push(await page.content());
      for (const token of gh.tokensOf('octocat')) {
        tokens.add(token.accessToken);
        if (token.refreshToken) tokens.add(token.refreshToken);
      }
    };

    await signIn(page);
    await expect.poll(() => page.locator('#who').textContent()).toContain('Ada Page');
    await page.getByRole('button', { name: 'Connect GitHub' }).waitFor(WAIT);
    await remember();

    // Connect: the page starts the flow, the fake shows its consent page, the callback sends us back.
    await page.getByRole('button', { name: 'Connect GitHub' }).click();
    await consent(page, gh, 'octocat');
    await waitForNotice(page, 'GitHub is connected.');
    expect(page.url()).toBe(`${origin}/`);
    await waitForBadge(page, 'github', 'Connected');
    await expect.poll(() => card(page, 'github').locator('.message').textContent()).toBe('GitHub is connected.');
    expect(await card(page, 'github').getByRole('button').allTextContents()).toEqual(['Refresh token for GitHub', 'Delete the GitHub integration']);
    await remember();
    expect(tokens.size).toBe(2);

    // The provider revokes the grant; "Refresh status" validates live and shows it.
    gh.revokeUser('octocat');
    await page.waitForTimeout(1100);
    await page.getByRole('button', { name: 'Refresh status' }).click();
    await waitForBadge(page, 'github', 'Invalid');
    await expect.poll(() => card(page, 'github').locator('.message').textContent()).toContain('Reconnect GitHub');
    await expect.poll(() => card(page, 'github').locator('.facts').textContent()).toContain('Problem');
    expect(await card(page, 'github').getByRole('button').allTextContents()).toEqual(['Reconnect GitHub', 'Delete the GitHub integration']);
    await remember();

    // Reconnect from the status's action.
    await page.getByRole('button', { name: 'Reconnect GitHub' }).click();
    await consent(page, gh, 'octocat');
    await waitForNotice(page, 'GitHub is connected.');
    await waitForBadge(page, 'github', 'Connected');
    await remember();

    // Refresh: a new token pair at the provider, none in the page.
    const refreshesBefore = gh.stats.refreshes;
    // With the keyboard: the card is redrawn, and focus stays on the button.
    await page.getByRole('button', { name: 'Refresh token for GitHub' }).focus();
    await page.keyboard.press('Enter');
    await waitForNotice(page, 'GitHub token refreshed.');
    // The card says so too, where the person looks.
    await expect.poll(() => card(page, 'github').locator('.refreshed').textContent()).toMatch(/^Token refreshed at \d/);
    expect(await page.evaluate('document.activeElement?.dataset.focusKey')).toBe('refresh:github');
    expect(gh.stats.refreshes).toBeGreaterThan(refreshesBefore);
    await waitForBadge(page, 'github', 'Connected');
    await remember();

    // The README's picture: GitHub connected, Slack ready to connect.
    await page.getByRole('button', { name: 'Connect Slack' }).waitFor(WAIT);
    await page.mouse.move(0, 0);
    await page.evaluate('document.activeElement?.blur()');
    const shot = await page.screenshot({ fullPage: true });
    expect(shot.subarray(1, 4).toString()).toBe('PNG');
    // Written when missing or asked for, so that a test run does not leave the work tree dirty.
    if (process.env.UPDATE_SCREENSHOT === '1' || !existsSync(SCREENSHOT)) writeFileSync(SCREENSHOT, shot);

    // Readable on a phone: nothing wider than the screen.
    await page.setViewportSize({ width: 360, height: 740 });
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(360);
    await page.setViewportSize({ width: 960, height: 760 });

    // Delete, after the confirmation dialog.
    const dialogs: string[] = [];
    page.once('dialog', (dialog) => {
      dialogs.push(`${dialog.type()}: ${dialog.message()}`);
      void dialog.accept();
    });
    await page.getByRole('button', { name: 'Delete the GitHub integration' }).click();
    await waitForNotice(page, 'GitHub integration deleted.');
    expect(dialogs).toEqual([expect.stringMatching(/^confirm: Delete the GitHub integration "GitHub Integration \(octocat\)"\?/)]);
    await page.getByRole('button', { name: 'Connect GitHub' }).waitFor(WAIT);
    expect(await card(page, 'github').count()).toBe(0);
    await expect.poll(() => gh.stats.revocations).toBeGreaterThan(0);
    await remember();

    await traffic.settle();
    expect(traffic.requests.filter((r) => /\/token$/.test(r))).toEqual([]);
    expect(tokens.size).toBeGreaterThanOrEqual(6);
    for (const token of tokens) {
      for (const html of snapshots) expect(html).not.toContain(token);
      for (const body of traffic.bodies) expect(body).not.toContain(token);
    }
    expect(cspViolations.filter((text) => /Content Security Policy/i.test(text))).toEqual([]);
    expect(pageErrors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);

  it('says in words when the person declines, shows crafted query values only as text, switches organization and signs out', async () => {
    const { context, page } = await newPage();
    await signIn(page);
    await page.getByRole('button', { name: 'Connect Slack' }).click();
    await page.waitForURL((url) => url.href.startsWith(slack.authUrl), WAIT);
    await page.getByRole('button', { name: 'Deny' }).click();
    await page.locator('#problem', { hasText: 'You declined access at Slack, so nothing was connected.' }).waitFor(WAIT);
    expect(page.url()).toBe(`${origin}/`);
    expect(await card(page, 'slack').count()).toBe(0);

    await page.goto(`${origin}/?status=error&provider=%3Cimg%20src%3Dx%3E&error=%3Cb%3EX`);
    await page.locator('#problem', { hasText: 'Connecting the provider failed. Try again.' }).waitFor(WAIT);
    expect(await page.locator('#problem img, #problem b').count()).toBe(0);
    expect(page.url()).toBe(`${origin}/`);

    // A second organization: the switcher appears, and switching shows that organization's integrations.
    const signedIn = await fetch(`${origin}/v1/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: EMAIL, password: PASSWORD }) });
    const { accessToken } = (await signedIn.json()) as { accessToken: string };
    const created = await fetch(`${origin}/v1/organizations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${accessToken}` },
      body: JSON.stringify({ name: 'Second Org' }),
    });
    expect(created.status).toBe(201);
    await page.getByRole('button', { name: 'Refresh status' }).click();
    await page.getByLabel('Organization').selectOption({ label: 'Second Org (owner)' });
    await page.getByRole('button', { name: 'Switch' }).click();
    await waitForNotice(page, 'Now working in Second Org.');
    await page.getByRole('button', { name: 'Connect GitHub' }).waitFor(WAIT);
    expect(await page.locator('li.card').count()).toBe(0);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await waitForNotice(page, 'Signed out.');
    await page.getByRole('heading', { name: 'Sign in to Tessera' }).waitFor(WAIT);
    await page.reload();
    await page.getByRole('heading', { name: 'Sign in to Tessera' }).waitFor(WAIT);
    await context.close();
  }, FLOW_TIMEOUT);

  it('shows an invitee her invitations to decline, accepts one through its link; the organization then appears, where an admin invites and revokes', async () => {
    const invitee = { email: 'page-invitee@example.com', password: 'another correct horse battery', name: 'Ivy Invitee' };
    await call('/v1/register', invitee);
    const acme = await ownerOrganization('Acme Team');
    const beta = await ownerOrganization('Beta Crew');
    // The owners invite through GraphQL, as a product's backend would; the e-mail's letter case does not matter.
    const query = 'mutation($e: String!, $r: String!) { addMember(email: $e, role: $r) { id } }';
    const toAcme = (await call('/query', { query, variables: { e: invitee.email.toUpperCase(), r: 'admin' } }, acme.token));
    await call('/query', { query, variables: { e: invitee.email, r: 'member' } }, beta.token);

    const { context, page, traffic } = await newPage();
    const pageErrors: string[] = [];
    const consoleErrors: string[] = [];
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    await signIn(page, invitee.email, invitee.password);
    await page.getByRole('heading', { level: 2, name: 'Invitations for you' }).waitFor(WAIT);
    const invitations = page.locator('#my-invitation-list > li');
    await expect.poll(() => invitations.count()).toBe(2);
    expect(await page.locator('#my-invitation-list').textContent()).toContain('Acme Team invites you to join as admin.');
    expect(await page.locator('#my-invitation-list').textContent()).toContain('Beta Crew invites you to join as member.');
    // Accepting takes the invitation's link (its token): the list says so and offers only Decline.
    expect(await page.locator('#my-invitation-list').textContent()).toContain('To accept, open the link in the invitation e-mail.');
    expect(await page.getByRole('button', { name: /^Accept/ }).count()).toBe(0);

    await page.getByRole('button', { name: 'Decline the invitation to Beta Crew' }).click();
    await waitForNotice(page, 'You declined the invitation to Beta Crew.');
    await expect.poll(() => invitations.count()).toBe(1);

    // The link of the invitation's event, opened signed in: the invitation is shown at once, Accept focused for the keyboard.
    const { acceptUrl } = await invitationDelivery(t, toAcme.data.addMember.id);
    await page.goto(acceptUrl);
    await page.getByText('Acme Team invites you to join as admin.').waitFor(WAIT);
    expect(await page.evaluate('document.activeElement?.id')).toBe('accept');
    await page.keyboard.press('Enter');
    await waitForNotice(page, 'You joined Acme Team as admin.');
    await page.getByRole('link', { name: 'Open the Tessera console' }).click();
    await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor(WAIT);
    await expect.poll(() => page.getByLabel('Organization').locator('option').count()).toBeGreaterThan(1);
    expect(await page.locator('#my-invitations').isHidden()).toBe(true);
    const options = await page.getByLabel('Organization').locator('option').allTextContents();
    expect(options).toContain('Acme Team (admin)');
    expect(options.some((text) => text.startsWith('Beta Crew'))).toBe(false);
    await page.getByLabel('Organization').selectOption({ label: 'Acme Team (admin)' });
    await page.getByRole('button', { name: 'Switch' }).click();
    await waitForNotice(page, 'Now working in Acme Team.');

    // As an admin of Acme Team: invite someone (members and admins only), see it pending, revoke it — in the console's Members section.
    await page.getByRole('link', { name: 'Members' }).click();
    await page.getByRole('heading', { level: 2, name: 'Pending invitations' }).waitFor(WAIT);
    expect(await page.locator('#invite-role option').allTextContents()).toEqual(['Member', 'Admin']);
    await page.getByLabel("Invitee's e-mail").fill('newcomer@example.com');
    await page.getByLabel('Role').selectOption('admin');
    await page.getByRole('button', { name: 'Invite', exact: true }).click();
    await waitForNotice(page, 'newcomer@example.com is invited as admin until');
    expect(await page.locator('#org-invitation-list').textContent()).toContain('newcomer@example.com as admin');
    expect(await page.evaluate('document.activeElement?.id')).toBe('invite-email');
    // Revoking is destructive: the console asks first.
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Revoke the invitation of newcomer@example.com' }).click();
    await waitForNotice(page, 'The invitation of newcomer@example.com is revoked.');
    await page.getByText('No invitation is waiting for an answer.').waitFor(WAIT);

    // Readable on a phone too.
    await page.setViewportSize({ width: 360, height: 740 });
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(360);

    await traffic.settle();
    expect(traffic.requests.filter((r) => r === 'POST /query').length).toBeGreaterThanOrEqual(6);
    expect(consoleErrors.filter((text) => /Content Security Policy/i.test(text))).toEqual([]);
    expect(pageErrors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);

  it('opens an invitation link signed out: the person signs in (or creates the account), sees the invitation and accepts it; the token reaches no URL, Referer or log', async () => {
    const guild = await ownerOrganization('Gamma Guild');
    const invitee = { email: 'link-invitee@example.com', password: 'a third correct horse battery', name: 'Lin Link' };
    await call('/v1/register', invitee);
    const query = 'mutation($e: String!, $r: String!) { addMember(email: $e, role: $r) { id } }';
    const invitationId = (await call('/query', { query, variables: { e: invitee.email, r: 'member' } }, guild.token)).data.addMember.id;
    const { acceptUrl, acceptToken } = await invitationDelivery(t, invitationId);
    expect(acceptUrl).toBe(`${origin}/invitations/${invitationId}#token=${acceptToken}`);

    const { context, page } = await newPage();
    const pageErrors: string[] = [];
    const consoleErrors: string[] = [];
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    const sent: { url: string; referer: string; body: string }[] = [];
    context.on('request', (request) => sent.push({ url: request.url(), referer: request.headers().referer ?? '', body: request.postData() ?? '' }));

    // A link cut short says so, in words.
    await page.goto(`${origin}/invitations/${invitationId}`);
    await page.locator('#problem', { hasText: 'This invitation link is incomplete.' }).waitFor(WAIT);

    await page.goto(acceptUrl);
    await page.getByRole('heading', { name: 'Sign in to answer the invitation' }).waitFor(WAIT);
    await page.getByLabel('E-mail', { exact: true }).fill(invitee.email);
    await page.getByLabel('Password').fill('not the password at all');
    await page.keyboard.press('Enter');
    await page.locator('#problem', { hasText: 'The e-mail or password is not right. Try again.' }).waitFor(WAIT);
    await page.getByLabel('Password').fill(invitee.password);
    await page.keyboard.press('Enter');
    await page.getByText('Gamma Guild invites you to join as member.').waitFor(WAIT);
    expect(await page.locator('#who').textContent()).toBe(`Signed in as ${invitee.email}`);
    await page.getByRole('button', { name: 'Accept' }).click();
    await waitForNotice(page, 'You joined Gamma Guild as member.');
    // Spent, the token leaves the address bar too.
    expect(page.url()).toBe(`${origin}/invitations/${invitationId}`);
    await page.getByRole('link', { name: 'Open the Tessera console' }).waitFor(WAIT);

    const { accessToken } = await call('/v1/login', { email: invitee.email, password: invitee.password });
    const access = await fetch(`${origin}/v1/account/access`, { headers: { authorization: `Bearer ${accessToken}` } });
    expect(((await access.json()) as { organizations: unknown[] }).organizations).toContainEqual({ id: guild.id, name: 'Gamma Guild', role: 'member' });

    // The token left the browser once, in the body of the acceptance, never in an address or a Referer; the server logged none.
    expect(sent.filter((request) => request.body.includes(acceptToken)).map((request) => new URL(request.url).pathname)).toEqual(['/query']);
    for (const request of sent) {
      expect(request.url).not.toContain(acceptToken);
      expect(request.referer).not.toContain(acceptToken);
    }
    expect(t.logs.text).not.toContain(acceptToken);
    expect(consoleErrors.filter((text) => /Content Security Policy/i.test(text))).toEqual([]);
    expect(pageErrors).toEqual([]);
    await context.close();

    // Someone invited before having an account creates it on the same page.
    const newcomer = 'link-newcomer@example.com';
    const secondId = (await call('/query', { query, variables: { e: newcomer, r: 'admin' } }, guild.token)).data.addMember.id;
    const second = await newPage();
    await second.page.goto((await invitationDelivery(t, secondId)).acceptUrl);
    await second.page.getByRole('button', { name: 'No account yet? Create one' }).click();
    await second.page.getByRole('heading', { name: 'Create your account to answer the invitation' }).waitFor(WAIT);
    await second.page.getByLabel('Your name').fill('Nia Newcomer');
    await second.page.getByLabel('E-mail', { exact: true }).fill(newcomer);
    await second.page.getByLabel('Password').fill('short');
    await second.page.getByRole('button', { name: 'Create account' }).click();
    await second.page.locator('#problem', { hasText: 'Enter an e-mail address and a password of 12 to 256 characters.' }).waitFor(WAIT);
    await second.page.getByLabel('Password').fill('a newcomer long enough password');
    await second.page.getByRole('button', { name: 'Create account' }).click();
    await second.page.getByText('Gamma Guild invites you to join as admin.').waitFor(WAIT);
    await second.page.getByRole('button', { name: 'Accept' }).click();
    await waitForNotice(second.page, 'You joined Gamma Guild as admin.');
    await second.context.close();
  }, FLOW_TIMEOUT);
});
