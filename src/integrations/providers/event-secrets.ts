/**
 * What a provider's events secret must be, by its signature scheme (spec.ts `EventSignatureSpec`):
 * checked where the secret is set — the settings at start, an organization's app on create and
 * change — and read once as a key where the scheme needs one (events/delivery.ts). An HMAC
 * scheme's secret is any string; an Ed25519 scheme's is the application's public key.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import type { EventsSpec } from './spec.ts';

/** An Ed25519 public key is 32 bytes: its hex, as Discord shows it on the application's page. */
const ED25519_PUBLIC_KEY = /^[0-9a-fA-F]{64}$/;
/** The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410): the raw 32 bytes follow it. */
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const publicKeys = new Map<string, KeyObject | null>();

/** The Ed25519 public key a hex events secret is; null when it is none (every signature checked with it then fails). */
export function ed25519PublicKey(hex: string): KeyObject | null {
  let key = publicKeys.get(hex);
  if (key !== undefined) return key;
  try {
    key = ED25519_PUBLIC_KEY.test(hex) ? createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, Buffer.from(hex, 'hex')]), format: 'der', type: 'spki' }) : null;
  } catch {
    key = null;
  }
  // A handful of apps' keys: bounded all the same, so changed settings never grow it without end.
  if (publicKeys.size >= 256) publicKeys.clear();
  publicKeys.set(hex, key);
  return key;
}

/**
 * What is wrong with an events secret for this provider's scheme, in words naming the rule and
 * never the value; undefined when it fits. An Ed25519 scheme's secret is the application's
 * public key: 64 hex characters that are a key.
 */
export function eventsSecretProblem(spec: EventsSpec, secret: string): string | undefined {
  if (spec.signature.kind === 'security_event_token' || spec.signature.scheme !== 'ed25519') return undefined;
  if (!ED25519_PUBLIC_KEY.test(secret)) return "must be the application's public key: 64 hexadecimal characters";
  return ed25519PublicKey(secret) ? undefined : "is not an Ed25519 public key; copy the application's public key again";
}
