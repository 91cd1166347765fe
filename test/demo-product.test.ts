// The demo's stand-in product (scripts/demo-product.ts) embeds Tessera through @tessera/client:
// it mints a connect session per visit and verifies the webhooks it shows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DemoProduct, startDemoProduct } from '../scripts/demo-product.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { registerAndLogin } from './helpers/identity.ts';
import { freePort } from './helpers/process.ts';
import { providerEnv } from './helpers/providers.ts';

const SECRET = `whsec_${Buffer.alloc(32, 8).toString('base64')}`;

let t: TestApp;
let gh: FakeProvider;
let product: DemoProduct;

beforeAll(async () => {
  gh = await startFakeGitHub();
  product = await startDemoProduct(SECRET);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  t = await createTestApp({
    env: { ...providerEnv(gh), PUBLIC_URL: url, OAUTH_REDIRECT_ORIGINS: product.url, RATE_LIMIT_MAX: '0', EVENTS_WEBHOOK_URL: product.webhookUrl, EVENTS_WEBHOOK_SECRET: SECRET },
  });
  await t.fastify.listen({ host: '127.0.0.1', port });
  const owner = await registerAndLogin(t.fastify, 'demo-owner');
  const apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "demo product") { token } }')).createAPIToken.token;
  product.connect(url, apiToken);
});

afterAll(async () => {
  await product?.close();
  await t?.close();
  await gh?.close();
});

describe('the demo product', () => {
  it('mints a connect session for its end user on each visit', async () => {
    const page = await (await fetch(`${product.url}/`)).text();
    const sessionUrl = /data-session-url="([^"]+)"/.exec(page)?.[1] as string;
    expect(sessionUrl).toMatch(/\/connect\/[A-Za-z0-9_-]{43}$/);
    expect((await t.fastify.inject({ url: new URL(sessionUrl).pathname })).statusCode).toBe(200);
  });

  it('shows the events Tessera signed, and refuses a forged one', async () => {
    const forged = await fetch(product.webhookUrl, { method: 'POST', body: JSON.stringify({ type: 'integration.connected', data: { forged: true } }) });
    expect(forged.status).toBe(401);
    // The registration above created an organization: Tessera's signed delivery of it reaches the page.
    await expect.poll(async () => (await (await fetch(`${product.url}/`)).text()).includes('organization.created'), { timeout: 20_000 }).toBe(true);
    expect(await (await fetch(`${product.url}/`)).text()).not.toContain('forged');
  });
});
