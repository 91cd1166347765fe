import type { AuthorizeRequest } from './grants.ts';

const STYLE =
  'body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1f2328}' +
  'button,select{font:inherit;padding:.35rem .9rem;margin-right:.5rem}code{background:#eff1f3;padding:0 .3rem}' +
  '.note{color:#59636e;font-size:.9rem}';

/** Escapes text for HTML content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

function page(title: string, main: string): string {
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8">` +
    `<meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<title>${escapeHtml(title)}</title><style>${STYLE}</style></head>` +
    `<body><main>${main}</main></body></html>`
  );
}

function scopeList(heading: string, scopes: string[]): string {
  if (scopes.length === 0) return '';
  const items = scopes.map((scope) => `<li><code>${escapeHtml(scope)}</code></li>`).join('');
  return `<h2>${escapeHtml(heading)}</h2><ul>${items}</ul>`;
}

/** The consent screen a person sees at the fake's authorize URL: pick a user, then Approve or Deny. */
export function consentPage(input: {
  providerName: string;
  appName: string;
  action: string;
  request: AuthorizeRequest;
  logins: string[];
}): string {
  const { providerName, appName, request, logins } = input;
  const scopes =
    request.scopes.length === 0 && request.botScopes.length === 0
      ? '<p>No scopes requested: public information only.</p>'
      : scopeList('Permissions requested', request.scopes) + scopeList('Bot permissions requested', request.botScopes);
  const picker =
    logins.length === 0
      ? '<p>No accounts exist at this fake provider yet; add one with <code>addUser()</code>.</p>'
      : `<p><label for="login">Sign in as</label> <select id="login" name="login">` +
        logins.map((login) => `<option value="${escapeHtml(login)}">${escapeHtml(login)}</option>`).join('') +
        '</select></p>';
  const approve = `<button type="submit" name="decision" value="approve"${logins.length === 0 ? ' disabled' : ''}>Approve</button>`;
  return page(
    `Authorize ${appName} · ${providerName}`,
    `<h1>Authorize ${escapeHtml(appName)}</h1>` +
      `<p>${escapeHtml(appName)} wants to access your ${escapeHtml(providerName)} account.</p>` +
      scopes +
      `<form method="post" action="${escapeHtml(input.action)}">${picker}` +
      `<p>${approve}<button type="submit" name="decision" value="deny">Deny</button></p></form>` +
      `<p class="note">Fake ${escapeHtml(providerName)} on loopback, for tests and demos. ` +
      `You will be sent back to <code>${escapeHtml(request.redirectUri)}</code>.</p>`,
  );
}

/** The page a provider shows instead of redirecting when the authorize request itself is wrong. */
export function errorPage(providerName: string, message: string): string {
  return page(`${providerName} · error`, `<h1>Something went wrong</h1><p>${escapeHtml(message)}</p>`);
}
