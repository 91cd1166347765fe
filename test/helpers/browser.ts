import { type Browser, type BrowserContext, chromium } from 'playwright-core';
import { chooseChromium } from './browser-path.ts';

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

/**
 * Launches headless Chromium with a fresh profile: `CHROMIUM_PATH`, a system one, or the
 * one `npm ci` installed (see chooseChromium). Playwright's own downloads are never used.
 */
export async function launchChromium(executablePath?: string): Promise<Browser> {
  const path = executablePath ?? (await chooseChromium()).path;
  return chromium.launch({ executablePath: path, headless: true, args: CHROMIUM_ARGS });
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
