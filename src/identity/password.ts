import { randomBytes, scrypt as scryptCallback, timingSafeEqual } from 'node:crypto';
import { AppError } from '../http/errors.ts';

const R = 8;
const P = 1;
const KEY_LENGTH = 32;

export interface PasswordHasherOptions {
  /** log2 of scrypt's N: 17 in production (CONTRACT.md §3); tests lower it. */
  cost: number;
  /** Hashes computed at once; each takes 128 MiB at cost 17, so this bounds memory. */
  concurrency?: number;
  /** Hashes allowed to wait; past that a flood is refused with 429 instead of queued. */
  maxQueue?: number;
}

/** scrypt password hashing with a bound on concurrent work. */
export class PasswordHasher {
  private readonly cost: number;
  private readonly concurrency: number;
  private readonly maxQueue: number;
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  private dummyHash: Promise<string> | undefined;
  /** scrypt derivations started (metrics; tests check that unknown e-mails cost the same). */
  derivations = 0;

  constructor(options: PasswordHasherOptions) {
    this.cost = options.cost;
    this.concurrency = options.concurrency ?? 2;
    this.maxQueue = options.maxQueue ?? 64;
  }

  /** `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>` with a fresh 16-byte salt. */
  async hash(password: string): Promise<string> {
    const salt = randomBytes(16);
    const key = await this.derive(password, salt, this.cost, R, P);
    return ['scrypt', this.cost, R, P, salt.toString('base64'), key.toString('base64')].join('$');
  }

  /** Constant-time check of `password` against a stored hash. */
  async verify(password: string, stored: string): Promise<boolean> {
    const [scheme, cost, r, p, salt, expected] = stored.split('$');
    if (scheme !== 'scrypt' || !cost || !r || !p || !salt || !expected) return false;
    const expectedKey = Buffer.from(expected, 'base64');
    const key = await this.derive(password, Buffer.from(salt, 'base64'), Number(cost), Number(r), Number(p));
    return key.length === expectedKey.length && timingSafeEqual(key, expectedKey);
  }

  /** Spends the same work as a real verification, for e-mails that match no user. */
  async verifyDummy(password: string): Promise<false> {
    await this.verify(password, await this.prepare());
    return false;
  }

  /** Computes the dummy hash ahead of time (at start), so the first unknown e-mail costs one derivation, not two. */
  prepare(): Promise<string> {
    this.dummyHash ??= this.hash('dummy-password-for-timing');
    return this.dummyHash;
  }

  /** Whether a stored hash uses other parameters than new hashes would (re-hash it after a good login). */
  needsRehash(stored: string): boolean {
    const [scheme, cost, r, p] = stored.split('$');
    return scheme !== 'scrypt' || Number(cost) !== this.cost || Number(r) !== R || Number(p) !== P;
  }

  private async derive(password: string, salt: Buffer, cost: number, r: number, p: number): Promise<Buffer> {
    await this.acquire();
    this.derivations++;
    try {
      const N = 2 ** cost;
      return await new Promise<Buffer>((resolve, reject) => {
        scryptCallback(password.normalize('NFC'), salt, KEY_LENGTH, { N, r, p, maxmem: 256 * N * r + 1024 * 1024 }, (error, key) =>
          error ? reject(error) : resolve(key),
        );
      });
    } finally {
      this.release();
    }
  }

  private acquire(): Promise<void> {
    if (this.running < this.concurrency) {
      this.running++;
      return Promise.resolve();
    }
    if (this.waiting.length >= this.maxQueue) {
      return Promise.reject(new AppError('RATE_LIMITED', { message: 'Too many sign-in attempts at once; retry shortly', headers: { 'retry-after': '1' } }));
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }
}
