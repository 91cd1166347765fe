/**
 * A small toolkit for a provider's fake: the RFC 6749 mechanics every provider shares (the
 * authorize page and its checks, codes, PKCE, client authentication, token families with
 * rotation, revocation) come from here; a provider's fake is a screen of what is its own —
 * endpoints, field names, error styles, and its answers for a dead token, a missing scope
 * and a rate limit, written from the provider's documentation (never from our definitions).
 */
import type { URLSearchParams } from 'node:url';
import {
  basicCredentials,
  type FakeContext,
  FakeAuthorizeError,
  type FakeCore,
  type FakeProvider,
  type FakeProviderOptions,
  type FakeReply,
  type FakeUser,
  type FakeUserInput,
  json,
  randomString,
  readParams,
  s256,
  startFakeProvider,
} from './common.ts';
import type { AuthorizeRequest, TokenFamily, TokenProfile } from './grants.ts';

export { json } from './common.ts';
export type { FakeContext, FakeReply } from './common.ts';

/** A user of a screened fake: `id` is the provider's own account id. */
export interface ScreenUser extends FakeUser {
  readonly id: string;
}

/** What an API handler gets: the caller's user and token family, and the request. */
export interface ApiCall {
  user: ScreenUser;
  family: TokenFamily;
  ctx: FakeContext;
  /** Request parameters: the query, then a form or JSON body. */
  params: Record<string, string>;
  /** The JSON body, parsed (or undefined). */
  body: unknown;
  core: FakeCore<ScreenUser>;
}

/** Which failure the token endpoint reports, and at which step. */
export type TokenFailure = 'invalid_client' | 'invalid_grant' | 'invalid_request' | 'unsupported_grant_type';

/** One provider's fake, as data and a few functions. */
export interface Screen {
  id: string;
  displayName: string;
  clientId: string;
  clientSecret: string;
  paths: { authorize: string; token: string; api: string };
  /** How the token endpoint takes client credentials (Zoom and Bitbucket: HTTP Basic; GitLab: either). */
  clientAuth: 'basic' | 'body' | 'either';
  /** How the token endpoint reads its body (Notion: JSON). Default `form`. */
  tokenBody?: 'form' | 'json' | 'either';
  /** How scopes are joined in the authorize URL. Default ' '. */
  scopeSeparator?: ' ' | ',';
  /** Access tokens: a prefix and a lifetime (null: no expiry). */
  access: { prefix?: string; ttl: number | null };
  /**
   * Refresh tokens: `rotate` (each refresh returns a new one; the old one dies), `keep` (the
   * refresh answer has none; the old one keeps working), `none` (never issued).
   */
  refresh: 'rotate' | 'keep' | 'none';
  /** Whether this authorization gets a refresh token at all (Google: `access_type=offline`; Atlassian: `offline_access`). Default yes. */
  refreshGranted?(request: AuthorizeRequest): boolean;
  /** Extra authorize checks where the provider shows an error page (throw FakeAuthorizeError). */
  checkAuthorize?(request: AuthorizeRequest): void;
  /** The token answer, in the provider's field names. */
  tokenAnswer(family: TokenFamily, user: ScreenUser, kind: 'exchange' | 'refresh', core: FakeCore<ScreenUser>): Record<string, unknown>;
  /** A refusal at the token endpoint, in the provider's style (status included). */
  tokenError(failure: TokenFailure, kind: 'exchange' | 'refresh'): FakeReply;
  /**
   * Sees each client-authenticated token request before its grant is read, and may answer it
   * itself (Entra refusing a refresh after a continuous-access-evaluation event). Undefined: the
   * grant is handled as usual.
   */
  tokenGate?(params: Record<string, string>, kind: 'exchange' | 'refresh', core: FakeCore<ScreenUser>): FakeReply | undefined;
  /** API routes behind the token check, `METHOD /path` under `paths.api` (a segment `:x` matches anything). */
  api: Record<string, (call: ApiCall) => FakeReply>;
  /** Routes outside the API prefix (revocation, a user-info host), `METHOD /path`. */
  other?: Record<string, (ctx: FakeContext, core: FakeCore<ScreenUser>, params: Record<string, string>) => FakeReply>;
  /** The provider's answer to a revoked or unknown token. */
  deadToken(ctx: FakeContext): FakeReply;
  /** The provider's answer to a call the token lacks the scope for. */
  missingScope(): FakeReply;
  /** The provider's rate-limit answer. */
  rateLimited(): FakeReply;
  /** The account id of a new user (default `<prefix><sequence>`). */
  userId?(sequence: number): string;
}

/** Revokes whichever family holds `token` (access or refresh); whether one did. */
export function revokeToken(core: FakeCore<ScreenUser>, token: string | undefined): boolean {
  const family = token ? core.grants.familyOfToken(token) : undefined;
  if (!family) return false;
  core.grants.revoke(family);
  core.stats.revocations++;
  return true;
}

/**
 * Revokes only what `token` is, as RFC 7009 §2.1 allows a server to (Salesforce does): a
 * refresh token ends the grant with every access token of it; an access token dies alone, its
 * refresh token still refreshing. Whether one was known.
 */
export function revokeAsGiven(core: FakeCore<ScreenUser>, token: string | undefined): boolean {
  const found = token ? core.grants.findToken(token) : undefined;
  if (!found) return false;
  if (found.kind === 'refresh') core.grants.revoke(found.family);
  else core.grants.revokeAccess(found.family);
  core.stats.revocations++;
  return true;
}

/** RFC 7009: revokes the token if it is known, and answers 200 either way. */
export function revokeAnyway(core: FakeCore<ScreenUser>, token: string | undefined): FakeReply {
  revokeToken(core, token);
  return json(200, {});
}

/** The bearer token of a request, if any. */
export function bearerOf(ctx: FakeContext): string | undefined {
  return /^Bearer\s+(\S+)\s*$/i.exec(ctx.req.headers.authorization ?? '')?.[1];
}

/** The user whose live access token the request carries as a bearer token, if any. */
export function bearerUser(ctx: FakeContext, core: FakeCore<ScreenUser>): ScreenUser | undefined {
  const check = core.grants.checkAccess(bearerOf(ctx) ?? '');
  return check.status === 'valid' ? core.user(check.family.login) : undefined;
}

/**
 * Whether the request authenticates a client registered here as `mode` says (RFC 6749 §2.3.1):
 * HTTP Basic, or id and secret in the body. A provider knows every app registered with it
 * (`registerClient`); without extra registrations that is the fake's one client.
 */
export function clientAuthenticated(ctx: FakeContext, core: FakeCore<ScreenUser>, params: Record<string, string>, mode: 'basic' | 'body'): boolean {
  const client = presentedClient(ctx, params, mode);
  return client?.id !== undefined && client.secret !== undefined && core.clientSecretOf(client.id) === client.secret;
}

function presentedClient(ctx: FakeContext, params: Record<string, string>, mode: 'basic' | 'body'): { id: string | undefined; secret: string | undefined } | null {
  return mode === 'basic' ? basicCredentials(ctx.req) : { id: params.client_id, secret: params.client_secret };
}

/** Starts a screened fake on loopback. */
export function startScreenFake(screen: Screen, options: FakeProviderOptions = {}): Promise<FakeProvider<ScreenUser>> {
  const separator = screen.scopeSeparator ?? ' ';
  const profileFor = (request: AuthorizeRequest): TokenProfile => ({
    access: () => `${screen.access.prefix ?? ''}${randomString(40)}`,
    accessTtlSeconds: screen.access.ttl,
    refresh: screen.refresh !== 'none' && (screen.refreshGranted?.(request) ?? true) ? () => `${screen.id}-refresh-${randomString(48)}` : null,
    refreshTtlSeconds: null,
  });
  return startFakeProvider<ScreenUser>(options, { clientId: screen.clientId, clientSecret: screen.clientSecret }, (core) => {
    function token(ctx: FakeContext, params: Record<string, string>): FakeReply {
      const mode = screen.clientAuth === 'either' ? (basicCredentials(ctx.req) ? 'basic' : 'body') : screen.clientAuth;
      const grantType = params.grant_type;
      const kind = grantType === 'refresh_token' ? 'refresh' : 'exchange';
      if (!clientAuthenticated(ctx, core, params, mode)) return screen.tokenError('invalid_client', kind);
      const gated = screen.tokenGate?.(params, kind, core);
      if (gated) return gated;
      if (grantType === 'authorization_code') {
        const found = core.grants.peekCode(params.code ?? '');
        if (found.status !== 'valid') return screen.tokenError('invalid_grant', kind);
        const { request, login, scopes } = found.grant;
        // RFC 6749 §4.1.3: a code is redeemed only by the client it was issued to.
        if (presentedClient(ctx, params, mode)?.id !== request.clientId) return screen.tokenError('invalid_grant', kind);
        if (params.redirect_uri !== request.redirectUri) return screen.tokenError('invalid_grant', kind);
        if (request.codeChallenge !== null && s256(params.code_verifier ?? '') !== request.codeChallenge) return screen.tokenError('invalid_grant', kind);
        core.grants.useCode(params.code ?? '');
        const family = core.grants.issue(login, scopes, 'user', profileFor(request));
        return json(200, screen.tokenAnswer(family, core.user(login) as ScreenUser, 'exchange', core), { 'cache-control': 'no-store' });
      }
      if (grantType === 'refresh_token') {
        const result = screen.refresh === 'keep' ? core.grants.renew(params.refresh_token ?? '') : core.grants.rotate(params.refresh_token ?? '');
        if (result.status === 'reused') core.stats.reusedRefreshTokens++;
        if (result.status !== 'rotated') return screen.tokenError('invalid_grant', kind);
        return json(200, screen.tokenAnswer(result.family, core.user(result.family.login) as ScreenUser, 'refresh', core), { 'cache-control': 'no-store' });
      }
      return screen.tokenError('unsupported_grant_type', kind);
    }

    function other(ctx: FakeContext): FakeReply | null {
      const handler = route(screen.other ?? {}, ctx.method, ctx.path);
      return handler ? handler(ctx, core, { ...Object.fromEntries(ctx.query), ...readParams(ctx, true) }) : null;
    }

    function api(ctx: FakeContext): FakeReply {
      // A route of its own under the API prefix (Notion's revoke endpoint) goes first: it authenticates otherwise.
      const own = other(ctx);
      if (own) return own;
      const check = core.grants.checkAccess(bearerOf(ctx) ?? '');
      if (check.status !== 'valid') return screen.deadToken(ctx);
      const sub = decodeURIComponent(ctx.path.slice(screen.paths.api.length)) || '/';
      const handler = route(screen.api, ctx.method, sub);
      const user = core.user(check.family.login) as ScreenUser;
      if (!handler) return json(404, { error: 'not_found', path: sub });
      const body = parseBody(ctx.body);
      const params = { ...Object.fromEntries(ctx.query), ...readParams(ctx, true) };
      return handler({ user, family: check.family, ctx, params, body, core });
    }

    return {
      id: screen.id,
      displayName: screen.displayName,
      authorizePath: screen.paths.authorize,
      tokenPath: screen.paths.token,
      apiPath: screen.paths.api,
      tokenAcceptsJson: screen.tokenBody === 'json' || screen.tokenBody === 'either',
      newCode: () => randomString(32),
      makeUser: (input: FakeUserInput, sequence: number) => ({
        login: input.login,
        email: input.email ?? null,
        name: input.name ?? input.login,
        id: screen.userId?.(sequence) ?? `${screen.id}-user-${sequence}`,
      }),
      parseAuthorize(query: URLSearchParams): AuthorizeRequest {
        const clientId = query.get('client_id') ?? undefined;
        // Every app registered with the provider (`registerClient`) may ask; without extra registrations, the fake's one client.
        if (clientId === undefined || core.clientSecretOf(clientId) === undefined) throw new FakeAuthorizeError('invalid_client');
        if (query.get('response_type') !== 'code') throw new FakeAuthorizeError('unsupported_response_type');
        const redirectUri = core.checkRedirectUri(query.get('redirect_uri'));
        if (redirectUri === null) throw new FakeAuthorizeError('invalid redirect_uri');
        const challenge = query.get('code_challenge');
        if (challenge !== null && query.get('code_challenge_method') !== 'S256') throw new FakeAuthorizeError('invalid code_challenge_method');
        const request: AuthorizeRequest = {
          clientId,
          redirectUri,
          redirectUriGiven: query.has('redirect_uri'),
          scopes: [...new Set((query.get('scope') ?? '').split(separator).filter(Boolean))],
          botScopes: [],
          state: query.get('state'),
          codeChallenge: challenge,
          params: Object.fromEntries(query),
        };
        screen.checkAuthorize?.(request);
        return request;
      },
      handleToken: (ctx, params) => (ctx.method === 'POST' ? token(ctx, params) : json(405, { error: 'method_not_allowed' })),
      handleApi: api,
      apiFailure: (mode) => (mode === 'missing-scope' ? screen.missingScope() : mode === 'forbidden' ? json(403, { error: 'forbidden' }) : screen.rateLimited()),
      handleOther: other,
    };
  });
}

/** The handler of `METHOD /path` in a route table; `:x` segments match any one segment. */
function route<H>(table: Record<string, H>, method: string, path: string): H | undefined {
  const segments = path.split('/');
  for (const [key, handler] of Object.entries(table)) {
    const [routeMethod, routePath = ''] = key.split(' ');
    if (routeMethod !== method && !(routeMethod === 'GET' && method === 'HEAD')) continue;
    const wanted = routePath.split('/');
    if (wanted.length === segments.length && wanted.every((part, i) => part.startsWith(':') || part === segments[i])) return handler;
  }
  return undefined;
}

function parseBody(body: string): unknown {
  try {
    return body ? JSON.parse(body) : undefined;
  } catch {
    return undefined;
  }
}
