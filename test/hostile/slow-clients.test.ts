// Slow clients — headers or a body dribbled a byte at a time, or nothing at all — are closed within
// REQUEST_TIMEOUT (plus the check interval), with a 408 in the contract's shape where one can still
// be sent, while other clients are served.
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
let appPort = 0;

beforeAll(async () => {
  app = await createTestApp({ background: false, env: { RATE_LIMIT_MAX: '0', REQUEST_TIMEOUT: '1' } });
  await app.fastify.listen({ port: 0, host: '127.0.0.1' });
  appPort = (app.fastify.server.address() as AddressInfo).port;
});

afterAll(async () => {
  await app?.close();
});

describe('slow clients are cut off within REQUEST_TIMEOUT while others are served', () => {
  it('slow clients of every kind are closed within REQUEST_TIMEOUT (plus the check interval) while others are served', { timeout: 60_000 }, async () => {
    const { connect: connectSocket } = await import('node:net');
    const slow = (first: string, dribble: string) =>
      new Promise<{ closedAfterMs: number; answer: string }>((resolve) => {
        const socket = connectSocket(appPort, '127.0.0.1');
        const started = Date.now();
        let answer = '';
        let timer: ReturnType<typeof setInterval> | undefined;
        socket.on('data', (data) => (answer += data.toString()));
        socket.on('error', () => {});
        socket.on('close', () => {
          clearInterval(timer);
          resolve({ closedAfterMs: Date.now() - started, answer });
        });
        socket.once('connect', () => {
          if (first) socket.write(first);
          let sent = 0;
          timer = setInterval(() => {
            if (sent < dribble.length && !socket.destroyed) socket.write(dribble[sent++] ?? '');
          }, 200);
        });
      });
    const clients = [
      ...Array.from({ length: 8 }, () => slow('', 'GET /livez HTTP/1.1\r\nHost: x\r\nX-A: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb')),
      ...Array.from({ length: 8 }, () => slow('POST /v1/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n', '{"email":"aaaaaaaaaaaaaaaaaaaaaa')),
      ...Array.from({ length: 4 }, () => slow('', '')),
    ];
    const served = await fetch(`http://127.0.0.1:${appPort}/livez`);
    expect(served.status).toBe(200);
    for (const client of await Promise.all(clients)) {
      expect(client.closedAfterMs).toBeLessThan(6000);
      if (client.answer) expect(client.answer).toMatch(/^HTTP\/1\.1 408 [^\r]*\r\n[\s\S]*X-Request-ID: [0-9A-Z]{26}[\s\S]*"code":"REQUEST_TIMEOUT"/);
    }
  });
});
