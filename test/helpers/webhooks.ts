import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One event as a webhook received it. */
export interface ReceivedEvent {
  headers: IncomingHttpHeaders;
  body: string;
  event: { id: string; type: string; occurredAt: string; data: Record<string, unknown> };
}

export interface WebhookReceiver {
  /** The URL to configure as `EVENTS_WEBHOOK_URL`. */
  url: string;
  received: ReceivedEvent[];
  close(): Promise<void>;
}

/** A webhook receiver on loopback that answers 204 to every delivery and keeps what arrived. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedEvent[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body, event: JSON.parse(body) });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
