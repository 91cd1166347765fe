import { describe, expect, it, vi } from 'vitest';
import { hashToken, newOpaqueToken, SessionTokens } from './credentials.ts';

const key = (kid: string, fill: number) => ({ kid, secret: Buffer.alloc(32, fill) });
const claims = () => ({ sub: 'user', org: 'org', sid: 'session', exp: Math.floor(Date.now() / 1000) + 600 });

describe('SessionTokens', () => {
  it('signs with the first key and verifies with any listed key (rotation)', () => {
    const old = new SessionTokens([key('old', 1)]);
    const rotated = new SessionTokens([key('new', 2), key('old', 1)]);
    const oldToken = old.issue(claims());
    const newToken = rotated.issue(claims());
    expect(JSON.parse(Buffer.from(newToken.split('.')[0] ?? '', 'base64url').toString())).toMatchObject({ alg: 'HS256', kid: 'new' });
    expect(rotated.verify(oldToken)).toMatchObject({ sub: 'user', org: 'org', sid: 'session' });
    expect(rotated.verify(newToken)).toMatchObject({ sub: 'user' });
    expect(old.verify(newToken)).toBeNull();
    expect(new SessionTokens([key('new', 2)]).verify(oldToken)).toBeNull();
  });

  it('accepts 60 s of clock skew and no more', () => {
    const tokens = new SessionTokens([key('k', 3)]);
    const now = Math.floor(Date.now() / 1000);
    expect(tokens.verify(tokens.issue({ ...claims(), exp: now - 30 }))).not.toBeNull();
    expect(tokens.verify(tokens.issue({ ...claims(), exp: now - 90 }))).toBeNull();
  });

  it('stops accepting a remembered token once it expires', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const tokens = new SessionTokens([key('k', 3)]);
      const token = tokens.issue({ ...claims(), exp: Math.floor(Date.now() / 1000) + 10 });
      expect(tokens.verify(token)).toMatchObject({ sid: 'session' });
      // Within the 60 s of skew allowed, then past it: the cached verification must not outlive the token.
      vi.setSystemTime(Date.now() + 60_000);
      expect(tokens.verify(token)).toMatchObject({ sid: 'session' });
      vi.setSystemTime(Date.now() + 15_000);
      expect(tokens.verify(token)).toBeNull();
      expect(tokens.verify(token)).toBeNull();
    } finally {
      vi.useRealTimers();
    }
  });

  it('remembers a token only once it verified: a forged one stays refused', () => {
    const tokens = new SessionTokens([key('k', 3)]);
    const token = tokens.issue(claims());
    const [header, payload, signature] = token.split('.');
    const forged = `${header}.${Buffer.from(JSON.stringify({ ...claims(), sub: 'other' })).toString('base64url')}.${signature}`;
    expect(tokens.verify(forged)).toBeNull();
    expect(tokens.verify(token)).toMatchObject({ sub: 'user' });
    expect(tokens.verify(forged)).toBeNull();
    expect(tokens.verify(`${header}.${payload}.${signature}x`)).toBeNull();
  });

  it('rejects garbage, alg=none and tokens without the session claims', () => {
    const tokens = new SessionTokens([key('k', 3)]);
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', kid: 'k' })).toString('base64url')}.${Buffer.from(JSON.stringify(claims())).toString('base64url')}.`;
    for (const bad of ['', 'a.b.c', 'x'.repeat(5000), none]) expect(tokens.verify(bad)).toBeNull();
  });

  it('binds CSRF tokens to their session and accepts them under any listed key', () => {
    const old = new SessionTokens([key('old', 1)]);
    const rotated = new SessionTokens([key('new', 2), key('old', 1)]);
    const token = old.csrfFor('session:abc');
    expect(rotated.csrfMatches('session:abc', token)).toBe(true);
    expect(rotated.csrfMatches('session:abd', token)).toBe(false);
    expect(rotated.csrfMatches('session:abc', `${token}x`)).toBe(false);
  });
});

describe('opaque tokens', () => {
  it('carry 32 random bytes after the prefix and are stored as SHA-256 only', () => {
    const token = newOpaqueToken('tsa_');
    expect(token).toMatch(/^tsa_[A-Za-z0-9_-]{43}$/);
    expect(newOpaqueToken('tsa_')).not.toBe(token);
    expect(hashToken(token)).toMatch(/^[0-9a-f]{64}$/);
  });
});
