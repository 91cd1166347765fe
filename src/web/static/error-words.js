// The words a person reads for each error code (docs/contract.md §2), one table for every page:
// the console (ui.js), a connect flow's outcome in the console (outcome.js), the invitation page
// (invitation.js) and the hosted credential form (src/web/credential-form.ts imports this module).
// Served as /assets/error-words.js; plain data and one function, nothing of the page's own.
//
// Each entry's `text` is its words anywhere; a page's own words (`connect`, `form`, `invitation`)
// replace them where the page says more. Placeholders: {name} the provider's name ("The provider"
// when none), {thatName} ("That provider" when none), {seconds} the answer's Retry-After (60 when
// none), {origin} this page's origin, {reference} " Reference: <requestId>." when there is one,
// {message} the answer's own message, {code} the code itself.

/**
 * @typedef {object} Words
 * @property {string} text The words anywhere: the console, and any page without words of its own for the code.
 * @property {true} [own] The answer's own message is shown instead, when it is not the code's default one (a specific reason written for people).
 * @property {Record<string, string>} [byMessage] Words for an answer whose message is exactly this one.
 * @property {string} [connect] A connect flow that failed, as the console tells it afterwards (outcome.js).
 * @property {string} [form] The hosted credential form, shown again after a refusal.
 * @property {string} [invitation] The invitation page.
 */

/** @type {Readonly<Record<string, Words>>} Every error code of the contract, and NETWORK (the pages' own: Tessera could not be reached). */
export const ERROR_WORDS = {
  NETWORK: { text: '{message}' },
  INVALID_INPUT: {
    text: 'Some of what you entered is not valid. Check it and try again.',
    own: true,
    form: 'Fill in every field (without spaces or line breaks) and try again.',
  },
  INVALID_OAUTH_STATE: { text: 'That connection attempt expired, was already used, or was started in another organization. Start again.' },
  PROVIDER_NOT_CONFIGURED: { text: '{thatName} is not configured on this Tessera.' },
  INVALID_REDIRECT_URI: {
    text: 'Tessera does not accept that address to come back to. Use an address at {origin} (PUBLIC_URL) or one listed in OAUTH_REDIRECT_ORIGINS.',
  },
  OAUTH_EXCHANGE_FAILED: {
    text: '{name} refused the authorization (it may have expired). Try again.',
    connect: '{name} refused the authorization (it may have expired). Nothing was connected; try again.',
  },
  ACCESS_DENIED: { text: 'Access was declined at {name}.', connect: 'You declined access at {name}, so nothing was connected.' },
  INVALID_CREDENTIALS: { text: '{name} did not accept these credentials. Check each field and try again.' },
  UNAUTHENTICATED: { text: 'Your session has ended. Sign in again.' },
  FORBIDDEN: {
    text: 'You are not allowed to do that here. Owners and admins of the organization can.',
    own: true,
    connect: 'Only owners and admins can connect {name}.',
  },
  CSRF_INVALID: {
    text: 'The security check of this page failed. Reload the page and try again.',
    byMessage: {
      'Origin not allowed': 'Tessera does not accept requests from {origin}. Open this page at the address Tessera is configured with (PUBLIC_URL).',
    },
    invitation: 'The security check of this page failed. Reload the page and try again.',
  },
  NOT_FOUND: { text: 'That no longer exists. The list has been updated.', invitation: '{message}' },
  INTEGRATION_NOT_FOUND: { text: 'That integration no longer exists. The list has been updated.' },
  METHOD_NOT_ALLOWED: { text: 'Tessera does not take that request. Reload the page and try again.' },
  REQUEST_TIMEOUT: { text: 'The request did not reach Tessera in time. Try again.' },
  CONFLICT: { text: 'That changed in the meantime. The list has been updated.', own: true },
  TOKEN_VALIDATION_FAILED: {
    text: '{name} no longer accepts this connection. Reconnect {name} to restore it.',
    connect: '{name} rejected the new connection. Nothing was connected; try again.',
  },
  PAYLOAD_TOO_LARGE: { text: 'That is more than Tessera takes at once (1 MiB). Shorten it and try again.' },
  UNSUPPORTED_MEDIA_TYPE: { text: 'Tessera could not read that request. Reload the page and try again.' },
  HEADERS_TOO_LARGE: { text: "The request's headers are too large. Clear this site's cookies, then sign in again." },
  RATE_LIMITED: { text: 'Too many requests. Wait {seconds} seconds and try again.', invitation: 'Too many attempts. Wait a minute and try again.' },
  PROVIDER_RATE_LIMITED: {
    text: '{name} is limiting requests right now. Try again in {seconds} seconds.',
    connect: '{name} is limiting requests right now. Nothing was connected; try again in a minute.',
    form: '{name} asked us to slow down. Wait a minute and try again.',
  },
  INTERNAL: { text: 'Something went wrong inside Tessera.{reference}' },
  PROVIDER_ERROR: {
    text: '{name} could not be reached or answered badly. Try again in a moment.',
    connect: '{name} could not be reached while connecting. Nothing was connected; try again in a moment.',
    form: '{name} could not be reached to check these credentials. Try again in a moment.',
  },
  PROVIDER_MISCONFIGURED: {
    text: "{name} refused this Tessera's client credentials. An administrator must check its configuration (the provider's client id and secret).",
    connect: "{name} refused this Tessera's client credentials, so nothing was connected. An administrator must check its configuration.",
    form: '{name} is not set up correctly for this app. Tell the app that sent you here.',
  },
  SERVICE_UNAVAILABLE: { text: 'Tessera is unavailable right now. Try again in a moment.' },
};

/**
 * Where words are shown, and what a code without words there reads: `general` places fall back
 * on an entry's `text`; the others only show their own words, else `fallback`.
 * @type {Readonly<Record<'console' | 'invitation' | 'connect' | 'form', { general: boolean; fallback: string }>>}
 */
export const PLACES = {
  console: { general: true, fallback: '{message}' },
  invitation: { general: true, fallback: '{message}' },
  connect: { general: false, fallback: 'Connecting {name} failed{code}. Try again.' },
  form: { general: true, fallback: '{name} could not be reached to check these credentials. Try again in a moment.' },
};

/** Default messages (src/ground/errors.ts) an `own` entry does not show: they say no more than the code. */
const DEFAULT_MESSAGES = new Set(['Invalid input', 'Forbidden', 'Conflict']);

/**
 * An error in words a person can act on, at `place`. `error` is what a page holds of an answer
 * (`code`, `message`, `retryAfter`, `requestId`); `name` is the provider's display name, when
 * one is concerned.
 * @param {'console' | 'invitation' | 'connect' | 'form'} place
 * @param {{ code?: string; message?: string; retryAfter?: string | null; requestId?: string | null }} error
 * @param {string} [name]
 * @returns {string}
 */
export function errorWords(place, error, name) {
  const code = error.code ?? '';
  const message = error.message ?? '';
  const entry = Object.hasOwn(ERROR_WORDS, code) ? ERROR_WORDS[code] : undefined;
  const { general, fallback } = PLACES[place];
  let template = fallback;
  if (entry?.[place] !== undefined) template = entry[place];
  else if (entry && general) {
    if (entry.byMessage && Object.hasOwn(entry.byMessage, message)) template = entry.byMessage[message];
    else if (entry.own && message && !DEFAULT_MESSAGES.has(message)) template = '{message}';
    else template = entry.text;
  }
  const seconds = Number.parseInt(error.retryAfter ?? '', 10);
  const vars = {
    name: name ?? 'The provider',
    thatName: name ?? 'That provider',
    seconds: String(Number.isFinite(seconds) && seconds > 0 ? seconds : 60),
    origin: globalThis.location?.origin ?? '',
    reference: error.requestId ? ` Reference: ${error.requestId}.` : '',
    message: message ? `${message}.`.replace(/\.\.$/, '.') : 'Something went wrong.',
    code: code ? ` (${code})` : '',
  };
  return template.replace(/\{(\w+)\}/g, (whole, key) => (Object.hasOwn(vars, key) ? vars[key] : whole));
}
