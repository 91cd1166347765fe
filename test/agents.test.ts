// Agent capabilities (docs/contract.md §9), HTTP in, HTTP, audit and fake-provider records out:
// minted by token exchange, they reach the proxy of their providers — read or write — and nothing
// else, only while they and their subject live, and every use names agent → capability → credential.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { scrubText } from '../src/http/logging.ts';
import { hashToken } from '../src/identity/credentials.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { startFakeSlack } from './fakes/slack.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData, graphqlRequest } from './helpers/graphql.ts';
import { type Account, bearer, registerAndLogin } from './helpers/identity.ts';
import { startThroughPage } from './helpers/connect-page.ts';
import { connect, providerEnv, REDIRECT_URI } from './helpers/providers.ts';

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

let t: TestApp;
let gh: FakeProvider;
let slack: FakeProvider;
let owner: Account;
let apiToken: string;

async function post(url: string, params: Record<string, string>) {
  return t.fastify.inject({ method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams(params).toString() });
}

/** A token exchange with `subject` for `scope`, plus any other parameters. */
function exchange(subject: string, scope: string, extra: Record<string, string> = {}) {
  return post('/v1/oauth/token', { grant_type: EXCHANGE, subject_token: subject, subject_token_type: ACCESS_TOKEN, scope, ...extra });
}

async function mint(subject: string, scope: string, extra: Record<string, string> = {}): Promise<string> {
  const res = await exchange(subject, scope, extra);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().access_token;
}

function proxy(token: string, method: 'GET' | 'POST' | 'DELETE', path: string, payload?: unknown) {
  return t.fastify.inject({ method, url: `/v1/integrations/${path}`, headers: bearer(token), ...(payload !== undefined ? { payload: payload as object } : {}) });
}

async function gql(token: string, query: string) {
  return graphqlData(t.fastify, token, query);
}

beforeAll(async () => {
  gh = await startFakeGitHub();
  slack = await startFakeSlack();
  gh.addUser({ login: 'octo', email: 'octo@example.com' });
  slack.addUser({ login: 'sam', email: 'sam@example.com' });
  t = await createTestApp({ env: { ...providerEnv(gh), ...providerEnv(slack), RATE_LIMIT_MAX: '0' } });
  owner = await registerAndLogin(t.fastify, 'owner');
  expect((await connect(t.fastify, owner.token, gh, 'octo')).statusCode).toBe(200);
  expect((await connect(t.fastify, owner.token, slack, 'sam')).statusCode).toBe(200);
  apiToken = (await gql(owner.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
  await slack?.close();
});

/** A second person, a member of the owner's organization, with a PAT for it. */
async function member(): Promise<{ account: Account; pat: string }> {
  const account = await registerAndLogin(t.fastify, 'member');
  await t.database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${owner.organizationId}, ${account.userId}, 'member')`);
  const pat = (await graphqlData(t.fastify, account.token, `mutation { createPersonalAccessToken(name: "agent", organizationIds: ["${owner.organizationId}"]) { token } }`)).createPersonalAccessToken.token;
  return { account, pat };
}

describe('minting a capability', () => {
  it('exchanges an API token: a tsc_ value, stored only as a hash, answered with no-store', async () => {
    const res = await exchange(apiToken, 'integrations:github:read', { agent: 'triage-bot', expires_in: '120', resource: 'http://127.0.0.1:8080/mcp' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(body).toEqual({ access_token: expect.stringMatching(/^tsc_[A-Za-z0-9_-]{43}$/), issued_token_type: ACCESS_TOKEN, token_type: 'Bearer', expires_in: 120, scope: 'integrations:github:read' });
    const stored = await queryRows<Record<string, unknown>>(t.database.db, sql`SELECT * FROM agent_capabilities`);
    expect(JSON.stringify(stored)).not.toContain(body.access_token.slice(4));
    expect(t.logs.lines.join('\n')).not.toContain(body.access_token.slice(4));
    // Were one ever written into a line, the scrubber knows it by its shape.
    expect(scrubText(`agent sent ${body.access_token}`)).toBe('agent sent ts*_[REDACTED]');
  });

  it("exchanges a person's PAT naming the organization; a member's PAT mints read but not write", async () => {
    const ownerPat = (await gql(owner.token, 'mutation { createPersonalAccessToken(name: "p") { token } }')).createPersonalAccessToken.token;
    expect((await exchange(ownerPat, 'integrations:github:write', { organization: owner.organizationId })).statusCode).toBe(200);
    const { pat } = await member();
    const read = await exchange(pat, 'integrations:github:read', { organization: owner.organizationId });
    expect(read.statusCode, read.body).toBe(200);
    const write = await exchange(pat, 'integrations:github:write integrations:slack:read', { organization: owner.organizationId });
    expect(write.statusCode).toBe(400);
    expect(write.json()).toEqual({ error: 'invalid_scope', error_description: expect.stringContaining('write') });
  });

  it('exchanges a service token naming the organization; without one it is refused', async () => {
    await t.database.db.execute(sql`UPDATE users SET system_admin = true WHERE id = ${owner.userId}`);
    const service = (await gql(owner.token, 'mutation { createServiceToken(name: "product") { token } }')).createServiceToken.token;
    await t.database.db.execute(sql`UPDATE users SET system_admin = false WHERE id = ${owner.userId}`);
    const cap = await mint(service, 'integrations:github:write', { organization: owner.organizationId, agent: 'service-agent' });
    expect((await proxy(cap, 'POST', 'github/proxy/echo/y', { b: 2 })).statusCode).toBe(200);
    expect((await exchange(service, 'integrations:github:read')).json().error).toBe('invalid_request');
  });

  it("checks a service token subject with authentication's own check: its use is recorded, and only the minting is audited (decision 263)", async () => {
    await t.database.db.execute(sql`UPDATE users SET system_admin = true WHERE id = ${owner.userId}`);
    const service = (await gql(owner.token, 'mutation { createServiceToken(name: "subject") { token } }')).createServiceToken.token;
    await t.database.db.execute(sql`UPDATE users SET system_admin = false WHERE id = ${owner.userId}`);
    const used = () => queryRows<{ id: string; last_used_at: Date | null }>(t.database.db, sql`SELECT id, last_used_at FROM service_tokens WHERE token_hash = ${hashToken(service)}`);
    const [unused] = await used();
    expect(unused?.last_used_at).toBeNull();
    await mint(service, 'integrations:github:read', { organization: owner.organizationId, agent: 'recorded' });
    const [row] = await used();
    expect(row?.last_used_at).not.toBeNull();
    const audited = await queryRows<{ action: string }>(
      t.database.db,
      sql`SELECT action FROM audit_logs WHERE credential_kind = 'service_token' AND credential_id = ${row?.id ?? ''} ORDER BY id`,
    );
    expect(audited.map((entry) => entry.action)).toEqual(['capability.created']);
  });

  it('answers each refusal in RFC 6749 §5.2 shape', async () => {
    const revokedToken = (await gql(owner.token, 'mutation { createAPIToken(name: "gone") { id token } }')).createAPIToken;
    await gql(owner.token, `mutation { revokeAPIToken(id: "${revokedToken.id}") { id } }`);
    const cases: [Record<string, string>, string][] = [
      [{ grant_type: 'client_credentials' }, 'unsupported_grant_type'],
      [{ grant_type: EXCHANGE, subject_token_type: ACCESS_TOKEN, scope: 'integrations:github:read' }, 'invalid_request'],
      [{ grant_type: EXCHANGE, subject_token: 'tsa_not-a-token-at-all', subject_token_type: ACCESS_TOKEN, scope: 'integrations:github:read' }, 'invalid_request'],
      [{ grant_type: EXCHANGE, subject_token: revokedToken.token, subject_token_type: ACCESS_TOKEN, scope: 'integrations:github:read' }, 'invalid_request'],
      [{ grant_type: EXCHANGE, subject_token: apiToken, subject_token_type: 'urn:ietf:params:oauth:token-type:jwt', scope: 'integrations:github:read' }, 'invalid_request'],
      [{ grant_type: EXCHANGE, subject_token: apiToken, subject_token_type: ACCESS_TOKEN, scope: 'integrations:github:read', expires_in: '7200' }, 'invalid_request'],
      [{ grant_type: EXCHANGE, subject_token: apiToken, subject_token_type: ACCESS_TOKEN, scope: 'integrations:gitlab:read' }, 'invalid_scope'],
      [{ grant_type: EXCHANGE, subject_token: apiToken, subject_token_type: ACCESS_TOKEN, scope: 'integrations:github:read', end_user: 'nobody' }, 'invalid_scope'],
      [{ grant_type: EXCHANGE, subject_token: apiToken, subject_token_type: ACCESS_TOKEN, scope: 'repo' }, 'invalid_scope'],
      [{ grant_type: EXCHANGE, subject_token: apiToken, subject_token_type: ACCESS_TOKEN, scope: 'integrations:github:read', resource: 'https://elsewhere.example/mcp' }, 'invalid_target'],
    ];
    for (const [params, error] of cases) {
      const res = await post('/v1/oauth/token', params);
      expect(res.statusCode, JSON.stringify(params)).toBe(400);
      expect(res.json(), JSON.stringify(params)).toEqual({ error, error_description: expect.any(String) });
    }
    // A provider configured but not connected in the organization is beyond the scope too.
    const other = await registerAndLogin(t.fastify, 'other');
    const otherToken = (await gql(other.token, 'mutation { createAPIToken(name: "x") { token } }')).createAPIToken.token;
    expect((await exchange(otherToken, 'integrations:github:read')).json().error).toBe('invalid_scope');
  });
});

describe('what a capability may do', () => {
  it('a read capability GETs through the proxy and is refused for writes, token reads, GraphQL, management and other providers', async () => {
    const cap = await mint(apiToken, 'integrations:github:read', { agent: 'reader' });
    const user = await proxy(cap, 'GET', 'github/proxy/user');
    expect(user.statusCode, user.body).toBe(200);
    expect(user.json().login).toBe('octo');
    const writes = gh.requests.length;
    for (const [res, what] of [
      [await proxy(cap, 'POST', 'github/proxy/echo/x', { a: 1 }), 'write'],
      [await proxy(cap, 'GET', 'slack/proxy/auth.test'), 'another provider'],
      [await t.fastify.inject({ method: 'GET', url: '/v1/integrations/github/token', headers: bearer(cap) }), 'token read'],
      [await t.fastify.inject({ method: 'GET', url: '/v1/integrations', headers: bearer(cap) }), 'management'],
      [await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(cap), payload: { redirectUri: 'http://127.0.0.1:8080/app', allowedProviders: ['github'] } }), 'management'],
    ] as const) {
      expect(res.statusCode, `${what}: ${res.body}`).toBe(403);
      expect(res.json().code).toBe('FORBIDDEN');
      expect(res.body).not.toMatch(/gh[ou]_/);
    }
    const graphql = await graphqlRequest(t.fastify, cap, '{ integrations { id } }');
    expect(graphql.status === 403 || graphql.body.errors?.[0]?.extensions?.code === 'FORBIDDEN', graphql.raw).toBe(true);
    expect(gh.requests.length, 'no refused call reached GitHub').toBe(writes);
  });

  it('a write capability writes', async () => {
    const cap = await mint(apiToken, 'integrations:github:write');
    const res = await proxy(cap, 'POST', 'github/proxy/echo/x', { a: 1 });
    expect(res.statusCode, res.body).toBe(200);
    expect(gh.requests.at(-1)).toMatchObject({ method: 'POST', path: '/api/echo/x' });
  });

  it('ends when it expires', async () => {
    const cap = await mint(apiToken, 'integrations:github:read', { expires_in: '60' });
    expect((await proxy(cap, 'GET', 'github/proxy/user')).statusCode).toBe(200);
    await t.database.db.execute(sql`UPDATE agent_capabilities SET expires_at = now() - interval '1 second' WHERE token_hash = ${hashToken(cap)}`);
    expect((await proxy(cap, 'GET', 'github/proxy/user')).statusCode).toBe(401);
  });

  it('ends on its revocation, and on its subject’s (a revoked API token, a member removed), from the next use', async () => {
    const cap = await mint(apiToken, 'integrations:github:read');
    expect((await post('/v1/oauth/revoke', { token: cap })).statusCode).toBe(200);
    expect((await proxy(cap, 'GET', 'github/proxy/user')).statusCode).toBe(401);
    expect((await post('/v1/oauth/revoke', { token: cap })).statusCode, 'again: 200 either way').toBe(200);
    expect((await post('/v1/oauth/revoke', { token: 'tsc_unknown' })).statusCode).toBe(200);

    const subject = (await gql(owner.token, 'mutation { createAPIToken(name: "short-lived") { id token } }')).createAPIToken;
    const fromSubject = await mint(subject.token, 'integrations:github:write');
    expect((await proxy(fromSubject, 'GET', 'github/proxy/user')).statusCode).toBe(200);
    await gql(owner.token, `mutation { revokeAPIToken(id: "${subject.id}") { id } }`);
    expect((await proxy(fromSubject, 'GET', 'github/proxy/user')).statusCode).toBe(401);

    // A write capability lives only while its person may still write: an admin made a member loses it, the read one stays.
    const admin = await member();
    await t.database.db.execute(sql`UPDATE memberships SET role = 'admin' WHERE organization_id = ${owner.organizationId} AND user_id = ${admin.account.userId}`);
    const adminWrite = await mint(admin.pat, 'integrations:github:write', { organization: owner.organizationId });
    const adminRead = await mint(admin.pat, 'integrations:github:read', { organization: owner.organizationId });
    expect((await proxy(adminWrite, 'GET', 'github/proxy/user')).statusCode).toBe(200);
    const demoted = await graphqlRequest(t.fastify, owner.token, `mutation { setMemberRole(email: "${admin.account.email}", role: "member") { role } }`);
    expect(demoted.status, demoted.raw).toBe(200);
    expect(demoted.body.errors, demoted.raw).toBeUndefined();
    expect((await proxy(adminWrite, 'GET', 'github/proxy/user')).statusCode).toBe(401);
    expect((await proxy(adminRead, 'GET', 'github/proxy/user')).statusCode).toBe(200);

    const { account, pat } = await member();
    const memberCap = await mint(pat, 'integrations:github:read', { organization: owner.organizationId });
    expect((await proxy(memberCap, 'GET', 'github/proxy/user')).statusCode).toBe(200);
    await gql(owner.token, `mutation { removeMember(email: "${account.email}") }`);
    expect((await proxy(memberCap, 'GET', 'github/proxy/user')).statusCode).toBe(401);
  });
});

describe("an end user's capability", () => {
  it("reaches only that end user's integration; one not narrowed picks with endUser, as the proxy does", async () => {
    gh.addUser({ login: 'alice', email: 'alice@example.com' });
    const minted = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(apiToken), payload: { redirectUri: REDIRECT_URI, allowedProviders: ['github'], endUser: { id: 'cust-a' } } });
    const { tx, authUrl } = await startThroughPage(t.fastify, minted.json().session.url, 'github');
    const back = new URL(gh.authorize(authUrl, 'alice').location);
    const landed = await t.fastify.inject({ url: `${back.pathname}${back.search}`, headers: { cookie: `oauth_tx=${tx}` } });
    expect(new URL(landed.headers.location as string).searchParams.get('status')).toBe('connected');

    const narrowed = await mint(apiToken, 'integrations:github:read', { end_user: 'cust-a' });
    expect((await proxy(narrowed, 'GET', 'github/proxy/user')).json().login).toBe('alice');
    expect((await proxy(narrowed, 'GET', 'github/proxy/user?endUser=cust-b')).statusCode).toBe(403);
    const wide = await mint(apiToken, 'integrations:github:read');
    expect((await proxy(wide, 'GET', 'github/proxy/user?endUser=cust-a')).json().login).toBe('alice');
    expect((await proxy(wide, 'GET', 'github/proxy/user')).json().login).toBe('octo');
  });
});

describe('the audit chain', () => {
  it('names agent → capability → credential → organization for the minting and every use, through GraphQL auditLogs', async () => {
    const cap = await mint(apiToken, 'integrations:github:read', { agent: 'auditor-bot' });
    expect((await proxy(cap, 'GET', 'github/proxy/user')).statusCode).toBe(200);
    const apiTokenId = (await gql(owner.token, '{ apiTokens { id name } }')).apiTokens.find((token: { name: string }) => token.name === 'backend').id;
    const nodes = (await gql(owner.token, '{ auditLogs(first: 50) { nodes { action credentialKind credentialId targetType targetId detail } } }')).auditLogs.nodes as {
      action: string;
      credentialKind: string;
      credentialId: string;
      targetId: string | null;
      detail: string;
    }[];
    const created = nodes.find((node) => node.action === 'capability.created' && JSON.parse(node.detail).agent === 'auditor-bot');
    expect(created).toMatchObject({ credentialKind: 'api_token', credentialId: apiTokenId, targetType: 'capability' });
    const used = nodes.find((node) => node.action === 'capability.request' && node.credentialId === created?.targetId);
    expect(used?.credentialKind).toBe('capability');
    expect(JSON.parse(used?.detail ?? '{}')).toMatchObject({ agent: 'auditor-bot', subject: { kind: 'api_token', id: apiTokenId }, route: '/v1/integrations/:provider/proxy/*' });
    expect(JSON.stringify(nodes)).not.toContain(cap.slice(4));
  });
});
