import type { FakeProviderOptions, FakeReply } from '../common.ts';
import { type ApiCall, bearerOf, json, startScreenFake } from '../toolkit.ts';

// From the Microsoft identity platform (v2.0 endpoints) and Graph error docs: endpoints under
// the tenant, a refresh token only with offline_access, AADSTS error answers, an id_token
// carrying the tenant (`tid`), and Graph's `{error:{code,message}}`.
const aadError = (status: number, error: string, code: number, description: string) =>
  json(status, { error, error_description: `AADSTS${code}: ${description}`, error_codes: [code], timestamp: new Date().toISOString(), trace_id: 'fake', correlation_id: 'fake' });
const graphError = (status: number, code: string, message: string, headers: Record<string, string> = {}) => json(status, { error: { code, message, innerError: { date: new Date().toISOString() } } }, headers);
const unsignedJwt = (claims: object) => `${Buffer.from('{"alg":"RS256","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.c2ln`;

/**
 * Continuous access evaluation, as Microsoft's "Claims challenges, claims requests and client
 * capabilities" and CAE pages describe it: a client declares the `cp1` capability with the
 * `claims` parameter of its token requests (`{"access_token":{"xms_cc":{"values":["cp1"]}}}`);
 * only tokens so issued are evaluated continuously. After a critical event (a session revoked, a
 * location policy met), Graph answers such a token issued before the event with 401 and
 * `WWW-Authenticate: Bearer realm="", authorization_uri="…", error="insufficient_claims",
 * claims="<base64 of {"access_token":{"nbf":{"essential":true,"value":"<event time>"}}}>"`; the
 * client asks the token endpoint again with those claims merged into its own. A refresh Entra
 * refuses after the event (MFA now required) is `interaction_required` (AADSTS50076).
 */
export interface FakeCae {
  /** Users (logins) whose cp1 tokens issued before the time given (epoch ms) Graph challenges. */
  events: Map<string, number>;
  /** Users whose every cp1 token Graph challenges, whenever issued: a condition no new token meets. */
  always: Set<string>;
  /** How the token endpoint answers a refresh of a challenged user: a new token, `interaction_required`, or 503. */
  refresh: 'ok' | 'interaction_required' | 'unavailable';
  /** The `claims` of each token request (decoded JSON; null when it carried none), in order. */
  readonly tokenClaims: (Record<string, unknown> | null)[];
  /** The claims challenges Graph sent, in order. */
  readonly challenges: string[];
}

/** A CAE control for `startFakeMicrosoft({ cae })`: no event yet. */
export function fakeCae(): FakeCae {
  return { events: new Map(), always: new Set(), refresh: 'ok', tokenClaims: [], challenges: [] };
}

/** A loopback fake of Entra ID and Graph for one tenant: `/{tenant}/oauth2/v2.0/{authorize,token}`, Graph under `/v1.0`. */
export function startFakeMicrosoft(options: FakeProviderOptions & { tenant?: string; tenantId?: string; cae?: FakeCae } = {}) {
  const tenant = options.tenant ?? 'common';
  const tenantId = options.tenantId ?? '9188040d-6c67-4c5b-b112-36a304b66dad';
  const cae = options.cae ?? fakeCae();
  /** Access tokens issued to a client that declared cp1, with when (epoch ms). */
  const evaluated = new Map<string, number>();
  let requestDeclaredCp1 = false;
  const declaresCp1 = (claims: Record<string, unknown> | null) => {
    const values = (claims?.access_token as { xms_cc?: { values?: unknown } } | undefined)?.xms_cc?.values;
    return Array.isArray(values) && values.includes('cp1');
  };
  /** The claims challenge for `token` of `login`, if Graph would send one now. */
  const challengeFor = (login: string, token: string): FakeReply | undefined => {
    const issuedAt = evaluated.get(token);
    if (issuedAt === undefined) return undefined;
    const event = cae.events.get(login);
    if (!cae.always.has(login) && (event === undefined || issuedAt >= event)) return undefined;
    const since = Math.floor((event ?? Date.now()) / 1000);
    const claims = Buffer.from(JSON.stringify({ access_token: { nbf: { essential: true, value: String(since) } } })).toString('base64');
    const header = `Bearer realm="", authorization_uri="https://login.microsoftonline.com/${tenant}/oauth2/authorize", client_id="00000003-0000-0000-c000-000000000000", error="insufficient_claims", claims="${claims}"`;
    cae.challenges.push(header);
    return graphError(401, 'InvalidAuthenticationToken', 'Continuous access evaluation resulted in challenge with result: InteractionRequired and code: TokenIssuedBeforeRevocationTimestamp', { 'www-authenticate': header });
  };
  const evaluatedCall =
    (handler: (call: ApiCall) => FakeReply) =>
    (call: ApiCall): FakeReply =>
      challengeFor(call.user.login, bearerOf(call.ctx) ?? '') ?? handler(call);
  return startScreenFake(
    {
      id: 'microsoft',
      displayName: 'Microsoft',
      clientId: '00000000-0000-0000-0000-00000000fa4e',
      clientSecret: 'fakeMicrosoftClientSecret~0000000001',
      paths: { authorize: `/${tenant}/oauth2/v2.0/authorize`, token: `/${tenant}/oauth2/v2.0/token`, api: '/v1.0' },
      clientAuth: 'body',
      access: { prefix: 'eyJ0eXAiOiJKV1Qi.', ttl: 3600 },
      refresh: 'rotate',
      refreshGranted: (request) => request.scopes.includes('offline_access'),
      userId: (n) => `6e7b7f1a-0000-4000-8000-${String(n).padStart(12, '0')}`,
      tokenGate: (params, kind, core) => {
        let claims: Record<string, unknown> | null = null;
        try {
          claims = params.claims ? (JSON.parse(params.claims) as Record<string, unknown>) : null;
        } catch {
          return aadError(400, 'invalid_request', 90014, 'The claims parameter is not valid JSON.');
        }
        cae.tokenClaims.push(claims);
        requestDeclaredCp1 = declaresCp1(claims);
        if (kind !== 'refresh' || cae.refresh === 'ok') return undefined;
        const login = core.grants.familyOfToken(params.refresh_token ?? '')?.login;
        if (login === undefined || (!cae.events.has(login) && !cae.always.has(login))) return undefined;
        if (cae.refresh === 'unavailable') return aadError(503, 'temporarily_unavailable', 90033, 'A transient error has occurred. Please try again.');
        return aadError(400, 'interaction_required', 50076, 'Due to a configuration change made by your administrator, or because you moved to a new location, you must use multi-factor authentication.');
      },
      tokenAnswer: (family, user) => {
        if (requestDeclaredCp1) evaluated.set(family.accessToken, Date.now());
        return {
        token_type: 'Bearer',
        scope: family.scopes.filter((scope) => scope !== 'offline_access').join(' '),
        expires_in: family.profile.accessTtlSeconds,
        ext_expires_in: family.profile.accessTtlSeconds,
        access_token: family.accessToken,
        ...(family.refreshToken ? { refresh_token: family.refreshToken } : {}),
        id_token: unsignedJwt({ tid: tenantId, oid: user.id, preferred_username: user.email }),
        };
      },
      tokenError: (failure, kind) =>
        failure === 'invalid_client'
          ? aadError(401, 'invalid_client', 7000215, 'Invalid client secret provided.')
          : aadError(400, failure, kind === 'refresh' ? 700082 : 70008, 'The provided authorization code or refresh token has expired due to inactivity.'),
      api: {
        'GET /me': evaluatedCall(({ user }) => json(200, { id: user.id, displayName: user.name, userPrincipalName: `${user.login}@contoso.onmicrosoft.com`, mail: user.email })),
        'GET /me/messages': evaluatedCall(() => json(200, { value: [] })),
      },
      deadToken: () => graphError(401, 'InvalidAuthenticationToken', 'Access token validation failure. Invalid audience.'),
      missingScope: () => graphError(403, 'Authorization_RequestDenied', 'Insufficient privileges to complete the operation.'),
      rateLimited: () => graphError(429, 'TooManyRequests', 'Too many requests', { 'retry-after': '10' }),
    },
    options,
  );
}
