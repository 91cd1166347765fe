// A happy walk through every documented route: each answers as the OpenAPI document says, and a
// route added without a line here fails the walk (every documented route must be walked).
import { createHash } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { githubEvents, slackEvents } from '../fakes/provider-events.ts';
import { bearer } from '../helpers/identity.ts';
import { SECRETS } from '../helpers/provider-events.ts';
import { REDIRECT_URI, startFlow } from '../helpers/providers.ts';
import { fakeProblems, logProblems, responseProblems } from './checks.ts';
import { checker, gh, gql, issued, ONE_MIB, slack, stripe, t, useHostileWorld } from './world.ts';

useHostileWorld();

describe('every documented route, walked as documented', () => {
  it('a happy walk through every documented route answers as documented', async () => {
    const problems: string[] = [];
    const covered = new Set<string>();
    const call = async (name: string, method: string, url: string, expected: number, headers: Record<string, string> = {}, payload?: unknown) => {
      const body = payload === undefined ? undefined : typeof payload === 'string' ? payload : JSON.stringify(payload);
      const finalHeaders = body !== undefined && !('content-type' in headers) ? { ...headers, 'content-type': 'application/json' } : headers;
      const res = await t.fastify.inject({ method: method as 'GET', url, headers: finalHeaders, ...(body !== undefined ? { payload: body } : {}) });
      const sent = { method, url, headers: finalHeaders, body: body ?? '' };
      const checked = { statusCode: res.statusCode, headers: res.headers, body: res.body };
      problems.push(...responseProblems(sent, checked).map((p) => `${name}: ${p}`));
      const route = checker.route(method, url);
      if (route && res.statusCode < 400) covered.add(`${method} ${route.path}`);
      expect(res.statusCode, `${name}: ${res.body.slice(0, 300)}`).toBe(expected);
      return res;
    };

    await call('liveness', 'GET', '/livez', 200);
    await call('readiness', 'GET', '/readyz', 200);
    await call('OpenAPI document', 'GET', '/api-docs', 200);

    const email = `happy-${Date.now()}@example.com`;
    const password = 'a perfectly happy password';
    issued.password.add(password);
    await call('register', 'POST', '/v1/register', 201, {}, { email, password, name: 'Happy' });
    const signedIn = await call('login', 'POST', '/v1/login', 200, {}, { email, password });
    const token = signedIn.json().accessToken as string;
    const organizationId = signedIn.json().organizationId as string;
    const session = signedIn.cookies.find((c) => c.name === 'session')?.value ?? '';
    issued.jwt.add(token);
    const auth = bearer(token);
    await call('csrf (anonymous)', 'GET', '/v1/csrf', 200);
    await call('csrf (session)', 'GET', '/v1/csrf', 200, { cookie: `session=${session}` });
    await call('account access', 'GET', '/v1/account/access', 200, auth);
    const second = await call('create organization', 'POST', '/v1/organizations', 201, auth, { name: 'Second' });
    const switched = await call('switch', 'POST', '/v1/account/switch', 200, auth, { organizationId: second.json().organization.id });
    issued.jwt.add(switched.json().accessToken);
    await call('switch back', 'POST', '/v1/account/switch', 200, bearer(switched.json().accessToken), { organizationId });
    await call('providers', 'GET', '/v1/providers', 200, auth);
    // A provider whose credentials a person enters: verified with the provider, then stored.
    await call('connect with credentials', 'POST', '/v1/integrations/stripe/credentials', 201, auth, { credentials: { apiKey: stripe.addAccount('Happy Shop').key } });

    // Connect GitHub with the POST callback, Slack with the provider's GET redirect.
    const started = await call('start', 'POST', '/v1/integrations/oauth/start', 200, auth, { provider: 'github', redirectUri: REDIRECT_URI });
    const tx = started.cookies.find((c) => c.name === 'oauth_tx')?.value ?? '';
    const approved = gh.authorize(started.json().authUrl, 'happycat');
    await call('callback (POST)', 'POST', '/v1/integrations/oauth/callback', 200, { cookie: `oauth_tx=${tx}` }, { provider: 'github', code: approved.code, state: approved.state });
    const slackStart = await startFlow(t.fastify, token, 'slack');
    const slackApproved = slack.authorize(slackStart.authUrl, 'happysam');
    const redirected = await call('callback (GET)', 'GET', `/v1/integrations/oauth/callback?code=${encodeURIComponent(slackApproved.code)}&state=${encodeURIComponent(slackApproved.state)}`, 302, { cookie: `oauth_tx=${slackStart.txCookie}` });
    expect(redirected.headers.location).toMatch(/^http:\/\/127\.0\.0\.1:8080\/app\/integrations\?status=connected&provider=slack&integration=[0-9A-Z]{26}$/);
    const denyStart = await startFlow(t.fastify, token, 'github');
    const denied = gh.deny(denyStart.authUrl);
    const deniedRedirect = await call('callback (GET, denied)', 'GET', `/v1/integrations/oauth/callback?error=access_denied&state=${encodeURIComponent(denied.state)}`, 302, { cookie: `oauth_tx=${denyStart.txCookie}` });
    expect(deniedRedirect.headers.location).toContain('error=ACCESS_DENIED');

    const listed = await call('list integrations', 'GET', '/v1/integrations', 200, auth);
    const slackId = (listed.json().integrations as { id: string; provider: string }[]).find((i) => i.provider === 'slack')?.id ?? '';
    await call('token', 'GET', '/v1/integrations/github/token', 200, auth);
    await call('status', 'GET', '/v1/integrations/github/status', 200, auth);
    await call('refresh', 'POST', '/v1/integrations/github/refresh', 200, auth);
    await call('proxy GET', 'GET', '/v1/integrations/github/proxy/user', 200, auth);
    await call('proxy HEAD', 'HEAD', '/v1/integrations/github/proxy/user', 200, auth);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) await call(`proxy ${method}`, method, '/v1/integrations/github/proxy/echo/x?y=1', 200, auth, { a: 1 });
    await call('proxy GET (Slack)', 'GET', '/v1/integrations/slack/proxy/auth.test', 200, auth);
    // Passthrough statuses other than 200 must be documented too (a provider answers 201, 204, 302, 404, 422…).
    await call('proxy passthrough 404', 'GET', '/v1/integrations/github/proxy/no/such/thing', 404, auth);
    await call('proxy passthrough 302', 'GET', '/v1/integrations/github/proxy/redirect', 302, auth);
    await call('GraphQL', 'POST', '/query', 200, auth, { query: '{ me { id } integrations { id status } }' });
    await call('GraphQL over GET', 'GET', '/query?query=%7Bme%7Bid%7D%7D', 405);
    const pat = (await gql(token, 'mutation { createPersonalAccessToken(name: "walk") { token } }')).createPersonalAccessToken.token as string;
    const api = (await gql(token, 'mutation { createAPIToken(name: "walk") { token } }')).createAPIToken.token as string;
    await call('account access (PAT)', 'GET', '/v1/account/access', 200, bearer(pat));
    await call('account access (API token)', 'GET', '/v1/account/access', 200, bearer(api));
    // Agents (docs/contract.md §9): a capability minted by token exchange, used at the proxy and /mcp, revoked; the metadata documents.
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const exchange = { grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', subject_token: api, subject_token_type: 'urn:ietf:params:oauth:token-type:access_token' };
    const capability = await call('mint a capability', 'POST', '/v1/oauth/token', 200, form, new URLSearchParams({ ...exchange, scope: 'integrations:github:read', agent: 'walker' }).toString());
    const cap = capability.json().access_token as string;
    issued.capability.add(cap);
    await call('proxy GET (capability)', 'GET', '/v1/integrations/github/proxy/user', 200, bearer(cap));
    const mcp = { ...bearer(cap), accept: 'application/json, text/event-stream' };
    await call('MCP initialize', 'POST', '/mcp', 200, mcp, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'walker', version: '1' } } });
    await call('MCP notification', 'POST', '/mcp', 202, { ...mcp, 'mcp-protocol-version': '2025-06-18' }, { jsonrpc: '2.0', method: 'notifications/initialized' });
    await call('MCP tools/list', 'POST', '/mcp', 200, { ...mcp, 'mcp-protocol-version': '2025-06-18' }, { jsonrpc: '2.0', id: 2, method: 'tools/list' });
    await call('MCP 401', 'POST', '/mcp', 401, { accept: 'application/json, text/event-stream' }, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    await call('revoke a capability', 'POST', '/v1/oauth/revoke', 200, form, new URLSearchParams({ token: cap }).toString());
    await call('token exchange refused', 'POST', '/v1/oauth/token', 400, form, new URLSearchParams({ ...exchange, scope: 'integrations:github:read', resource: 'https://elsewhere.example/' }).toString());
    await call('protected-resource metadata', 'GET', '/.well-known/oauth-protected-resource/mcp', 200);
    await call('authorization server metadata', 'GET', '/.well-known/oauth-authorization-server', 200);
    // MCP clients (docs/contract.md §9a): one registers; its authorization request is decided by the product (the consent
    // handoff's routes) — approved, its code exchanged, the grant listed and revoked — and a second one denied.
    const walker = await call('register an MCP client', 'POST', '/oauth/register', 201, {}, { client_name: 'Walker Host', redirect_uris: ['http://127.0.0.1:9/cb'] });
    const verifier = 'walking-verifier-'.repeat(3);
    const authorizeUrl = (state: string) =>
      `/oauth/authorize?${new URLSearchParams({ response_type: 'code', client_id: walker.json().client_id, redirect_uri: 'http://127.0.0.1:9/cb', code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256', state, resource: 'http://127.0.0.1:8080/mcp', scope: 'integrations:github:read' })}`;
    const requestOf = async (state: string) => /name="request" value="([^"]+)"/.exec((await t.fastify.inject({ url: authorizeUrl(state) })).body)?.[1] ?? '';
    const approving = await requestOf('walk-1');
    await call('an authorization request (handoff)', 'GET', `/v1/oauth/authorizations/${approving}`, 200, bearer(api));
    const approvedRequest = await call('approve an authorization request', 'POST', `/v1/oauth/authorizations/${approving}/approve`, 200, bearer(api), { scope: 'integrations:github:read' });
    const walkCode = new URL(approvedRequest.json().redirectTo).searchParams.get('code') ?? '';
    const pair = await call("exchange an MCP client's code", 'POST', '/v1/oauth/token', 200, form, new URLSearchParams({ grant_type: 'authorization_code', code: walkCode, code_verifier: verifier, client_id: walker.json().client_id, redirect_uri: 'http://127.0.0.1:9/cb' }).toString());
    issued.capability.add(pair.json().access_token);
    issued.capability.add(pair.json().refresh_token);
    const grants = await call('list MCP grants', 'GET', '/v1/oauth/grants', 200, bearer(api));
    await call('revoke an MCP grant', 'DELETE', `/v1/oauth/grants/${grants.json().grants[0]?.id}`, 200, bearer(api));
    await call('deny an authorization request', 'POST', `/v1/oauth/authorizations/${await requestOf('walk-2')}/deny`, 200, bearer(api));
    const minted = await call('connect session', 'POST', '/v1/connect/sessions', 201, bearer(api), { redirectUri: REDIRECT_URI, allowedProviders: ['github'], endUser: { id: 'walker' } });
    await call('connect session status', 'GET', `/v1/connect/sessions/${minted.json().session.id}`, 200, bearer(api));
    await call('list connect sessions', 'GET', '/v1/connect/sessions?status=pending&first=5', 200, bearer(api));
    await call('revoke connect session', 'DELETE', `/v1/connect/sessions/${minted.json().session.id}`, 200, bearer(api));
    await call('delete integration', 'DELETE', `/v1/integrations/${slackId}`, 200, auth);
    await call("list an end user's integrations", 'GET', '/v1/integrations?provider=github&endUser=walker', 200, auth);
    await call("delete an end user's integrations", 'DELETE', '/v1/integrations?endUser=walker', 200, auth);
    // Organizations as a whole (docs/contract.md §5d): read and renamed by their owner, listed by a system administrator's service token, offboarded by the owner.
    const secondId = second.json().organization.id as string;
    await call('read organization', 'GET', `/v1/organizations/${secondId}`, 200, auth);
    await call('rename organization', 'PATCH', `/v1/organizations/${secondId}`, 200, auth, { name: 'Second, renamed' });
    await t.database.db.execute(sql`UPDATE users SET system_admin = true WHERE id = ${signedIn.json().user.id}`);
    const serviceToken = (await gql(token, 'mutation { createServiceToken(name: "walk") { token } }')).createServiceToken.token as string;
    await call('list organizations (service token)', 'GET', '/v1/organizations?first=5', 200, bearer(serviceToken));
    await call('find organizations (system administrator)', 'GET', '/v1/organizations?q=second&first=5', 200, auth);
    const deliveries = await call('webhook deliveries', 'GET', '/v1/webhooks/deliveries?status=pending&eventType=organization.created&first=5', 200, auth);
    await call('retry a delivery', 'POST', `/v1/webhooks/deliveries/${deliveries.json().deliveries[0]?.id}/retry`, 200, auth);
    // Webhook endpoints as data (docs/contract.md §7): the deployment's, managed by a system administrator or a service token.
    const endpoint = await call('add a webhook endpoint', 'POST', '/v1/webhook-endpoints', 201, auth, { url: 'http://127.0.0.1:9/walk-hook', description: 'walk', eventTypes: ['integration.connected'] });
    const endpointId = endpoint.json().endpoint.id as string;
    await call('list webhook endpoints (service token)', 'GET', '/v1/webhook-endpoints', 200, bearer(serviceToken));
    await call('read a webhook endpoint', 'GET', `/v1/webhook-endpoints/${endpointId}`, 200, auth);
    await call('change a webhook endpoint', 'PATCH', `/v1/webhook-endpoints/${endpointId}`, 200, auth, { eventTypes: ['integration.connected', 'integration.deleted'] });
    await call("rotate a webhook endpoint's secret", 'POST', `/v1/webhook-endpoints/${endpointId}/rotate-secret`, 200, auth, { overlapSeconds: 60 });
    await call('send a test event', 'POST', `/v1/webhook-endpoints/${endpointId}/test`, 200, auth);
    await call('delete a webhook endpoint', 'DELETE', `/v1/webhook-endpoints/${endpointId}`, 200, auth);
    // An organization's own OAuth apps (docs/contract.md §5e): made, listed, read, changed (the default too) and deleted.
    const ownApp = await call('add an app', 'POST', '/v1/apps', 201, auth, { provider: 'github', name: 'Walk app', clientId: 'walk-client.1', clientSecret: 'walk-client-secret-never-shown', scopes: ['repo'] });
    const ownAppId = ownApp.json().app.id as string;
    await call('list apps', 'GET', '/v1/apps?provider=github', 200, auth);
    await call('read an app', 'GET', `/v1/apps/${ownAppId}`, 200, auth);
    await call('change an app', 'PATCH', `/v1/apps/${ownAppId}`, 200, auth, { name: 'Walk app, renamed', default: true });
    await call('delete an app', 'DELETE', `/v1/apps/${ownAppId}`, 200, auth);
    await call('account access (service token)', 'GET', '/v1/account/access', 200, { ...bearer(serviceToken), 'x-organization-id': organizationId });
    await call('offboard organization', 'DELETE', `/v1/organizations/${secondId}`, 200, auth);
    // A provider's signed events (docs/contract.md §5b): Slack's URL check, and a GitHub event naming no one here.
    const slackCheck = slackEvents(SECRETS.slack).urlVerification();
    await call('provider events (Slack url_verification)', 'POST', '/v1/providers/slack/events', 200, slackCheck.headers, slackCheck.body);
    const revoked = githubEvents(SECRETS.github).authorizationRevoked({ id: 424242, login: 'nobody-here' });
    await call('provider events (GitHub)', 'POST', '/v1/providers/github/events', 200, revoked.headers, revoked.body);
    // The same app's route by its id (docs/contract.md §5e): the default deployment app's id is its provider's.
    const revokedAgain = githubEvents(SECRETS.github).authorizationRevoked({ id: 434343, login: 'nobody-here-either' });
    await call("an app's events (the default GitHub app)", 'POST', '/v1/apps/github/events', 200, revokedAgain.headers, revokedAgain.body);

    // Documented errors.
    await call('401', 'GET', '/v1/integrations', 401);
    await call('409', 'POST', '/v1/register', 409, {}, { email, password });
    await call('401 login', 'POST', '/v1/login', 401, {}, { email, password: 'not the password at all' });
    await call('415', 'POST', '/v1/register', 415, { 'content-type': 'text/plain' }, 'hello');
    await call('413', 'POST', '/v1/organizations', 413, auth, { name: 'x'.repeat(ONE_MIB) });
    await call('400', 'POST', '/v1/organizations', 400, auth, { name: '' });
    await call('404 route', 'GET', '/v1/nothing-here', 404, auth);
    await call('404 integration', 'GET', '/v1/integrations/gitlab/token', 404, auth);
    await call('403 CSRF', 'POST', '/v1/organizations', 403, { cookie: `session=${session}` }, { name: 'x' });
    await call('logout', 'POST', '/v1/logout', 200, auth);

    problems.push(...fakeProblems({ apiOnly: false }), ...logProblems());
    // Every documented route is walked with a success (GET /query only ever answers 405): a new route needs a line above.
    const uncovered = checker.routes.map((r) => `${r.method} ${r.path}`).filter((key) => !covered.has(key) && key !== 'GET /query');
    expect({ problems, uncovered }).toEqual({ problems: [], uncovered: [] });
  });
});
