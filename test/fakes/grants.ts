/** A parsed, validated authorize request, as the provider remembers it behind a code. */
export interface AuthorizeRequest {
  clientId: string;
  /** The redirect URI the browser is sent back to (the one given, else the registered default). */
  redirectUri: string;
  /** Whether redirect_uri was in the authorize URL; only then must the token request repeat it. */
  redirectUriGiven: boolean;
  /** Scopes of the token the user gets (Slack: user_scope). */
  scopes: string[];
  /** Slack bot scopes (`scope`); always empty for GitHub. */
  botScopes: string[];
  state: string | null;
  /** S256 PKCE challenge, or null when none was sent. */
  codeChallenge: string | null;
  /** Every parameter of the authorize URL (providers' extras: `access_type`, `audience`, `owner`…). */
  params?: Record<string, string>;
}

/** What an issued code stands for. */
export interface CodeGrant {
  login: string;
  request: AuthorizeRequest;
  scopes: string[];
  expiresAt: number;
}

/** How a provider mints one family of tokens. */
export interface TokenProfile {
  access: () => string;
  accessTtlSeconds: number | null;
  /** Null: no refresh token (classic tokens). */
  refresh: (() => string) | null;
  refreshTtlSeconds: number | null;
}

/** One line of tokens: an access token and its refresh token, replaced together on every rotation. */
export interface TokenFamily {
  readonly id: number;
  readonly login: string;
  readonly scopes: readonly string[];
  readonly kind: 'user' | 'bot';
  readonly profile: TokenProfile;
  /** The client registration (app) the grant was made to, where the provider tells them apart. */
  readonly clientId?: string;
  accessToken: string;
  accessExpiresAt: number | null;
  refreshToken: string | null;
  refreshExpiresAt: number | null;
  /** The whole grant is revoked: its access and refresh token. */
  revoked: boolean;
  /** Only the current access token is revoked (a provider that revokes just the token it is given): the refresh token still works. */
  accessRevoked: boolean;
}

/** A code's state at the token endpoint. */
export type CodeLookup = { status: 'valid'; grant: CodeGrant } | { status: 'unknown' | 'used' | 'expired' };
/** Whether an access token may call the API, and if not, why. */
export type AccessCheck =
  | { status: 'valid'; family: TokenFamily }
  | { status: 'unknown' | 'revoked' | 'rotated' | 'expired' };
/** The outcome of presenting a refresh token. */
export type RotateResult =
  | { status: 'rotated'; family: TokenFamily }
  | { status: 'unknown' | 'reused' | 'revoked' | 'expired' };

const CODE_LIFETIME_MS = 10 * 60 * 1000;

/** Codes and tokens of one fake provider, with the provider's expiry, rotation and revocation rules. */
export class Grants {
  readonly #now: () => number;
  readonly #codes = new Map<string, CodeGrant & { used: boolean }>();
  readonly #families: TokenFamily[] = [];
  readonly #byAccess = new Map<string, TokenFamily>();
  readonly #byRefresh = new Map<string, TokenFamily>();
  readonly #retiredAccess = new Map<string, TokenFamily>();
  readonly #retiredRefresh = new Map<string, TokenFamily>();
  readonly #issued: string[] = [];

  constructor(now: () => number) {
    this.#now = now;
  }

  /** Remembers a code for ten minutes. */
  issueCode(code: string, login: string, request: AuthorizeRequest, scopes: string[]): void {
    this.#codes.set(code, { login, request, scopes, expiresAt: this.#now() + CODE_LIFETIME_MS, used: false });
  }

  /** Looks a code up without using it (a failed exchange leaves it usable). */
  peekCode(code: string): CodeLookup {
    const entry = this.#codes.get(code);
    if (!entry) return { status: 'unknown' };
    if (entry.used) return { status: 'used' };
    if (this.#now() >= entry.expiresAt) return { status: 'expired' };
    return { status: 'valid', grant: entry };
  }

  /** Marks a code as exchanged: it never works again. */
  useCode(code: string): void {
    const entry = this.#codes.get(code);
    if (entry) entry.used = true;
  }

  /** Mints a new family of tokens for a user (made to `clientId`, when the provider tells its apps apart). */
  issue(login: string, scopes: readonly string[], kind: 'user' | 'bot', profile: TokenProfile, clientId?: string): TokenFamily {
    const family: TokenFamily = {
      id: this.#families.length + 1,
      login,
      scopes: [...scopes],
      kind,
      profile,
      ...(clientId === undefined ? {} : { clientId }),
      accessToken: '',
      accessExpiresAt: null,
      refreshToken: null,
      refreshExpiresAt: null,
      revoked: false,
      accessRevoked: false,
    };
    this.#families.push(family);
    this.#mint(family);
    return family;
  }

  /** Whether an access token may call the API now, and if not, why. */
  checkAccess(token: string): AccessCheck {
    const family = this.#byAccess.get(token);
    if (!family) return { status: this.#retiredAccess.has(token) ? 'rotated' : 'unknown' };
    if (family.revoked || family.accessRevoked) return { status: 'revoked' };
    if (family.accessExpiresAt !== null && this.#now() >= family.accessExpiresAt) return { status: 'expired' };
    return { status: 'valid', family };
  }

  /** The family whose current access token this is (expired or revoked included). */
  familyOfAccess(token: string): TokenFamily | undefined {
    return this.#byAccess.get(token);
  }

  /** Exchanges a refresh token: new access and refresh tokens; both old ones die at once. */
  rotate(refreshToken: string): RotateResult {
    const family = this.#byRefresh.get(refreshToken);
    if (!family) return { status: this.#retiredRefresh.has(refreshToken) ? 'reused' : 'unknown' };
    if (family.revoked) return { status: 'revoked' };
    if (family.refreshExpiresAt !== null && this.#now() >= family.refreshExpiresAt) return { status: 'expired' };
    this.#byAccess.delete(family.accessToken);
    this.#byRefresh.delete(refreshToken);
    this.#retiredAccess.set(family.accessToken, family);
    this.#retiredRefresh.set(refreshToken, family);
    this.#mint(family);
    return { status: 'rotated', family };
  }

  /**
   * Exchanges a refresh token for a new access token only: the refresh token stays the same
   * and keeps working (Google, Salesforce without rotation).
   */
  renew(refreshToken: string): RotateResult {
    const family = this.#byRefresh.get(refreshToken);
    if (!family) return { status: this.#retiredRefresh.has(refreshToken) ? 'reused' : 'unknown' };
    if (family.revoked) return { status: 'revoked' };
    if (family.refreshExpiresAt !== null && this.#now() >= family.refreshExpiresAt) return { status: 'expired' };
    this.#byAccess.delete(family.accessToken);
    this.#retiredAccess.set(family.accessToken, family);
    const now = this.#now();
    family.accessToken = family.profile.access();
    family.accessExpiresAt = family.profile.accessTtlSeconds === null ? null : now + family.profile.accessTtlSeconds * 1000;
    family.accessRevoked = false;
    this.#byAccess.set(family.accessToken, family);
    this.#issued.push(family.accessToken);
    return { status: 'rotated', family };
  }

  /** The family holding this token as its current access or refresh token. */
  familyOfToken(token: string): TokenFamily | undefined {
    return this.#byAccess.get(token) ?? this.#byRefresh.get(token);
  }

  /** Which current token of which family this is (expired or revoked included). */
  findToken(token: string): { family: TokenFamily; kind: 'access' | 'refresh' } | undefined {
    const byAccess = this.#byAccess.get(token);
    if (byAccess) return { family: byAccess, kind: 'access' };
    const byRefresh = this.#byRefresh.get(token);
    return byRefresh ? { family: byRefresh, kind: 'refresh' } : undefined;
  }

  /** Revokes one family: the grant (its current access and refresh token). */
  revoke(family: TokenFamily): void {
    family.revoked = true;
  }

  /** Revokes a family's current access token only: its refresh token still refreshes, and a refresh brings a working access token. */
  revokeAccess(family: TokenFamily): void {
    family.accessRevoked = true;
  }

  /** Revokes every token a user holds — of one app only when `clientId` is given (the user's grant to that app). */
  revokeUser(login: string, clientId?: string): void {
    for (const family of this.#families) {
      if (family.login === login && (clientId === undefined || family.clientId === clientId)) family.revoked = true;
    }
  }

  /** Every access and refresh token ever minted, in order (what a secrets scan looks for). */
  issued(): readonly string[] {
    return this.#issued;
  }

  /** Families of a user that still hold a usable access or refresh token. */
  live(login: string): TokenFamily[] {
    const now = this.#now();
    const alive = (expiresAt: number | null) => expiresAt === null || now < expiresAt;
    return this.#families.filter(
      (family) =>
        family.login === login &&
        !family.revoked &&
        ((!family.accessRevoked && alive(family.accessExpiresAt)) || (family.refreshToken !== null && alive(family.refreshExpiresAt))),
    );
  }

  #mint(family: TokenFamily): void {
    const now = this.#now();
    const { profile } = family;
    family.accessToken = profile.access();
    family.accessExpiresAt = profile.accessTtlSeconds === null ? null : now + profile.accessTtlSeconds * 1000;
    family.accessRevoked = false;
    this.#byAccess.set(family.accessToken, family);
    this.#issued.push(family.accessToken);
    if (profile.refresh) {
      family.refreshToken = profile.refresh();
      family.refreshExpiresAt = profile.refreshTtlSeconds === null ? null : now + profile.refreshTtlSeconds * 1000;
      this.#byRefresh.set(family.refreshToken, family);
      this.#issued.push(family.refreshToken);
    }
  }
}
