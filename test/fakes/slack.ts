import type { URLSearchParams } from 'node:url';
import {
  clientCredentials,
  type FakeContext,
  FakeAuthorizeError,
  type FakeProvider,
  type FakeProviderOptions,
  type FakeUser,
  type FakeReply,
  json,
  randomString,
  readParams,
  startFakeProvider,
  testEndpoint,
} from './common.ts';
import type { TokenFamily, TokenProfile } from './grants.ts';

/** A Slack user: `id` is the user id (`U…`), `teamId` the workspace (`T…`). */
export interface FakeSlackUser extends FakeUser {
  readonly id: string;
  readonly teamId: string;
}

/** Options of the fake Slack. */
export interface FakeSlackOptions extends FakeProviderOptions {
  /** Workspace id (default `T0FAKE0001`). */
  teamId?: string;
  /** Workspace name (default `Fake Workspace`). */
  teamName?: string;
  /** Seconds; null (default) = non-rotating xoxp- tokens; a number = token rotation: xoxe.xoxp- access tokens + xoxe-1- refresh tokens. */
  tokenExpiresIn?: number | null;
}

const APP_ID = 'A0FAKE';
const BOT = { userId: 'U0FAKEBOT', botId: 'B0FAKEBOT', name: 'tessera' };
const DIGITS = '0123456789';
const HEX = '0123456789abcdef';
const SCOPE = /^[a-z][a-z0-9_.:-]*$/i;
const METHODS = new Set(['auth.test', 'auth.revoke', 'users.info', 'conversations.list', 'chat.postMessage']);
const CHANNELS = [{ id: 'C0FAKE0001', name: 'general', is_channel: true, is_private: false, is_member: true }];

/** Starts a loopback fake of Slack: OAuth v2 authorize, `oauth.v2.access` and Web API methods under `/api`. */
export function startFakeSlack(options: FakeSlackOptions = {}): Promise<FakeProvider<FakeSlackUser>> {
  const team = { id: options.teamId ?? 'T0FAKE0001', name: options.teamName ?? 'Fake Workspace' };
  const expiresIn = options.tokenExpiresIn ?? null;
  const userProfile: TokenProfile =
    expiresIn === null
      ? {
          access: () =>
            `xoxp-${randomString(10, DIGITS)}-${randomString(10, DIGITS)}-${randomString(13, DIGITS)}-${randomString(32, HEX)}`,
          accessTtlSeconds: null,
          refresh: null,
          refreshTtlSeconds: null,
        }
      : {
          access: () => `xoxe.xoxp-1-${randomString(140)}`,
          accessTtlSeconds: expiresIn,
          // Rotating refresh tokens of a confidential client do not expire; they die when used.
          refresh: () => `xoxe-1-${randomString(140)}`,
          refreshTtlSeconds: null,
        };
  const botProfile: TokenProfile = {
    access: () => `xoxb-${randomString(10, DIGITS)}-${randomString(13, DIGITS)}-${randomString(24)}`,
    accessTtlSeconds: null,
    refresh: null,
    refreshTtlSeconds: null,
  };
  const defaults = { clientId: '1111111111.2222222222222', clientSecret: 'fakeslackclientsecret00000000001' };

  return startFakeProvider<FakeSlackUser>(options, defaults, (core) => {
    // Slack reports errors as HTTP 200 {ok:false}.
    const fail = (error: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
      json(200, { ok: false, error, ...extra }, headers);

    function exchange(params: Record<string, string>): FakeReply {
      const code = params.code ?? '';
      const found = core.grants.peekCode(code);
      if (found.status !== 'valid') return fail('invalid_code');
      const { grant } = found;
      if (grant.request.redirectUriGiven && params.redirect_uri !== grant.request.redirectUri) {
        return fail('bad_redirect_uri');
      }
      core.grants.useCode(code);
      const user = core.user(grant.login);
      if (!user) throw new Error(`code of unknown user ${grant.login}`);
      const authedUser: Record<string, unknown> = { id: user.id };
      if (grant.scopes.length > 0) {
        const family = core.grants.issue(grant.login, grant.scopes, 'user', userProfile);
        Object.assign(authedUser, userTokenFields(family));
      }
      const body: Record<string, unknown> = { ok: true, app_id: APP_ID, authed_user: authedUser };
      // Bot scopes would put a bot token at the top level; user-token apps must read authed_user.
      if (grant.request.botScopes.length > 0) {
        const bot = core.grants.issue(grant.login, grant.request.botScopes, 'bot', botProfile);
        Object.assign(body, {
          scope: grant.request.botScopes.join(','),
          token_type: 'bot',
          access_token: bot.accessToken,
          bot_user_id: BOT.userId,
        });
      }
      return json(200, { ...body, team, enterprise: null, is_enterprise_install: false });
    }

    function userTokenFields(family: TokenFamily): Record<string, unknown> {
      const fields: Record<string, unknown> = {
        scope: family.scopes.join(','),
        access_token: family.accessToken,
        token_type: 'user',
      };
      if (family.refreshToken !== null) {
        fields.refresh_token = family.refreshToken;
        fields.expires_in = family.profile.accessTtlSeconds;
      }
      return fields;
    }

    function refresh(params: Record<string, string>): FakeReply {
      const result = core.grants.rotate(params.refresh_token ?? '');
      if (result.status === 'reused') core.stats.reusedRefreshTokens++;
      if (result.status !== 'rotated') return fail('invalid_refresh_token');
      const user = core.user(result.family.login);
      // On refresh Slack puts the new user token at the top level.
      return json(200, {
        ok: true,
        app_id: APP_ID,
        ...userTokenFields(result.family),
        team,
        enterprise: null,
        is_enterprise_install: false,
        authed_user: { id: user?.id },
      });
    }

    function handleApi(ctx: FakeContext): FakeReply {
      const sub = ctx.path.slice('/api'.length);
      const method = sub.slice(1);
      const testPath = sub === '/redirect' || sub === '/big' || sub === '/echo' || sub.startsWith('/echo/');
      if (!METHODS.has(method) && !testPath) {
        return json(404, { ok: false, error: 'unknown_method', req_method: method });
      }
      const token = /^Bearer\s+(\S+)\s*$/i.exec(ctx.req.headers.authorization ?? '')?.[1];
      if (!token) return fail('not_authed');
      const check = core.grants.checkAccess(token);
      if (check.status !== 'valid') {
        const error = check.status === 'revoked' ? 'token_revoked' : check.status === 'expired' ? 'token_expired' : 'invalid_auth';
        return fail(error);
      }
      const { family } = check;
      const user = core.user(family.login);
      if (!user) throw new Error(`token of unknown user ${family.login}`);
      const headers = { 'x-oauth-scopes': family.scopes.join(','), 'x-accepted-oauth-scopes': '' };
      const params = { ...Object.fromEntries(ctx.query), ...readParams(ctx, true) };

      if (method === 'auth.test') {
        const who =
          family.kind === 'bot'
            ? { user: BOT.name, team: team.name, team_id: team.id, user_id: BOT.userId, bot_id: BOT.botId }
            : { user: user.login, team: team.name, team_id: team.id, user_id: user.id };
        return json(200, { ok: true, url: `${core.url}/`, ...who, is_enterprise_install: false }, headers);
      }
      if (method === 'auth.revoke') {
        if (params.test === 'true' || params.test === '1') return json(200, { ok: true, revoked: false }, headers);
        core.grants.revoke(family);
        core.stats.revocations++;
        return json(200, { ok: true, revoked: true }, headers);
      }
      if (method === 'users.info') {
        const withEmail = family.scopes.includes('users:read.email');
        if (!withEmail && !family.scopes.includes('users:read')) {
          return fail('missing_scope', { needed: 'users:read', provided: family.scopes.join(',') }, headers);
        }
        const target = core.users().find((candidate) => candidate.id === params.user);
        if (!target) return fail('user_not_found', {}, headers);
        const profile: Record<string, unknown> = { real_name: target.name, display_name: target.login };
        if (withEmail && target.email !== null) profile.email = target.email;
        const body = { id: target.id, team_id: target.teamId, name: target.login, deleted: false, real_name: target.name, profile };
        return json(200, { ok: true, user: body }, headers);
      }
      if (method === 'conversations.list') {
        if (!family.scopes.includes('channels:read')) return fail('missing_scope', { needed: 'channels:read', provided: family.scopes.join(',') }, headers);
        return json(200, { ok: true, channels: CHANNELS, response_metadata: { next_cursor: '' } }, headers);
      }
      if (method === 'chat.postMessage') {
        if (!family.scopes.includes('chat:write')) return fail('missing_scope', { needed: 'chat:write', provided: family.scopes.join(',') }, headers);
        if (!CHANNELS.some((channel) => channel.id === params.channel || channel.name === params.channel)) return fail('channel_not_found', {}, headers);
        core.stats.messagesPosted = (core.stats.messagesPosted ?? 0) + 1;
        return json(200, { ok: true, channel: CHANNELS[0]?.id, ts: `${Math.floor(core.now() / 1000)}.000100`, message: { text: params.text ?? '' } }, headers);
      }
      return testEndpoint(ctx, sub, headers) ?? json(404, { ok: false, error: 'unknown_method', req_method: method });
    }

    return {
      id: 'slack',
      displayName: 'Slack',
      authorizePath: '/oauth/v2/authorize',
      tokenPath: '/api/oauth.v2.access',
      apiPath: '/api',
      // oauth.v2.access takes form bodies only.
      tokenAcceptsJson: false,
      newCode: () => `${randomString(10, DIGITS)}.${randomString(13, DIGITS)}.${randomString(64, HEX)}`,
      makeUser: (input, sequence) => ({
        login: input.login,
        email: input.email ?? null,
        name: input.name ?? input.login,
        id: `U0FAKE${String(sequence).padStart(4, '0')}`,
        teamId: team.id,
      }),
      parseAuthorize(query: URLSearchParams) {
        if (query.get('client_id') !== core.clientId) throw new FakeAuthorizeError('invalid_client_id');
        const redirectUri = core.checkRedirectUri(query.get('redirect_uri'));
        if (redirectUri === null) throw new FakeAuthorizeError('bad_redirect_uri');
        // Comma-separated; a space-separated list is one invalid scope, as at Slack.
        const split = (value: string | null) => [...new Set((value ?? '').split(',').filter(Boolean))];
        const scopes = split(query.get('user_scope'));
        const botScopes = split(query.get('scope'));
        const invalid = [...scopes, ...botScopes].find((scope) => !SCOPE.test(scope));
        if (invalid !== undefined) throw new FakeAuthorizeError(`invalid_scope: ${invalid}`);
        if (scopes.length === 0 && botScopes.length === 0) throw new FakeAuthorizeError('invalid_scope: no scopes requested');
        return {
          clientId: core.clientId,
          redirectUri,
          redirectUriGiven: query.has('redirect_uri'),
          scopes,
          botScopes,
          state: query.get('state'),
          codeChallenge: null,
        };
      },
      handleToken(ctx, params) {
        const client = clientCredentials(ctx, params);
        if (client.id !== core.clientId) return fail('invalid_client_id');
        if (client.secret !== core.clientSecret) return fail('bad_client_secret');
        const grantType = params.grant_type ?? 'authorization_code';
        if (grantType === 'authorization_code') return exchange(params);
        if (grantType === 'refresh_token') return refresh(params);
        return fail('invalid_grant_type');
      },
      handleApi,
      apiFailure(mode) {
        if (mode === 'forbidden') return json(403, { ok: false, error: 'access_denied' });
        // Slack names the scope a method needed and the ones the token has, with HTTP 200.
        if (mode === 'missing-scope') return json(200, { ok: false, error: 'missing_scope', needed: 'channels:history', provided: 'channels:read,chat:write,users:read' });
        return json(429, { ok: false, error: 'ratelimited' }, { 'retry-after': '30' });
      },
    };
  });
}
