import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

/**
 * The slow group (decision 259): the page tests driving Chromium, and the files whose tests spawn
 * `tessera` processes that each create, initialize and migrate a database of their own. `npm test`
 * runs the rest (project `fast`); `npm run test:slow` runs these. A file added here must be named in
 * docs/testing.md too.
 *
 * Project `slow` is what the database changes: processes on a store, start-up and its migrations,
 * several instances, an outage. `.ci/run` runs it on both databases. Project `slow-once` is what it
 * does not — pages in a browser (the routes beneath them are the fast group's, on both databases),
 * help text, packing the client, the demo on its own embedded database — and runs once, on PGlite
 * (decision 340).
 */
export const SLOW_DATABASE = [
  'test/cli-local.test.ts',
  'test/cli-service-tokens.test.ts',
  'test/database-outage.test.ts',
  'test/logs.test.ts',
  'test/processes.test.ts',
  'test/production-install.test.ts',
  'test/startup-messages.test.ts',
  'test/startup.test.ts',
];
export const SLOW_ONCE = [
  // Chromium
  'test/browser.test.ts',
  'test/console.test.ts',
  'test/console-apps.test.ts',
  'test/connect-guard-browser.test.ts',
  'test/connect-js.test.ts',
  'test/docs-page.test.ts',
  'test/page.test.ts',
  // spawned processes whose subject is not the database: help, the fakes, npm pack/install, the demo
  'test/cli-fakes.test.ts',
  'test/cli-help.test.ts',
  'test/client-package.test.ts',
  'test/demo.test.ts',
];
export const SLOW = [...SLOW_DATABASE, ...SLOW_ONCE];

const ALL = ['src/**/*.test.ts', 'test/**/*.test.ts'];

/** Fast files that must not share a module graph with others. */
const ISOLATED = ['test/traces.test.ts'];

export default defineConfig({
  resolve: {
    // One graphql for everyone: Vite would pick its ESM build for our sources while mercurius
    // requires the CommonJS one, and graphql refuses types "from another module or realm".
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    // Builds the database templates each file's database starts from, and unpacks Chromium (decision 258).
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    projects: [
      // One module graph per worker, reused across files: a file no longer pays the app's imports again.
      { extends: true, test: { name: 'fast', include: ALL, exclude: [...SLOW, ...ISOLATED], isolate: false } },
      // Files that change process-wide state (OpenTelemetry's global tracer provider, instrumented modules) keep a graph of their own.
      { extends: true, test: { name: 'fast-isolated', include: ISOLATED } },
      { extends: true, test: { name: 'slow', include: SLOW_DATABASE } },
      { extends: true, test: { name: 'slow-once', include: SLOW_ONCE } },
    ],
  },
});
