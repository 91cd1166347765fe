// @ts-check
/** @import { webhooks } from './generated/openapi.js' */
import { Webhook, WebhookVerificationError as StandardWebhooksError } from 'standardwebhooks';

/**
 * @typedef {{ [T in keyof webhooks]: NonNullable<webhooks[T]['post']>['requestBody'] extends { content: { 'application/json': infer E } } | undefined ? E : never }} WebhookEvents
 * Each event type's body, by type (the OpenAPI document's `webhooks`).
 */
/** @typedef {WebhookEvents[keyof WebhookEvents]} WebhookEvent An event Tessera delivers: narrow it on `type`. */
/**
 * @typedef {Headers | { [name: string]: string | string[] | undefined }} WebhookHeaders
 * The request's headers: a Fetch `Headers`, or Node's `request.headers`.
 */

/** The delivery is not Tessera's: a bad or missing signature, or a timestamp outside five minutes. Answer it 401. */
export class WebhookVerificationError extends Error {
  /** @param {string} message @param {unknown} [cause] */
  constructor(message, cause) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'WebhookVerificationError';
  }
}

const NAMES = ['webhook-id', 'webhook-timestamp', 'webhook-signature'];

/** @param {WebhookHeaders} headers */
function signatureHeaders(headers) {
  /** @type {Record<string, string>} */
  const found = {};
  for (const name of NAMES) {
    let value;
    if (typeof Headers !== 'undefined' && headers instanceof Headers) value = headers.get(name);
    else {
      const record = /** @type {{ [name: string]: string | string[] | undefined }} */ (headers);
      const key = Object.keys(record).find((candidate) => candidate.toLowerCase() === name);
      const raw = key === undefined ? undefined : record[key];
      value = Array.isArray(raw) ? raw[0] : raw;
    }
    if (typeof value === 'string') found[name] = value;
  }
  return found;
}

/**
 * Verifies a webhook delivery (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
 * `webhook-signature`, HMAC-SHA256 with the `whsec_…` secret, five minutes' tolerance) and
 * returns its event. Pass the body exactly as received, before any JSON parsing.
 * @param {string | Uint8Array} rawBody
 * @param {WebhookHeaders} headers
 * @param {string} secret EVENTS_WEBHOOK_SECRET (`whsec_…`)
 * @returns {WebhookEvent}
 * @throws {WebhookVerificationError} when the delivery is not Tessera's
 */
export function verifyWebhook(rawBody, headers, secret) {
  let event;
  try {
    // Tessera signs UTF-8 JSON: bytes that are not UTF-8 cannot be its delivery.
    const body = typeof rawBody === 'string' ? rawBody : new TextDecoder('utf-8', { fatal: true }).decode(rawBody);
    event = new Webhook(secret).verify(body, signatureHeaders(headers));
  } catch (error) {
    if (error instanceof TypeError && typeof rawBody !== 'string') throw new WebhookVerificationError('Webhook not verified: the body is not UTF-8', error);
    if (error instanceof StandardWebhooksError) throw new WebhookVerificationError(`Webhook not verified: ${error.message}`, error);
    throw error;
  }
  if (typeof event !== 'object' || event === null || typeof (/** @type {{ type?: unknown }} */ (event).type) !== 'string') {
    throw new WebhookVerificationError('Webhook not verified: the signed body is not an event');
  }
  return /** @type {WebhookEvent} */ (event);
}
