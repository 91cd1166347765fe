import { existsSync } from 'node:fs';
import { type Browser, type BrowserContext, chromium } from 'playwright-core';

/** Debian's chromium; Playwright's own browser downloads are not used. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Flags for a machine with no route to Google's hosts: without them Chromium keeps trying. */
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

/** Launches headless Chromium with a fresh profile; fails with the fix when it is not installed. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium not found at ${CHROMIUM_PATH}: the page tests drive Debian's chromium. ` +
        'Install it with `DEBIAN_FRONTEND=noninteractive apt-get install -y chromium` (bash .ci/run does), or set CHROMIUM_PATH.',
    );
  }
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS });
}

/** What a browser context received from one origin: request URLs and response bodies. */
export interface Traffic {
  requests: string[];
  bodies: string[];
  /** Waits until every response body seen so far has been read. */
  settle(): Promise<void>;
}

/** Records the requests a context makes to `origin` and the bodies it gets back. */
export function recordTraffic(context: BrowserContext, origin: string): Traffic {
  const requests: string[] = [];
  const bodies: string[] = [];
  const pending: Promise<void>[] = [];
  context.on('request', (request) => {
    if (request.url().startsWith(`${origin}/`)) requests.push(`${request.method()} ${new URL(request.url()).pathname}`);
  });
  context.on('response', (response) => {
    if (!response.url().startsWith(`${origin}/`)) return;
    pending.push(
      response.text().then(
        (text) => void bodies.push(text),
        () => {}, // redirects have no body
      ),
    );
  });
  return { requests, bodies, settle: async () => void (await Promise.all(pending)) };
}
