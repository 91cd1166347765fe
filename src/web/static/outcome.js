// What a connect flow left in the address bar when the provider's callback sent the browser back
// (`?status=connected&provider=…` or `?status=error&…&error=<CODE>`), in words. The values are
// anyone's to craft: the provider is only looked up among the configured ones, and only an error
// code's shape is shown, as text.

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

/** The outcome of a connect flow in words. */
export function describeOutcome(ctx, result) {
  const name = ctx.providerName(result.provider);
  if (result.status === 'connected') return { ok: true, text: `${name} is connected.` };
  const words = {
    ACCESS_DENIED: `You declined access at ${name}, so nothing was connected.`,
    OAUTH_EXCHANGE_FAILED: `${name} refused the authorization (it may have expired). Nothing was connected; try again.`,
    TOKEN_VALIDATION_FAILED: `${name} rejected the new connection. Nothing was connected; try again.`,
    PROVIDER_ERROR: `${name} could not be reached while connecting. Nothing was connected; try again in a moment.`,
    PROVIDER_RATE_LIMITED: `${name} is limiting requests right now. Nothing was connected; try again in a minute.`,
    INVALID_OAUTH_STATE: 'That connection attempt expired, was already used, or was started in another organization. Start again.',
    FORBIDDEN: `Only owners and admins can connect ${name}.`,
  };
  return { ok: false, text: words[result.error] ?? `Connecting ${name} failed${result.error ? ` (${result.error})` : ''}. Try again.` };
}

