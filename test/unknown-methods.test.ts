import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from './helpers/app.ts';

let t: TestApp;
let port: number;

beforeAll(async () => {
  t = await createTestApp();
  port = Number(new URL(await t.fastify.listen({ host: '127.0.0.1', port: 0 })).port);
});
afterAll(async () => {
  await t?.close();
});

/** One request over a real socket: `inject` would refuse methods a client may still send. */
function send(method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

describe('an HTTP method no route serves', () => {
  const cases: [string, string, Record<string, string>, string | undefined][] = [
    ['QUERY', '/v1/integrations', {}, undefined],
    ['QUERY', '/v1/integrations', {}, '{"q":1}'],
    ['QUERY', '/v1/integrations', { 'content-type': 'application/json' }, '{"q":1}'],
    ['QUERY', '/query', { 'content-type': 'text/plain' }, '{ me { id } }'],
    ['QUERY', '/livez', {}, undefined],
    ['PROPFIND', '/', { 'content-type': 'application/xml' }, '<propfind xmlns="DAV:"/>'],
    ['PROPFIND', '/v1/integrations/github/token', {}, undefined],
    ['SEARCH', '/api-docs', {}, 'x'],
    ['PURGE', '/docs', {}, undefined],
    ['PUT', '/v1/login', { 'content-type': 'application/json' }, '{}'],
    ['TRACE', '/v1/integrations/github/proxy/user/repos', {}, undefined],
    ['MKCOL', '/no/such/path', {}, undefined],
  ];

  it.each(cases)('%s %s (%o) answers 404/405 in the error shape with its request id, never 500', async (method, path, headers, body) => {
    const res = await send(method, path, headers, body);
    expect([404, 405], res.body).toContain(res.status);
    const requestId = res.headers['x-request-id'];
    expect(typeof requestId).toBe('string');
    expect(JSON.parse(res.body)).toEqual({ success: false, error: expect.any(String), code: res.status === 404 ? 'NOT_FOUND' : 'METHOD_NOT_ALLOWED', requestId });
  });

  it('leaves no error line and no stack in the log', () => {
    const lines = t.logs.entries;
    expect(lines.filter((line) => Number(line.level) >= 50)).toEqual([]);
    expect(t.logs.text).not.toMatch(/"stack"|\n\s+at /);
    expect(lines.some((line) => line.msg === 'request finish' && line.status === 404)).toBe(true);
  });
});
