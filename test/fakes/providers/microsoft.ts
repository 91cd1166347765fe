import type { FakeProviderOptions } from '../common.ts';
import { json, startScreenFake } from '../toolkit.ts';

// From the Microsoft identity platform (v2.0 endpoints) and Graph error docs: endpoints under
// the tenant, a refresh token only with offline_access, AADSTS error answers, an id_token
// carrying the tenant (`tid`), and Graph's `{error:{code,message}}`.
const aadError = (status: number, error: string, code: number, description: string) =>
  json(status, { error, error_description: `AADSTS${code}: ${description}`, error_codes: [code], timestamp: new Date().toISOString(), trace_id: 'fake', correlation_id: 'fake' });
const graphError = (status: number, code: string, message: string, headers: Record<string, string> = {}) => json(status, { error: { code, message, innerError: { date: new Date().toISOString() } } }, headers);
const unsignedJwt = (claims: object) => `${Buffer.from('{"alg":"RS256","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.c2ln`;

/** A loopback fake of Entra ID and Graph for one tenant: `/{tenant}/oauth2/v2.0/{authorize,token}`, Graph under `/v1.0`. */
export function startFakeMicrosoft(options: FakeProviderOptions & { tenant?: string; tenantId?: string } = {}) {
  const tenant = options.tenant ?? 'common';
  const tenantId = options.tenantId ?? '9188040d-6c67-4c5b-b112-36a304b66dad';
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
      tokenAnswer: (family, user) => ({
        token_type: 'Bearer',
        scope: family.scopes.filter((scope) => scope !== 'offline_access').join(' '),
        expires_in: family.profile.accessTtlSeconds,
        ext_expires_in: family.profile.accessTtlSeconds,
        access_token: family.accessToken,
        ...(family.refreshToken ? { refresh_token: family.refreshToken } : {}),
        id_token: unsignedJwt({ tid: tenantId, oid: user.id, preferred_username: user.email }),
      }),
      tokenError: (failure, kind) =>
        failure === 'invalid_client'
          ? aadError(401, 'invalid_client', 7000215, 'Invalid client secret provided.')
          : aadError(400, failure, kind === 'refresh' ? 700082 : 70008, 'The provided authorization code or refresh token has expired due to inactivity.'),
      api: {
        'GET /me': ({ user }) => json(200, { id: user.id, displayName: user.name, userPrincipalName: `${user.login}@contoso.onmicrosoft.com`, mail: user.email }),
        'GET /me/messages': () => json(200, { value: [] }),
      },
      deadToken: () => graphError(401, 'InvalidAuthenticationToken', 'Access token validation failure. Invalid audience.'),
      missingScope: () => graphError(403, 'Authorization_RequestDenied', 'Insufficient privileges to complete the operation.'),
      rateLimited: () => graphError(429, 'TooManyRequests', 'Too many requests', { 'retry-after': '10' }),
    },
    options,
  );
}
