import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, type KeyObject, randomBytes } from 'node:crypto';
import type { Keyring } from '../config/checks.ts';
import { remember } from '../lib/bounded.ts';

const FORMAT = 'v1';
const INFO = Buffer.from('tessera secret v1');

/** What a ciphertext is bound to: copied to another row, it no longer decrypts. */
export interface SecretBinding {
  organizationId: string;
  /** The integration id (or, for OAuth state rows, the state's nonce hash). */
  recordId: string;
  name: string;
}

export interface Sealed {
  keyId: string;
  /** `v1.<salt>.<iv>.<ciphertext+tag>`, base64url parts. */
  envelope: string;
}

/** Thrown when a ciphertext does not decrypt: a 500, never a silent "invalid". */
export class SecretDecryptionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretDecryptionError';
  }
}

/**
 * Length-prefixed associated data: format version, key id, organization, record and
 * secret name, each as a 4-byte length and its UTF-8 bytes, so no two bindings can
 * produce the same bytes.
 */
function associatedData(keyId: string, binding: SecretBinding): Buffer {
  const parts = [FORMAT, keyId, binding.organizationId, binding.recordId, binding.name];
  let size = 0;
  for (const part of parts) size += 4 + Buffer.byteLength(part, 'utf8');
  const out = Buffer.allocUnsafe(size);
  let offset = 0;
  for (const part of parts) {
    const length = out.write(part, offset + 4, 'utf8');
    out.writeUInt32BE(length, offset);
    offset += 4 + length;
  }
  return out;
}

const masterObjects = new WeakMap<Buffer, KeyObject>();
/** Record keys of recently opened secrets, per master key, by salt (a salt is never reused). */
const recordKeys = new WeakMap<Buffer, Map<string, KeyObject>>();
const RECORD_KEY_CACHE = 10_000;

/**
 * A per-record key: HKDF-SHA256 of the master key with a random salt, so no key nears
 * GCM's limits. Both keys are handed to node:crypto as KeyObjects: given a Buffer, Node 24
 * first probes it as a KeyObject by throwing and catching an error, which cost ~30 µs
 * per call — most of a token read's decryption (measured in bench/http.ts).
 */
function recordKey(master: Buffer, salt: Buffer): KeyObject {
  let masterObject = masterObjects.get(master);
  if (!masterObject) {
    masterObject = createSecretKey(master);
    masterObjects.set(master, masterObject);
  }
  return createSecretKey(Buffer.from(hkdfSync('sha256', masterObject, salt, INFO, 32)));
}

/**
 * `recordKey` for opening, remembered for the most recently opened secrets: a token read
 * again and again derives its key once. The master keys are in memory anyway; a derived
 * key opens only its own record.
 */
function openingKey(master: Buffer, salt: string): KeyObject {
  let cache = recordKeys.get(master);
  if (!cache) {
    cache = new Map();
    recordKeys.set(master, cache);
  }
  const key = cache.get(salt) ?? recordKey(master, Buffer.from(salt, 'base64url'));
  remember(cache, salt, key, RECORD_KEY_CACHE);
  return key;
}

/** A record key derived ahead of time for one `seal` (its salt is used once). */
export interface SealKey {
  keyId: string;
  salt: Buffer;
  key: KeyObject;
}

/**
 * Derives a record key under the keyring's active key now, for one `seal` later: a caller that
 * must store a value the moment it arrives (a rotated refresh token) pays for HKDF before.
 */
export function prepareSeal(keyring: Keyring): SealKey {
  const keyId = keyring.activeId;
  const master = keyring.keys.get(keyId);
  if (!master) throw new Error(`active key ${keyId} missing from the keyring`);
  const salt = randomBytes(32);
  return { keyId, salt, key: recordKey(master, salt) };
}

/** Encrypts `plaintext` under the keyring's active key with AES-256-GCM (with `prepared`, under that record key: use each once). */
export function seal(keyring: Keyring, binding: SecretBinding, plaintext: string, prepared: SealKey = prepareSeal(keyring)): Sealed {
  const { keyId, salt, key } = prepared;
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(associatedData(keyId, binding));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return { keyId, envelope: [FORMAT, salt.toString('base64url'), iv.toString('base64url'), ciphertext.toString('base64url')].join('.') };
}

/** Decrypts a sealed value for `binding`; throws SecretDecryptionError on any mismatch. */
export function open(keyring: Keyring, binding: SecretBinding, sealed: Sealed): string {
  const master = keyring.keys.get(sealed.keyId);
  if (!master) throw new SecretDecryptionError(`secret encrypted under key id "${sealed.keyId}", which is not in ENCRYPTION_KEYS`);
  const [format, salt, iv, body] = sealed.envelope.split('.');
  if (format !== FORMAT || !salt || !iv || !body) throw new SecretDecryptionError('unrecognized secret envelope');
  const data = Buffer.from(body, 'base64url');
  if (data.length < 16) throw new SecretDecryptionError('truncated secret envelope');
  try {
    const decipher = createDecipheriv('aes-256-gcm', openingKey(master, salt), Buffer.from(iv, 'base64url'));
    decipher.setAAD(associatedData(sealed.keyId, binding));
    decipher.setAuthTag(data.subarray(data.length - 16));
    return decipher.update(data.subarray(0, data.length - 16), undefined, 'utf8') + decipher.final('utf8');
  } catch {
    throw new SecretDecryptionError('secret failed to decrypt (wrong key, or moved from another row)');
  }
}

/** A key for `purpose` derived from a master key: never the encryption key itself. */
export function deriveKey(master: Buffer, purpose: string): Buffer {
  return createHmac('sha256', master).update(`tessera derived key: ${purpose}`).digest();
}
