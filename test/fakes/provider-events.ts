/**
 * Signed event deliveries as Slack, GitHub and Zoom send them to an app, written from each
 * provider's documentation (not from Tessera's definitions):
 * - Slack Events API, "Verifying requests from Slack": `X-Slack-Request-Timestamp` (epoch
 *   seconds) and `X-Slack-Signature: v0=` + hex HMAC-SHA256(signing secret, `v0:<ts>:<body>`);
 *   `url_verification` carries a `challenge`; `event_callback` wraps `tokens_revoked`
 *   (`event.tokens.oauth` user ids, `event.tokens.bot`) and `app_uninstalled`, with `team_id`,
 *   `api_app_id`, `event_id` and `event_time`; a retry repeats the body under a new timestamp
 *   with `X-Slack-Retry-Num` and `X-Slack-Retry-Reason`.
 * - GitHub webhooks, "Validating webhook deliveries": `X-Hub-Signature-256: sha256=` + hex
 *   HMAC-SHA256(webhook secret, body) beside the legacy SHA-1 `X-Hub-Signature`, the event in
 *   `X-GitHub-Event`, a GUID in `X-GitHub-Delivery` (kept by a redelivery), `User-Agent:
 *   GitHub-Hookshot/…`; `github_app_authorization` has `action: "revoked"` and the `sender`;
 *   `installation` ("Webhook events and payloads") has `action` (`created`, `deleted`,
 *   `suspend`, `unsuspend`, `new_permissions_accepted`), the `installation` (`id`, `account`,
 *   `app_id`, `target_type`, `repository_selection`, `suspended_at`, `suspended_by`…), for
 *   `created`/`deleted` the `repositories`, and the `sender`.
 * - Zoom webhooks: `x-zm-request-timestamp` (epoch seconds) and `x-zm-signature: v0=` + hex
 *   HMAC-SHA256(secret token, `v0:<ts>:<body>`); `endpoint.url_validation` carries
 *   `payload.plainToken`; `app_deauthorized` carries `payload.account_id`, `user_id`,
 *   `deauthorization_time` (ISO 8601), `client_id`, `user_data_retention` and `signature`, with
 *   `event_ts` in epoch milliseconds.
 * - Linear (the OAuth application's webhook): `Linear-Signature` = hex HMAC-SHA256(secret, raw
 *   body), no prefix; `Linear-Delivery` (a UUID) and `Linear-Event` (the entity type) headers;
 *   every body carries `webhookTimestamp` (epoch milliseconds). An `OAuthApp` `revoked` event
 *   names `organizationId` and the app's `oauthClientId`.
 * - Discord (webhook events of an application, "Webhook Events"): `X-Signature-Ed25519` = hex
 *   Ed25519 signature, by the application's key pair, of `X-Signature-Timestamp` (epoch
 *   seconds) followed by the raw body; the application's public key is shown as 64 hex
 *   characters. The body has `version` 1, `application_id` and `type` — 0 a PING (sent when the
 *   URL is saved; answered 204 with no body), 1 an event whose `event` has `type`
 *   (`APPLICATION_AUTHORIZED`, `APPLICATION_DEAUTHORIZED`, `ENTITLEMENT_CREATE`…), `timestamp`
 *   (ISO 8601, no offset: UTC) and `data` (`APPLICATION_DEAUTHORIZED`: the `user`). An endpoint
 *   must refuse a bad signature (Discord checks that it does) and answer 204 within 3 seconds.
 */
import { createHmac, generateKeyPairSync, randomBytes, randomUUID, sign as signWith } from 'node:crypto';

/** One delivery: what goes on the wire. */
export interface SignedDelivery {
  headers: Record<string, string>;
  body: string;
}

/** What the receiver answered. */
export interface DeliveryAnswer {
  status: number;
  headers: Headers;
  body: string;
  json(): Record<string, unknown>;
}

const hmacHex = (secret: string, data: string) => createHmac('sha256', secret).update(data).digest('hex');
const nowSeconds = () => Math.floor(Date.now() / 1000);

/** POSTs a delivery to `url` over real HTTP, as the provider's servers do. */
export async function deliver(url: string, delivery: SignedDelivery): Promise<DeliveryAnswer> {
  const res = await fetch(url, { method: 'POST', headers: delivery.headers, body: delivery.body });
  const body = await res.text();
  return { status: res.status, headers: res.headers, body, json: () => JSON.parse(body) as Record<string, unknown> };
}

/** Slack's Events API deliveries, signed with the app's signing secret. */
export function slackEvents(signingSecret: string, options: { appId?: string } = {}) {
  const appId = options.appId ?? 'A0FAKE';
  const sign = (body: string, timestamp = nowSeconds(), extra: Record<string, string> = {}): SignedDelivery => ({
    headers: {
      'content-type': 'application/json',
      'user-agent': 'Slackbot 1.0 (+https://api.slack.com/robots)',
      'x-slack-request-timestamp': String(timestamp),
      'x-slack-signature': `v0=${hmacHex(signingSecret, `v0:${timestamp}:${body}`)}`,
      ...extra,
    },
    body,
  });
  const callback = (teamId: string, event: Record<string, unknown>, eventTime: number) =>
    JSON.stringify({
      token: 'legacyVerificationToken0',
      team_id: teamId,
      api_app_id: appId,
      event,
      type: 'event_callback',
      event_id: `Ev${randomBytes(5).toString('hex').toUpperCase()}`,
      event_time: eventTime,
    });
  return {
    sign,
    /** The check Slack sends when the Request URL is set. */
    urlVerification: (challenge = randomBytes(24).toString('base64url')) => sign(JSON.stringify({ token: 'legacyVerificationToken0', challenge, type: 'url_verification' })),
    /** A user (or several) revoked the app's tokens. */
    tokensRevoked: (teamId: string, userIds: string[], options: { botIds?: string[]; eventTime?: number; timestamp?: number } = {}) =>
      sign(callback(teamId, { type: 'tokens_revoked', tokens: { oauth: userIds, bot: options.botIds ?? [] } }, options.eventTime ?? nowSeconds()), options.timestamp),
    /** The app was uninstalled from the workspace. */
    appUninstalled: (teamId: string, options: { eventTime?: number; timestamp?: number } = {}) => sign(callback(teamId, { type: 'app_uninstalled' }, options.eventTime ?? nowSeconds()), options.timestamp),
    /** Another event the app is subscribed to. */
    other: (teamId: string, type: string) => sign(callback(teamId, { type, user: 'U0SOMEONE', channel: 'C0FAKE0001' }, nowSeconds())),
    /** Slack's retry of a delivery that failed: the same body, a new timestamp and signature. */
    retry: (delivery: SignedDelivery, number = 1) => sign(delivery.body, nowSeconds(), { 'x-slack-retry-num': String(number), 'x-slack-retry-reason': 'http_timeout' }),
  };
}

/** A GitHub App's webhook deliveries, signed with the webhook secret. */
export function githubEvents(webhookSecret: string, options: { appId?: number; hookId?: number } = {}) {
  const sign = (event: string, body: string, deliveryId: string = randomUUID()): SignedDelivery => ({
    headers: {
      'content-type': 'application/json',
      'user-agent': 'GitHub-Hookshot/7c9b3a1',
      'x-github-event': event,
      'x-github-delivery': deliveryId,
      'x-github-hook-id': String(options.hookId ?? 4711),
      'x-github-hook-installation-target-type': 'integration',
      'x-github-hook-installation-target-id': String(options.appId ?? 123456),
      'x-hub-signature': `sha1=${createHmac('sha1', webhookSecret).update(body).digest('hex')}`,
      'x-hub-signature-256': `sha256=${hmacHex(webhookSecret, body)}`,
    },
    body,
  });
  const sender = (user: { id: number; login: string }) => ({ login: user.login, id: user.id, node_id: `U_${user.id}`, type: 'User', site_admin: false, html_url: `https://github.com/${user.login}` });
  return {
    sign,
    /** A user revoked their authorization of the GitHub App. */
    authorizationRevoked: (user: { id: number; login: string }) => sign('github_app_authorization', JSON.stringify({ action: 'revoked', sender: sender(user) })),
    /** An `installation` event of the app: `deleted`, `suspend`, `unsuspend`, `created`… by `by` (the account's owner or admin). */
    installation: (
      action: string,
      installation: { id: number; account: { id: number; login: string; type: 'User' | 'Organization' }; repositorySelection?: 'all' | 'selected' },
      by: { id: number; login: string },
    ) => {
      const suspended = action === 'suspend';
      const at = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
      const account = { ...sender(installation.account), type: installation.account.type };
      return sign(
        'installation',
        JSON.stringify({
          action,
          installation: {
            id: installation.id,
            client_id: 'Iv23liFakeGitHubApp001',
            account,
            repository_selection: installation.repositorySelection ?? 'selected',
            access_tokens_url: `https://api.github.com/app/installations/${installation.id}/access_tokens`,
            repositories_url: 'https://api.github.com/installation/repositories',
            html_url: `https://github.com/settings/installations/${installation.id}`,
            app_id: options.appId ?? 123456,
            app_slug: 'tessera-test',
            target_id: installation.account.id,
            target_type: installation.account.type,
            permissions: { contents: 'read', metadata: 'read', issues: 'write' },
            events: [],
            created_at: at,
            updated_at: at,
            single_file_name: null,
            suspended_by: suspended ? sender(by) : null,
            suspended_at: suspended ? at : null,
          },
          ...(action === 'created' || action === 'deleted' ? { repositories: [{ id: installation.account.id * 10, name: 'hello-world', full_name: `${installation.account.login}/hello-world`, private: false }] } : {}),
          sender: sender(by),
        }),
      );
    },
    /** The ping GitHub sends when the webhook is created. */
    ping: () => sign('ping', JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: options.hookId ?? 4711 })),
    /** A redelivery, from the app's settings: the same delivery id and body. */
    redeliver: (delivery: SignedDelivery) => sign(delivery.headers['x-github-event'] as string, delivery.body, delivery.headers['x-github-delivery']),
  };
}

/** Zoom's event notifications to an app's endpoint, signed with its secret token. */
export function zoomEvents(secretToken: string, app: { clientId?: string } = {}) {
  const sign = (body: string, timestamp = nowSeconds()): SignedDelivery => ({
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'user-agent': 'Zoom Marketplace/1.0a',
      'x-zm-request-timestamp': String(timestamp),
      'x-zm-signature': `v0=${hmacHex(secretToken, `v0:${timestamp}:${body}`)}`,
      // The legacy verification token Zoom still sends; not a signature.
      authorization: 'legacyVerificationToken0',
    },
    body,
  });
  return {
    sign,
    /** The check Zoom sends when the endpoint URL is saved (and every 72 hours). */
    urlValidation: (plainToken = randomBytes(16).toString('base64url')) => sign(JSON.stringify({ payload: { plainToken }, event_ts: Date.now(), event: 'endpoint.url_validation' })),
    /** A user (or the account's admin) removed the app. */
    appDeauthorized: (accountId: string, userId: string, options: { deauthorizedAt?: Date; timestamp?: number } = {}) =>
      sign(
        JSON.stringify({
          event: 'app_deauthorized',
          event_ts: Date.now(),
          payload: {
            account_id: accountId,
            user_id: userId,
            signature: randomBytes(32).toString('hex'),
            deauthorization_time: (options.deauthorizedAt ?? new Date()).toISOString(),
            client_id: app.clientId ?? 'fakeZoomClientId',
            user_data_retention: 'false',
          },
        }),
        options.timestamp,
      ),
  };
}

/** Linear's webhook deliveries of an OAuth application, signed with its webhook signing secret. */
export function linearEvents(signingSecret: string) {
  const sign = (body: string, deliveryId: string = randomUUID()): SignedDelivery => ({
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'user-agent': 'Linear-Webhook',
      'linear-delivery': deliveryId,
      'linear-event': String((JSON.parse(body) as { type?: unknown }).type ?? ''),
      'linear-signature': hmacHex(signingSecret, body),
    },
    body,
  });
  return {
    sign,
    /** An organization's admin revoked the app's access (every token of the app in that Linear organization). */
    oauthAppRevoked: (organizationId: string, oauthClientId: string, options: { webhookTimestamp?: number } = {}) =>
      sign(
        JSON.stringify({
          action: 'revoked',
          type: 'OAuthApp',
          createdAt: new Date().toISOString(),
          organizationId,
          oauthClientId,
          url: 'https://linear.app/settings/api/applications',
          webhookId: randomUUID(),
          webhookTimestamp: options.webhookTimestamp ?? Date.now(),
        }),
      ),
  };
}

/** A Discord application's webhook events, signed with its Ed25519 key pair (its public key: `publicKey`, hex). */
export function discordEvents(options: { applicationId?: string } = {}) {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x as string, 'base64url');
  const applicationId = options.applicationId ?? '1234560123453231555';
  const sign = (body: string, timestamp = nowSeconds()): SignedDelivery => ({
    headers: {
      'content-type': 'application/json',
      'user-agent': 'Discord-Webhook/1.0 (+https://discord.com)',
      'x-signature-ed25519': signWith(null, Buffer.from(`${timestamp}${body}`), privateKey).toString('hex'),
      'x-signature-timestamp': String(timestamp),
    },
    body,
  });
  const user = (id: string) => ({ id, username: `user${id.slice(-4)}`, avatar: null, discriminator: '0', public_flags: 0, flags: 0, banner: null, accent_color: null, global_name: null, avatar_decoration_data: null, banner_color: null, clan: null });
  // Discord's timestamps: ISO 8601 with microseconds and no offset (UTC).
  const discordTime = (at: Date) => at.toISOString().replace('Z', '000');
  const event = (type: string, data: Record<string, unknown>, at: Date) => JSON.stringify({ version: 1, application_id: applicationId, type: 1, event: { type, timestamp: discordTime(at), data } });
  return {
    /** The application's public key, as its page shows it: 64 hex characters. */
    publicKey: raw.toString('hex'),
    applicationId,
    sign,
    /** The PING Discord sends when the Webhook Events URL is saved. */
    ping: () => sign(JSON.stringify({ version: 1, application_id: applicationId, type: 0 })),
    /** A user removed the app from their account. */
    deauthorized: (userId: string, options: { at?: Date; timestamp?: number } = {}) => sign(event('APPLICATION_DEAUTHORIZED', { user: user(userId) }, options.at ?? new Date()), options.timestamp),
    /** Another event the app subscribes to (`APPLICATION_AUTHORIZED`, with the user and the scopes granted). */
    authorized: (userId: string) => sign(event('APPLICATION_AUTHORIZED', { integration_type: 1, scopes: ['identify', 'email'], user: user(userId) }, new Date())),
    /** A resend of a delivery Discord got no answer to: the same body, timestamp and signature. */
    resend: (delivery: SignedDelivery): SignedDelivery => ({ headers: { ...delivery.headers }, body: delivery.body }),
  };
}
