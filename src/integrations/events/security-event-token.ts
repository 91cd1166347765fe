/**
 * Security event tokens (RFC 8417) as a provider pushes them per RFC 8935 — Google's
 * Cross-Account Protection (providers/spec.ts `SecurityEventTokenSpec`): a JWT signed RS256 by a
 * key of the JWKS that the provider's configuration document names. The document and the key set
 * are fetched through the provider transport (timeouts, size cap; the key set, a URL a document
 * chose, through the outbound guard) and kept per configuration URL; an unknown `kid` fetches
 * them again at most once per `refetchSeconds` since the last fetch, so a flood of forged `kid`s
 * costs Google one request a minute, not one per delivery. Verified with node:crypto: the header
 * is read (for `alg` and `kid`), the signature checked, and only then the claims.
 */
import { createPublicKey, type KeyObject, verify } from 'node:crypto';
import type { SecurityEventTokenSpec } from '../providers/spec.ts';

/** RFC 8935 §2.3's error codes Tessera answers with. */
export type SetError = 'invalid_request' | 'invalid_key' | 'invalid_issuer' | 'invalid_audience';

/** A delivery refused in RFC 8935's words (400 `{err, description}`); `outcome` is its metrics label. Nothing changes. */
export class SetRefused extends Error {
  readonly err: SetError;
  readonly outcome: 'rejected_signature' | 'stale';
  constructor(err: SetError, description: string, outcome: 'rejected_signature' | 'stale' = 'rejected_signature') {
    super(description);
    this.name = 'SetRefused';
    this.err = err;
    this.outcome = outcome;
  }
}

/** The configuration document or the key set could not be had (or may not be fetched again yet): 503 with `Retry-After`, the transmitter retries. */
export class KeysUnavailable extends Error {
  readonly retryAfterSeconds: number;
  constructor(message: string, retryAfterSeconds: number) {
    super(message);
    this.name = 'KeysUnavailable';
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** GETs a JSON document through the provider transport: `key_set` for a URL the configuration document chose (the outbound guard). Throws when it cannot. */
export type FetchJson = (url: string, origin?: 'key_set') => Promise<unknown>;

interface KeySet {
  issuer: string;
  keys: Map<string, KeyObject>;
}

interface Entry {
  set?: KeySet;
  /** When the last fetch was tried (successful or not): the refetch rule counts from it. */
  triedAt: number;
  loading?: Promise<void>;
}

const MAX_KEYS = 50;
const MAX_KID = 200;

/** The providers' key sets, by configuration URL: one per process, shared by every app of the provider. */
export class EventKeySets {
  private readonly entries = new Map<string, Entry>();
  private readonly clock: () => number;

  constructor(clock: () => number = Date.now) {
    this.clock = clock;
  }

  /**
   * The issuer and the key `kid` names. Fetched the first time; an unknown `kid` fetches again
   * when `refetchSeconds` have passed since the last fetch — still unknown, `invalid_key`; too soon
   * (or a fetch that fails), KeysUnavailable.
   */
  async key(configurationUrl: string, kid: string, fetchJson: FetchJson, refetchSeconds: number): Promise<{ issuer: string; key: KeyObject }> {
    let entry = this.entries.get(configurationUrl);
    if (!entry) {
      entry = { triedAt: Number.NEGATIVE_INFINITY };
      this.entries.set(configurationUrl, entry);
    }
    const known = entry.set?.keys.get(kid);
    if (entry.set && known) return { issuer: entry.set.issuer, key: known };
    if (!entry.loading) {
      const wait = entry.triedAt + refetchSeconds * 1000 - this.clock();
      if (wait > 0) {
        throw new KeysUnavailable(entry.set ? 'unknown key id; the key set was fetched less than a minute ago' : 'the key set could not be fetched', Math.max(1, Math.ceil(wait / 1000)));
      }
      entry.triedAt = this.clock();
      const loading = load(configurationUrl, fetchJson).then((set) => {
        (entry as Entry).set = set;
      });
      entry.loading = loading.finally(() => {
        (entry as Entry).loading = undefined;
      });
    }
    try {
      await entry.loading;
    } catch (error) {
      throw new KeysUnavailable(error instanceof Error ? error.message : 'the key set could not be fetched', refetchSeconds);
    }
    const set = entry.set as KeySet;
    const found = set.keys.get(kid);
    if (!found) throw new SetRefused('invalid_key', 'The key id is not in the key set');
    return { issuer: set.issuer, key: found };
  }
}

async function load(configurationUrl: string, fetchJson: FetchJson): Promise<KeySet> {
  const document = await fetchJson(configurationUrl);
  const issuer = field(document, 'issuer');
  const jwksUri = field(document, 'jwks_uri');
  if (!issuer || !jwksUri) throw new Error('the configuration document has no issuer or jwks_uri');
  const jwks = await fetchJson(jwksUri, 'key_set');
  const listed = jwks !== null && typeof jwks === 'object' ? (jwks as { keys?: unknown }).keys : undefined;
  if (!Array.isArray(listed)) throw new Error('the key set has no keys');
  const keys = new Map<string, KeyObject>();
  for (const jwk of listed.slice(0, MAX_KEYS)) {
    if (jwk === null || typeof jwk !== 'object') continue;
    const { kid, kty, use, alg } = jwk as Record<string, unknown>;
    // Only signing RSA keys can verify RS256; anything else in the set is not ours to use.
    if (typeof kid !== 'string' || kid === '' || kid.length > MAX_KID || kty !== 'RSA' || (use !== undefined && use !== 'sig') || (alg !== undefined && alg !== 'RS256')) continue;
    try {
      keys.set(kid, createPublicKey({ key: jwk as Record<string, string>, format: 'jwk' }));
    } catch {
      // A key that does not import is skipped: a token it signed is refused as an unknown key.
    }
  }
  return { issuer, keys };
}

function field(document: unknown, name: string): string | undefined {
  const value = document !== null && typeof document === 'object' ? (document as Record<string, unknown>)[name] : undefined;
  return typeof value === 'string' && value !== '' && value.length <= 2048 ? value : undefined;
}

/** Where a token's keys come from. */
export interface TokenKeys {
  sets: EventKeySets;
  configurationUrl: string;
  fetchJson: FetchJson;
}

/** A verified token: the audience it named (a client id) and the body the rules read — its claims, with its one event as `event_type` and `event`. */
export interface VerifiedToken {
  audience: string;
  body: Record<string, unknown>;
}

/** Three base64url parts; the signature may be empty (`alg: none`), which the `alg` rule then refuses as a key error. */
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
/** A transmitter's clock may run a little ahead of ours. */
const FUTURE_SKEW_SECONDS = 300;

function jsonPart(part: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Verifies a security event token over the raw body: its form, `alg`, the signature with the key
 * its `kid` names, then `iss`, `aud` (one of `audiences`), `iat` and its one event. Throws
 * SetRefused (400) or KeysUnavailable (503); nothing of the claims is read before the signature holds.
 */
export async function verifySecurityEventToken(scheme: SecurityEventTokenSpec, raw: Buffer, keys: TokenKeys, audiences: readonly string[], nowMs: number): Promise<VerifiedToken> {
  const text = raw.toString('utf8').trim();
  if (!JWT.test(text)) throw new SetRefused('invalid_request', 'The body is not a JWT');
  const [encodedHeader = '', encodedClaims = '', encodedSignature = ''] = text.split('.');
  const header = jsonPart(encodedHeader);
  if (!header) throw new SetRefused('invalid_request', 'The JWT header is malformed');
  if (header.alg !== scheme.alg) throw new SetRefused('invalid_key', `The JWT must be signed ${scheme.alg}`);
  if (typeof header.kid !== 'string' || header.kid === '' || header.kid.length > MAX_KID) throw new SetRefused('invalid_key', 'The JWT names no key id');
  const { issuer, key } = await keys.sets.key(keys.configurationUrl, header.kid, keys.fetchJson, scheme.refetchSeconds);
  const signed = verify('RSA-SHA256', Buffer.from(`${encodedHeader}.${encodedClaims}`), key, Buffer.from(encodedSignature, 'base64url'));
  if (!signed) throw new SetRefused('invalid_key', 'The signature does not verify');
  const claims = jsonPart(encodedClaims);
  if (!claims) throw new SetRefused('invalid_request', 'The JWT claims are malformed');
  if (claims.iss !== issuer) throw new SetRefused('invalid_issuer', 'The issuer is not the transmitter');
  const named = typeof claims.aud === 'string' ? [claims.aud] : Array.isArray(claims.aud) ? claims.aud.filter((item): item is string => typeof item === 'string') : [];
  const audience = named.find((item) => audiences.includes(item));
  if (audience === undefined) throw new SetRefused('invalid_audience', 'The audience is not this receiver');
  const iat = claims.iat;
  if (typeof iat !== 'number' || !Number.isFinite(iat)) throw new SetRefused('invalid_request', 'The JWT has no iat');
  const age = nowMs / 1000 - iat;
  if (age > scheme.maxAgeSeconds || age < -FUTURE_SKEW_SECONDS) throw new SetRefused('invalid_request', 'The JWT was issued outside the accepted window', 'stale');
  const events = claims.events;
  const entries = events !== null && typeof events === 'object' && !Array.isArray(events) ? Object.entries(events) : [];
  // RFC 8417 §2.2: one state change per token; Google sends one event in each.
  const [only] = entries;
  if (entries.length !== 1 || !only || only[1] === null || typeof only[1] !== 'object' || Array.isArray(only[1])) throw new SetRefused('invalid_request', 'The token must carry one event');
  return { audience, body: { ...claims, event_type: only[0], event: only[1] } };
}
