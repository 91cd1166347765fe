/**
 * Reading a provider's event delivery by its definition's data (providers/spec.ts `EventsSpec`):
 * the signature over the raw body, then — only once it holds — the body, the handshake, the rule
 * it matches and the ids that rule names. Pure functions: no database, no clock but the one given.
 */
import { createHash, createHmac, timingSafeEqual, verify } from 'node:crypto';
import { ed25519PublicKey } from '../providers/event-secrets.ts';
import { valueAt, valuesAt } from '../providers/json.ts';
import type { EventCondition, EventHandshakeSpec, EventRule, EventSignatureSpec, EventsSpec, SecurityEventTokenSpec } from '../providers/spec.ts';

/** A delivery as it arrived: header names lower-case, the body byte for byte. */
export interface Delivery {
  headers: Readonly<Record<string, string | string[] | undefined>>;
  raw: Buffer;
}

/** How the signature check ended: `ok`, or the outcome label of a refusal (docs/contract.md §5b metrics). */
export type SignatureCheck = 'ok' | 'rejected_signature' | 'stale';

const DEFAULT_TOLERANCE_SECONDS = 300;

/** One header's value (the first, if repeated). */
export function header(delivery: Delivery, name: string): string | undefined {
  const value = delivery.headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
}

/** The scheme of a provider signed by its own keys (a security event token), or undefined for an HMAC under the app's events secret. */
export function tokenScheme(spec: EventsSpec): SecurityEventTokenSpec | undefined {
  return spec.signature.kind === 'security_event_token' ? spec.signature : undefined;
}

const hmacHex = (secret: string, data: Buffer | string) => createHmac('sha256', secret).update(data).digest('hex');

/**
 * Checks the signature the provider sent against the HMAC of the signed text, in constant
 * time, then the signed timestamp against the tolerance: a wrong signature says nothing about
 * the time, and a stale one is refused even when well signed (a replay).
 */
export function checkSignature(spec: EventsSpec, secret: string, delivery: Delivery, nowMs: number): SignatureCheck {
  if (spec.signature.kind === 'security_event_token') return 'rejected_signature';
  const signature: EventSignatureSpec = spec.signature;
  const sent = header(delivery, signature.header);
  if (!sent?.startsWith(signature.prefix)) return 'rejected_signature';
  const timestamp = signature.timestampHeader ? header(delivery, signature.timestampHeader) : undefined;
  if (signature.timestampHeader && (timestamp === undefined || !/^\d{1,12}$/.test(timestamp))) return 'rejected_signature';
  const template = signature.signed ?? '{body}';
  const [before, after] = splitOnce(template, '{body}');
  const signed = Buffer.concat([Buffer.from(before.replace('{timestamp}', timestamp ?? '')), delivery.raw, Buffer.from(after.replace('{timestamp}', timestamp ?? ''))]);
  const given = sent.slice(signature.prefix.length);
  if (!(signature.scheme === 'ed25519' ? ed25519Holds(secret, signed, given) : hmacHolds(secret, signed, given))) return 'rejected_signature';
  const tolerance = signature.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (timestamp !== undefined && Math.abs(nowMs / 1000 - Number(timestamp)) > tolerance) return 'stale';
  if (signature.bodyTimestamp) {
    // Signed with the body: read only now that the signature holds.
    const value = valueAt(parseBody(delivery.raw), signature.bodyTimestamp.path);
    const ms = typeof value === 'number' && Number.isFinite(value) ? value * (signature.bodyTimestamp.format === 'seconds' ? 1000 : 1) : undefined;
    if (ms === undefined || Math.abs(nowMs - ms) > tolerance * 1000) return 'stale';
  }
  return 'ok';
}

function hmacHolds(secret: string, signed: Buffer, sent: string): boolean {
  const expected = Buffer.from(hmacHex(secret, signed));
  const given = Buffer.from(sent);
  // Equal lengths first: timingSafeEqual throws otherwise, and a length says nothing of the secret.
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** Whether `sent` (hex, 64 bytes) is an Ed25519 signature of `signed` by the public key `secret` (hex). */
function ed25519Holds(secret: string, signed: Buffer, sent: string): boolean {
  const key = ed25519PublicKey(secret);
  if (!key || !/^[0-9a-fA-F]{128}$/.test(sent)) return false;
  try {
    return verify(null, signed, key, Buffer.from(sent, 'hex'));
  } catch {
    return false;
  }
}

function splitOnce(text: string, marker: string): [string, string] {
  const at = text.indexOf(marker);
  return at < 0 ? [text, ''] : [text.slice(0, at), text.slice(at + marker.length)];
}

/** The body as JSON, once the signature holds; undefined when it is not a JSON object. */
export function parseBody(raw: Buffer): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(raw.toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function holds(condition: EventCondition, delivery: Delivery, body: unknown): boolean {
  const value = condition.header !== undefined ? header(delivery, condition.header) : condition.path !== undefined ? valueAt(body, condition.path) : undefined;
  const allowed: readonly (string | number)[] = typeof condition.equals === 'string' || typeof condition.equals === 'number' ? [condition.equals] : condition.equals;
  return (typeof value === 'string' || typeof value === 'number') && allowed.includes(value);
}

const allHold = (conditions: readonly EventCondition[], delivery: Delivery, body: unknown) => conditions.every((condition) => holds(condition, delivery, body));

/**
 * The answer to a handshake the delivery is (a URL check), null when it is none; undefined
 * when it is one but lacks what the answer needs (a 400).
 */
export function handshakeAnswer(spec: EventsSpec, secret: string, delivery: Delivery, body: unknown): Record<string, string> | null | undefined {
  const handshake = handshakeOf(spec, delivery, body);
  if (!handshake) return null;
  const answer: Record<string, string> = {};
  for (const [field, source] of Object.entries(handshake.answer)) {
    const value = valueAt(body, typeof source === 'string' ? source : source.hmac);
    if (typeof value !== 'string' || value === '' || value.length > 512) return undefined;
    answer[field] = typeof source === 'string' ? value : hmacHex(secret, value);
  }
  return answer;
}

/** The handshake the delivery is, if any. */
export function handshakeOf(spec: EventsSpec, delivery: Delivery, body: unknown): EventHandshakeSpec | undefined {
  return spec.handshakes?.find((candidate) => allHold(candidate.when, delivery, body));
}

/** The rule the delivery matches, if any. */
export function matchingRule(spec: EventsSpec, delivery: Delivery, body: unknown): EventRule | undefined {
  return spec.rules.find((rule) => allHold(rule.when, delivery, body));
}

const MAX_ID = 200;
const PLACEHOLDER = /\{([A-Za-z][A-Za-z0-9_.]*(?:\[\])?[A-Za-z0-9_.]*)\}/g;

/**
 * The ids a template names in the body: one per combination of its placeholders' values (a
 * path with `[]` fans out, and an empty list names no one); undefined when a placeholder holds
 * nothing usable.
 */
export function idsOf(template: string, body: unknown): string[] | undefined {
  let ids = [''];
  let last = 0;
  for (const match of template.matchAll(PLACEHOLDER)) {
    const path = match[1] as string;
    const literal = template.slice(last, match.index);
    const found = valuesAt(body, path);
    // Slack revoking only bot tokens sends `tokens.oauth: []`: a real event naming none of ours.
    if (path.includes('[]') && found.length === 0 && Array.isArray(valueAt(body, path.slice(0, path.indexOf('[]'))))) return [];
    const values = found.filter((value) => typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))).map(String);
    if (values.length === 0 || values.length !== found.length || values.some((value) => value === '' || value.length > MAX_ID)) return undefined;
    ids = ids.flatMap((prefix) => values.map((value) => `${prefix}${literal}${value}`));
    last = (match.index ?? 0) + match[0].length;
  }
  return ids.map((id) => id + template.slice(last));
}

/** The ids a rule names: its workspace (one) and accounts (any number, at most 100); undefined when the body lacks them. */
export function targetsOf(rule: EventRule, body: unknown): { workspace?: string; accounts?: string[] } | undefined {
  const workspace = rule.match.workspace !== undefined ? idsOf(rule.match.workspace, body) : undefined;
  const accounts = rule.match.accounts !== undefined ? idsOf(rule.match.accounts, body) : undefined;
  if ((rule.match.workspace !== undefined && workspace?.length !== 1) || (rule.match.accounts !== undefined && (!accounts || accounts.length > 100))) return undefined;
  return { ...(workspace?.[0] !== undefined ? { workspace: workspace[0] } : {}), ...(accounts ? { accounts: [...new Set(accounts)] } : {}) };
}

/** Whether the body names `clientId` where the rule says it names the app's client (`EventRule.match.client`); true when it says nowhere. */
export function namesClient(rule: EventRule, body: unknown, clientId: string): boolean {
  if (rule.match.client === undefined) return true;
  const named = valueAt(body, rule.match.client);
  return typeof named === 'string' && named === clientId;
}

/** The delivery's id, the same on the provider's retries; undefined when the delivery carries none. */
export function deliveryIdOf(spec: EventsSpec, delivery: Delivery, body: unknown): string | undefined {
  const source = spec.deliveryId;
  let id: string | undefined;
  if ('header' in source) id = header(delivery, source.header);
  else if ('headerDigest' in source) {
    const value = header(delivery, source.headerDigest);
    id = value ? `sha256:${createHash('sha256').update(value.toLowerCase()).digest('hex')}` : undefined;
  } else if ('path' in source) {
    const value = valueAt(body, source.path);
    id = typeof value === 'string' || typeof value === 'number' ? String(value) : undefined;
  } else {
    const parts = source.digest.map((path) => valueAt(body, path));
    if (parts.some((part) => part === undefined)) return undefined;
    id = `sha256:${createHash('sha256').update(JSON.stringify(parts)).digest('hex')}`;
  }
  return id !== undefined && id !== '' && id.length <= MAX_ID ? id : undefined;
}

const ISO_WITHOUT_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/;

/** When the provider says the event happened, if the rule knows where it says so and the body holds a sane time. */
export function occurredAtOf(rule: EventRule, body: unknown): Date | undefined {
  if (!rule.occurredAt) return undefined;
  const value = valueAt(body, rule.occurredAt.path);
  let ms: number | undefined;
  // An ISO 8601 time without an offset is UTC (Discord's `event.timestamp`), never this server's local time.
  if (rule.occurredAt.format === 'iso' && typeof value === 'string') ms = Date.parse(ISO_WITHOUT_OFFSET.test(value) ? `${value}Z` : value);
  else if (typeof value === 'number' || (typeof value === 'string' && /^\d+(\.\d+)?$/.test(value))) ms = Number(value) * (rule.occurredAt.format === 'seconds' ? 1000 : 1);
  return ms !== undefined && Number.isFinite(ms) && ms > 0 ? new Date(ms) : undefined;
}
