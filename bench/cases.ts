/**
 * The HTTP benchmark's cases: one line per measured request. Each is compared in alternating
 * rounds with the one-row baseline (the machine's limit) and with its same-work baseline — its
 * own statements replayed by a bare route (replay.ts) — so a new route gets both figures by
 * adding a line here; `compareWith` prints its ratios to another case of the same run.
 * `PENDING` lists the benchmarks issue 29 asks for whose routes are not in this tree yet, with
 * what each will measure: the smoke run prints them, so none is forgotten.
 */
import type { Fixture } from './fixture.ts';

export interface HttpRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface HttpCase {
  /** Shown in the tables; BENCH_ONLY matches a part of it. */
  name: string;
  /** A short id: the same-work route's path segment. */
  id: string;
  /** The request, built from the fixture. */
  request(f: Fixture): { path: string } & HttpRequest;
  /** The status every answer must have (200 when absent): anything else fails the run. */
  status?: number;
  /**
   * No same-work baseline (the route's database work is the baseline itself, or it cannot be
   * replayed); the reason is printed instead.
   */
  noSameWork?: string;
  /** Another case's id this one is compared with (req/s and p99 ratios printed under the table). */
  compareWith?: string;
}

const jsonBody = (headers: Record<string, string>, body: unknown): HttpRequest => ({
  method: 'POST',
  headers: { ...headers, 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

export const CASES: HttpCase[] = [
  {
    name: "the one-row baseline's SELECT, unprepared",
    id: 'unprepared',
    request: () => ({ path: '/bench/unprepared' }),
    noSameWork: 'it is the one-row baseline unprepared',
  },
  { name: 'GET …/token (session JWT)', id: 'token-jwt', request: (f) => ({ path: '/v1/integrations/github/token', headers: f.jwt }) },
  { name: 'GET …/token (API token)', id: 'token-api', request: (f) => ({ path: '/v1/integrations/github/token', headers: f.apiToken }) },
  { name: 'GET …/token (service token)', id: 'token-service', request: (f) => ({ path: '/v1/integrations/github/token', headers: f.serviceToken }) },
  { name: 'GET /v1/integrations (100)', id: 'list', request: (f) => ({ path: '/v1/integrations', headers: f.listJwt }) },
  { name: 'GET …/status (no live validation)', id: 'status', request: (f) => ({ path: '/v1/integrations/github/status', headers: f.jwt }) },
  {
    name: 'POST …/oauth/start',
    id: 'start',
    request: (f) => ({ path: '/v1/integrations/oauth/start', ...jsonBody(f.jwt, { provider: 'github', redirectUri: `${f.base}/` }) }),
  },
  {
    // The direct call the MCP tool call (case `mcp`) is compared with.
    name: 'GET …/proxy/user (fake GitHub in-process)',
    id: 'proxy',
    request: (f) => ({ path: '/v1/integrations/github/proxy/user', headers: f.jwt }),
    noSameWork: "its work includes the provider's answer, which a replay of its statements would not wait for",
  },
  {
    name: 'POST /mcp tools/call github_api GET /user (read capability)',
    id: 'mcp',
    request: (f) => ({
      path: '/mcp',
      ...jsonBody(f.mcp, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'github_api', arguments: { method: 'GET', path: '/user' } } }),
    }),
    noSameWork: "its work includes the provider's answer, which a replay of its statements would not wait for",
    compareWith: 'proxy',
  },
  {
    name: 'GET …/zooms2s/token (client credentials, minted token from cache)',
    id: 'token-minted',
    request: (f) => ({ path: '/v1/integrations/zooms2s/token', headers: f.jwt }),
    compareWith: 'token-jwt',
  },
  {
    name: 'POST …/stripe/credentials (the same key entered again, verified live)',
    id: 'credentials',
    request: (f) => ({ path: '/v1/integrations/stripe/credentials', ...jsonBody(f.jwt, { credentials: { apiKey: f.stripeKey } }) }),
    noSameWork: "its work includes the provider's answer to the verification, which a replay of its statements would not wait for",
  },
  // Routes this milestone added (issue 42 asks for each against its same-work baseline).
  { name: "GET /v1/apps (the organization's OAuth apps)", id: 'apps', request: (f) => ({ path: '/v1/apps', headers: f.jwt }) },
  { name: "GET /v1/webhook-endpoints (the deployment's, service token)", id: 'webhook-endpoints', request: (f) => ({ path: '/v1/webhook-endpoints', headers: { authorization: f.serviceToken.authorization as string } }) },
  {
    // The authorization server's token endpoint (§9, §9a): the grant every agent's backend uses, an
    // API token exchanged for a read capability (RFC 8693). The code and refresh grants spend what
    // they are given, so a load generator cannot repeat one request of theirs.
    name: 'POST /v1/oauth/token (token exchange: API token for a read capability)',
    id: 'oauth-token',
    request: (f) => ({
      path: '/v1/oauth/token',
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        subject_token: (f.apiToken.authorization as string).replace(/^Bearer /, ''),
        subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        scope: 'integrations:github:read',
      }).toString(),
    }),
  },
  {
    name: 'POST /query { integrations }',
    id: 'graphql',
    request: (f) => ({ path: '/query', ...jsonBody(f.jwt, { query: '{ integrations { id name status statusDetail { message actions } } }' }) }),
  },
];

/**
 * Benchmarks issue 29 asks for, waiting for their routes; each becomes a case (or a mode) when
 * its route lands. Empty now: provider events are bench/events.ts (run after the cases), the MCP
 * tool call is case `mcp` (compared with `proxy`), the minted token from cache `token-minted`
 * (compared with `token-jwt`).
 */
export const PENDING: { name: string; measures: string; target: string }[] = [];
