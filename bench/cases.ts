/**
 * The HTTP benchmark's cases: one line per measured request. Each is compared in alternating
 * rounds with the one-row baseline (the machine's limit) and with its same-work baseline — its
 * own statements replayed by a bare route (replay.ts) — so a new route gets both figures by
 * adding a line here. `PENDING` lists the benchmarks issue 29 asks for whose routes are not in
 * this tree yet, with what each will measure: the smoke run prints them, so none is forgotten.
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
    // The direct call the MCP tool call is to be compared with (PENDING below).
    name: 'GET …/proxy/user (fake GitHub in-process)',
    id: 'proxy',
    request: (f) => ({ path: '/v1/integrations/github/proxy/user', headers: f.jwt }),
    noSameWork: "its work includes the provider's answer, which a replay of its statements would not wait for",
  },
  {
    name: 'POST /query { integrations }',
    id: 'graphql',
    request: (f) => ({ path: '/query', ...jsonBody(f.jwt, { query: '{ integrations { id name status statusDetail { message actions } } }' }) }),
  },
];

/** Benchmarks issue 29 asks for, waiting for their routes; each becomes a case (or a mode) when its route lands. */
export const PENDING: { name: string; measures: string; target: string }[] = [
  {
    name: 'provider events acted on',
    measures: 'events/s acted on (a fake provider posting events in a loop) and p99 time from the post to the status change being visible',
    target: '≥ 1,000/s, p99 time-to-detect < 1 s',
  },
  {
    name: 'MCP tool call',
    measures: 'an MCP tool call that proxies GET /user, against the same call through GET …/proxy/user (case `proxy`, same fake, same run)',
    target: '≥ 0.8× the direct proxied call',
  },
  {
    name: 'minted token from cache',
    measures: 'GET …/token for a client-credentials or installation integration whose minted token is cached, against the OAuth token read (token-jwt)',
    target: 'as fast as the OAuth token read (≥ 1.0× within the run-to-run spread)',
  },
];
