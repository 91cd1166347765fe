// @tessera/client's generated files are the served OpenAPI document's, never older (docs/contract.md §10):
// rendered again from the document a running Tessera serves, they must equal what is committed.
// After changing a route: `npm run client:generate`.
import { readFileSync } from 'node:fs';
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_PACKAGE, clientPackageFor, GENERATED_DIR, renderClientFiles } from '../scripts/client-generate.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { providerEnv } from './helpers/providers.ts';

let t: TestApp;
let gh: FakeProvider;

beforeAll(async () => {
  gh = await startFakeGitHub();
  // Settings of a real deployment (a provider, a public URL): the document, and so the types, depend on the routes only.
  t = await createTestApp({ env: { ...providerEnv(gh), PUBLIC_URL: 'https://tessera.example.com' }, background: false });
});
afterAll(async () => {
  await t?.close();
  await gh?.close();
});

const served = async (app: TestApp) => (await app.fastify.inject({ url: '/api-docs' })).json() as Record<string, unknown>;

describe('packages/client/src/generated', () => {
  it('is what openapi-typescript renders from the served /api-docs today (else: npm run client:generate)', async () => {
    const files = await renderClientFiles(await served(t));
    expect(Object.keys(files).sort()).toEqual(['multi-segment.js', 'openapi.d.ts']);
    for (const [name, text] of Object.entries(files)) {
      expect(readFileSync(new URL(name, GENERATED_DIR), 'utf8'), `${name} drifted from the routes: run npm run client:generate`).toBe(text);
    }
    expect(files['multi-segment.js']).toContain('"/v1/integrations/{provider}/proxy/{path}": [\n    "path"\n  ]');
  });

  it("carries the version of the API description it was generated from, which is Tessera's", async () => {
    const document = await served(t);
    const version = (document.info as { version: string }).version;
    expect(version).toBe((JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version);
    expect(version).toMatch(/^\d+\.\d+\.\d+$/);
    expect((JSON.parse(readFileSync(CLIENT_PACKAGE, 'utf8')) as { version: string }).version, 'run npm run client:generate').toBe(version);
    // The generator writes it: a document of another version gives the manifest that version, and changes nothing else.
    const other = JSON.parse(clientPackageFor({ ...document, info: { ...(document.info as object), version: '9.8.7' } })) as Record<string, unknown>;
    expect(other).toEqual({ ...JSON.parse(readFileSync(CLIENT_PACKAGE, 'utf8')), version: '9.8.7' });
    expect(clientPackageFor(document)).toBe(readFileSync(CLIENT_PACKAGE, 'utf8'));
  });

  it('changes when a route does: the comparison above would catch it', async () => {
    const widened = await createTestApp({
      background: false,
      routes: (app) => {
        const config = { auth: 'authenticated' as const, errors: [] };
        app.get('/v1/widgets/:id', { config, schema: { summary: 'A widget', params: Type.Object({ id: Type.String() }), response: { 200: Type.Object({ id: Type.String() }) } } }, async () => ({ id: 'w' }));
      },
    });
    try {
      const files = await renderClientFiles(await served(widened));
      expect(files['openapi.d.ts']).toContain('"/v1/widgets/{id}": {');
      expect(files['openapi.d.ts']).not.toBe(readFileSync(new URL('openapi.d.ts', GENERATED_DIR), 'utf8'));
    } finally {
      await widened.close();
    }
  });
});
