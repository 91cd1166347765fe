// The outbound guard (docs/contract.md §1): the address classifier over many addresses, and the
// guard's check on the address actually connected to (a resolver answering as the test says).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LookupFunction } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyAddress, createOutboundGuard, embeddedIpv4, OutboundRefused } from './outbound.ts';

describe('classifyAddress', () => {
  const table: [string, string][] = [
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['100.127.255.255', 'private'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    // IPv6 embedding IPv4: judged by the IPv4.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::ffff:10.1.2.3', 'private'],
    ['::127.0.0.1', 'loopback'],
    ['::a9fe:a9fe', 'link-local'],
    ['64:ff9b::10.0.0.1', 'private'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
    ['2002:7f00:1::', 'loopback'],
    ['2002:c0a8:0101::1', 'private'],
    ['::ffff:8.8.8.8', 'public'],
    ['64:ff9b::8.8.8.8', 'public'],
    ['2002:0808:0808::1', 'public'],
    // Public.
    ['8.8.8.8', 'public'],
    ['1.1.1.1', 'public'],
    ['100.63.255.255', 'public'],
    ['100.128.0.0', 'public'],
    ['172.15.255.255', 'public'],
    ['172.32.0.0', 'public'],
    ['169.253.255.255', 'public'],
    ['2606:4700:4700::1111', 'public'],
    ['2001:4860:4860::8888', 'public'],
    // Not addresses.
    ['localhost', 'invalid'],
    ['example.com', 'invalid'],
    ['127.1', 'invalid'],
    ['', 'invalid'],
  ];
  it.each(table)('%s is %s', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });

  const octet = fc.integer({ min: 0, max: 255 });
  it('an IPv4-mapped, IPv4-compatible, NAT64 or 6to4 address is judged exactly as the IPv4 it embeds', () => {
    fc.assert(
      fc.property(octet, octet, octet, octet, (a, b, c, d) => {
        const v4 = `${a}.${b}.${c}.${d}`;
        const hex = (x: number, y: number) => ((x << 8) | y).toString(16);
        const expected = classifyAddress(v4);
        expect(classifyAddress(`::ffff:${v4}`)).toBe(expected);
        expect(classifyAddress(`::ffff:${hex(a, b)}:${hex(c, d)}`)).toBe(expected);
        expect(classifyAddress(`64:ff9b::${v4}`)).toBe(expected);
        expect(classifyAddress(`2002:${hex(a, b)}:${hex(c, d)}::1`)).toBe(expected);
        expect(embeddedIpv4(`::ffff:${v4}`)).toBe(v4);
        // ::/96 except :: and ::1 themselves (refused either way).
        if (a + b + c > 0 || d > 1) expect(classifyAddress(`::${v4}`)).toBe(expected);
      }),
      { numRuns: 2000 },
    );
  });

  it('every address in a guarded IPv4 range is refused, whatever its host bits', () => {
    const ranges: [number, number, number, string][] = [
      [127, 0, 8, 'loopback'],
      [10, 0, 8, 'private'],
      [172, 16, 12, 'private'],
      [192, 168, 16, 'private'],
      [169, 254, 16, 'link-local'],
      [100, 64, 10, 'private'],
      [0, 0, 8, 'unspecified'],
    ];
    fc.assert(
      fc.property(fc.constantFrom(...ranges), fc.integer({ min: 0, max: 2 ** 32 - 1 }), ([a, b, prefix, kind], random) => {
        const base = ((a << 24) | (b << 16)) >>> 0;
        const mask = prefix === 0 ? 0 : (~0 << (32 - prefix)) >>> 0;
        const value = ((base & mask) | (random & ~mask)) >>> 0;
        const address = [24, 16, 8, 0].map((shift) => (value >>> shift) & 255).join('.');
        expect(classifyAddress(address)).toBe(kind);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('the guard, in production', () => {
  let server: Server;
  let port: number;
  const hits: string[] = [];
  beforeAll(async () => {
    // Listens on every interface: 127.0.0.1 and 127.0.0.2 both reach it, so only the guard can keep a call away.
    server = createServer((request, response) => {
      hits.push(request.url ?? '');
      response.setHeader('content-type', 'application/json');
      response.end('{"internal":"secret body"}');
    });
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** A resolver answering each lookup with the next address of `answers` (the last one repeats). */
  const resolver = (answers: string[][]) => {
    let call = 0;
    const lookup: LookupFunction = (_hostname, options, callback) => {
      const list = (answers[Math.min(call, answers.length - 1)] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
      call += 1;
      if (options.all) (callback as unknown as (error: null, all: typeof list) => void)(null, list);
      else callback(null, list[0]?.address ?? '', list[0]?.family ?? 4);
    };
    return lookup;
  };

  const get = (guard: ReturnType<typeof createOutboundGuard>, host: string, origin: 'entered' | 'key_set' = 'entered') =>
    guard.fetch(`http://${host}:${port}/me`, { method: 'GET', headers: {} }, origin);

  it('refuses a host whose DNS answer is loopback, private, link-local or IPv4-mapped, before any byte is sent', async () => {
    for (const address of ['127.0.0.1', '10.0.0.7', '169.254.169.254', '::ffff:127.0.0.1', '0.0.0.0']) {
      const guard = createOutboundGuard({ enforce: true, allowCidrs: [], lookup: resolver([[address]]) });
      const before = hits.length;
      await expect(get(guard, 'api.tenant.example.com')).rejects.toBeInstanceOf(OutboundRefused);
      expect(hits.length).toBe(before);
    }
  });

  it('refuses IP-literal hosts directly (no lookup happens for them)', async () => {
    const guard = createOutboundGuard({ enforce: true, allowCidrs: [], lookup: resolver([['8.8.8.8']]) });
    for (const host of ['127.0.0.1', '[::1]', '[::ffff:127.0.0.1]', '169.254.169.254']) await expect(get(guard, host)).rejects.toBeInstanceOf(OutboundRefused);
  });

  it('checks the address each connection uses: an answer that was allowed once and private the next time is refused the next time', async () => {
    // 127.0.0.1 is opened by OUTBOUND_ALLOW_CIDRS; 127.0.0.2 (the same server, listening on every interface) is not.
    const guard = createOutboundGuard({ enforce: true, allowCidrs: ['127.0.0.1/32'], lookup: resolver([['127.0.0.1'], ['127.0.0.2']]) });
    const first = await get(guard, 'api.tenant.example.com');
    expect(first.status).toBe(200);
    await first.text();
    const before = hits.length;
    await expect(get(guard, 'api.tenant.example.com')).rejects.toBeInstanceOf(OutboundRefused);
    expect(hits.length).toBe(before);
  });

  it('refuses an answer list that holds any guarded address, even after an allowed one', async () => {
    const guard = createOutboundGuard({ enforce: true, allowCidrs: ['127.0.0.1/32'], lookup: resolver([['127.0.0.1', '169.254.169.254']]) });
    await expect(get(guard, 'api.tenant.example.com')).rejects.toBeInstanceOf(OutboundRefused);
  });

  it('OUTBOUND_ALLOW_CIDRS opens ranges for entered values, never for key sets or client metadata documents', async () => {
    const guard = createOutboundGuard({ enforce: true, allowCidrs: ['127.0.0.0/8'], lookup: resolver([['127.0.0.1']]) });
    const answer = await get(guard, 'api.tenant.example.com');
    expect(await answer.json()).toEqual({ internal: 'secret body' });
    await expect(get(guard, 'api.tenant.example.com', 'key_set')).rejects.toBeInstanceOf(OutboundRefused);
    await expect(guard.fetch(`http://127.0.0.1:${port}/x`, { method: 'GET', headers: {} }, 'client_metadata')).rejects.toBeInstanceOf(OutboundRefused);
    expect(guard.refusal('::ffff:127.0.0.1', 'entered')).toBeNull();
    expect(guard.refusal('::ffff:127.0.0.1', 'key_set')).toBe('loopback');
  });

  it('never follows a redirect', async () => {
    const redirecting = createServer((_request, response) => {
      response.statusCode = 302;
      response.setHeader('location', 'http://169.254.169.254/latest/meta-data/');
      response.end();
    });
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    const guard = createOutboundGuard({ enforce: true, allowCidrs: ['127.0.0.1/32'], lookup: resolver([['127.0.0.1']]) });
    const answer = await guard.fetch(`http://api.tenant.example.com:${(redirecting.address() as AddressInfo).port}/`, { method: 'GET', headers: {} }, 'entered');
    expect(answer.status).toBe(302);
    await new Promise<void>((resolve) => redirecting.close(() => resolve()));
  });

  it('in development it reaches loopback (local fakes)', async () => {
    const guard = createOutboundGuard({ enforce: false, allowCidrs: [] });
    expect(guard.refusal('127.0.0.1', 'key_set')).toBeNull();
    expect((await guard.fetch(`http://127.0.0.1:${port}/dev`, { method: 'GET', headers: {} }, 'entered')).status).toBe(200);
  });
});
