// What a company meets first (issue 41's frictions): the reference documents its sections,
// `/docs/` finds the reference, "Try it out" calls the proxy with a multi-segment path.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TAGS } from '../src/http/openapi-document.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => {
  await t?.close();
});

describe('the API reference', () => {
  it('declares every tag its operations use, each with a description', async () => {
    const document = (await t.fastify.inject({ url: '/api-docs' })).json();
    const used = new Set<string>();
    for (const item of [...Object.values(document.paths), ...Object.values(document.webhooks ?? {})] as Record<string, { tags?: string[] }>[]) {
      for (const operation of Object.values(item)) for (const tag of operation.tags ?? []) used.add(tag);
    }
    expect(used.size).toBeGreaterThan(5);
    const declared = document.tags as { name: string; description?: string }[];
    expect(declared.map((tag) => tag.name).sort()).toEqual([...used].sort());
    for (const tag of declared) expect(tag.description, tag.name).toBe(TAGS[tag.name]);
  });
});

describe('the reference page', () => {
  it('sends /docs/ to /docs, relatively', async () => {
    const res = await t.fastify.inject({ url: '/docs/' });
    expect(res.statusCode).toBe(301);
    expect(res.headers.location).toBe('../docs');
    expect(new URL(String(res.headers.location), 'http://tessera.test/docs/').pathname).toBe('/docs');
    expect((await t.fastify.inject({ url: '/docs' })).statusCode).toBe(200);
  });

  it('"Try it out" sends a multi-segment proxy path with its slashes, leaving the query and other routes alone', async () => {
    const script = (await t.fastify.inject({ url: '/docs/docs.js' })).body;
    let config: { requestInterceptor(request: { url: string }): { url: string } } | undefined;
    const window = {
      location: { href: 'https://tessera.example.com/docs' },
      SwaggerUIBundle: Object.assign((options: typeof config) => (config = options), { presets: { apis: {} } }),
    };
    new Function('window', script)(window);
    const intercept = (url: string) => config?.requestInterceptor({ url }).url;
    expect(intercept('https://tessera.example.com/v1/integrations/github/proxy/user%2Frepos?q=a%2Fb')).toBe('https://tessera.example.com/v1/integrations/github/proxy/user/repos?q=a%2Fb');
    expect(intercept('https://tessera.example.com/prefix/v1/integrations/github/proxy/repos%2Fo%2Fr%2Fissues')).toBe('https://tessera.example.com/prefix/v1/integrations/github/proxy/repos/o/r/issues');
    expect(intercept('https://tessera.example.com/v1/integrations/github/token?endUser=a%2Fb')).toBe('https://tessera.example.com/v1/integrations/github/token?endUser=a%2Fb');
  });
});

describe('a generated client calling the proxy', () => {
  it('openapi-fetch with the documented path serializer sends a multi-segment path with its slashes; without it, encoded', async () => {
    const { createServer } = await import('node:http');
    const seen: string[] = [];
    const server = createServer((request, response) => {
      seen.push(String(request.url));
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    }).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      const { default: createClient } = await import('openapi-fetch');
      const { pathSerializer } = await import('@tessera/client');
      type Paths = import('@tessera/client').paths;
      const route = '/v1/integrations/{provider}/proxy/{path}' as const;
      const params = { params: { path: { provider: 'github', path: 'repos/octo cat/hello/issues' } } };
      await createClient<Paths>({ baseUrl, pathSerializer }).GET(route, params);
      await createClient<Paths>({ baseUrl }).GET(route, params);
      expect(seen).toEqual(['/v1/integrations/github/proxy/repos/octo%20cat/hello/issues', '/v1/integrations/github/proxy/repos%2Focto%20cat%2Fhello%2Fissues']);
    } finally {
      server.close();
    }
  });
});

describe("the console's audit log", () => {
  it('has words for every action Tessera records, and makes any other readable instead of showing its name', async () => {
    const { readFileSync, readdirSync } = await import('node:fs');
    const { join } = await import('node:path');
    const root = join(import.meta.dirname, '../src');
    const recorded = new Set<string>();
    const walk = (dir: string): void => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) walk(path);
        else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) {
          for (const match of readFileSync(path, 'utf8').matchAll(/action: (?:sql`)?'([a-z_]+\.[a-z_]+)'/g)) recorded.add(match[1] as string);
        }
      }
    };
    walk(root);
    expect(recorded.size).toBeGreaterThan(20);
    const { actionWords } = (await import('../src/web/static/sections/audit.js')) as { actionWords(action: string): string };
    // Each is in the list the filter offers, with its own words.
    const listed = readFileSync(join(root, 'web/static/sections/audit.js'), 'utf8');
    for (const action of recorded) expect(listed, action).toContain(`['${action}', `);
    for (const action of recorded) expect(actionWords(action), action).not.toMatch(/[._]/);
    expect(actionWords('service_token.created')).toBe('Service token created');
    expect(actionWords('integration.deleted')).toBe('Integration deleted');
    // One Tessera adds later reads as words too, never as its raw name.
    expect(actionWords('webhook_endpoint.secret_rotated')).toBe('Webhook endpoint: secret rotated');
  });
});
