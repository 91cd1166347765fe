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

  it('shares hashing fairly between clients: a flood waits behind itself, another client goes next', async () => {
    const hasher = new PasswordHasher({ cost: 12, concurrency: 1, maxQueuePerClient: 4 });
    const finished: string[] = [];
    const flood = Array.from({ length: 10 }, (_, i) => hasher.hash(`flood ${i}`, 'flooder').then(() => finished.push('flooder'), () => finished.push('flooder refused')));
    await new Promise((resolve) => setImmediate(resolve));
    const victim = hasher.hash('a real password', 'victim').then(() => finished.push('victim'));
    await Promise.all([...flood, victim]);
    // One flood hash was running and four waited; the other five were refused at once. The
    // queues take turns: the victim waited for one more flood hash, not for the whole flood.
    expect(finished.filter((entry) => entry === 'flooder refused')).toHaveLength(5);
    expect(finished.filter((entry) => entry !== 'flooder refused')).toEqual(['flooder', 'flooder', 'victim', 'flooder', 'flooder', 'flooder']);
  });
});
