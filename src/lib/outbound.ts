/**
 * The outbound guard (docs/contract.md §1): the one way Tessera fetches a URL that the
 * deployment's settings did not fix — one built from an entered value (§5c), and later a
 * client metadata document (§9a), a webhook endpoint made through the API (§7) or a key set
 * (§5b). Redirects are never followed, and in production the address actually connected to
 * is never a loopback, private, link-local, unspecified, multicast or broadcast one: the host
 * is resolved, every answer is checked, and the socket connects to exactly the checked answers
 * (an IP-literal host is checked as it is). A DNS answer cannot move a call afterwards.
 *
 * Anything outside the integrations room (a webhook sender) uses the same `guard.fetch`, naming
 * the URL's origin class; `OUTBOUND_ALLOW_CIDRS` opens ranges for the classes that may use it.
 */
import { type LookupAddress, lookup as dnsLookup } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { Readable } from 'node:stream';

/** Where a guarded URL came from: it decides whether `OUTBOUND_ALLOW_CIDRS` applies. */
export type OutboundOrigin = 'entered' | 'webhook' | 'client_metadata' | 'key_set';

/** The classes `OUTBOUND_ALLOW_CIDRS` opens ranges for; a client metadata document or a key set never reaches a guarded range. */
const ALLOWLISTED: ReadonlySet<OutboundOrigin> = new Set(['entered', 'webhook']);

/** What an address is, for the guard: `public` is the only class production reaches unasked. */
export type AddressClass = 'public' | 'loopback' | 'private' | 'link-local' | 'unspecified' | 'multicast' | 'broadcast' | 'invalid';

const V4: [string, number, AddressClass][] = [
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'private'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.168.0.0', 16, 'private'],
  ['224.0.0.0', 4, 'multicast'],
  // 240.0.0.0/4 is reserved and 255.255.255.255 the limited broadcast: neither is a public host.
  ['240.0.0.0', 4, 'broadcast'],
];
const V6: [string, number, AddressClass][] = [
  ['::1', 128, 'loopback'],
  ['::', 128, 'unspecified'],
  ['fc00::', 7, 'private'],
  ['fec0::', 10, 'private'],
  ['fe80::', 10, 'link-local'],
  ['ff00::', 8, 'multicast'],
];
const V4_LISTS = V4.map(([network, prefix, kind]) => {
  const list = new BlockList();
  list.addSubnet(network, prefix, 'ipv4');
  return [list, kind] as const;
});
const V6_LISTS = V6.map(([network, prefix, kind]) => {
  const list = new BlockList();
  list.addSubnet(network, prefix, 'ipv6');
  return [list, kind] as const;
});

/** The 16 bytes of an IPv6 address (zone id dropped), or null. */
function ipv6Bytes(address: string): number[] | null {
  let text = address.replace(/^\[|\]$/g, '');
  const zone = text.indexOf('%');
  if (zone !== -1) text = text.slice(0, zone);
  if (isIP(text) !== 6) return null;
  let tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted?.[1]) {
    tail = dotted[1].split('.').map(Number);
    text = `${text.slice(0, -dotted[1].length)}0:0`;
  }
  const [head = '', rest] = text.split('::') as [string, string | undefined];
  const groups = (part: string) => (part === '' ? [] : part.split(':').map((group) => Number.parseInt(group, 16)));
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const all = rest === undefined ? left : [...left, ...new Array(8 - left.length - right.length).fill(0), ...right];
  const bytes = all.flatMap((group) => [group >> 8, group & 0xff]);
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes.length === 16 ? bytes : null;
}

/**
 * The IPv4 address an IPv6 one embeds, judged in its place: IPv4-mapped (`::ffff:0:0/96`),
 * IPv4-compatible (`::/96`), NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`). Else null.
 */
export function embeddedIpv4(address: string): string | null {
  const bytes = ipv6Bytes(address);
  if (!bytes) return null;
  const zeros = (from: number, to: number) => bytes.slice(from, to).every((byte) => byte === 0);
  const quad = (at: number) => bytes.slice(at, at + 4).join('.');
  if (zeros(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) return quad(12);
  // ::/96, except :: and ::1 themselves (judged as IPv6: unspecified and loopback — refused either way).
  if (zeros(0, 12) && !zeros(12, 15)) return quad(12);
  if (bytes[0] === 0x00 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b && zeros(4, 12)) return quad(12);
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return quad(2);
  return null;
}

/** The class of an IP address (brackets and a zone id allowed); anything that is not one is `invalid`. */
export function classifyAddress(address: string): AddressClass {
  const text = address.replace(/^\[|\]$/g, '');
  const family = isIP(text.split('%')[0] ?? '');
  if (family === 4) {
    if (text === '255.255.255.255') return 'broadcast';
    return V4_LISTS.find(([list]) => list.check(text, 'ipv4'))?.[1] ?? 'public';
  }
  if (family !== 6) return 'invalid';
  const embedded = embeddedIpv4(text);
  if (embedded) return classifyAddress(embedded);
  const bare = text.split('%')[0] as string;
  return V6_LISTS.find(([list]) => list.check(bare, 'ipv6'))?.[1] ?? 'public';
}

/** The guard refused an address: the host asked for, the address it resolved to, and its class. */
export class OutboundRefused extends Error {
  readonly host: string;
  readonly address: string;
  readonly addressClass: AddressClass;
  constructor(host: string, address: string, addressClass: AddressClass) {
    super(`outbound guard: ${host} resolves to a ${addressClass} address`);
    this.name = 'OutboundRefused';
    this.host = host;
    this.address = address;
    this.addressClass = addressClass;
  }
}

export interface OutboundGuardOptions {
  /** Production: addresses are checked. Development reaches anything (local fakes), still without following redirects. */
  enforce: boolean;
  /** `OUTBOUND_ALLOW_CIDRS`: ranges opened for entered values and webhook endpoints. */
  allowCidrs: readonly string[];
  /** The resolver (tests answer as they please); default node:dns `lookup`. */
  lookup?: LookupFunction;
  /** Extra trusted certificate authorities (tests' https fakes); default the system's. */
  ca?: string;
  /** Told of each refusal (the caller logs it). */
  onRefused?(refused: OutboundRefused, origin: OutboundOrigin): void;
}

/** One guarded request: what `fetch` takes, reduced to what Tessera sends. */
export interface OutboundInit {
  method: string;
  headers: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
}

export interface OutboundGuard {
  /** Why `address` may not be reached for a URL of `origin` (its class), or null when it may. */
  refusal(address: string, origin: OutboundOrigin): AddressClass | null;
  /** Fetches `url` (no redirect followed) connecting only to addresses `refusal` passes; a refused one throws OutboundRefused. */
  fetch(url: string | URL, init: OutboundInit, origin: OutboundOrigin): Promise<Response>;
  /**
   * Why `url`'s host may not be reached now for `origin` — the class of the first refused address
   * among its current DNS answers (`invalid` when it has none) — or null: where a request chooses a
   * URL that is fetched later (a webhook endpoint), it is refused up front. Development: null.
   */
  check(url: URL, origin: OutboundOrigin): Promise<AddressClass | null>;
}

/** A guard from the settings (`APP_ENV`, `OUTBOUND_ALLOW_CIDRS`). */
export function createOutboundGuard(options: OutboundGuardOptions): OutboundGuard {
  const allowed = new BlockList();
  for (const cidr of options.allowCidrs) {
    const [network = '', bits] = cidr.split('/');
    const family = isIP(network) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) allowed.addAddress(network, family);
    else allowed.addSubnet(network, Number(bits), family);
  }
  const opened = (address: string) => {
    const bare = address.replace(/^\[|\]$/g, '').split('%')[0] as string;
    const family = isIP(bare);
    if (family === 0) return false;
    const embedded = family === 6 ? embeddedIpv4(bare) : null;
    return allowed.check(bare, family === 6 ? 'ipv6' : 'ipv4') || (embedded !== null && allowed.check(embedded, 'ipv4'));
  };
  const refusal = (address: string, origin: OutboundOrigin): AddressClass | null => {
    if (!options.enforce) return null;
    const kind = classifyAddress(address);
    if (kind === 'public') return null;
    if (kind !== 'invalid' && ALLOWLISTED.has(origin) && opened(address)) return null;
    return kind;
  };
  const resolve = options.lookup ?? (dnsLookup as unknown as LookupFunction);
  const refuse = (host: string, address: string, kind: AddressClass, origin: OutboundOrigin) => {
    const refused = new OutboundRefused(host, address, kind);
    options.onRefused?.(refused, origin);
    return refused;
  };

  return {
    refusal,
    async check(url, origin) {
      if (!options.enforce) return null;
      const host = url.hostname.replace(/^\[|\]$/g, '');
      if (isIP(host)) return refusal(host, origin);
      const answers = await new Promise<LookupAddress[]>((done) => {
        resolve(host, { all: true }, (error, list) => done(error ? [] : ((Array.isArray(list) ? list : [{ address: list, family: 4 }]) as LookupAddress[])));
      });
      if (answers.length === 0) return 'invalid';
      for (const answer of answers) {
        const kind = refusal(answer.address, origin);
        if (kind) return kind;
      }
      return null;
    },
    async fetch(target, init, origin) {
      const url = new URL(target);
      // Development reaches anything; with extra trusted authorities (tests' https fakes) over node:https, which honours them.
      if (!options.enforce) return options.ca ? send(url, init, resolve, options.ca) : fetch(url, { ...init, redirect: 'manual' });
      const host = url.hostname.replace(/^\[|\]$/g, '');
      // An IP literal is never looked up: it is checked as it is.
      if (isIP(host)) {
        const kind = refusal(host, origin);
        if (kind) throw refuse(host, host, kind, origin);
      }
      // Every answer checked; the socket connects to the answers given here and nowhere else.
      const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
        resolve(hostname, { ...lookupOptions, all: true }, (error, answers) => {
          if (error) return callback(error, '', 4);
          const list = (Array.isArray(answers) ? answers : [{ address: answers, family: 4 }]) as LookupAddress[];
          for (const answer of list) {
            const kind = refusal(answer.address, origin);
            if (kind) return callback(refuse(hostname, answer.address, kind, origin), '', 4);
          }
          if (list.length === 0) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 4);
          if (lookupOptions.all) return (callback as unknown as (error: null, addresses: LookupAddress[]) => void)(null, list);
          const first = list[0] as LookupAddress;
          callback(null, first.address, first.family);
        });
      };
      return send(url, init, lookup, options.ca);
    },
  };
}

/** Statuses whose answer has no body (a Response refuses one). */
const NO_BODY = new Set([101, 103, 204, 205, 304]);

/** One request over node:http(s) with our lookup, no connection reuse (each call is checked anew), answered as a fetch Response. */
function send(url: URL, init: OutboundInit, lookup: LookupFunction, ca: string | undefined): Promise<Response> {
  const headers = Object.fromEntries(Object.entries(init.headers).filter(([name]) => name.toLowerCase() !== 'accept-encoding'));
  if (init.body !== undefined && !Object.keys(headers).some((name) => name.toLowerCase() === 'content-length')) headers['content-length'] = String(Buffer.byteLength(init.body));
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const outgoing = request(
      url,
      { method: init.method, headers, lookup, agent: false, ...(init.signal ? { signal: init.signal } : {}), ...(ca && url.protocol === 'https:' ? { ca } : {}) },
      (incoming: IncomingMessage) => {
        const answerHeaders = new Headers();
        for (let index = 0; index + 1 < incoming.rawHeaders.length; index += 2) {
          try {
            answerHeaders.append(incoming.rawHeaders[index] as string, incoming.rawHeaders[index + 1] as string);
          } catch {
            // A header fetch would refuse is dropped.
          }
        }
        const status = incoming.statusCode ?? 502;
        const empty = NO_BODY.has(status) || init.method === 'HEAD';
        if (empty) incoming.resume();
        const body = empty ? null : (Readable.toWeb(incoming) as ReadableStream<Uint8Array>);
        try {
          resolve(new Response(body, { status, headers: answerHeaders }));
        } catch (error) {
          incoming.destroy();
          reject(error);
        }
      },
    );
    outgoing.on('error', reject);
    outgoing.end(init.body);
  });
}
