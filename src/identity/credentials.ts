import { createHmac, createSecretKey, hash, type KeyObject, timingSafeEqual } from 'node:crypto';
import { newSecret } from '../lib/ids.ts';
import { createSigner, createVerifier } from 'fast-jwt';
import type { JwtKey } from '../config/checks.ts';
import { remember } from '../lib/bounded.ts';

export const PAT_PREFIX = 'tsp_';
export const API_TOKEN_PREFIX = 'tsa_';
export const SERVICE_TOKEN_PREFIX = 'tss_';
export const CAPABILITY_PREFIX = 'tsc_';
const ISSUER = 'tessera';
const AUDIENCE = 'tessera';

/** A new opaque token: prefix + 32 random bytes, base64url. */
export function newOpaqueToken(prefix: string): string {
  return prefix + newSecret();
}

/** Opaque tokens are stored only as this hash. */
export function hashToken(token: string): string {
  return hash('sha256', token, 'hex');
}

export interface SessionClaims {
  /** User id. */
  sub: string;
  /** Organization the token is bound to. */
  org: string;
  /** Session id, checked against the sessions table on every request. */
  sid: string;
  exp: number;
}

type Verify = (token: string) => SessionClaims;

/** Leeway for `exp`, as fast-jwt's `clockTolerance`. */
const CLOCK_TOLERANCE_MS = 60_000;
const VERIFIED_CACHE = 10_000;

/**
 * Session JWTs (HS256). The first key signs; every key verifies, picked by `kid`,
 * so secrets rotate without logging everyone out. Verified tokens are remembered until
 * they expire (decision 68): a hit is one map lookup, where fast-jwt's own cache hashes
 * every token with SHA-256 first (~9 µs a call on Node 24, most of a cached verification).
 */
export class SessionTokens {
  private readonly sign: (payload: Record<string, unknown>) => string;
  private readonly verifiers: Map<string, Verify>;
  /** Token → its claims and when to stop accepting it; oldest first, at most VERIFIED_CACHE. */
  private readonly verified = new Map<string, { claims: SessionClaims; untilMs: number }>();
  private readonly csrfKeys: KeyObject[];

  constructor(keys: JwtKey[]) {
    const [first] = keys;
    if (!first) throw new Error('at least one JWT key is required');
    this.sign = createSigner({ algorithm: 'HS256', key: first.secret, kid: first.kid, iss: ISSUER, aud: AUDIENCE });
    this.verifiers = new Map(
      keys.map((key) => [
        key.kid,
        createVerifier({
          algorithms: ['HS256'],
          key: key.secret,
          allowedIss: ISSUER,
          allowedAud: AUDIENCE,
          requiredClaims: ['sub', 'org', 'sid', 'exp'],
          clockTolerance: CLOCK_TOLERANCE_MS,
        }) as Verify,
      ]),
    );
    this.csrfKeys = keys.map((key) => createSecretKey(createHmac('sha256', key.secret).update('tessera csrf v1').digest()));
  }

  /** Signs a token for `claims`; `exp` is the session's expiry (seconds). */
  issue(claims: SessionClaims): string {
    return this.sign({ ...claims });
  }

  /** The claims of a valid token, or null (bad signature, expired, wrong issuer, unknown kid…). */
  verify(token: string): SessionClaims | null {
    const known = this.verified.get(token);
    if (known) {
      if (Date.now() < known.untilMs) return known.claims;
      this.verified.delete(token);
      return null;
    }
    const claims = this.verifyAnew(token);
    if (claims) {
      // Shared by every later caller of the same token: frozen, so none can change it for the others.
      remember(this.verified, token, { claims: Object.freeze(claims), untilMs: claims.exp * 1000 + CLOCK_TOLERANCE_MS }, VERIFIED_CACHE);
    }
    return claims;
  }

  private verifyAnew(token: string): SessionClaims | null {
    const dot = token.indexOf('.');
    if (dot <= 0 || token.length > 4096) return null;
    let kid: unknown;
    try {
      kid = (JSON.parse(Buffer.from(token.slice(0, dot), 'base64url').toString('utf8')) as { kid?: unknown }).kid;
    } catch {
      return null;
    }
    const verify = typeof kid === 'string' ? this.verifiers.get(kid) : undefined;
    if (!verify) return null;
    try {
      const claims = verify(token);
      return typeof claims.sub === 'string' && typeof claims.org === 'string' && typeof claims.sid === 'string' ? claims : null;
    } catch {
      return null;
    }
  }

  /** The CSRF token bound to a session (or to an anonymous nonce). */
  csrfFor(binding: string): string {
    return createHmac('sha256', this.csrfKeys[0] as KeyObject).update(binding).digest('base64url');
  }

  /** Whether `token` is the CSRF token of `binding` under any configured key. */
  csrfMatches(binding: string, token: string): boolean {
    const given = Buffer.from(token);
    return this.csrfKeys.some((key) => {
      const expected = Buffer.from(createHmac('sha256', key).update(binding).digest('base64url'));
      return expected.length === given.length && timingSafeEqual(expected, given);
    });
  }
}
