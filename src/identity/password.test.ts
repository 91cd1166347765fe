import { describe, expect, it } from 'vitest';
import { PasswordHasher } from './password.ts';

describe('PasswordHasher', () => {
  it('hashes with a per-user salt and verifies in constant time', async () => {
    const hasher = new PasswordHasher({ cost: 10 });
    const a = await hasher.hash('correct horse battery');
    const b = await hasher.hash('correct horse battery');
    expect(a).toMatch(/^scrypt\$10\$8\$1\$[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}$/);
    expect(a).not.toBe(b);
    expect(await hasher.verify('correct horse battery', a)).toBe(true);
    expect(await hasher.verify('correct horse batterY', a)).toBe(false);
    expect(await hasher.verify('x', 'not-a-hash')).toBe(false);
  });

  it('uses the contract parameters by default in production (N=2^17, r=8, p=1)', async () => {
    const hasher = new PasswordHasher({ cost: 17 });
    const hash = await hasher.hash('a password of some length');
    expect(hash.startsWith('scrypt$17$8$1$')).toBe(true);
  });

  it('spends a real derivation on unknown users', async () => {
    const hasher = new PasswordHasher({ cost: 10 });
    const before = hasher.derivations;
    expect(await hasher.verifyDummy('anything at all')).toBe(false);
    expect(hasher.derivations - before).toBeGreaterThanOrEqual(1);
    const settled = hasher.derivations;
    await hasher.verifyDummy('again');
    expect(hasher.derivations - settled).toBe(1);
  });

  it('bounds concurrent hashes and refuses a flood past the queue with 429', async () => {
    const hasher = new PasswordHasher({ cost: 12, concurrency: 1, maxQueue: 2 });
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => hasher.hash('flooding password')));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    const rejected = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
    expect(rejected).toHaveLength(2);
    expect(rejected[0]?.reason).toMatchObject({ code: 'RATE_LIMITED', headers: { 'retry-after': '1' } });
  });
});
