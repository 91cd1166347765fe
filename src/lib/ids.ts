import { randomBytes, randomFillSync } from 'node:crypto';
import { monotonicFactory, ulid } from 'ulidx';

const pool = new Uint8Array(4096);
let offset = pool.length;

/**
 * Crypto-random numbers in [0, 1) from a pooled buffer. ulidx's default asks the OS for
 * one byte per character (16 calls per id); on hot paths that showed up at ~5 % of CPU.
 */
export function pooledRandom(): number {
  if (offset >= pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  return (pool[offset++] as number) / 256;
}

/** A new ULID (26 characters, time-ordered). */
export function newId(): string {
  return ulid(undefined, pooledRandom);
}

/** ULIDs that keep increasing within one millisecond. */
export function monotonicIds(): () => string {
  const next = monotonicFactory(pooledRandom);
  return () => next();
}

/** Provider ids (docs/contract.md §1): lower-case, a letter first, 2–32 characters. */
export const PROVIDER_ID = /^[a-z][a-z0-9]{1,31}$/;

/** The shape of our ids (ULID, Crockford base32): anything else names nothing. */
export const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** A new random secret: 32 bytes, base64url (43 characters). */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** The shape of a `newSecret()`: anything else opens nothing. */
export const SECRET = /^[A-Za-z0-9_-]{43}$/;

/**
 * Ids a product gives us for its own things (docs/contract.md §5a: an organization's `externalId`,
 * an end user's `id`): 1–128 printable characters — none a control, format or unassigned
 * character (`\p{C}`), so they print as what they are. As a JSON-schema pattern (Ajv: `u` flag).
 */
export const PRODUCT_ID_PATTERN = '^\\P{C}{1,128}$';
export const PRODUCT_ID = new RegExp(PRODUCT_ID_PATTERN, 'u');
