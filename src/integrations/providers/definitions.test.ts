// Each definition's reading of its provider's answers, from answers shaped as the providers
// document them: what a token answer yields, and what an API answer signals.
import { describe, expect, it } from 'vitest';
import { retryAfterSeconds } from './engine.ts';
import { DEFINITIONS } from './registry.ts';
import type { ProviderDefinition } from './types.ts';

const byId = new Map(DEFINITIONS.map((definition) => [definition.id, definition]));
const definition = (id: string) => byId.get(id) as ProviderDefinition;
const answer = (status: number, body: unknown, headers: Record<string, string> = {}) => ({
  status,
  headers: new Headers(headers),
  body: typeof body === 'string' ? body : JSON.stringify(body),
});
const kindOf = (id: string, status: number, body: unknown, headers: Record<string, string> = {}) => definition(id).classify(answer(status, body, headers))?.kind ?? null;

describe('the catalog', () => {
  it('has the twelve OAuth providers of the contract, those whose credentials people enter, and the GitHub App (§5c), with their display names', () => {
    expect(DEFINITIONS.map((d) => [d.id, d.displayName])).toEqual([
      ['github', 'GitHub'],
      ['slack', 'Slack'],
      ['gitlab', 'GitLab'],
      ['bitbucket', 'Bitbucket'],
      ['discord', 'Discord'],
      ['google', 'Google'],
      ['microsoft', 'Microsoft'],
      ['atlassian', 'Atlassian'],
      ['linear', 'Linear'],
      ['notion', 'Notion'],
      ['zoom', 'Zoom'],
      ['salesforce', 'Salesforce'],
      ['stripe', 'Stripe'],
      ['twilio', 'Twilio'],
      ['zooms2s', 'Zoom Server-to-Server'],
      ['githubapp', 'GitHub App'],
    ]);
  });
});

describe('token answers', () => {
  it('read tokens, expiry, scopes and metadata in each provider’s field names', () => {
    expect(definition('gitlab').parseTokenResponse(answer(200, { access_token: 'a', token_type: 'Bearer', refresh_token: 'r', scope: 'read_user api', created_at: 1 }))).toEqual({
      accessToken: 'a',
      refreshToken: 'r',
      // Versions that leave out expires_in issue two-hour tokens.
      expiresIn: 7200,
      scopes: ['read_user', 'api'],
      tokenType: 'Bearer',
    });
    expect(definition('bitbucket').parseTokenResponse(answer(200, { access_token: 'a', scopes: 'account repository', expires_in: 7200, refresh_token: 'r', token_type: 'bearer' })).scopes).toEqual(['account', 'repository']);
    expect(definition('linear').parseTokenResponse(answer(200, { access_token: 'a', expires_in: 86399, scope: ['read', 'write'] })).scopes).toEqual(['read', 'write']);
    expect(definition('slack').parseTokenResponse(answer(200, { ok: true, team: { id: 'T1' }, authed_user: { id: 'U1', access_token: 'xoxp', scope: 'a,b', token_type: 'user' } }))).toMatchObject({ accessToken: 'xoxp', scopes: ['a', 'b'], metadata: { workspaceId: 'T1' } });
    expect(definition('salesforce').parseTokenResponse(answer(200, { access_token: 'a', instance_url: 'https://acme.my.salesforce.com', issued_at: '1700000000000', token_type: 'Bearer' }))).toEqual({
      accessToken: 'a',
      scopes: [],
      tokenType: 'Bearer',
      metadata: { instanceUrl: 'https://acme.my.salesforce.com' },
    });
    expect(definition('zoom').parseTokenResponse(answer(200, { access_token: 'a', expires_in: 3599, api_url: 'https://api.zoom.us' })).metadata).toEqual({ apiUrl: 'https://api.zoom.us' });
    expect(definition('notion').parseTokenResponse(answer(200, { access_token: 'a', bot_id: 'b', workspace_id: 'w', workspace_name: 'W' })).metadata).toEqual({ workspaceId: 'w', workspaceName: 'W', botId: 'b' });
    const idToken = `e30.${Buffer.from(JSON.stringify({ tid: 'tenant-1' })).toString('base64url')}.x`;
    expect(definition('microsoft').parseTokenResponse(answer(200, { access_token: 'a', expires_in: 3600, id_token: idToken })).metadata).toEqual({ tenantId: 'tenant-1' });
  });

  it('take a refusal for a dead grant whatever its status (GitHub and Slack: HTTP 200; Atlassian: 403), with its code as an identifier', () => {
    const refused = (id: string, status: number, body: unknown) => {
      try {
        definition(id).parseTokenResponse(answer(status, body));
      } catch (error) {
        return { kind: (error as { kind: string }).kind, code: (error as { providerCode?: string }).providerCode };
      }
      return null;
    };
    expect(refused('github', 200, { error: 'bad_refresh_token', error_description: 'The refresh token passed is incorrect or expired.' })).toEqual({ kind: 'revoked', code: 'bad_refresh_token' });
    expect(refused('slack', 200, { ok: false, error: 'invalid_refresh_token' })).toEqual({ kind: 'revoked', code: 'invalid_refresh_token' });
    expect(refused('atlassian', 403, { error: 'unauthorized_client', error_description: 'refresh_token is invalid' })).toEqual({ kind: 'revoked', code: 'unauthorized_client' });
    expect(refused('google', 400, { error: 'invalid_grant', error_description: 'Token has been expired or revoked.' })).toEqual({ kind: 'revoked', code: 'invalid_grant' });
    expect(refused('zoom', 400, { reason: 'Invalid Token!', error: 'invalid_request' })).toEqual({ kind: 'revoked', code: 'invalid_request' });
    expect(refused('gitlab', 429, 'Retry later')).toEqual({ kind: 'rateLimited', code: undefined });
    expect(refused('discord', 502, '<html>bad gateway</html>')).toEqual({ kind: 'transient', code: undefined });
    expect(refused('notion', 200, { token_type: 'bearer' })).toEqual({ kind: 'transient', code: undefined });
  });

  it("tell a refusal of our own client credentials from a dead grant, in each provider's words", () => {
    const kind = (id: string, status: number, body: unknown) => {
      try {
        definition(id).parseTokenResponse(answer(status, body));
      } catch (error) {
        return (error as { kind: string }).kind;
      }
      return null;
    };
    expect(kind('github', 200, { error: 'incorrect_client_credentials', error_description: 'The client_id and/or client_secret passed are incorrect.' })).toBe('misconfigured');
    expect(kind('slack', 200, { ok: false, error: 'bad_client_secret' })).toBe('misconfigured');
    expect(kind('slack', 200, { ok: false, error: 'invalid_client_id' })).toBe('misconfigured');
    expect(kind('google', 401, { error: 'invalid_client', error_description: 'Unauthorized' })).toBe('misconfigured');
    expect(kind('microsoft', 400, { error: 'unauthorized_client', error_description: 'AADSTS700016: Application not found in the directory.' })).toBe('misconfigured');
    expect(kind('zoom', 401, { reason: 'Invalid client_id or client_secret', error: 'invalid_client' })).toBe('misconfigured');
    expect(kind('atlassian', 401, { error: 'access_denied', error_description: 'Unauthorized' })).toBe('misconfigured');
    // Atlassian's dead refresh token is its `unauthorized_client`: a dead grant there, not our configuration.
    expect(kind('atlassian', 403, { error: 'unauthorized_client', error_description: 'refresh_token is invalid' })).toBe('revoked');
    expect(kind('google', 400, { error: 'invalid_grant' })).toBe('revoked');
  });
});

describe('API answers', () => {
  it('tell a dead token from a missing scope, a rate limit and an outage, in each provider’s signals', () => {
    const cases: [string, number, unknown, Record<string, string>, string | null][] = [
      ['github', 401, { message: 'Bad credentials' }, {}, 'revoked'],
      ['github', 403, { message: 'API rate limit exceeded' }, { 'x-ratelimit-remaining': '0' }, 'rateLimited'],
      ['github', 403, { message: 'You have exceeded a secondary rate limit.' }, {}, 'rateLimited'],
      ['github', 403, { message: 'Resource not accessible by integration' }, {}, 'forbidden'],
      ['slack', 200, { ok: false, error: 'token_revoked' }, {}, 'revoked'],
      ['slack', 200, { ok: false, error: 'missing_scope', needed: 'chat:write' }, {}, 'forbidden'],
      ['slack', 200, { ok: false, error: 'channel_not_found' }, {}, null],
      ['gitlab', 401, { error: 'invalid_token', error_description: 'Token was revoked.' }, {}, 'revoked'],
      ['gitlab', 403, { error: 'insufficient_scope' }, {}, 'forbidden'],
      ['bitbucket', 401, { type: 'error', error: { message: 'Access token expired.' } }, {}, 'revoked'],
      ['bitbucket', 403, { type: 'error', error: { message: 'Your credentials lack one or more required privilege scopes.' } }, {}, 'forbidden'],
      ['discord', 401, { message: '401: Unauthorized', code: 0 }, {}, 'revoked'],
      ['discord', 403, { message: 'Missing Permissions', code: 50013 }, {}, 'forbidden'],
      ['discord', 429, { message: 'You are being rate limited.', retry_after: 1.5, global: false }, {}, 'rateLimited'],
      ['google', 401, { error: { code: 401, status: 'UNAUTHENTICATED' } }, {}, 'revoked'],
      ['google', 403, { error: { code: 403, errors: [{ reason: 'userRateLimitExceeded' }] } }, {}, 'rateLimited'],
      ['google', 403, { error: { code: 403, errors: [{ reason: 'insufficientPermissions' }] } }, {}, 'forbidden'],
      ['microsoft', 401, { error: { code: 'InvalidAuthenticationToken' } }, {}, 'revoked'],
      ['microsoft', 503, { error: { code: 'serviceNotAvailable' } }, { 'retry-after': '5' }, 'rateLimited'],
      ['microsoft', 503, { error: { code: 'serviceNotAvailable' } }, {}, 'transient'],
      ['atlassian', 401, { code: 401, message: 'Unauthorized' }, {}, 'revoked'],
      ['atlassian', 401, { code: 401, message: 'Unauthorized; scope does not match' }, {}, 'forbidden'],
      ['linear', 400, { errors: [{ message: 'Authentication required', extensions: { type: 'authentication error' } }] }, {}, 'revoked'],
      ['linear', 400, { errors: [{ message: 'Rate limit exceeded', extensions: { type: 'ratelimited' } }] }, {}, 'rateLimited'],
      ['linear', 200, { errors: [{ message: 'Invalid scope', extensions: { type: 'forbidden' } }], data: null }, {}, 'forbidden'],
      ['linear', 200, { data: { viewer: { id: 'u' } } }, {}, null],
      ['notion', 401, { object: 'error', status: 401, code: 'unauthorized' }, {}, 'revoked'],
      ['notion', 404, { object: 'error', status: 404, code: 'object_not_found' }, {}, null],
      ['zoom', 401, { code: 124, message: 'Invalid access token.' }, {}, 'revoked'],
      ['zoom', 400, { code: 4711, message: 'Invalid access token, does not contain scopes' }, {}, 'forbidden'],
      ['zoom', 400, { code: 300, message: 'Invalid meeting id' }, {}, null],
      ['salesforce', 401, [{ errorCode: 'INVALID_SESSION_ID', message: 'Session expired or invalid' }], {}, 'revoked'],
      ['salesforce', 403, [{ errorCode: 'REQUEST_LIMIT_EXCEEDED', message: 'TotalRequests Limit exceeded.' }], {}, 'rateLimited'],
      ['salesforce', 500, [{ errorCode: 'UNKNOWN_EXCEPTION' }], {}, 'transient'],
      // docs/contract.md §5's rate limits hold for every provider, not only the one that taught them.
      ['gitlab', 403, { message: 'Forbidden' }, { 'retry-after': '30' }, 'rateLimited'],
      ['bitbucket', 403, { type: 'error' }, { 'x-ratelimit-remaining': '0' }, 'rateLimited'],
      ['zoom', 403, { message: 'You have exceeded a secondary rate limit' }, {}, 'rateLimited'],
      ['gitlab', 403, { message: 'Forbidden' }, { 'x-ratelimit-remaining': '12' }, 'forbidden'],
    ];
    for (const [id, status, body, headers, kind] of cases) expect(kindOf(id, status, body, headers), `${id} ${status} ${JSON.stringify(body)}`).toBe(kind);
  });

  it("read Microsoft's claims challenge (continuous access evaluation) as `challenged`, with its claims decoded", () => {
    // The example of Microsoft's "Claims challenges, claims requests and client capabilities".
    const claims = 'eyJhY2Nlc3NfdG9rZW4iOnsibmJmIjp7ImVzc2VudGlhbCI6dHJ1ZSwgInZhbHVlIjoiMTYwNDEwNjY1MSJ9fX0=';
    const challenge = `Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", client_id="00000003-0000-0000-c000-000000000000", error="insufficient_claims", claims="${claims}"`;
    const failure = definition('microsoft').classify(answer(401, { error: { code: 'InvalidAuthenticationToken' } }, { 'www-authenticate': challenge }));
    expect(failure?.kind).toBe('challenged');
    expect(failure?.claims).toEqual({ access_token: { nbf: { essential: true, value: '1604106651' } } });
    // Another error, claims that are not a JSON object, or none: a dead token as any other 401.
    expect(kindOf('microsoft', 401, {}, { 'www-authenticate': challenge.replace('insufficient_claims', 'invalid_token') })).toBe('revoked');
    expect(kindOf('microsoft', 401, {}, { 'www-authenticate': challenge.replace(claims, Buffer.from('[1]').toString('base64')) })).toBe('revoked');
    expect(kindOf('microsoft', 401, {}, { 'www-authenticate': 'Bearer realm="", error="insufficient_claims"' })).toBe('revoked');
    // A provider that does not say it sends them reads the same header as a dead token.
    expect(kindOf('google', 401, {}, { 'www-authenticate': challenge })).toBe('revoked');
    expect(definition('microsoft').tokenClaims).toEqual({ access_token: { xms_cc: { values: ['cp1'] } } });
  });

  it('read when to try again from Retry-After (seconds, a date or an ISO time), the body, or a reset time', () => {
    const now = Date.parse('2026-11-23T12:00:00Z');
    const headers = (values: Record<string, string>) => ({ headers: new Headers(values) });
    expect(retryAfterSeconds(headers({ 'retry-after': '30' }), undefined, now)).toBe(30);
    expect(retryAfterSeconds(headers({ 'retry-after': '2026-11-23T12:00:45Z' }), undefined, now)).toBe(45);
    expect(retryAfterSeconds(headers({ 'retry-after': 'Mon, 23 Nov 2026 12:01:00 GMT' }), undefined, now)).toBe(60);
    expect(retryAfterSeconds(headers({}), '1.5', now)).toBe(2);
    expect(retryAfterSeconds(headers({ 'x-ratelimit-reset': String(now / 1000 + 90) }), undefined, now)).toBe(90);
    expect(retryAfterSeconds(headers({ 'x-ratelimit-requests-reset': String(now + 20_000) }), undefined, now)).toBe(20);
    expect(retryAfterSeconds(headers({ 'x-ratelimit-reset': '2026-11-23T12:00:05Z' }), undefined, now)).toBe(5);
    expect(retryAfterSeconds(headers({ 'retry-after': 'soon' }), undefined, now)).toBe(60);
  });

  it('decide which proxied calls write: the REST rule, Slack by method, Linear by operation', () => {
    expect(definition('gitlab').isWrite('GET', ['user'], undefined)).toBe(false);
    expect(definition('gitlab').isWrite('DELETE', ['projects', '1'], undefined)).toBe(true);
    expect(definition('slack').isWrite('GET', ['auth.revoke'], undefined)).toBe(true);
    expect(definition('slack').isWrite('POST', ['conversations.history'], undefined)).toBe(false);
    expect(definition('linear').isWrite('POST', ['graphql'], { query: '{ issues { nodes { id } } }' })).toBe(false);
    expect(definition('linear').isWrite('POST', ['graphql'], { query: 'mutation { issueArchive(id: "1") { success } }' })).toBe(true);
    expect(definition('linear').isWrite('POST', ['graphql'], { query: 42 })).toBe(true);
  });
});
