import { defineProvider } from './engine.ts';

/**
 * Discord. Access tokens live 7 days and every refresh returns a new refresh token. More than
 * 10,000 answers of 401/403/429 in 10 minutes ban the calling IP, so a dead token must not be
 * retried: the 401 rules try one refresh, then the integration is `invalid`.
 */
export const discord = defineProvider({
  id: 'discord',
  displayName: 'Discord',
  endpoints: {
    authUrl: 'https://discord.com/oauth2/authorize',
    tokenUrl: 'https://discord.com/api/oauth2/token',
    apiUrl: 'https://discord.com/api/v10',
    revokeUrl: 'https://discord.com/api/oauth2/token/revoke',
  },
  defaultScopes: ['identify', 'email'],
  // A confidential client: Discord documents PKCE only for public ones.
  pkce: false,
  account: { url: '{apiUrl}/users/@me', id: 'id', username: ['username', 'global_name'], email: 'email' },
  api: {
    // 403 with code 50001 (Missing Access) or 50013 (Missing Permissions): forbidden, not revoked.
    deadToken: [{ status: 401 }],
    retryAfterPath: 'retry_after',
  },
  // Either token revokes every token of the authorization; the refresh token outlives the access token.
  revoke: { url: '{revokeUrl}', token: 'refresh', param: 'token', auth: 'body' },
  // The application's webhook events (docs/contract.md §5b): Ed25519 over the timestamp and the raw body, checked
  // with the application's public key (the events secret, hex). Discord sends no delivery id: its signature is one.
  // The PING it sends when the URL is saved, and every accepted delivery, are answered 204 with no body.
  events: {
    signature: { scheme: 'ed25519', header: 'x-signature-ed25519', prefix: '', signed: '{timestamp}{body}', timestampHeader: 'x-signature-timestamp' },
    deliveryId: { headerDigest: 'x-signature-ed25519' },
    accepted: 204,
    handshakes: [{ when: [{ path: 'type', equals: 0 }], answer: {} }],
    rules: [
      {
        type: 'application_deauthorized',
        when: [
          { path: 'type', equals: 1 },
          { path: 'event.type', equals: 'APPLICATION_DEAUTHORIZED' },
        ],
        // The Discord user who removed the app: the account id its integrations keep (`/users/@me` `id`).
        match: { accounts: '{event.data.user.id}' },
        occurredAt: { path: 'event.timestamp', format: 'iso' },
      },
    ],
  },
});
