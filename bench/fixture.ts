/**
 * The HTTP benchmarks' app and data: Tessera listening on loopback in this process, with a fake
 * GitHub, one organization connected to it, a session JWT, an API token and a service token,
 * a second organization with 100 integrations, and the bare routes the scenarios are compared
 * with — the one-row baseline (the machine's limit for a request that reads its data) and
 * `/bench/same/:case`, the replay of a case's own statements (replay.ts).
 */
import { Writable } from 'node:stream';
import { sql } from 'drizzle-orm';
import { ulid } from 'ulidx';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config/load.ts';
import { type Database, HotStatement, queryRows } from '../src/db/client.ts';
import type { Principal } from '../src/ground/principal.ts';
import { createLogger } from '../src/http/logging.ts';
import { createApiToken } from '../src/identity/access-tokens.ts';
import { createServiceToken } from '../src/identity/service-tokens.ts';
import { replaceSecrets } from '../src/integrations/secrets.ts';
import type { Services } from '../src/services.ts';
import { startFakeGitHub } from '../test/fakes/github.ts';
import { startFakeStripe } from '../test/fakes/providers/stripe.ts';
import { startFakeZoomS2S } from '../test/fakes/providers/zooms2s.ts';
import { Recorder } from './replay.ts';
import { openBenchDatabase } from './validation.ts';

const ONE_ROW = new HotStatement(sql`SELECT id, name FROM organizations WHERE id = ${sql.placeholder('id')}`);

/** What a case builds its request from. */
export interface Fixture {
  base: string;
  database: Database;
  services: Services;
  recorder: Recorder;
  /** The connected organization (GitHub connected through the fake). */
  organizationId: string;
  /** Headers of each credential kind, acting in the connected organization. */
  jwt: Record<string, string>;
  apiToken: Record<string, string>;
  serviceToken: Record<string, string>;
  /** A session JWT acting in the organization holding 100 integrations. */
  listJwt: Record<string, string>;
  /** The GitHub webhook secret the events route checks deliveries with. */
  githubEventsSecret: string;
  /**
   * The GitHub account ids of `eventTargets` end users' GitHub integrations in an organization of
   * their own, each `connected`: a `github_app_authorization` revocation naming one is matched
   * and commits its status change (once; a second names an already invalid integration).
   */
  eventTargets: number[];
  /** Headers of an MCP request with a read capability for GitHub (minted by token exchange). */
  mcp: Record<string, string>;
  /** A Stripe secret key the organization may (re)enter through POST …/stripe/credentials. */
  stripeKey: string;
  /** The same-work baselines, by case name: set after each case's census. */
  sameWork: Map<string, () => Promise<number>>;
  close(): Promise<void>;
}

const json = async (r: Response) => {
  if (!r.ok) throw new Error(`bench set-up: ${r.url} answered ${r.status}: ${(await r.text()).slice(0, 300)}`);
  // biome-ignore lint/suspicious/noExplicitAny: the service's answers, read loosely to set the benchmark up
  return r.json() as Promise<Record<string, any>>;
};

/** Starts the app and seeds its data; `close()` stops everything and drops the database. */
export async function startFixture(): Promise<Fixture> {
  const fake = await startFakeGitHub({ tokenExpiresIn: 28800 });
  fake.addUser({ login: 'bench', email: 'bench@example.com' });
  // Client credentials (tokens minted and cached) and an entered API key, each behind its own fake.
  const zoom = await startFakeZoomS2S();
  const stripe = await startFakeStripe();
  const closeFakes = () => Promise.all([fake.close(), zoom.close(), stripe.close()]);
  const githubEventsSecret = 'bench-github-webhook-secret-0123456789';
  const { database, cleanup } = await openBenchDatabase();
  const recorder = new Recorder(database);
  const sameWork = new Map<string, () => Promise<number>>();
  let app: Awaited<ReturnType<typeof buildApp>> | null = null;
  try {
    await database.migrate();
    const port = 18000 + Math.floor(Math.random() * 2000);
    const config = loadConfig({
      env: {
        ENCRYPTION_KEYS: `bench:${Buffer.alloc(32, 9).toString('base64')}`,
        JWT_SECRET: 'b'.repeat(40),
        PASSWORD_COST: '10',
        RATE_LIMIT_MAX: '0',
        OAUTH_STATUS_MAX_AGE: '86400',
        PORT: String(port),
        INTEGRATION_OAUTH_GITHUB_CLIENT_ID: fake.clientId,
        INTEGRATION_OAUTH_GITHUB_CLIENT_SECRET: fake.clientSecret,
        INTEGRATION_OAUTH_GITHUB_AUTH_URL: fake.authUrl,
        INTEGRATION_OAUTH_GITHUB_TOKEN_URL: fake.tokenUrl,
        INTEGRATION_OAUTH_GITHUB_API_URL: fake.apiUrl,
        INTEGRATION_OAUTH_GITHUB_EVENTS_SECRET: githubEventsSecret,
        INTEGRATION_OAUTH_ZOOMS2S_ENABLED: 'true',
        INTEGRATION_OAUTH_ZOOMS2S_TOKEN_URL: `${zoom.url}/oauth/token`,
        INTEGRATION_OAUTH_ZOOMS2S_API_URL: `${zoom.url}/v2`,
        INTEGRATION_OAUTH_STRIPE_ENABLED: 'true',
        INTEGRATION_OAUTH_STRIPE_API_URL: stripe.url,
        DB_POOL_MAX: '16',
      },
      persistGeneratedSecrets: false,
    });
    // Logs are produced and serialized as in production, then dropped.
    const sink = new Writable({ write: (_chunk, _encoding, callback) => callback() });
    let organizationId = '';
    const bare = { config: { auth: 'unauthenticated', errors: [] }, schema: { hide: true } } as const;
    app = await buildApp({
      config,
      database,
      logger: createLogger({ level: process.env.BENCH_LOG_LEVEL ?? 'info', stream: sink }),
      routes: (fastify, services) => {
        fastify.get('/bench/baseline', bare, async () => {
          // A prepared statement like the hot paths' own, so the comparison is like for like.
          const [row] = await ONE_ROW.rows(services.db, { id: organizationId });
          return { row: row ?? null };
        });
        // The same SELECT unprepared, as a plain `db.execute`: what planning every statement costs.
        fastify.get('/bench/unprepared', bare, async () => {
          const [row] = await queryRows(services.db, sql`SELECT id, name FROM organizations WHERE id = ${organizationId}`);
          return { row: row ?? null };
        });
        // A case's own statements, replayed: its database work with nothing of Tessera around it.
        fastify.get<{ Params: { case: string } }>('/bench/same/:case', bare, async (request) => {
          const replay = sameWork.get(request.params.case);
          if (!replay) throw new Error(`no recorded statements for case ${request.params.case}`);
          return { statements: await replay() };
        });
      },
    });
    await app.fastify.listen({ host: '127.0.0.1', port });
    const base = `http://127.0.0.1:${port}`;
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${base}${path}`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });

    await post('/v1/register', { email: 'bench@example.com', password: 'benchmark password' });
    const login = await json(await post('/v1/login', { email: 'bench@example.com', password: 'benchmark password' }));
    const jwt = login.accessToken as string;
    organizationId = login.organizationId as string;
    const auth = { authorization: `Bearer ${jwt}` };
    const start = await json(await post('/v1/integrations/oauth/start', { provider: 'github', redirectUri: `${base}/` }, auth));
    const approved = fake.authorize(start.authUrl as string, 'bench');
    await json(await post('/v1/integrations/oauth/callback', { provider: 'github', code: approved.code, state: approved.state }, auth));
    const sid = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString()).sid as string;
    const principal: Principal = { kind: 'jwt', userId: login.user.id as string, organizationId, role: 'owner', credentialId: sid, systemAdmin: false, viaCookie: false };
    const actor = (p: Principal) => ({ db: database.db, actor: { principal: p, requestId: null } });
    const apiToken = (await createApiToken(actor(principal), { name: 'bench' })).token;
    // Service tokens are a system administrator's to create; the benchmark acts as one directly.
    const serviceToken = (await createServiceToken(actor({ ...principal, systemAdmin: true }), { name: 'bench' })).token;

    // A second organization with 100 integrations, for the listing.
    const listOrg = ulid();
    await database.db.execute(sql`INSERT INTO organizations (id, name) VALUES (${listOrg}, 'list')`);
    await database.db.execute(sql`INSERT INTO memberships (organization_id, user_id, role) VALUES (${listOrg}, ${principal.userId}, 'owner')`);
    for (let i = 0; i < 100; i++) {
      const id = ulid();
      await database.db.execute(sql`INSERT INTO integrations (organization_id, id, provider, app_id, name, description, provider_account_id, last_validated_at)
        VALUES (${listOrg}, ${id}, ${`p${i}`}, ${`p${i}`}, ${`P${i} Integration (bench)`}, ${`OAuth integration with p${i} for bench`}, ${String(i)}, now())`);
      await replaceSecrets(database.db, config.keyring, { organizationId: listOrg, integrationId: id, provider: `p${i}` }, { access_token: `tok_${i}` });
    }
    const listJwt = (await json(await post('/v1/account/switch', { organizationId: listOrg }, auth))).accessToken as string;

    // Zoom client credentials connected (minted once here, then served from the cache), and a Stripe key.
    const zoomApp = zoom.addApp();
    await json(await post('/v1/integrations/zooms2s/credentials', { credentials: { accountId: zoomApp.accountId, clientId: zoomApp.clientId, clientSecret: zoomApp.clientSecret } }, auth));
    const stripeKey = stripe.addAccount('Bench Payments').key;

    // An agent's read capability for GitHub, minted from the API token as an agent's backend does.
    const minted = await json(
      await fetch(`${base}/v1/oauth/token`, {
        method: 'POST',
        body: new URLSearchParams({
          grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
          subject_token: apiToken,
          subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
          scope: 'integrations:github:read',
        }),
      }),
    );
    const mcp = { authorization: `Bearer ${minted.access_token as string}`, accept: 'application/json, text/event-stream' };
    // A tool error is a 200 too: check once that the call reaches GitHub, so the case measures the proxied call.
    const called = await json(await post('/mcp', { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'github_api', arguments: { method: 'GET', path: '/user' } } }, mcp));
    if (called.error || called.result?.isError || !JSON.stringify(called.result).includes('bench')) throw new Error(`bench set-up: the MCP tool call failed: ${JSON.stringify(called).slice(0, 300)}`);

    // End users' GitHub integrations for the provider-events benchmark, in an organization of their own.
    const eventTargets = await seedEventTargets(database, Number(process.env.BENCH_EVENTS ?? (process.env.BENCH_SMOKE === '1' ? 300 : 5000)));

    // The fakes keep a log of every request for the tests; under a proxy case's load it would only grow.
    const trimFakeLog = setInterval(() => {
      fake.requests.length = 0;
      zoom.requests.length = 0;
      stripe.requests.length = 0;
    }, 1000);
    trimFakeLog.unref();
    const started = app;
    return {
      base,
      database,
      services: app.services,
      recorder,
      organizationId,
      jwt: auth,
      apiToken: { authorization: `Bearer ${apiToken}` },
      serviceToken: { authorization: `Bearer ${serviceToken}`, 'x-organization-id': organizationId },
      listJwt: { authorization: `Bearer ${listJwt}` },
      githubEventsSecret,
      eventTargets,
      mcp,
      stripeKey,
      sameWork,
      close: async () => {
        clearInterval(trimFakeLog);
        await started.fastify.close();
        await cleanup();
        await closeFakes();
      },
    };
  } catch (error) {
    await app?.fastify.close();
    await cleanup();
    await closeFakes();
    throw error;
  }
}

/** `count` connected GitHub integrations of distinct end users and accounts (ids 7,000,001…) in a new organization. */
async function seedEventTargets(database: Database, count: number): Promise<number[]> {
  const org = ulid();
  const first = 7_000_001;
  await database.db.execute(sql`INSERT INTO organizations (id, name) VALUES (${org}, 'events')`);
  // One statement: ids are the organization's ULID and a counter (unique within it).
  await database.db.execute(sql`INSERT INTO integrations (organization_id, id, provider, app_id, end_user_key, end_user, name, description, provider_account_id, last_validated_at)
    SELECT ${org}, ${org} || '-' || n, 'github', 'github', 'eu' || n, jsonb_build_object('id', 'eu' || n), 'GitHub Integration (bench)', 'OAuth integration with github for bench', (${first} + n)::text, now()
    FROM generate_series(0, ${count - 1}) AS n`);
  return Array.from({ length: count }, (_, i) => first + i);
}
