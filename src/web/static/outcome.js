// What a connect flow left in the address bar when the provider's callback sent the browser back
// (`?status=connected&provider=…` or `?status=error&…&error=<CODE>`), in words. The values are
// anyone's to craft: the provider is only looked up among the configured ones, and only an error
// code's shape is shown, as text.

import { errorWords } from './error-words.js';

const ERROR_CODE = /^[A-Z][A-Z_]{1,49}$/;

/** Reads `?status=…` left by the OAuth callback (or a connect session's), then removes it from the address bar. */
export function takeOutcome() {
  const params = new URLSearchParams(location.search);
  const status = params.get('status');
  if (status !== 'connected' && status !== 'error') return null;
  const provider = params.get('provider') ?? '';
  const error = params.get('error') ?? '';
  history.replaceState(null, '', location.pathname + location.hash);
  // These values come from the address bar: anyone can craft them. The provider is only looked up among the
  // configured ones, and only an error code's shape is shown (as text).
  return { status, provider, error: ERROR_CODE.test(error) ? error : '' };
}

/** The outcome of a connect flow in words (the one table: error-words.js). */
export function describeOutcome(ctx, result) {
  const name = ctx.providerName(result.provider);
  if (result.status === 'connected') return { ok: true, text: `${name} is connected.` };
  return { ok: false, text: errorWords('connect', { code: result.error }, name) };
}

