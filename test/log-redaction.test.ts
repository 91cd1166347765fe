// No secret in a log line (docs/contract.md §2), whatever form it arrives in: a connect link, its start
// link or a `token=` parameter, percent-encoded once, twice or in part, in upper or lower case, in
// the path or in a header the logs carry. HTTP in, the captured log lines out.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scrubLogLine, URL_SECRETS } from '../src/http/logging.ts';
import { API_TOKEN_PREFIX, CAPABILITY_PREFIX, PAT_PREFIX, SERVICE_TOKEN_PREFIX } from '../src/identity/credentials.ts';
import type { FakeProvider } from './fakes/common.ts';
import { startFakeGitHub } from './fakes/github.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';
import { graphqlData } from './helpers/graphql.ts';
import { bearer, registerAndLogin } from './helpers/identity.ts';
import { providerEnv } from './helpers/providers.ts';

const SCALE = Number(process.env.HOSTILE_SCALE ?? '1') || 1;
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

let t: TestApp;
let gh: FakeProvider;
let apiToken: string;

beforeAll(async () => {
  gh = await startFakeGitHub();
  t = await createTestApp({ background: false, env: { ...providerEnv(gh), OAUTH_REDIRECT_ORIGINS: 'http://127.0.0.1:8080,http://127.0.0.1:4455', RATE_LIMIT_MAX: '0' } });
  const owner = await registerAndLogin(t.fastify, 'redaction');
  apiToken = (await graphqlData(t.fastify, owner.token, 'mutation { createAPIToken(name: "backend") { token } }')).createAPIToken.token;
});

afterAll(async () => {
  await t?.close();
  await gh?.close();
});

/** Percent-decodes until nothing changes (every `%XX`, valid UTF-8 or not): what a reader of the log could recover. */
function decodedFully(text: string): string {
  let current = text;
  for (let round = 0; round < 20; round++) {
    const next = current.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => Buffer.from(run.replaceAll('%', ''), 'hex').toString('latin1'));
    if (next === current) return current;
    current = next;
  }
  return current;
}

/** One character as a browser, a proxy or an attacker might send it: raw, `%XX`, `%xx`, or encoded again. */
const charForm = (char: string) => {
  const hex = char.charCodeAt(0).toString(16).padStart(2, '0');
  return fc.constantFrom(char, `%${hex.toUpperCase()}`, `%${hex.toLowerCase()}`, `%25${hex.toUpperCase()}`, `%2525${hex.toLowerCase()}`);
};
/** Any mix of those forms over a whole text. */
const encoded = (text: string) => fc.tuple(...[...text].map(charForm)).map((parts) => parts.join(''));
const secretArb = fc.array(fc.constantFrom(...BASE64URL), { minLength: 43, maxLength: 43 }).map((chars) => chars.join(''));

interface Carrier {
  url: string;
  headers?: Record<string, string>;
}

/** Where a secret travels: the hosted page's link, its start link, a query parameter, an unrouted path, a logged header. */
const carriers = (secret: string): fc.Arbitrary<Carrier> =>
  fc.oneof<fc.Arbitrary<Carrier>[]>(
    encoded(`/connect/${secret}`).map((path) => ({ url: path })),
    fc.tuple(encoded('/connect/'), encoded(secret)).map(([prefix, value]) => ({ url: `/v1/integrations/oauth${prefix}${value}/start?provider=github` })),
    encoded(`/connect/${secret}`).map((path) => ({ url: `/nowhere${path.startsWith('/') ? '' : '/'}${path}` })),
    fc.tuple(fc.constantFrom('token', 'access_token', 'invitation_token'), encoded(secret)).chain(([name, value]) =>
      encoded(`?${name}=`).map((query) => ({ url: `/connect${query}${value}` })),
    ),
    encoded(`/connect/${secret}`).map((value) => ({ url: '/livez', headers: { 'x-request-id': value } })),
  );

function leaks(lines: string[], secret: string): string | undefined {
  return lines.find((line) => line.includes(secret) || decodedFully(line).includes(secret));
}

describe('log redaction of encoded forms', () => {
  it('keeps a live connect link out of the log however it is percent-encoded', async () => {
    const minted = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(apiToken), payload: { redirectUri: 'http://127.0.0.1:4455/done' } });
    expect(minted.statusCode, minted.body).toBe(201);
    const secret = (minted.json().session.url as string).split('/').at(-1) as string;
    const escapeAll = (text: string, upper: boolean) => [...text].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')[upper ? 'toUpperCase' : 'toLowerCase']()}`).join('');
    const forms = [
      `/connect/${escapeAll(secret, true)}`,
      `/connect/${secret.slice(0, 10)}${escapeAll(secret.slice(10, 12), false)}${secret.slice(12)}`,
      `/anything/%2Fconnect%2F${secret}`,
      `/anything/%252Fconnect%252F${secret}`,
      `/v1/integrations/oauth/connect/${escapeAll(secret, false)}/start?provider=github`,
      `/connect%3Ftoken%3D${secret}`,
    ];
    const marker = t.logs.lines.length;
    // The encoded link is live: the router decodes it to the session's page.
    expect((await t.fastify.inject({ url: forms[0] as string })).statusCode).toBe(200);
    for (const url of forms.slice(1)) await t.fastify.inject({ url });
    await t.fastify.inject({ url: '/livez', headers: { 'x-request-id': `%2Fconnect%2F${secret}` } });
    const lines = t.logs.lines.slice(marker);
    expect(lines.length).toBeGreaterThan(10);
    expect(leaks(lines, secret)).toBeUndefined();
    expect(lines.join('\n')).toContain('/connect/[REDACTED]');
  });

  it('any secret in a connect path, a start link, a token parameter or a header, in any mix of encodings, never reaches the log', { timeout: 300_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(
        secretArb.chain((secret) => fc.tuple(fc.constant(secret), carriers(secret))),
        async ([secret, request]) => {
          const marker = t.logs.lines.length;
          await t.fastify.inject({ url: request.url, ...(request.headers ? { headers: request.headers } : {}) });
          const lines = t.logs.lines.slice(marker);
          expect(lines.length).toBeGreaterThan(0);
          expect(leaks(lines, secret)).toBeUndefined();
        },
      ),
      { numRuns: Math.ceil(200 * SCALE) },
    );
  });

  it('the scrubber recovers every encoded form of a secret shape, and leaves ordinary encoded text alone', () => {
    fc.assert(
      fc.property(
        secretArb.chain((secret) =>
          fc.tuple(
            fc.constant(secret),
            fc.oneof(
              encoded(`/connect/${secret}`),
              encoded(`/v1/integrations/oauth/connect/${secret}/start`),
              encoded(`https://tessera.example/cb?code=${secret}`),
              encoded(`Bearer ghp_${secret}`),
              encoded(`/invitations?token=${secret}`),
            ),
          ),
        ),
        fc.constantFrom('url', 'msg', 'requestId', 'path'),
        ([secret, value], field) => {
          const line = scrubLogLine(JSON.stringify({ level: 30, [field]: value, msg2: 'x' }));
          expect(() => JSON.parse(line)).not.toThrow();
          expect(line.includes(secret) || decodedFully(line).includes(secret), line).toBe(false);
        },
      ),
      { numRuns: Math.ceil(1000 * SCALE) },
    );
    const ordinary = JSON.stringify({ url: '/v1/integrations/Acme%20Corp/files%2Freport.pdf', msg: '50% done' });
    expect(scrubLogLine(ordinary)).toBe(ordinary);
  });
});

/** One character of a route's fixed text in either case, then in any of `charForm`'s encodings. */
const caseAndForm = (char: string) => fc.constantFrom(char.toLowerCase(), char.toUpperCase()).chain(charForm);
/** A route's fixed text in any mix of cases and encodings (the secret itself keeps its case: another case is another value). */
const blindEncoded = (text: string) => fc.tuple(...[...text].map(caseAndForm)).map((parts) => parts.join(''));

/** Mints a connect session through the API and returns its link's secret. */
async function issuedSecret(): Promise<string> {
  const minted = await t.fastify.inject({ method: 'POST', url: '/v1/connect/sessions', headers: bearer(apiToken), payload: { redirectUri: 'http://127.0.0.1:4455/done' } });
  expect(minted.statusCode, minted.body).toBe(201);
  return (minted.json().session.url as string).split('/').at(-1) as string;
}

describe('log redaction whatever the case (decision 235)', () => {
  it('keeps a live connect secret out of the log when the path differs in case, encoding or separators, on every route that carries one', async () => {
    const secret = await issuedSecret();
    const forms = [
      `/CONNECT/${secret}`,
      `/Connect/${secret}`,
      `/cOnNeCt/${secret}?popup=1`,
      `/%63onnect/${secret}`,
      `/%43ONNECT/${secret}`,
      `/%2563onnect/${secret}`,
      `/%43%4f%4E%4eect/${secret}`,
      `/%252F%2563ONNECT%252F${secret}`,
      `/V1/INTEGRATIONS/OAUTH/CONNECT/${secret}/START?provider=github`,
      `/v1/integrations/oauth/%43onnect/${secret}/start`,
      `/v1/oauth/AUTHORIZATIONS/${secret}`,
      `/v1/oauth/authorizations/${secret}/approve`,
      `/invitations/01JDZ3K5M8Q2W4E6R8T0Y2U4I6%23TOKEN%3D${secret}`,
      `/v1/integrations/oauth/callback%3FCODE%3D${secret}%26STATE%3D${secret}`,
      `/connect//${secret}`,
      `/connect/x${secret}`,
      `/nowhere/${secret}`,
      `/nowhere/TSA_${secret}`,
      `/connect\\${secret}`,
    ];
    const marker = t.logs.lines.length;
    // The lower-case link with an encoded letter is live (the router decodes it), and the upper-case one is no route.
    expect((await t.fastify.inject({ url: `/connect/${secret.slice(0, 5)}%${secret.charCodeAt(5).toString(16)}${secret.slice(6)}` })).statusCode).toBe(200);
    expect((await t.fastify.inject({ url: `/CONNECT/${secret}` })).statusCode).toBe(404);
    for (const url of forms) await t.fastify.inject({ url });
    const lines = t.logs.lines.slice(marker);
    expect(lines.length).toBeGreaterThanOrEqual(2 * (forms.length + 2));
    expect(leaks(lines, secret)).toBeUndefined();
    const all = lines.join('\n');
    expect(all).toContain('/CONNECT/[REDACTED]');
    expect(all).toContain('/v1/oauth/AUTHORIZATIONS/[REDACTED]');
    // Nothing of the routes' own text went with it.
    expect(all).toContain('"route":"/connect/:secret"');
  });

  it('many case and encoding variants of a real issued connect secret never reach the log', { timeout: 300_000 }, async () => {
    const secrets = [await issuedSecret(), await issuedSecret()];
    const variants = fc.constantFrom(...secrets).chain((secret) =>
      fc.tuple(
        fc.constant(secret),
        fc.oneof<fc.Arbitrary<Carrier>[]>(
          fc.tuple(blindEncoded('/connect/'), encoded(secret), fc.constantFrom('', '?popup=1', '/')).map(([prefix, value, tail]) => ({ url: `${prefix}${value}${tail}` })),
          fc.tuple(blindEncoded('/v1/integrations/oauth/connect/'), encoded(secret), blindEncoded('/start')).map(([prefix, value, tail]) => ({ url: `${prefix}${value}${tail}` })),
          fc.tuple(blindEncoded('/v1/oauth/authorizations/'), encoded(secret)).map(([prefix, value]) => ({ url: `${prefix}${value}` })),
          fc.tuple(fc.constantFrom('token', 'code', 'state', 'access_token', 'refresh_token'), fc.constantFrom('%3F', '%23', '%253F', '%26')).chain(([name, lead]) =>
            fc.tuple(blindEncoded(`${name}=`), encoded(secret)).map(([param, value]) => ({ url: `/v1/integrations/oauth/callback${lead}${param}${value}` })),
          ),
          fc.tuple(blindEncoded('/connect/'), encoded(secret)).map(([prefix, value]) => ({ url: '/livez', headers: { 'x-request-id': `${prefix}${value}` } })),
        ),
      ),
    );
    await fc.assert(
      fc.asyncProperty(variants, async ([secret, request]) => {
        const marker = t.logs.lines.length;
        await t.fastify.inject({ url: request.url, ...(request.headers ? { headers: request.headers } : {}) });
        const lines = t.logs.lines.slice(marker);
        expect(lines.length).toBeGreaterThan(0);
        expect(leaks(lines, secret)).toBeUndefined();
      }),
      { numRuns: Math.ceil(300 * SCALE) },
    );
  });

  it('covers every prefix of our own tokens in either case, and every listed path in any case', () => {
    const secret = 'AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCdE';
    for (const prefix of [PAT_PREFIX, API_TOKEN_PREFIX, SERVICE_TOKEN_PREFIX, CAPABILITY_PREFIX]) {
      expect(URL_SECRETS.tokenPrefixes).toContain(prefix);
      for (const form of [prefix, prefix.toUpperCase()]) {
        const line = scrubLogLine(JSON.stringify({ msg: `presented ${form}${secret}`, header: `Token ${form}${secret}` }));
        expect(line).not.toContain(secret);
      }
    }
    for (const path of URL_SECRETS.pathPrefixes) {
      for (const form of [path, path.toUpperCase(), path.replace(/^./, (c) => c.toUpperCase())]) {
        const line = scrubLogLine(JSON.stringify({ url: `/v1/${form}/${secret.slice(0, 12)}`, msg: `No route for GET /${form}/${secret.slice(0, 12)}` }));
        expect(line).not.toContain(secret.slice(0, 12));
      }
    }
    // Ordinary paths stay as they were, and a JSON escape before a long word is never cut.
    for (const ordinary of [{ url: '/connect/assets/connect.css' }, { url: '/v1/integrations/github/proxy/repos/acme/widgets' }]) {
      expect(scrubLogLine(JSON.stringify(ordinary))).toBe(JSON.stringify(ordinary));
    }
    for (const escaped of [`line\n${secret}`, `a\\\n${secret}`, `\\\\${secret}`, `/x\\\t${secret}`]) {
      expect(() => JSON.parse(scrubLogLine(JSON.stringify({ msg: escaped })))).not.toThrow();
    }
  });
});
