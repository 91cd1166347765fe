// The last page of a connect flow started in a popup: hands the outcome to the window that
// opened it — only if that window is on the session's redirect origin (the browser enforces
// the target origin) — then closes. Without an opener, it goes on to the redirect URI.
const result = document.getElementById('result');
const data = JSON.parse(result.dataset.result);
if (window.opener) {
  window.opener.postMessage({ type: 'tessera:connect', ...data }, result.dataset.origin);
  setTimeout(() => window.close(), 150);
} else {
  window.location.replace(result.dataset.redirect);
}
