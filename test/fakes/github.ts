import { URLSearchParams } from 'node:url';
import {
  basicCredentials,
  clientCredentials,
  type FakeContext,
  FakeAuthorizeError,
  type FakeProvider,
  type FakeProviderOptions,
  type FakeUser,
  type FakeReply,
  empty,
  json,
  randomString,
  s256,
  startFakeProvider,
  testEndpoint,
} from './common.ts';
import type { TokenFamily, TokenProfile } from './grants.ts';

/** A GitHub user: `id` is GitHub's numeric account id. */
export interface FakeGitHubUser extends FakeUser {
  readonly id: number;
  /** Whether `GET /user` shows the e-mail. */
  readonly publicEmail: boolean;
}

/** Options of the fake GitHub. */
export interface FakeGitHubOptions extends FakeProviderOptions {
  /** Seconds; null (default) = classic non-expiring gho_ tokens, no refresh token; a number = ghu_ tokens + rotating ghr_. */
  tokenExpiresIn?: number | null;
  /** Seconds a ghr_ refresh token lives (default 15897600, about six months). */
  refreshTokenExpiresIn?: number;
}

const DOCS = 'https://docs.github.com/rest';
const ERROR_DOCS =
  'https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors';
const TOKEN_ERRORS: Record<string, { description: string; anchor: string }> = {
  bad_verification_code: { description: 'The code passed is incorrect or expired.', anchor: 'bad-verification-code' },
  incorrect_client_credentials: {
    description: 'The client_id and/or client_secret passed are incorrect.',
    anchor: 'incorrect-client-credentials',
  },
  redirect_uri_mismatch: {
    description: 'The redirect_uri MUST match the registered callback URL for this application.',
    anchor: 'redirect-uri-mismatch2',
  },
  bad_refresh_token: { description: 'The refresh token passed is incorrect or expired.', anchor: 'bad-refresh-token' },
  unsupported_grant_type: { description: 'The grant type is not supported.', anchor: 'unsupported-grant-type' },
};

/** Starts a loopback fake of GitHub: OAuth app authorize + token endpoints and the REST API under `/api`. */
export function startFakeGitHub(options: FakeGitHubOptions = {}): Promise<FakeProvider<FakeGitHubUser>> {
  const expiresIn = options.tokenExpiresIn ?? null;
  const profile: TokenProfile =
    expiresIn === null
      ? { access: () => `gho_${randomString(36)}`, accessTtlSeconds: null, refresh: null, refreshTtlSeconds: null }
      : {
          access: () => `ghu_${randomString(36)}`,
          accessTtlSeconds: expiresIn,
          refresh: () => `ghr_${randomString(76)}`,
          refreshTtlSeconds: options.refreshTokenExpiresIn ?? 15_897_600,
        };
  const defaults = { clientId: 'Ov23liFakeGitHubApp01', clientSecret: 'fake0github0client0secret0000000000000001' };

  return startFakeProvider<FakeGitHubUser>(options, defaults, (core) => {
    const rateHeaders = (): Record<string, string> => ({
      'x-ratelimit-limit': '5000',
      'x-ratelimit-remaining': '4999',
      'x-ratelimit-reset': String(Math.floor(core.now() / 1000) + 3600),
      'x-ratelimit-used': '1',
      'x-ratelimit-resource': 'core',
    });

    function tokenReply(ctx: FakeContext, body: Record<string, string | number>): FakeReply {
      // GitHub answers form-encoded unless asked for JSON, errors included, always with HTTP 200.
      const accept = ctx.req.headers.accept ?? '';
      if (/application\/json/i.test(accept)) return json(200, body, { 'cache-control': 'no-store' });
      const form = new URLSearchParams();
      for (const [key, value] of Object.entries(body)) form.set(key, String(value));
      const headers = { 'cache-control': 'no-store', 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' };
      return { status: 200, headers, text: form.toString() };
    }

    function tokenError(ctx: FakeContext, error: keyof typeof TOKEN_ERRORS): FakeReply {
      const known = TOKEN_ERRORS[error];
      return tokenReply(ctx, {
        error,
        error_description: known?.description ?? error,
        error_uri: `${ERROR_DOCS}#${known?.anchor ?? ''}`,
      });
    }

    function tokenBody(family: TokenFamily): Record<string, string | number> {
      const scope = family.scopes.join(',');
      if (family.refreshToken === null) return { access_token: family.accessToken, token_type: 'bearer', scope };
      return {
        access_token: family.accessToken,
        expires_in: family.profile.accessTtlSeconds ?? 0,
        refresh_token: family.refreshToken,
        refresh_token_expires_in: family.profile.refreshTtlSeconds ?? 0,
        token_type: 'bearer',
        scope,
      };
    }

    function exchange(ctx: FakeContext, params: Record<string, string>, clientId: string): FakeReply {
      const code = params.code ?? '';
      const found = core.grants.peekCode(code);
      if (found.status !== 'valid') return tokenError(ctx, 'bad_verification_code');
      const { grant } = found;
      // A code is the app's it was issued to: another OAuth app of the same account cannot redeem it.
      if (grant.request.clientId !== clientId) return tokenError(ctx, 'bad_verification_code');
      // GitHub does not require redirect_uri here, but one that is sent must be the authorize one.
      if (params.redirect_uri !== undefined && params.redirect_uri !== grant.request.redirectUri) {
        return tokenError(ctx, 'redirect_uri_mismatch');
      }
      if (grant.request.codeChallenge !== null && s256(params.code_verifier ?? '') !== grant.request.codeChallenge) {
        return tokenError(ctx, 'bad_verification_code');
      }
      core.grants.useCode(code);
      return tokenReply(ctx, tokenBody(core.grants.issue(grant.login, grant.scopes, 'user', profile, clientId)));
    }

    function refresh(ctx: FakeContext, params: Record<string, string>, clientId: string): FakeReply {
      // A refresh token is the app's it was issued to.
      const owner = core.grants.familyOfToken(params.refresh_token ?? '');
      if (owner && owner.clientId !== clientId) return tokenError(ctx, 'bad_refresh_token');
      const result = core.grants.rotate(params.refresh_token ?? '');
      if (result.status === 'reused') core.stats.reusedRefreshTokens++;
      if (result.status !== 'rotated') return tokenError(ctx, 'bad_refresh_token');
      return tokenReply(ctx, tokenBody(result.family));
    }

    function revokeAtApplication(ctx: FakeContext, pathClientId: string, what: 'grant' | 'token'): FakeReply {
      core.recordClientCall('revoke', pathClientId);
      const app = basicCredentials(ctx.req);
      const secret = core.clientSecretOf(pathClientId);
      if (secret === undefined || app?.id !== pathClientId || app.secret !== secret) {
        return json(404, { message: 'Not Found', documentation_url: DOCS });
      }
      let accessToken: unknown;
      try {
        accessToken = (JSON.parse(ctx.body) as { access_token?: unknown }).access_token;
      } catch {
        accessToken = undefined;
      }
      if (typeof accessToken !== 'string') {
        return json(422, { message: 'Invalid request.\n\n"access_token" wasn\'t supplied.', documentation_url: DOCS });
      }
      const family = core.grants.familyOfAccess(accessToken);
      // A token of another app of the same account is not this app's to revoke.
      if (!family || family.revoked || family.clientId !== pathClientId) return json(404, { message: 'Not Found', documentation_url: DOCS });
      // The grant is the user's authorization of the app: every token of it goes (another app's stay).
      if (what === 'grant') core.grants.revokeUser(family.login, pathClientId);
      else core.grants.revoke(family);
      core.stats.revocations++;
      return empty(204, rateHeaders());
    }

    function handleApi(ctx: FakeContext): FakeReply {
      const sub = ctx.path.slice('/api'.length) || '/';
      const app = /^\/applications\/([^/]+)\/(grant|token)$/.exec(sub);
      if (app && ctx.method === 'DELETE') {
        return revokeAtApplication(ctx, decodeURIComponent(app[1] ?? ''), app[2] === 'grant' ? 'grant' : 'token');
      }
      const token = /^(?:token|bearer)\s+(\S+)\s*$/i.exec(ctx.req.headers.authorization ?? '')?.[1];
      const headers = rateHeaders();
      if (!token) return json(401, { message: 'Requires authentication', documentation_url: DOCS }, headers);
      const check = core.grants.checkAccess(token);
      if (check.status !== 'valid') {
        return json(401, { message: 'Bad credentials', documentation_url: DOCS }, headers);
      }
      const user = core.user(check.family.login);
      if (!user) throw new Error(`token of unknown user ${check.family.login}`);
      const scopes = check.family.scopes;
      headers['x-oauth-scopes'] = scopes.join(', ');
      headers['x-accepted-oauth-scopes'] = '';
      const get = ctx.method === 'GET' || ctx.method === 'HEAD';

      if (get && sub === '/user') {
        const { id, login, name } = user;
        const email = user.publicEmail ? user.email : null;
        const body = { login, id, type: 'User', html_url: `https://github.com/${login}`, name, email };
        return json(200, body, headers);
      }
      if (get && sub === '/user/emails') {
        // Real GitHub hides this list from tokens without an e-mail scope.
        if (!scopes.includes('user') && !scopes.includes('user:email')) {
          return json(404, { message: 'Not Found', documentation_url: DOCS }, headers);
        }
        const visibility = user.publicEmail ? 'public' : 'private';
        const emails = user.email === null ? [] : [{ email: user.email, primary: true, verified: true, visibility }];
        return json(200, emails, headers);
      }
      if (get && sub === '/user/repos') {
        const repo = { id: user.id * 10, name: 'hello-world', full_name: `${user.login}/hello-world`, private: false };
        return json(200, [repo], headers);
      }
      return testEndpoint(ctx, sub, headers) ?? json(404, { message: 'Not Found', documentation_url: DOCS }, headers);
    }

    return {
      id: 'github',
      displayName: 'GitHub',
      authorizePath: '/login/oauth/authorize',
      tokenPath: '/login/oauth/access_token',
      apiPath: '/api',
      tokenAcceptsJson: true,
      newCode: () => randomString(20, '0123456789abcdef'),
      makeUser: (input, sequence) => ({
        login: input.login,
        email: input.email ?? null,
        name: input.name ?? input.login,
        id: 100_000 + sequence,
        publicEmail: input.publicEmail ?? true,
      }),
      parseAuthorize(query: URLSearchParams) {
        // GitHub shows a 404 page for an unknown client_id.
        const clientId = query.get('client_id') ?? undefined;
        if (clientId === undefined || core.clientSecretOf(clientId) === undefined) throw new FakeAuthorizeError('Not Found', 404);
        const redirectUri = core.checkRedirectUri(query.get('redirect_uri'));
        if (redirectUri === null) throw new FakeAuthorizeError('The redirect_uri is not associated with this application.');
        const codeChallenge = query.get('code_challenge');
        if (codeChallenge !== null) {
          if (query.get('code_challenge_method') !== 'S256') {
            throw new FakeAuthorizeError('code_challenge_method must be S256 (plain is not supported).');
          }
          if (!/^[A-Za-z0-9_-]{43}$/.test(codeChallenge)) throw new FakeAuthorizeError('code_challenge is malformed.');
        }
        // Documented as space-separated; GitHub also tolerates commas.
        const scopes = [...new Set((query.get('scope') ?? '').split(/[\s,]+/).filter(Boolean))];
        return {
          clientId,
          redirectUri,
          redirectUriGiven: query.has('redirect_uri'),
          scopes,
          botScopes: [],
          state: query.get('state'),
          codeChallenge,
        };
      },
      handleToken(ctx, params) {
        const client = clientCredentials(ctx, params);
        const secret = core.clientSecretOf(client.id);
        if (client.id === undefined || secret === undefined || client.secret !== secret) {
          return tokenError(ctx, 'incorrect_client_credentials');
        }
        const grantType = params.grant_type ?? (params.code !== undefined ? 'authorization_code' : '');
        if (grantType === 'authorization_code') return exchange(ctx, params, client.id);
        if (grantType === 'refresh_token') return refresh(ctx, params, client.id);
        return tokenError(ctx, 'unsupported_grant_type');
      },
      handleApi,
      apiFailure(mode) {
        if (mode === 'rate-limited') {
          const reset = String(Math.floor(core.now() / 1000) + 60);
          const headers = {
            'x-ratelimit-limit': '5000',
            'x-ratelimit-remaining': '0',
            'x-ratelimit-reset': reset,
            'x-ratelimit-used': '5000',
          };
          const documentation_url = 'https://docs.github.com/rest/overview/rate-limits-for-the-rest-api';
          return json(403, { message: 'API rate limit exceeded for user ID 1.', documentation_url }, headers);
        }
        const headers = { 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '4999' };
        if (mode === 'secondary-rate-limit') {
          const message = 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.';
          const documentation_url =
            'https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits';
          return json(403, { message, documentation_url }, { ...headers, 'retry-after': '30' });
        }
        return json(403, { message: 'Resource not accessible by integration', documentation_url: DOCS }, headers);
      },
    };
  });
}
