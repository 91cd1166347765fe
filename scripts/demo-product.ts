/**
 * The demo's "product": a tiny app on loopback that embeds Tessera the way a SaaS product
 * would (docs/embedding.md), through @tessera/client. Its backend holds the organization's API
 * token and mints a connect session for each visit; its page includes Tessera's connect.js; its
 * webhook receiver verifies and shows the events Tessera sends. Demo only: no sign-in, one customer.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { Tessera, verifyWebhook, WebhookVerificationError } from '@tessera/client';
import { escapeHtml } from '../src/http/html.ts';

export interface DemoProduct {
  url: string;
  /** The webhook receiver's URL, for EVENTS_WEBHOOK_URL. */
  webhookUrl: string;
  /** Tells the product where Tessera is and which API token is its backend's. */
  connect(tessera: string, apiToken: string): void;
  close(): Promise<void>;
}

function page(tessera: string, sessionUrl: string, events: string[], landed: URLSearchParams): string {
  const outcome = landed.has('status') ? `<p class="landed">Back from the full-page flow: <code>${escapeHtml(landed.toString())}</code></p>` : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Acme CRM (demo product)</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}button{font:inherit;padding:.6rem 1rem}
code,pre{background:#f3f4f6;padding:.1rem .3rem;border-radius:4px}pre{padding:.75rem;overflow:auto}</style>
<script src="${escapeHtml(tessera)}/connect.js"></script></head>
<body>
<h1>Acme CRM</h1>
<p>A stand-in for <em>your</em> product. Its backend minted a connect session for this visit with its API token; the button hands the session's link to <code>Tessera.connect()</code>.</p>
<p><button id="connect" data-session-url="${escapeHtml(sessionUrl)}">Connect an account</button></p>
<p id="result" role="status" aria-live="polite"></p>
${outcome}
<h2>Webhook events received</h2>
<pre id="events">${escapeHtml(events.join('\n')) || '(none yet — connect something)'}</pre>
<script>
document.getElementById('connect').addEventListener('click', async (event) => {
  const result = await Tessera.connect(event.currentTarget.dataset.sessionUrl);
  document.getElementById('result').textContent = 'Tessera.connect resolved: ' + JSON.stringify(result) + ' — reload for a new link.';
});
</script>
</body></html>`;
}

async function body(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Starts the demo product on `port` (0: any free one); `webhookSecret` is Tessera's EVENTS_WEBHOOK_SECRET. */
export async function startDemoProduct(webhookSecret: string, port = 0): Promise<DemoProduct> {
  const events: string[] = [];
  let tessera = '';
  let client: Tessera | undefined;
  let url = '';
  const server: Server = createServer(async (request, response) => {
    const requested = new URL(request.url ?? '/', url);
    try {
      if (request.method === 'POST' && requested.pathname === '/webhooks/tessera') {
        // Nothing is trusted before its signature (Standard Webhooks) checks out.
        let event: ReturnType<typeof verifyWebhook>;
        try {
          event = verifyWebhook(await body(request), request.headers, webhookSecret);
        } catch (error) {
          if (!(error instanceof WebhookVerificationError)) throw error;
          response.writeHead(401).end();
          return;
        }
        events.push(`${event.type} ${JSON.stringify(event.data)}`);
        response.writeHead(204).end();
        return;
      }
      if (request.method !== 'GET' || (requested.pathname !== '/' && requested.pathname !== '/done')) {
        response.writeHead(404).end();
        return;
      }
      // What a product's backend does for a visit: mint a session for this end user, server to server.
      if (!client) throw new Error('not connected to Tessera yet');
      const { session } = await client.connectSessions.create({ redirectUri: `${url}/done`, endUser: { id: 'acme-user-1', displayName: 'Dana from Acme' } });
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(page(tessera, session.url, events, requested.searchParams));
    } catch (error) {
      response.writeHead(500, { 'content-type': 'text/plain' }).end(`demo product: ${(error as Error).message}`);
    }
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : port}`;
  return {
    url,
    webhookUrl: `${url}/webhooks/tessera`,
    connect(base, token) {
      tessera = base;
      client = new Tessera({ baseUrl: base, apiToken: token });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
