import { chooseChromium } from './helpers/browser-path.ts';

/**
 * Unpacks the bundled Chromium once, before the test files run in parallel: two workers
 * unpacking it at the same moment could each see the other's half-written binary.
 */
export default async function setup(): Promise<void> {
  await chooseChromium();
}
