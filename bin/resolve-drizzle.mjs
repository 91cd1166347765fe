// Plain JavaScript, as bin/tessera.mjs, which registers it (decision 335).
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * drizzle-orm's package.json is 179 KB (an `exports` entry per file), and Node parses it again for
 * each of the ~450 files the service imports from it to learn their format, and for each of our
 * files that imports it: ~1.6 s of CPU at every start. Its files are all ES modules under that one
 * package.json (test/start-cost.test.ts holds it), so this resolves imports of drizzle-orm's
 * subpaths from its `exports`, read once, and relative `.js` imports between its files — each as
 * a module, without asking. Anything else goes to Node's resolution.
 */
const require = createRequire(import.meta.url);
/** Where drizzle-orm is installed (a directory URL), or null when it cannot be found: then nothing is resolved here. */
const DRIZZLE = (() => {
  try {
    // Its main entry (index.cjs) sits beside its package.json.
    return new URL('./', pathToFileURL(require.resolve('drizzle-orm'))).href;
  } catch {
    return null;
  }
})();
/** @type {Record<string, { import?: { default?: string } }> | undefined} */
let exportsMap;

/**
 * A `module.registerHooks` resolve hook.
 * @param {string} specifier
 * @param {{ parentURL?: string, conditions?: readonly string[] }} context
 * @param {(specifier: string, context: object) => { url: string, format?: string | null }} nextResolve
 */
export function resolveDrizzle(specifier, context, nextResolve) {
  if (DRIZZLE === null) return nextResolve(specifier, context);
  if (specifier === 'drizzle-orm' || specifier.startsWith('drizzle-orm/')) {
    if (context.conditions?.includes('import')) {
      exportsMap ??= require(fileURLToPath(new URL('package.json', DRIZZLE))).exports;
      const target = exportsMap?.[`.${specifier.slice('drizzle-orm'.length)}`]?.import?.default;
      if (target) return { url: new URL(target, DRIZZLE).href, format: 'module', shortCircuit: true };
    }
  } else if (context.parentURL?.startsWith(DRIZZLE) && specifier.endsWith('.js') && (specifier.startsWith('./') || specifier.startsWith('../'))) {
    const url = new URL(specifier, context.parentURL).href;
    if (url.startsWith(DRIZZLE)) return { url, format: 'module', shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
