// The console's Apps section in a real browser (docs/contract.md §5e, §11): the deployment's apps
// read-only, an organization's own app with the redirect URI to register shown first; adding one
// through the form, rotating its secret, making it (and a deployment app) the default, deleting it
// once nothing uses it (the 409 said while a connect session does); a GitHub App of a provider
// offered to organizations' own apps only (decision 299). Every secret typed is sent — the sealed
// row holds it — and is in neither the page's fields nor its DOM afterwards.
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { launchChromium } from './helpers/browser.ts';
import { acceptTokenOf } from './helpers/invitations.ts';
import { freePort } from './helpers/process.ts';

const SCREENSHOTS = fileURLToPath(new URL('../docs/screenshots/', import.meta.url));
const OWNER = { email: 'apps-owner@example.com', password: 'apps owner password', name: 'Avery Owner' };
const MEMBER = { email: 'apps-member@example.com', password: 'apps member password', name: 'Morgan Member' };
const WAIT = { timeout: 15_000 };
const FLOW_TIMEOUT = 90_000;
/** Secrets typed into the page: each must reach the sealed row and stay out of the page. */
const SECRET = 'first-client-secret-6f1c2a9e';
const ROTATED = 'rotated-client-secret-93b7d40c';
const EVENTS_SECRET = 'events-secret-of-acme-0a8e4c1d';

let browser: Browser;
let t: TestApp;
let gh: FakeProvider;
let origin: string;
let organizationId: string;
let ownerToken: string;

beforeAll(async () => {
  browser = await launchChromium();
  gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  t = await createTestApp({
    env: { HOST: '127.0.0.1', PORT: String(port), PUBLIC_URL: origin, RATE_LIMIT_MAX: '0' },
    overrides: {
      // A second deployment app of GitHub, and GitHub Apps offered to organizations' own apps only.
      integrationOauthApps: [{ id: 'github-readonly', provider: 'github', name: 'GitHub (read-only)', clientId: 'readonly-client', clientSecret: 'readonly-secret', scopes: ['read:user'] }],
      // (the record is given whole here: the environment's GitHub settings would be replaced by it)
      integrationOauthProvider: { github: { clientId: gh.clientId, clientSecret: gh.clientSecret, authUrl: gh.authUrl, tokenUrl: gh.tokenUrl, apiUrl: gh.apiUrl }, githubapp: {} },
    },
  });
  await t.fastify.listen({ host: '127.0.0.1', port });
  await call('/v1/register', OWNER);
  ownerToken = (await call('/v1/login', { email: OWNER.email, password: OWNER.password })).accessToken;
  organizationId = (await call('/v1/account/access', undefined, ownerToken)).organization.id;
  // A member of the same organization: reads the apps, changes none.
  await call('/v1/register', MEMBER);
  const { data } = await call('/query', { query: `mutation { addMember(email: "${MEMBER.email}", role: "member") { id } }` }, ownerToken);
  const memberToken = (await call('/v1/login', { email: MEMBER.email, password: MEMBER.password })).accessToken;
  const accept = { id: data.addMember.id, token: await acceptTokenOf(t, data.addMember.id) };
  await call('/query', { query: 'mutation($id: ID!, $token: String!) { acceptInvitation(id: $id, token: $token) { id } }', variables: accept }, memberToken);
});

afterAll(async () => {
  await browser?.close();
  await t?.close();
  await gh?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: each call reads the fields its own request asked for
type Answer = any;

/** A JSON call from the test itself (not the page): GET without a body, else `method` (POST). */
async function call(path: string, body?: unknown, token?: string, method = body === undefined ? 'GET' : 'POST'): Promise<Answer> {
  const res = await fetch(`${origin}${path}`, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const answer = (await res.json()) as Answer;
  expect(res.status, JSON.stringify(answer)).toBeLessThan(300);
  expect(answer.errors, JSON.stringify(answer)).toBeUndefined();
  return answer;
}

/** What the organization's app `id` holds sealed: the secrets the page sent. */
async function sealed(id: string): Promise<{ clientSecret?: string; eventsSecret?: string; privateKey?: string }> {
  const { apps, db } = t.app.services;
  const row = await apps.organizationApp(db, organizationId, id);
  expect(row, `app ${id}`).not.toBeNull();
  return apps.secrets(row!);
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

async function signIn(page: Page, who: { email: string; password: string }): Promise<void> {
  await page.goto(`${origin}/`);
  await page.getByLabel('E-mail', { exact: true }).fill(who.email);
  await page.getByLabel('Password').fill(who.password);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor(WAIT);
}

/** Opens the Apps section from the navigation, with the keyboard. */
async function openApps(page: Page): Promise<void> {
  await page.getByRole('navigation', { name: 'Console sections' }).getByRole('link', { name: 'Apps', exact: true }).focus();
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Apps' }).waitFor(WAIT);
  await page.locator('#deployment-apps li.row').first().waitFor(WAIT);
}

const notice = (page: Page, text: string) => page.locator('#notice', { hasText: text }).waitFor(WAIT);

/** Every field's current value and the serialized DOM: where a secret typed into the page could linger. */
async function pageHolds(page: Page, secret: string): Promise<boolean> {
  const values = await page.evaluate('[...document.querySelectorAll("input, textarea")].map((field) => field.value)');
  return (await page.content()).includes(secret) || (values as string[]).some((value) => value.includes(secret));
}

async function readableOnPhone(page: Page): Promise<void> {
  const size = page.viewportSize();
  await page.setViewportSize({ width: 360, height: 740 });
  expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(360);
  if (size) await page.setViewportSize(size);
}

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

describe('the console’s Apps section', () => {
  it('shows the deployment’s apps read-only; adds an app whose redirect URI comes first, rotates its secret, makes it the default, deletes it once unused — no secret left in the page', async () => {
    const { page, context, errors } = await newPage();
    await signIn(page, OWNER);
    await openApps(page);

    // The deployment's apps: listed, read-only (no secret to enter, nothing to delete), the settings' one the default in effect.
    const deployment = page.locator('#deployment-apps');
    const settingsApp = deployment.locator('li[data-app="github"]');
    const readonlyApp = deployment.locator('li[data-app="github-readonly"]');
    await expect.poll(() => readonlyApp.textContent()).toContain('GitHub (read-only)');
    expect(await readonlyApp.textContent()).toContain('readonly-client');
    expect(await settingsApp.locator('.badge').textContent()).toContain('Default for GitHub (none chosen)');
    expect(await deployment.locator('input, textarea, form').count()).toBe(0);
    expect(await deployment.getByRole('button', { name: /^(Delete|Rotate)/ }).count()).toBe(0);
    expect(await page.locator('#deployment-apps').textContent()).not.toContain('readonly-secret');
    await page.getByText('Your organization has no app of its own').waitFor(WAIT);

    // Adding one: the secret is cleared as soon as it is sent, and the sealed row holds it.
    const form = page.locator('#app-form');
    await form.getByLabel('Provider', { exact: true }).selectOption('github');
    expect(await page.locator('#app-github-app').isHidden()).toBe(true);
    await form.getByLabel('Name').fill('Acme GitHub');
    await form.getByLabel('Client id').fill('acme-client.id_1');
    await form.getByLabel('Client secret').fill(SECRET);
    await form.getByLabel('Scopes').fill('repo, read:user');
    await form.getByLabel('Events secret (optional)').fill(EVENTS_SECRET);
    await form.getByRole('button', { name: 'Add app' }).click();
    await notice(page, 'The app Acme GitHub is added.');
    const row = page.locator('#own-apps li.row', { hasText: 'Acme GitHub' });
    await row.waitFor(WAIT);
    const id = (await row.getAttribute('data-app')) as string;
    expect(id).toMatch(/^[0-9A-Z]{26}$/);
    expect(await sealed(id)).toEqual({ clientSecret: SECRET, eventsSecret: EVENTS_SECRET });
    expect(await form.getByLabel('Client secret').inputValue()).toBe('');
    expect(await form.getByLabel('Events secret (optional)').inputValue()).toBe('');
    expect(await pageHolds(page, SECRET)).toBe(false);
    expect(await pageHolds(page, EVENTS_SECRET)).toBe(false);

    // The redirect URI to register: the row's first thing, the callback of GitHub, with a Copy button.
    const redirectUri = `${origin}/v1/integrations/oauth/callback`;
    expect(await row.evaluate((li) => li.firstElementChild?.className)).toBe('register');
    expect(await row.locator('.register code').textContent()).toBe(redirectUri);
    expect(await row.evaluate((li, uri) => (li.textContent ?? '').indexOf(uri) < (li.textContent ?? '').indexOf('acme-client.id_1'), redirectUri)).toBe(true);
    expect(await row.textContent()).toContain('repo read:user');
    expect(await row.textContent()).toContain(`${origin}/v1/apps/${id}/events`);
    expect(await row.textContent()).toContain('Events secretSet');
    await readableOnPhone(page);
    await photograph(page, 'apps');
    // Copied, or (no clipboard in this headless browser) selected for Ctrl+C.
    await row.getByRole('button', { name: 'Copy redirect URI of Acme GitHub' }).click();
    await page.locator('#notice', { hasText: /Redirect URI of Acme GitHub copied\.|Press Ctrl\+C/ }).waitFor(WAIT);

    // Rotating the client secret: sent, sealed, cleared.
    await row.getByLabel('New client secret').fill(ROTATED);
    await row.getByRole('button', { name: 'Rotate secret of Acme GitHub' }).click();
    await notice(page, 'The client secret of Acme GitHub is changed.');
    expect(await sealed(id)).toEqual({ clientSecret: ROTATED, eventsSecret: EVENTS_SECRET });
    expect(await row.getByLabel('New client secret').inputValue()).toBe('');
    expect(await pageHolds(page, ROTATED)).toBe(false);

    // The default: the organization's own app, then a deployment app (which clears the other).
    await row.getByRole('button', { name: 'Make default for GitHub: Acme GitHub' }).click();
    await notice(page, 'Acme GitHub is now the default app for GitHub');
    await expect.poll(() => row.locator('.badge').textContent()).toBe('Default for GitHub');
    expect(await settingsApp.locator('.badge').count()).toBe(0);
    expect((await call(`/v1/apps/${id}`, undefined, ownerToken)).app.default).toBe(true);
    await readonlyApp.getByRole('button', { name: 'Make default for GitHub: GitHub (read-only)' }).click();
    await notice(page, 'GitHub (read-only) is now the default app for GitHub');
    await expect.poll(() => readonlyApp.locator('.badge').textContent()).toBe('Default for GitHub');
    expect(await row.locator('.badge').count()).toBe(0);
    const { apps } = await call('/v1/apps', undefined, ownerToken);
    expect(apps.filter((app: { default: boolean }) => app.default).map((app: { id: string }) => app.id)).toEqual(['github-readonly']);

    // Deleting while a pending connect session uses it: the server's 409 is said, the app stays.
    const { session } = await call('/v1/connect/sessions', { redirectUri: `${origin}/`, allowedProviders: ['github'], app: id }, ownerToken);
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.accept();
    });
    await row.getByRole('button', { name: 'Delete the app Acme GitHub' }).click();
    await expect.poll(() => page.locator('#problem').textContent(), WAIT).not.toBe('');
    const refused = (await page.locator('#problem').textContent()) ?? '';
    // The server's own words, saying what uses it (not the console's generic words for a conflict).
    expect(refused).toContain('pending connect session');
    expect(await row.count()).toBe(1);
    expect(dialogs).toEqual([expect.stringMatching(/^Delete the app "Acme GitHub" \(GitHub\)\?/)]);

    // Unused once the session is revoked: deleted.
    await call(`/v1/connect/sessions/${session.id}`, undefined, ownerToken, 'DELETE');
    await row.getByRole('button', { name: 'Delete the app Acme GitHub' }).click();
    await notice(page, 'The app Acme GitHub is deleted.');
    await expect.poll(() => row.count()).toBe(0);
    expect(await t.app.services.apps.organizationApp(t.app.services.db, organizationId, id)).toBeNull();
    expect(errors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);

  it('adds a GitHub App of a provider offered to organizations’ own apps only (typed by its id), with its id, slug and private key; the key never comes back', async () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
    const keyBody = privateKey.split('\n')[1] as string;
    const { page, context, errors } = await newPage();
    await signIn(page, OWNER);
    await openApps(page);
    const form = page.locator('#app-form');
    // Not usable before the organization has an app of it: not in the list, typed by id instead.
    expect(await page.locator('#app-provider option[value="githubapp"]').count()).toBe(0);
    await form.getByLabel('Provider', { exact: true }).selectOption('');
    await form.getByLabel('Provider id').fill('githubapp');
    expect(await page.locator('#app-github-app').isVisible()).toBe(true);
    await form.getByLabel('Name').fill('Acme GitHub App');
    await form.getByLabel('Client id').fill('Iv1.acme0001');
    await form.getByLabel('Client secret').fill(SECRET);
    await form.getByLabel('GitHub App id').fill('424242');
    await form.getByLabel('Slug').fill('acme-tessera');
    await form.getByLabel('Private key (PEM)').fill(privateKey);
    await form.getByRole('button', { name: 'Add app' }).click();
    await notice(page, 'The app Acme GitHub App is added.');
    const row = page.locator('#own-apps li.row', { hasText: 'Acme GitHub App' });
    const id = (await row.getAttribute('data-app')) as string;
    expect(await sealed(id)).toEqual({ clientSecret: SECRET, privateKey: privateKey.trim() });
    expect(await pageHolds(page, keyBody)).toBe(false);
    expect(await pageHolds(page, SECRET)).toBe(false);
    // Now usable: its rotation form asks for a new key too.
    expect(await row.getByLabel('New private key (PEM)').count()).toBe(1);
    const stored = (await call(`/v1/apps/${id}`, undefined, ownerToken)).app;
    expect(stored).toMatchObject({ provider: 'githubapp', owner: 'organization', clientId: 'Iv1.acme0001' });
    expect(JSON.stringify(stored)).not.toContain(keyBody);
    expect(errors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);

  it('shows a member the apps to read, with nothing to change', async () => {
    const { page, context, errors } = await newPage();
    await signIn(page, MEMBER);
    await page.getByLabel('Organization').selectOption(organizationId);
    await page.getByRole('button', { name: 'Switch' }).click();
    await notice(page, 'Now working in');
    await openApps(page);
    await page.locator('#own-apps li.row', { hasText: 'Acme GitHub App' }).waitFor(WAIT);
    expect(await page.locator('#own-apps .register code').first().textContent()).toBe(`${origin}/v1/integrations/oauth/callback`);
    expect(await page.locator('#app-form').count()).toBe(0);
    expect(await page.locator('#section-apps form').count()).toBe(0);
    expect(await page.getByRole('button', { name: /^(Make default|Delete|Rotate)/ }).count()).toBe(0);
    expect(errors).toEqual([]);
    await context.close();
  }, FLOW_TIMEOUT);
});
