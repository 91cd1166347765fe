import { defineProvider } from './engine.ts';

const OAUTH_EVENT = 'https://schemas.openid.net/secevent/oauth/event-type/';
const RISC_EVENT = 'https://schemas.openid.net/secevent/risc/event-type/';
/** Events naming a Google account (`iss-sub`): every grant of that account is gone, or unusable. */
const accountEvent = (type: string, uri: string) => ({
  type,
  when: [
    { path: 'event_type', equals: uri },
    { path: 'event.subject.subject_type', equals: 'iss-sub' },
  ],
  match: { accounts: '{event.subject.sub}' },
  occurredAt: { path: 'iat', format: 'seconds' as const },
});

/**
 * Google. A refresh token comes only with `access_type=offline` (and again only with
 * `prompt=consent`); refresh answers carry no new one, so the stored one is kept. A 403 is a
 * rate limit or a missing scope, told apart by `error.errors[].reason`.
 */
export const google = defineProvider({
  id: 'google',
  displayName: 'Google',
  endpoints: {
    authUrl: 'https://accounts.google.com/o/oauth2/v2/auth',
    tokenUrl: 'https://oauth2.googleapis.com/token',
    apiUrl: 'https://www.googleapis.com',
    userInfoUrl: 'https://openidconnect.googleapis.com/v1/userinfo',
    revokeUrl: 'https://oauth2.googleapis.com/revoke',
  },
  defaultScopes: ['openid', 'email', 'profile'],
  authorizeParams: { access_type: 'offline', prompt: 'consent' },
  // `sub` is the stable id; Google accounts have no username: the e-mail stands in.
  account: { url: '{userInfoUrl}', id: 'sub', username: ['email', 'name'], email: 'email' },
  api: {
    missingScope: [
      { status: 403, body: { path: 'error.errors[].reason', equals: 'insufficientPermissions' } },
      { status: 403, body: { path: 'error.details[].reason', equals: 'ACCESS_TOKEN_SCOPE_INSUFFICIENT' } },
    ],
    deadToken: [{ status: 401 }],
    rateLimit: [{ status: 403, body: { path: 'error.errors[].reason', equals: ['rateLimitExceeded', 'userRateLimitExceeded'] } }],
  },
  // Revoking either token ends the whole grant; no client authentication. The refresh token, which outlives an
  // expired access token, is sent where there is one.
  // `nextPageToken` in the body, sent back as `pageToken` (Drive, Calendar, Gmail).
  pagination: { type: 'cursor', from: 'nextPageToken', param: 'pageToken' },
  revoke: { url: '{revokeUrl}', token: 'refresh', param: 'token', auth: 'none' },
  // Cross-Account Protection (RISC): security event tokens signed by Google's own keys, for the
  // client id in `aud` — no events secret. Switched on by INTEGRATION_OAUTH_GOOGLE_RISC once the
  // receiver is registered with Google's RISC API (docs/providers.md).
  events: {
    signature: {
      kind: 'security_event_token',
      enabledBy: 'risc',
      configuration: { setting: 'riscConfigUrl', url: 'https://accounts.google.com/.well-known/risc-configuration' },
      alg: 'RS256',
      maxAgeSeconds: 24 * 60 * 60,
      refetchSeconds: 60,
    },
    deliveryId: { path: 'jti' },
    // The stream's test event: answered 202, its `state` (chosen by whoever asked Google to send it) logged.
    handshakes: [{ when: [{ path: 'event_type', equals: `${RISC_EVENT}verification` }], answer: {}, log: 'event.state' }],
    rules: [accountEvent('tokens_revoked', `${OAUTH_EVENT}tokens-revoked`), accountEvent('account_disabled', `${RISC_EVENT}account-disabled`)],
  },
});
