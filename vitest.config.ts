import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

/**
 * The slow group (decision 259): the page tests driving Chromium, and the files whose tests spawn
 * `tessera` processes that each create, initialize and migrate a database of their own. `npm test`
 * runs the rest (project `fast`); `npm run test:slow` runs these (project `slow`); `.ci/run` runs
 * both, on both databases. A file added here must be named in docs/testing.md too.
 */
export const SLOW = [
  // Chromium
  'test/browser.test.ts',
  'test/console.test.ts',
  'test/console-apps.test.ts',
  'test/connect-guard-browser.test.ts',
  'test/connect-js.test.ts',
  'test/docs-page.test.ts',
  'test/page.test.ts',
  // spawned `tessera` processes (servers, the CLI on a local store, npm pack/install)
  'test/cli-fakes.test.ts',
  'test/cli-help.test.ts',
  'test/cli-local.test.ts',
  'test/cli-service-tokens.test.ts',
  'test/database-outage.test.ts',
  'test/logs.test.ts',
  'test/demo.test.ts',
  'test/client-package.test.ts',
  'test/processes.test.ts',
  'test/production-install.test.ts',
  'test/startup-messages.test.ts',
  'test/startup.test.ts',
];

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
      { extends: true, test: { name: 'slow', include: SLOW } },
    ],
  },
});
