/**
 * What every HTML page of ours shares, whichever room serves it (the console in web/, the
 * connect pages in integrations/connect/): its security headers and the escaping of values.
 */

/**
 * The pages' policy: their own scripts and styles only (nothing inline, so an injected
 * `<script>` or `style=` does nothing), calls to this origin only, never framed; forms post
 * to this origin, and a form's answer may redirect only to `formTargets` (origins) besides —
 * browsers hold the redirect after a form post to `form-action` too.
 */
export function contentSecurityPolicy(formTargets: readonly string[] = []): string {
  return (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    `frame-ancestors 'none'; base-uri 'none'; form-action ${["'self'", ...formTargets].join(' ')}`
  );
}

export const CONTENT_SECURITY_POLICY = contentSecurityPolicy();

/** Headers every HTML page of ours carries, whatever its caching. */
export const HTML_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
};

/** Escapes text for an HTML text node or a quoted attribute. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}
