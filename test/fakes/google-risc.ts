/**
 * A loopback fake of Google's Cross-Account Protection (RISC) transmitter, written from Google's
 * documentation ("Protect user accounts with Cross-Account Protection",
 * https://developers.google.com/identity/protocols/risc) and the RFCs it follows:
 * - the configuration document at `/.well-known/risc-configuration` names the `issuer`
 *   (`https://accounts.google.com/`), the `jwks_uri` of the keys that sign security event tokens,
 *   the supported delivery method (push) and the stream management endpoints;
 * - the key set (`/oauth2/v3/certs`, Google's JWKS) holds RSA keys with `kid`, `alg: RS256`,
 *   `use: sig`; Google rotates its keys, so a receiver must look a token's `kid` up in the current set;
 * - a security event token (RFC 8417) is a JWT signed RS256, header `{alg, kid, typ}`, claims `iss`,
 *   `aud` (the OAuth client id of the app the event is for), `iat`, `jti` (unique per token) and
 *   `events`: one event, keyed by its URI — `…/risc/event-type/account-disabled` (with `reason`
 *   `hijacking` or `bulk-account`), `…/oauth/event-type/tokens-revoked`, `…/risc/event-type/
 *   sessions-revoked`, `…/risc/event-type/verification` (with the `state` the receiver asked
 *   for) — whose `subject` is `{subject_type: "iss-sub", iss: "https://accounts.google.com/", sub}`
 *   (the Google account id, the `sub` of its ID tokens);
 * - delivered per RFC 8935: `POST` with `Content-Type: application/secevent+jwt` and `Accept:
 *   application/json`; the receiver answers 202 to accept, 400 `{err, description}` to refuse.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSign, generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto';
import { type DeliveryAnswer, deliver } from './provider-events.ts';

export const RISC = {
  accountDisabled: 'https://schemas.openid.net/secevent/risc/event-type/account-disabled',
  sessionsRevoked: 'https://schemas.openid.net/secevent/risc/event-type/sessions-revoked',
  verification: 'https://schemas.openid.net/secevent/risc/event-type/verification',
  tokensRevoked: 'https://schemas.openid.net/secevent/oauth/event-type/tokens-revoked',
} as const;

const GOOGLE_ISSUER = 'https://accounts.google.com/';

interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

function newKey(): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { kid: randomBytes(20).toString('hex'), privateKey, publicKey };
}

const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** How to sign one token: another key or `kid`, another `alg`, or no signature. */
export interface SignOptions {
  key?: SigningKey;
  kid?: string;
  alg?: string;
  unsigned?: boolean;
}

export interface FakeRisc {
  readonly url: string;
  readonly configurationUrl: string;
  readonly issuer: string;
  /** Requests for the key set so far. */
  readonly jwksRequests: number;
  /** Requests for the configuration document so far. */
  readonly configurationRequests: number;
  /** The key tokens are signed with now. */
  readonly current: SigningKey;
  /** Answer the document and key set with 500 (Google unreachable from the receiver's point of view). */
  down: boolean;
  /** Rotates: a new signing key is published (the old one stays listed unless `dropOld`) and used from now on. */
  rotate(options?: { dropOld?: boolean }): SigningKey;
  /** A key that is published nowhere (a forger's). */
  strangerKey(): SigningKey;
  /** A signed token of `claims`. */
  sign(claims: Record<string, unknown>, options?: SignOptions): string;
  /** The claims of one event for `aud`, as Google sends them. */
  claims(aud: string, type: string, event: Record<string, unknown>, extra?: Record<string, unknown>): Record<string, unknown>;
  /** An event about a Google account (`iss-sub` subject). */
  accountEvent(aud: string, type: string, sub: string, extra?: Record<string, unknown>): Record<string, unknown>;
  /** The verification event Google sends when asked to (`state` echoed). */
  verification(aud: string, state: string): Record<string, unknown>;
  /** POSTs a token to a receiver as RFC 8935 says. */
  push(url: string, token: string, contentType?: string): Promise<DeliveryAnswer>;
  close(): Promise<void>;
}

export async function startFakeRisc(): Promise<FakeRisc> {
  const keys: SigningKey[] = [newKey()];
  let jwksRequests = 0;
  let configurationRequests = 0;
  let url = '';
  const state = { down: false };
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify(body));
    };
    if (req.method === 'GET' && path === '/.well-known/risc-configuration') {
      configurationRequests += 1;
      if (state.down) return reply(500, { error: { code: 500, message: 'Internal error', status: 'INTERNAL' } });
      return reply(200, {
        issuer: GOOGLE_ISSUER,
        jwks_uri: `${url}/oauth2/v3/certs`,
        delivery_methods_supported: ['https://schemas.openid.net/secevent/risc/delivery-method/push'],
        configuration_endpoint: `${url}/v1beta/stream`,
        status_endpoint: `${url}/v1beta/stream/status`,
        add_subject_endpoint: `${url}/v1beta/subject:add`,
        remove_subject_endpoint: `${url}/v1beta/subject:remove`,
        verification_endpoint: `${url}/v1beta/stream:verify`,
      });
    }
    if (req.method === 'GET' && path === '/oauth2/v3/certs') {
      jwksRequests += 1;
      if (state.down) return reply(500, { error: { code: 500, message: 'Internal error', status: 'INTERNAL' } });
      return reply(200, { keys: keys.map((key) => ({ ...key.publicKey.export({ format: 'jwk' }), kid: key.kid, alg: 'RS256', use: 'sig' })) });
    }
    reply(404, { error: { code: 404, message: 'Not Found', status: 'NOT_FOUND' } });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const sign = (claims: Record<string, unknown>, options: SignOptions = {}): string => {
    const key = options.key ?? (keys.at(-1) as SigningKey);
    const input = `${part({ alg: options.alg ?? 'RS256', kid: options.kid ?? key.kid, typ: 'secevent+jwt' })}.${part(claims)}`;
    if (options.unsigned) return `${input}.`;
    return `${input}.${createSign('RSA-SHA256').update(input).sign(key.privateKey, 'base64url')}`;
  };
  const claims = (aud: string, type: string, event: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    iss: GOOGLE_ISSUER,
    aud,
    iat: Math.floor(Date.now() / 1000),
    jti: randomBytes(16).toString('hex'),
    events: { [type]: event },
    ...extra,
  });
  return {
    url,
    configurationUrl: `${url}/.well-known/risc-configuration`,
    issuer: GOOGLE_ISSUER,
    get jwksRequests() {
      return jwksRequests;
    },
    get configurationRequests() {
      return configurationRequests;
    },
    get current() {
      return keys.at(-1) as SigningKey;
    },
    get down() {
      return state.down;
    },
    set down(value: boolean) {
      state.down = value;
    },
    rotate(options = {}) {
      const key = newKey();
      if (options.dropOld) keys.splice(0, keys.length);
      keys.push(key);
      return key;
    },
    strangerKey: newKey,
    sign,
    claims,
    accountEvent: (aud, type, sub, extra = {}) =>
      claims(aud, type, { subject: { subject_type: 'iss-sub', iss: GOOGLE_ISSUER, sub }, ...(type === RISC.accountDisabled ? { reason: 'hijacking' } : {}) }, extra),
    verification: (aud, verificationState) => claims(aud, RISC.verification, { state: verificationState }),
    push: (target, token, contentType = 'application/secevent+jwt') => deliver(target, { headers: { 'content-type': contentType, accept: 'application/json' }, body: token }),
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
}
