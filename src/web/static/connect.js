// Tessera's connect script, for a product's own pages (docs/contract.md §5a). No dependency, no build.
//
//   <script src="https://tessera.example/connect.js"></script>
//   const result = await Tessera.connect(sessionUrl);
//   // { status: 'connected' | 'error' | 'closed', provider, integration, error, session }
//
// It opens the session's page in a popup and resolves once the flow ends there. The result
// comes only from Tessera's own page (its origin is checked), which posts it only to the
// origin of the session's redirect URI. When the browser blocks the popup, the whole page
// goes to the session's page instead, and the flow ends on the redirect URI with the same
// values in its query (status, provider, integration or error, session).
(() => {
  const MESSAGE = 'tessera:connect';

  function connect(sessionUrl, options = {}) {
    const target = new URL(sessionUrl, window.location.href);
    const tesseraOrigin = target.origin;
    const popupUrl = new URL(target.href);
    popupUrl.searchParams.set('popup', '1');
    const width = options.width ?? 520;
    const height = options.height ?? 720;
    const left = Math.max(0, (window.screenX ?? 0) + ((window.outerWidth ?? width) - width) / 2);
    const top = Math.max(0, (window.screenY ?? 0) + ((window.outerHeight ?? height) - height) / 2);
    const popup = window.open(popupUrl.href, 'tessera-connect', `popup,width=${width},height=${height},left=${left},top=${top}`);
    if (!popup) {
      // Blocked: carry on in this window. The promise stays pending; this page is being left.
      window.location.assign(target.href);
      return new Promise(() => {});
    }
    return new Promise((resolve) => {
      let done = false;
      const finish = (result) => {
        if (done) return;
        done = true;
        window.removeEventListener('message', onMessage);
        clearInterval(watch);
        resolve(result);
      };
      function onMessage(event) {
        if (event.origin !== tesseraOrigin || event.source !== popup) return;
        const data = event.data;
        if (!data || typeof data !== 'object' || data.type !== MESSAGE) return;
        const text = (value) => (typeof value === 'string' ? value : null);
        finish({ status: text(data.status), provider: text(data.provider), integration: text(data.integration), error: text(data.error), session: text(data.session) });
      }
      window.addEventListener('message', onMessage);
      // Closed without an answer (the person closed it): a moment's grace for a message already on its way.
      const watch = setInterval(() => {
        if (popup.closed) setTimeout(() => finish({ status: 'closed', provider: null, integration: null, error: null, session: null }), 300);
      }, 400);
    });
  }

  window.Tessera = Object.freeze({ ...(window.Tessera ?? {}), connect });
})();
