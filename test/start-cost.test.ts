// What bin/tessera.mjs assumes to start faster (decision 335, bin/resolve-drizzle.mjs): drizzle-orm's
// files are all ES modules under its one package.json, so the hook may resolve imports of and
// between them without asking Node — to exactly the files Node itself resolves. If an upgrade of
// drizzle-orm changes that, this fails before a start does.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { resolveDrizzle } from '../bin/resolve-drizzle.mjs';

const DRIZZLE = dirname(createRequire(import.meta.url).resolve('drizzle-orm'));
/** Every drizzle-orm specifier src/ imports, statically or by `import()`. */
const SPECIFIERS = ['drizzle-orm', 'drizzle-orm/pg-core', 'drizzle-orm/pglite', 'drizzle-orm/pglite/migrator', 'drizzle-orm/node-postgres', 'drizzle-orm/node-postgres/migrator'];
const ESM = { parentURL: pathToFileURL(join(DRIZZLE, '..', '..', 'src', 'db', 'client.ts')).href, conditions: ['node', 'import', 'module-sync', 'node-addons'] };
const asked: string[] = [];
const node = (specifier: string) => {
  asked.push(specifier);
  return { url: 'node:asked' };
};

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? files(join(dir, entry.name)) : [join(dir, entry.name)]));
}

describe('the start-up resolver for drizzle-orm (bin/resolve-drizzle.mjs)', () => {
  it('relies on one package.json, of type module, over every .js file', () => {
    const all = files(DRIZZLE);
    expect(all.filter((file) => file.endsWith('package.json')).map((file) => relative(DRIZZLE, file))).toEqual(['package.json']);
    expect(JSON.parse(readFileSync(join(DRIZZLE, 'package.json'), 'utf8')).type).toBe('module');
  });

  it('resolves each subpath the service imports to the file Node resolves, as a module', () => {
    for (const specifier of SPECIFIERS) {
      expect(resolveDrizzle(specifier, ESM, node), specifier).toEqual({ url: import.meta.resolve(specifier), format: 'module', shortCircuit: true });
    }
  });

  it('resolves every relative .js import between its files to a file that exists, and leaves the rest to Node', () => {
    let checked = 0;
    for (const file of files(DRIZZLE).filter((name) => name.endsWith('.js'))) {
      const parentURL = pathToFileURL(file).href;
      for (const [, specifier] of readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+\.js)"/g)) {
        const resolved = resolveDrizzle(specifier as string, { parentURL, conditions: ESM.conditions }, node) as { url: string; format: string };
        expect(resolved.url).toBe(new URL(specifier as string, parentURL).href);
        expect(existsSync(fileURLToPath(resolved.url)), resolved.url).toBe(true);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(500);
    asked.length = 0;
    // Another package, drizzle-orm required (CommonJS), a subpath it does not export: Node's own resolution.
    resolveDrizzle('fastify', ESM, node);
    resolveDrizzle('drizzle-orm', { ...ESM, conditions: ['node', 'require'] }, node);
    resolveDrizzle('drizzle-orm/no-such-path', ESM, node);
    resolveDrizzle('./index.cjs', { parentURL: pathToFileURL(join(DRIZZLE, 'index.cjs')).href, conditions: ['require'] }, node);
    expect(asked).toEqual(['fastify', 'drizzle-orm', 'drizzle-orm/no-such-path', './index.cjs']);
  });
});
