import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { proxyPath } from './proxy.ts';

describe('proxyPath', () => {
  it('keeps plain segments, re-encoded', () => {
    expect(proxyPath('repos/octo/hello%20world/issues')).toBe('repos/octo/hello%20world/issues');
    expect(proxyPath('chat.postMessage')).toBe('chat.postMessage');
    expect(proxyPath('')).toBe('');
  });

  it('refuses dot segments, empty segments, slashes and backslashes, encoded or not', () => {
    for (const raw of ['..', 'a/..', '../x', '%2e%2e', '.%2E', 'a//b', '/abs', 'a/%2F/b', '%2fetc', '%5C', 'a\\b', '%00', 'a/.', '%E0%A4%A']) {
      expect(() => proxyPath(raw), raw).toThrow();
    }
  });

  it('never produces a path that escapes the base, whatever the input', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), (raw) => {
        let path: string;
        try {
          path = proxyPath(raw);
        } catch {
          return true;
        }
        const base = new URL('https://api.example.com/base');
        const url = new URL(`${base.href}/${path}`);
        return url.origin === base.origin && url.pathname.startsWith('/base/') && !url.pathname.split('/').includes('..');
      }),
      { numRuns: 2000 },
    );
  });
});
