// `npm pack`'s prepack: writes types/ — the declarations tsc derives from the JSDoc of src/*.js,
// beside the hand-written and generated ones (src/**/*.d.ts, copied). postpack (`--clean`)
// removes it again, so the repository holds only the sources. No JavaScript is built: the
// package ships src/ as written.
import { spawnSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const types = join(here, 'types');
rmSync(types, { recursive: true, force: true });
if (process.argv.includes('--clean')) process.exit(0);

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const run = spawnSync(process.execPath, [tsc, '-p', join(here, 'tsconfig.json')], { stdio: 'inherit' });
if (run.status !== 0) process.exit(run.status ?? 1);
for (const entry of readdirSync(join(here, 'src'), { recursive: true, withFileTypes: true })) {
  if (entry.isFile() && entry.name.endsWith('.d.ts')) {
    const from = join(entry.parentPath, entry.name);
    cpSync(from, join(types, from.slice(join(here, 'src').length)));
  }
}
