// Reading deliveries by the definitions' data, against the test vectors the providers publish.
import { describe, expect, it } from 'vitest';
import { createHmac, generateKeyPairSync, sign } from 'node:crypto';
import { discord } from '../providers/discord.ts';
import { github } from '../providers/github.ts';
import { linear } from '../providers/linear.ts';
import { slack } from '../providers/slack.ts';
import { zoom } from '../providers/zoom.ts';
import { eventsSecretProblem } from '../providers/event-secrets.ts';
import { checkSignature, deliveryIdOf, handshakeAnswer, idsOf, matchingRule, namesClient, occurredAtOf, targetsOf } from './delivery.ts';

const events = (definition: { events?: unknown }) => definition.events as NonNullable<typeof slack.events>;

describe('signatures, as the providers document them', () => {
  it("Slack's sample request from “Verifying requests from Slack” verifies, and only within five minutes", () => {
    const body =
      'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c';
    const delivery = {
      headers: { 'x-slack-request-timestamp': '1531420618', 'x-slack-signature': 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503' },
      raw: Buffer.from(body),
    };
    const secret = '8f742231b10e8888abcd99yyyzzz85a5';
    expect(checkSignature(events(slack), secret, delivery, 1531420618_000 + 60_000)).toBe('ok');
    expect(checkSignature(events(slack), secret, delivery, 1531420618_000 + 301_000)).toBe('stale');
    expect(checkSignature(events(slack), 'another-secret', delivery, 1531420618_000)).toBe('rejected_signature');
    expect(checkSignature(events(slack), secret, { ...delivery, raw: Buffer.from(`${body} `) }, 1531420618_000)).toBe('rejected_signature');
  });

  it("GitHub's test values from “Validating webhook deliveries” verify", () => {
    const delivery = { headers: { 'x-hub-signature-256': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17' }, raw: Buffer.from('Hello, World!') };
    expect(checkSignature(events(github), "It's a Secret to Everybody", delivery, Date.now())).toBe('ok');
    expect(checkSignature(events(github), "It's a Secret to Everybody", { headers: {}, raw: delivery.raw }, Date.now())).toBe('rejected_signature');
    expect(checkSignature(events(github), "It's a Secret to Everybody", { headers: { 'x-hub-signature-256': 'sha256=757107' }, raw: delivery.raw }, Date.now())).toBe('rejected_signature');
  });
});

describe("Linear's webhook: the signed body's webhookTimestamp, and the app's client id", () => {
  const secret = 'lin_wh_0123456789abcdef';
  const at = 1_764_300_000_000;
  const signed = (body: Record<string, unknown>) => {
    const raw = Buffer.from(JSON.stringify(body));
    return { headers: { 'linear-signature': createHmac('sha256', secret).update(raw).digest('hex'), 'linear-delivery': 'd-1' }, raw };
  };
  const revoked = { action: 'revoked', type: 'OAuthApp', organizationId: 'org-1', oauthClientId: 'client-a', webhookTimestamp: at };

  it('verifies within 60 seconds of webhookTimestamp; later, or without one, is stale; a wrong secret is refused first', () => {
    expect(checkSignature(events(linear), secret, signed(revoked), at + 59_000)).toBe('ok');
    expect(checkSignature(events(linear), secret, signed(revoked), at - 59_000)).toBe('ok');
    expect(checkSignature(events(linear), secret, signed(revoked), at + 61_000)).toBe('stale');
    expect(checkSignature(events(linear), secret, signed({ ...revoked, webhookTimestamp: undefined }), at)).toBe('stale');
    expect(checkSignature(events(linear), secret, signed({ ...revoked, webhookTimestamp: String(at) }), at)).toBe('stale');
    expect(checkSignature(events(linear), 'another-secret', signed(revoked), at)).toBe('rejected_signature');
  });

  it('an OAuthApp revocation names the Linear organization, and acts for the app whose client id it names', () => {
    const rule = matchingRule(events(linear), signed(revoked), revoked);
    expect(rule?.type).toBe('oauth_app_revoked');
    expect(rule && targetsOf(rule, revoked)).toEqual({ workspace: 'org-1' });
    expect(rule && namesClient(rule, revoked, 'client-a')).toBe(true);
    expect(rule && namesClient(rule, revoked, 'client-b')).toBe(false);
    expect(rule && namesClient(rule, { ...revoked, oauthClientId: undefined }, 'client-a')).toBe(false);
  });
});

describe('what a rule names', () => {
  it('a `[]` path fans out over its list; a missing part names nothing', () => {
    const body = { team_id: 'T1', event: { type: 'tokens_revoked', tokens: { oauth: ['U1', 'U2'], bot: ['B1'] } } };
    expect(idsOf('{team_id}:{event.tokens.oauth[]}', body)).toEqual(['T1:U1', 'T1:U2']);
    // Only bot tokens revoked: a real event that names none of ours; a missing list is not what Slack sends.
    expect(idsOf('{team_id}:{event.tokens.oauth[]}', { team_id: 'T1', event: { tokens: { oauth: [], bot: ['B1'] } } })).toEqual([]);
    expect(idsOf('{team_id}:{event.tokens.oauth[]}', { team_id: 'T1', event: {} })).toBeUndefined();
    expect(idsOf('{team_id}:{event.tokens.oauth[]}', { event: { tokens: { oauth: ['U1'] } } })).toBeUndefined();
    expect(idsOf('{sender.id}', { sender: { id: 583231 } })).toEqual(['583231']);
  });

  it("Slack's tokens_revoked names user tokens only; app_uninstalled the workspace", () => {
    const revoked = { type: 'event_callback', team_id: 'T1', event_id: 'Ev1', event: { type: 'tokens_revoked', tokens: { oauth: ['U1'], bot: ['B1'] } } };
    const rule = matchingRule(events(slack), { headers: {}, raw: Buffer.alloc(0) }, revoked);
    expect(rule?.type).toBe('tokens_revoked');
    expect(rule && targetsOf(rule, revoked)).toEqual({ accounts: ['T1:U1'] });
    const uninstalled = { type: 'event_callback', team_id: 'T1', event: { type: 'app_uninstalled' } };
    const other = matchingRule(events(slack), { headers: {}, raw: Buffer.alloc(0) }, uninstalled);
    expect(other && targetsOf(other, uninstalled)).toEqual({ workspace: 'T1' });
  });

  it("Zoom's delivery id is the same for a retry of the same body, and differs for another event", () => {
    const body = { event: 'app_deauthorized', event_ts: 1700000000000, payload: { account_id: 'A', user_id: 'U' } };
    const none = { headers: {}, raw: Buffer.alloc(0) };
    expect(deliveryIdOf(events(zoom), none, body)).toBe(deliveryIdOf(events(zoom), none, structuredClone(body)));
    expect(deliveryIdOf(events(zoom), none, { ...body, event_ts: 1700000000001 })).not.toBe(deliveryIdOf(events(zoom), none, body));
  });
});

describe("Discord's webhook events: Ed25519 by the application's public key", () => {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const hex = Buffer.from(publicKey.export({ format: 'jwk' }).x as string, 'base64url').toString('hex');
  const at = 1_764_300_000;
  const signed = (body: string, timestamp = String(at)) => ({
    headers: { 'x-signature-ed25519': sign(null, Buffer.from(`${timestamp}${body}`), privateKey).toString('hex'), 'x-signature-timestamp': timestamp },
    raw: Buffer.from(body),
  });
  const body = { version: 1, application_id: '11', type: 1, event: { type: 'APPLICATION_DEAUTHORIZED', timestamp: '2025-11-28T03:20:00.123456', data: { user: { id: '80351110224678913' } } } };

  it('verifies the signature over the timestamp and the raw body, within five minutes, with that key only', () => {
    const delivery = signed(JSON.stringify(body));
    expect(checkSignature(events(discord), hex, delivery, at * 1000 + 299_000)).toBe('ok');
    expect(checkSignature(events(discord), hex, delivery, at * 1000 + 301_000)).toBe('stale');
    const other = Buffer.from(generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x as string, 'base64url').toString('hex');
    expect(checkSignature(events(discord), other, delivery, at * 1000)).toBe('rejected_signature');
    expect(checkSignature(events(discord), hex, { ...delivery, raw: Buffer.from(`${delivery.raw} `) }, at * 1000)).toBe('rejected_signature');
    expect(checkSignature(events(discord), 'not a key', delivery, at * 1000)).toBe('rejected_signature');
  });

  it('the PING is a handshake with no fields; type is compared as the number it is', () => {
    const ping = { version: 1, application_id: '11', type: 0 };
    expect(handshakeAnswer(events(discord), hex, signed(JSON.stringify(ping)), ping)).toEqual({});
    expect(handshakeAnswer(events(discord), hex, signed(JSON.stringify(body)), body)).toBeNull();
    expect(handshakeAnswer(events(discord), hex, signed('{}'), { ...ping, type: '0' })).toBeNull();
  });

  it('names the user; the time without an offset is UTC; the delivery id is a digest of the signature', () => {
    const delivery = signed(JSON.stringify(body));
    const rule = matchingRule(events(discord), delivery, body);
    expect(rule?.type).toBe('application_deauthorized');
    expect(rule && targetsOf(rule, body)).toEqual({ accounts: ['80351110224678913'] });
    expect(rule && occurredAtOf(rule, body)?.toISOString()).toBe('2025-11-28T03:20:00.123Z');
    const id = deliveryIdOf(events(discord), delivery, body);
    expect(id).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(deliveryIdOf(events(discord), { ...delivery, headers: { ...delivery.headers } }, body)).toBe(id);
    expect(deliveryIdOf(events(discord), signed(JSON.stringify(body), String(at + 1)), body)).not.toBe(id);
  });

  it("an events secret that is not a public key is named as such; another scheme's secret is free", () => {
    expect(eventsSecretProblem(events(discord), hex)).toBeUndefined();
    expect(eventsSecretProblem(events(discord), 'a-shared-secret-of-sixteen')).toMatch(/64 hexadecimal characters/);
    expect(eventsSecretProblem(events(slack), 'a-shared-secret-of-sixteen')).toBeUndefined();
  });
});
