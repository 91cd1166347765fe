/**
 * A small loopback server for fakes of providers whose credentials a person enters (API keys,
 * HTTP Basic, server-to-server client credentials): no authorize page, no code exchange — a
 * table of routes, every request recorded, and a switch to make the API unreachable.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';

/** One request the fake received. */
export interface EnteredRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  body: string;
}

/** An answer: a status and a JSON body, with headers. */
export interface EnteredReply {
  status: number;
  json: unknown;
  headers?: Record<string, string>;
}

export type EnteredRoute = (request: EnteredRequest, params: string[]) => EnteredReply | Promise<EnteredReply>;

/** A running fake: its base URL, what it received, `mode` (`down`: every answer a 503), and how long each answer waits. */
export interface EnteredFake {
  url: string;
  requests: EnteredRequest[];
  mode: { api: 'ok' | 'down' };
  /** Milliseconds every answer waits once its request is recorded: a test acts while the provider "thinks". */
  latencyMs: number;
  close(): Promise<void>;
}

/** Random text from an alphabet (keys, ids). */
export function randomText(length: number, alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'): string {
  const bytes = randomBytes(length);
  return Array.from(bytes, (byte) => alphabet[byte % alphabet.length]).join('');
}

/** The user and password of an HTTP Basic header (RFC 7617), or null. */
export function basicOf(request: EnteredRequest): { user: string; password: string } | null {
  const header = request.headers.authorization ?? '';
  if (!header.startsWith('Basic ')) return null;
  const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
  const at = decoded.indexOf(':');
  return at === -1 ? null : { user: decoded.slice(0, at), password: decoded.slice(at + 1) };
}

/** The bearer token of a request, or null. */
export function bearerOf(request: EnteredRequest): string | null {
  const header = request.headers.authorization ?? '';
  return header.startsWith('Bearer ') ? header.slice(7) : null;
}

/** Starts a fake on a free loopback port; `routes` are `METHOD /path` with `:x` segments matched as parameters. */
export async function startEnteredFake(routes: Record<string, EnteredRoute>): Promise<EnteredFake> {
  const table = Object.entries(routes).map(([key, handler]) => {
    const [method, path] = key.split(' ') as [string, string];
    return { method, parts: path.split('/'), handler };
  });
  const fake: EnteredFake = { url: '', requests: [], mode: { api: 'ok' }, latencyMs: 0, close: async () => {} };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const request: EnteredRequest = { method: req.method ?? 'GET', path: url.pathname, query: url.searchParams, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      fake.requests.push(request);
      if (fake.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, fake.latencyMs));
      let reply: EnteredReply = { status: 404, json: { error: 'not found' } };
      if (fake.mode.api === 'down') reply = { status: 503, json: { error: 'service unavailable' } };
      else {
        const parts = url.pathname.split('/');
        for (const route of table) {
          if (route.method !== request.method || route.parts.length !== parts.length) continue;
          const params: string[] = [];
          const matched = route.parts.every((part, i) => {
            if (part.startsWith(':')) {
              params.push(decodeURIComponent(parts[i] ?? ''));
              return true;
            }
            return part === parts[i];
          });
          if (matched) {
            reply = await route.handler(request, params);
            break;
          }
        }
      }
      res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
      res.end(JSON.stringify(reply.json));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  fake.url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  fake.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return fake;
}
