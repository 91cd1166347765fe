import { describe, expect, it } from 'vitest';
import { chooseChromium } from './helpers/browser-path.ts';
import { launchChromium } from './helpers/browser.ts';

describe('the browser the page tests drive', () => {
  it('comes from npm when no CHROMIUM_PATH is set and no system browser is installed, and renders a page', async () => {
    const choice = await chooseChromium({}, []);
    expect(choice.source).toBe('npm');
    const browser = await launchChromium(choice.path);
    try {
      const page = await browser.newPage();
      await page.setContent('<main><h1>Tessera</h1><button>Connect</button></main>');
      expect(await page.getByRole('button', { name: 'Connect' }).isVisible()).toBe(true);
      expect(await page.textContent('h1')).toBe('Tessera');
    } finally {
      await browser.close();
    }
  });

  it('prefers CHROMIUM_PATH, then a system browser, and names a CHROMIUM_PATH that does not exist', async () => {
    const self = process.execPath; // any existing file stands in for a browser binary here
    expect(await chooseChromium({ CHROMIUM_PATH: self }, ['/nonexistent/chromium'])).toEqual({ path: self, source: 'CHROMIUM_PATH' });
    expect(await chooseChromium({}, ['/nonexistent/chromium', self])).toEqual({ path: self, source: 'system' });
    await expect(chooseChromium({ CHROMIUM_PATH: '/nonexistent/chromium' })).rejects.toThrow(/CHROMIUM_PATH=\/nonexistent\/chromium: no such file/);
  });
});
