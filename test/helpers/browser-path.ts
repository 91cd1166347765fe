import { existsSync } from 'node:fs';

/** Where a system Chromium is looked for, in order (Debian's package first). */
export const SYSTEM_CHROMIUM_PATHS = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

export interface ChromiumChoice {
  path: string;
  source: 'CHROMIUM_PATH' | 'system' | 'npm';
}

/**
 * The browser the page tests drive: `CHROMIUM_PATH` when set, else a system Chromium, else
 * the one `npm ci` brought in (`@sparticuz/chromium`: a compressed Chromium inside a registry
 * package, unpacked under the temporary directory on first use). Nothing is downloaded.
 */
export async function chooseChromium(
  env: Record<string, string | undefined> = process.env,
  systemPaths: readonly string[] = SYSTEM_CHROMIUM_PATHS,
): Promise<ChromiumChoice> {
  if (env.CHROMIUM_PATH) {
    if (!existsSync(env.CHROMIUM_PATH)) throw new Error(`CHROMIUM_PATH=${env.CHROMIUM_PATH}: no such file; unset it to use a system or the bundled Chromium`);
    return { path: env.CHROMIUM_PATH, source: 'CHROMIUM_PATH' };
  }
  const system = systemPaths.find((path) => existsSync(path));
  if (system) return { path: system, source: 'system' };
  const { default: bundled } = await import('@sparticuz/chromium');
  return { path: await bundled.executablePath(), source: 'npm' };
}
