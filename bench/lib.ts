import { createServer, type Server } from 'node:http';
import { readdirSync, readFileSync } from 'node:fs';
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
  // Not measured (a smoke run's one-row columns, a CPU figure without PostgreSQL on this host): a dash, as elsewhere in the tables.
  return Number.isNaN(n) ? '–' : n.toFixed(digits);
}

/**
 * CPU time (µs) used so far by this host's PostgreSQL server processes, read from /proc;
 * null where there is no /proc or no local server. Backends that exit take their share
 * with them, so measure while the pool's connections stay open.
 */
export function postgresCpuUs(): number | null {
  let ticks = 0;
  let found = false;
  try {
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      } catch {
        continue;
      }
      const close = stat.lastIndexOf(')');
      if (stat.slice(stat.indexOf('(') + 1, close) !== 'postgres') continue;
      // Fields after the command: state is 3rd overall; utime and stime are the 14th and 15th.
      const fields = stat.slice(close + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
      found = true;
    }
  } catch {
    return null;
  }
  // Linux reports these in USER_HZ, 100 per second on every architecture Node runs on.
  return found ? ticks * 10_000 : null;
}
