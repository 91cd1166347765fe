import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { launchChromium, recordTraffic } from './helpers/browser.ts';
import { freePort } from './helpers/process.ts';

const WAIT = { timeout: 20_000 };

let browser: Browser;
let t: TestApp;
let origin: string;

beforeAll(async () => {
  browser = await launchChromium();
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  t = await createTestApp({ env: { HOST: '127.0.0.1', PORT: String(port), PUBLIC_URL: origin } });
  await t.fastify.listen({ host: '127.0.0.1', port });
});
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe('GET /docs', () => {
  it('is served unauthenticated under a strict policy: no inline script or style, no eval, nothing from elsewhere', async () => {
    const res = await fetch(`${origin}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const policy = res.headers.get('content-security-policy') ?? '';
    expect(policy).toMatch(/script-src 'self'(;|$)/);
    expect(policy).toMatch(/style-src 'self'(;|$)/);
    expect(policy).toMatch(/connect-src 'self'(;|$)/);
    expect(policy).not.toMatch(/unsafe|https?:|\*/);
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(await res.text()).not.toMatch(/<script(?![^>]*\bsrc=)|\sstyle=|https?:\/\//);
  });

  it('renders every operation of the OpenAPI document in a real browser, with no policy violation', async () => {
    const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1200, height: 900 } });
    const traffic = recordTraffic(context, origin);
    const outside: string[] = [];
    context.on('request', (request) => {
      if (!request.url().startsWith(`${origin}/`) && !request.url().startsWith('data:')) outside.push(request.url());
    });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));
    try {
      await page.goto(`${origin}/docs`);
      await page.locator('.opblock').first().waitFor(WAIT);
      type Operations = Record<string, Record<string, { operationId: string }>>;
      const document = (await (await fetch(`${origin}/api-docs`)).json()) as { paths: Operations; webhooks: Operations };
      // The routes and the webhooks Tessera posts (docs/contract.md §7).
      const operationIds = [...Object.values(document.paths), ...Object.values(document.webhooks)].flatMap((item) => Object.values(item).map((operation) => operation.operationId));
      expect(operationIds.length).toBeGreaterThan(20);
      expect(await page.locator('.opblock').count()).toBe(operationIds.length);
      const shown = await page.locator('.opblock-summary-operation-id').allTextContents();
      expect(shown.map((text) => text.trim()).sort()).toEqual([...operationIds].sort());
      await expect(page.getByRole('heading', { name: /Tessera/ }).first().isVisible()).resolves.toBe(true);
      // Opening an operation shows its parameters and its responses, error shape included.
      await page.locator('#operations-integrations-integrations_getToken').click();
      await page.locator('#operations-integrations-integrations_getToken .responses-table').first().waitFor(WAIT);
      expect(await page.locator('#operations-integrations-integrations_getToken').textContent()).toMatch(/INTEGRATION_NOT_FOUND/);
      await traffic.settle();
      expect(traffic.requests).toEqual(expect.arrayContaining(['GET /docs', 'GET /docs/swagger-ui-bundle.js', 'GET /docs/docs.js', 'GET /api-docs']));
      expect(outside).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);
});
