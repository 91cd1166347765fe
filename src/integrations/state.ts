import { createHash, createHmac, createSecretKey, type KeyObject, randomBytes, timingSafeEqual } from 'node:crypto';
import { and, eq } from 'drizzle-orm';
import type { Keyring } from '../config/checks.ts';
import type { Db } from '../db/client.ts';
import { oauthStates } from '../db/schema.ts';
import { deriveKey } from '../secrets/crypto.ts';

const VERSION = 1;
const NONCE_BYTES = 16;
const MAC_BYTES = 32;

/** What an OAuth state carries (docs/seed.md: organization, provider, 16 random bytes; plus issue time). */
export interface StatePayload {
  organizationId: string;
  provider: string;
  nonce: Buffer;
  /** Seconds since the epoch. */
  issuedAt: number;
}

/**
 * Signs and checks states with HMAC-SHA256 under keys derived from the encryption
 * keyring (never the encryption key itself): the active one signs, all verify, so a
 * key rotation does not break flows in progress.
 */
export class StateCodec {
  private readonly keys: KeyObject[];

  constructor(keyring: Keyring) {
    const active = keyring.keys.get(keyring.activeId) as Buffer;
    const others = [...keyring.keys.entries()].filter(([id]) => id !== keyring.activeId).map(([, key]) => key);
    this.keys = [active, ...others].map((key) => createSecretKey(deriveKey(key, 'oauth state')));
  }

  /** A new state for the organization and provider. */
  create(organizationId: string, provider: string, now = Date.now()): { state: string; payload: StatePayload } {
    const payload = { organizationId, provider, nonce: randomBytes(NONCE_BYTES), issuedAt: Math.floor(now / 1000) };
    const body = encodeBody(payload);
    const mac = createHmac('sha256', this.keys[0] as KeyObject).update(body).digest();
    return { state: Buffer.concat([body, mac]).toString('base64url'), payload };
  }

  /** The payload of an authentic, well-formed state, or null. Expiry is the caller's check. */
  verify(state: string): StatePayload | null {
    if (typeof state !== 'string' || state.length < 32 || state.length > 512 || !/^[A-Za-z0-9_-]+$/.test(state)) return null;
    const raw = Buffer.from(state, 'base64url');
    if (raw.length <= MAC_BYTES) return null;
    const body = raw.subarray(0, raw.length - MAC_BYTES);
    const mac = raw.subarray(raw.length - MAC_BYTES);
    const authentic = this.keys.some((key) => timingSafeEqual(createHmac('sha256', key).update(body).digest(), mac));
    return authentic ? decodeBody(body) : null;
  }
}

function encodeBody(payload: StatePayload): Buffer {
  const organization = Buffer.from(payload.organizationId, 'utf8');
  const provider = Buffer.from(payload.provider, 'utf8');
  const time = Buffer.alloc(8);
  time.writeBigUInt64BE(BigInt(payload.issuedAt));
  return Buffer.concat([Buffer.from([VERSION]), payload.nonce, time, Buffer.from([organization.length]), organization, Buffer.from([provider.length]), provider]);
}

function decodeBody(body: Buffer): StatePayload | null {
  if (body[0] !== VERSION || body.length < 1 + NONCE_BYTES + 8 + 2) return null;
  let offset = 1;
  const nonce = body.subarray(offset, (offset += NONCE_BYTES));
  const issuedAt = Number(body.readBigUInt64BE(offset));
  offset += 8;
  const organizationLength = body[offset++] as number;
  const organizationId = body.subarray(offset, (offset += organizationLength)).toString('utf8');
  const providerLength = body[offset++];
  if (providerLength === undefined) return null;
  const provider = body.subarray(offset, (offset += providerLength)).toString('utf8');
  if (offset !== body.length || !organizationId || !provider) return null;
  return { organizationId, provider, nonce: Buffer.from(nonce), issuedAt };
}

/** Hex SHA-256, for the nonce and `oauth_tx` values kept server-side. */
export function sha256(value: Buffer | string): string {
  return createHash('sha256').update(value).digest('hex');
}

export type StateRow = typeof oauthStates.$inferSelect;

/** A pending state, without using it up. */
export async function findState(db: Db, organizationId: string, nonceHash: string): Promise<StateRow | null> {
  const [row] = await db
    .select()
    .from(oauthStates)
    .where(and(eq(oauthStates.organizationId, organizationId), eq(oauthStates.nonceHash, nonceHash)));
  return row ?? null;
}

/** Consumes a state atomically: of two racing callbacks, exactly one gets the row. */
export async function consumeState(db: Db, organizationId: string, nonceHash: string): Promise<StateRow | null> {
  const [row] = await db
    .delete(oauthStates)
    .where(and(eq(oauthStates.organizationId, organizationId), eq(oauthStates.nonceHash, nonceHash)))
    .returning();
  return row ?? null;
}
