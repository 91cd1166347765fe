/**
 * The connect flow's own pages: the page shell the hosted connect page (web/connect-pages.ts)
 * shares, and the page that ends a flow started in a popup by connect.js — answered by the
 * callback, so it lives with the flow and the connect walk goes one way. Server-rendered
 * HTML with every value escaped; no inline script or style (the CSP allows none).
 */
import { escapeHtml, HTML_HEADERS } from '../../http/html.ts';
import type { ProviderRegistry } from '../providers/registry.ts';
import type { StateRow } from '../state.ts';
import { callbackRedirect, type FlowOutcome, outcomeParams } from './callback.ts';

/** The pages' policy without COOP, so that connect.js keeps a handle on the popup it opened (no-store: the routes' `noStore`). */
export const CONNECT_PAGE_HEADERS = HTML_HEADERS;

/** A connect page: `body` (trusted markup, its values escaped by the caller) in the pages' shell, with their style sheet. */
export function connectPage(title: string, body: string, extraHead = ''): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/connect/assets/connect.css">
${extraHead}</head>
<body>
<main class="card">
${body}
</main>
</body>
</html>
`;
}

/**
 * The end of a flow started in a popup: hands the outcome to the window that opened it, for
 * the session's redirect origin only, and closes; without an opener it goes on to the
 * redirect URI like a full-page flow.
 */
export function flowDonePage(providers: ProviderRegistry, state: Pick<StateRow, 'provider' | 'redirectUri' | 'connectSessionId'>, outcome: FlowOutcome): string {
  const result = outcomeParams(state, outcome);
  const provider = providers.get(state.provider)?.displayName ?? 'the service';
  const ok = 'integrationId' in outcome;
  const words = ok
    ? `${provider} is connected. You can close this window.`
    : outcome.error === 'ACCESS_DENIED'
      ? `You declined access at ${provider}, so nothing was connected. You can close this window.`
      : `Connecting ${provider} did not work (${outcome.error}). Close this window and try again.`;
  return connectPage(
    ok ? 'Connected' : 'Not connected',
    `<h1>${ok ? 'Connected' : 'Not connected'}</h1>
<p id="result" data-result="${escapeHtml(JSON.stringify(result))}" data-origin="${escapeHtml(new URL(state.redirectUri).origin)}" data-redirect="${escapeHtml(callbackRedirect(state, outcome))}">${escapeHtml(words)}</p>`,
    '<script src="/connect/assets/done.js" defer></script>\n',
  );
}
