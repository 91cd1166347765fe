import { randomBytes, scrypt as scryptCallback, timingSafeEqual } from 'node:crypto';
import { AppError } from '../ground/errors.ts';

const R = 8;
const P = 1;
const KEY_LENGTH = 32;

export interface PasswordHasherOptions {
  /** log2 of scrypt's N: 17 in production (docs/contract.md §3); tests lower it. */
  cost: number;
  /** Hashes computed at once; each takes 128 MiB at cost 17, so this bounds memory. */
  concurrency?: number;
  /** Hashes one client may have waiting; past that its further attempts get 429 at once. */
  maxQueuePerClient?: number;
  /** Hashes allowed to wait in total, whoever asks (a bound on memory). */
  maxQueue?: number;
}

/** Who asked for a hash: the client IP for logins and registrations, `system` for start-up. */
export type HashClient = string;

/**
 * scrypt password hashing with a bound on concurrent work, shared fairly between clients
 * (decision 77): each client has its own queue and the queues take turns, so a flood from
 * one client waits behind itself, never in front of another client's login.
 */
export class PasswordHasher {
  private readonly cost: number;
  private readonly concurrency: number;
  private readonly maxQueuePerClient: number;
  private readonly maxQueue: number;
  private running = 0;
  private waitingTotal = 0;
  /** Client → its waiting hashes; Map order is the turn order (a served client goes to the back). */
  private readonly waiting = new Map<HashClient, (() => void)[]>();
  private dummyHash: Promise<string> | undefined;
  /** scrypt derivations started (metrics; tests check that unknown e-mails cost the same). */
  derivations = 0;

  constructor(options: PasswordHasherOptions) {
    this.cost = options.cost;
    this.concurrency = options.concurrency ?? 2;
    this.maxQueuePerClient = options.maxQueuePerClient ?? 8;
    this.maxQueue = options.maxQueue ?? 1024;
  }

  /** `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>` with a fresh 16-byte salt. */
  async hash(password: string, client: HashClient = 'system'): Promise<string> {
    const salt = randomBytes(16);
    const key = await this.derive(client, password, salt, this.cost, R, P);
    return ['scrypt', this.cost, R, P, salt.toString('base64'), key.toString('base64')].join('$');
  }

  /** Constant-time check of `password` against a stored hash. */
  async verify(password: string, stored: string, client: HashClient = 'system'): Promise<boolean> {
    const [scheme, cost, r, p, salt, expected] = stored.split('$');
    if (scheme !== 'scrypt' || !cost || !r || !p || !salt || !expected) return false;
    const expectedKey = Buffer.from(expected, 'base64');
    const key = await this.derive(client, password, Buffer.from(salt, 'base64'), Number(cost), Number(r), Number(p));
    return key.length === expectedKey.length && timingSafeEqual(key, expectedKey);
  }

  /** Spends the same work as a real verification, for e-mails that match no user. */
  async verifyDummy(password: string, client: HashClient = 'system'): Promise<false> {
    await this.verify(password, await this.prepare(), client);
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

  private async derive(client: HashClient, password: string, salt: Buffer, cost: number, r: number, p: number): Promise<Buffer> {
    await this.acquire(client);
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

  private acquire(client: HashClient): Promise<void> {
    if (this.running < this.concurrency && this.waitingTotal === 0) {
      this.running++;
      return Promise.resolve();
    }
    const queue = this.waiting.get(client) ?? [];
    if (queue.length >= this.maxQueuePerClient || this.waitingTotal >= this.maxQueue) {
      return Promise.reject(new AppError('RATE_LIMITED', { message: 'Too many sign-in attempts at once; retry shortly', headers: { 'retry-after': '1' } }));
    }
    if (queue.length === 0) this.waiting.set(client, queue);
    this.waitingTotal++;
    return new Promise((resolve) => queue.push(resolve));
  }

  private release(): void {
    // The client whose turn it is: the first in line; it goes to the back if more of its hashes wait.
    const [client, queue] = this.waiting.entries().next().value ?? [];
    const next = queue?.shift();
    if (client === undefined || !next) {
      this.running--;
      return;
    }
    this.waiting.delete(client);
    if (queue && queue.length > 0) this.waiting.set(client, queue);
    this.waitingTotal--;
    next();
  }
}
