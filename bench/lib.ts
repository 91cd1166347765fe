import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Peak RSS sampled every 25 ms while `fn` runs. */
export async function withPeakRss<T>(fn: () => Promise<T>): Promise<{ result: T; peakRssMb: number; startRssMb: number }> {
  const startRssMb = process.memoryUsage().rss / 1048576;
  let peak = startRssMb;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss / 1048576);
  }, 25);
  try {
    const result = await fn();
    peak = Math.max(peak, process.memoryUsage().rss / 1048576);
    return { result, peakRssMb: peak, startRssMb };
  } finally {
    clearInterval(timer);
  }
}

/** A minimal GitHub-like API that answers `GET /user` for any token after `latencyMs`. */
export async function startSlowUserApi(latencyMs: number): Promise<{ url: string; calls: () => number; close(): Promise<void> }> {
  let calls = 0;
  const server: Server = createServer((req, res) => {
    calls++;
    setTimeout(() => {
      const id = Number.parseInt((req.headers.authorization ?? '').slice(-6), 36) || 1;
      res.writeHead(200, { 'content-type': 'application/json', 'x-ratelimit-remaining': '4999' });
      res.end(JSON.stringify({ id, login: `user${id}`, email: `user${id}@example.com` }));
    }, latencyMs);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls: () => calls,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function fmt(n: number, digits = 1): string {
  return n.toFixed(digits);
}
