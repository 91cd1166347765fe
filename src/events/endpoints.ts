/**
 * Webhook endpoints as data (docs/contract.md §7): made, changed, rotated and removed through the
 * API without a redeploy, beside the endpoint(s) of the settings (`EVENTS_WEBHOOK_URL`), which are
 * listed read-only as `settings-<n>`. Endpoints are the deployment's, like service tokens: their
 * rows have no organization, nor do their audit rows (`organization_id` DEPLOYMENT, decision 282).
 * Each endpoint's signing secret is sealed under the keyring; a rotation keeps the one before it
 * until its overlap ends, and ends any older overlap, so at most two sign a delivery.
 */
import { randomBytes } from 'node:crypto';
import { recordAudit } from '../audit/audit.ts';
import { allowedScheme, type Keyring } from '../config/checks.ts';
import { type Db, queryRows, sql } from '../db/client.ts';
import { AppError } from '../ground/errors.ts';
import type { Work } from '../ground/work.ts';
import { DEPLOYMENT } from '../identity/service-tokens.ts';
import { newId } from '../lib/ids.ts';
import type { OutboundGuard } from '../lib/outbound.ts';
import { open, seal } from '../secrets/crypto.ts';
import { type WebhookSettings, webhookId } from './outbox.ts';
import { publicEndpoint, signingKey } from './send.ts';
import { EVENT_TYPES, type EventType, WEBHOOK_TEST_TYPE } from './types.ts';

/** The type of the event `POST /v1/webhook-endpoints/{id}/test` sends: a type of its own, never in an endpoint's `eventTypes`. */
export const WEBHOOK_TEST = WEBHOOK_TEST_TYPE;

/** Endpoints made through the API have ids `whe_<ULID>`; their deliveries' `webhook_id` is that id. */
export const ENDPOINT_ID = /^whe_[0-9A-HJKMNP-TV-Z]{26}$/;

/** The organization column of what belongs to no organization: endpoints' audit rows, test events and their deliveries. */
export const NO_ORGANIZATION = DEPLOYMENT;

/** An endpoint as the API shows it (never its secret, which only create and rotate answer). */
export interface EndpointView {
  id: string;
  url: string;
  description: string | null;
  eventTypes: EventType[];
  enabled: boolean;
  source: 'settings' | 'api';
  /** Null for the settings' endpoints, which have no row. */
  createdAt: string | null;
}

interface EndpointRow {
  id: string;
  url: string;
  description: string | null;
  event_types: string[] | null;
  enabled: boolean;
  created_at: string;
}

const COLUMNS = sql`id, url, description, event_types, enabled, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at`;

function view(row: EndpointRow): EndpointView {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    eventTypes: (row.event_types ?? EVENT_TYPES) as EventType[],
    enabled: row.enabled,
    source: 'api',
    createdAt: row.created_at,
  };
}

/** `whsec_` and 32 random bytes, base64 (Standard Webhooks; the contract allows 24–64). */
function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** What a sealed endpoint secret is bound to: another endpoint's or secret's row does not open it. */
export function endpointSecretBinding(endpointId: string, secretId: string) {
  return { organizationId: NO_ORGANIZATION, recordId: endpointId, name: `webhook_endpoint.secret.${secretId}` };
}

/** The settings' endpoints, `settings-<n>` by their index, read-only; the same URL listed twice is one webhook (its first index). */
export function settingsEndpoints(webhooks: readonly WebhookSettings[]): (EndpointView & { webhookId: string })[] {
  const seen = new Set<string>();
  const listed: (EndpointView & { webhookId: string })[] = [];
  webhooks.forEach((hook, index) => {
    const id = webhookId(hook.url);
    if (seen.has(id)) return;
    seen.add(id);
    // The settings' URL may carry the receiver's credential (userinfo, query): shown as the delivery log shows it.
    listed.push({ id: `settings-${index}`, webhookId: id, url: publicEndpoint(hook.url), description: null, eventTypes: [...EVENT_TYPES], enabled: true, source: 'settings', createdAt: null });
  });
  return listed;
}

/** What checking an endpoint's URL needs: the mode (the https rule) and the outbound guard. */
export interface UrlRules {
  isProduction: boolean;
  guard: OutboundGuard;
}

const urlRefused = (message: string) => new AppError('INVALID_INPUT', { message: `The url is refused: ${message}`, details: [{ path: 'url', message }] });

/**
 * A URL an endpoint may have (docs/contract.md §1): https, or http to a loopback host in
 * development; in production its host's current DNS answers must pass the outbound guard
 * (class `webhook`: `OUTBOUND_ALLOW_CIDRS` opens ranges). Refused → 400 `INVALID_INPUT`, path `url`.
 */
export async function checkEndpointUrl(value: string, rules: UrlRules): Promise<string> {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw urlRefused('must be an absolute URL');
  }
  if (!allowedScheme(url, rules.isProduction)) {
    throw urlRefused(rules.isProduction ? 'must use https:' : 'must use https: (http: is allowed only for loopback hosts in development)');
  }
  const refused = await rules.guard.check(url, 'webhook');
  if (refused) throw urlRefused(refused === 'invalid' ? 'its host does not resolve to an address' : `its host resolves to a ${refused} address, which the outbound guard refuses`);
  return url.href;
}

/** `eventTypes` as stored: null for every type; `webhook.test` and unknown types refused. */
function checkEventTypes(types: readonly string[] | undefined): string[] | null {
  if (types === undefined) return null;
  const known = new Set<string>(EVENT_TYPES);
  types.forEach((type, index) => {
    if (type === WEBHOOK_TEST) throw new AppError('INVALID_INPUT', { details: [{ path: `eventTypes.${index}`, message: 'webhook.test is sent only by the test route, to one endpoint' }] });
    if (!known.has(type)) throw new AppError('INVALID_INPUT', { details: [{ path: `eventTypes.${index}`, message: `must be one of ${EVENT_TYPES.join(', ')}` }] });
  });
  return [...new Set(types)];
}

function audit(work: Work, action: string, id: string, detail: Record<string, unknown> = {}) {
  return recordAudit(work.db, work.actor, { organizationId: NO_ORGANIZATION, action: `webhook_endpoint.${action}`, targetType: 'webhook_endpoint', targetId: id, detail });
}

/** Seals and stores a new current secret for `endpointId`; answers it (shown once). */
async function storeSecret(db: Db, keyring: Keyring, endpointId: string): Promise<string> {
  const secret = newSecret();
  const secretId = newId();
  const sealed = seal(keyring, endpointSecretBinding(endpointId, secretId), secret);
  await db.execute(sql`INSERT INTO webhook_endpoint_secrets (endpoint_id, id, key_id, envelope) VALUES (${endpointId}, ${secretId}, ${sealed.keyId}, ${sealed.envelope})`);
  return secret;
}

export interface NewEndpoint {
  url: string;
  description?: string | undefined;
  eventTypes?: string[] | undefined;
  enabled?: boolean | undefined;
}

/** Creates an endpoint: from the next event written on, it receives what its `eventTypes` name. */
export async function createEndpoint(work: Work, keyring: Keyring, rules: UrlRules, input: NewEndpoint): Promise<EndpointView & { secret: string }> {
  const url = await checkEndpointUrl(input.url, rules);
  const eventTypes = checkEventTypes(input.eventTypes);
  const id = `whe_${newId()}`;
  const [row] = await queryRows<EndpointRow>(
    work.db,
    sql`INSERT INTO webhook_endpoints (id, url, endpoint, description, event_types, enabled)
        VALUES (${id}, ${url}, ${publicEndpoint(url)}, ${input.description ?? null}, ${eventTypes === null ? null : sql`ARRAY[${sql.join(eventTypes.map((type) => sql`${type}`), sql`, `)}]::text[]`}, ${input.enabled ?? true})
        RETURNING ${COLUMNS}`,
  );
  const secret = await storeSecret(work.db, keyring, id);
  await audit(work, 'created', id, { endpoint: publicEndpoint(url), eventTypes, enabled: input.enabled ?? true });
  return { ...view(row as EndpointRow), secret };
}

/** Every endpoint: the settings' first, then those made through the API, oldest first. */
export async function listEndpoints(db: Db, webhooks: readonly WebhookSettings[]): Promise<EndpointView[]> {
  const rows = await queryRows<EndpointRow>(db, sql`SELECT ${COLUMNS} FROM webhook_endpoints ORDER BY id`);
  return [...settingsEndpoints(webhooks).map(({ webhookId: _id, ...endpoint }) => endpoint), ...rows.map(view)];
}

/** One endpoint by id (a settings one too), or 404. */
export async function findEndpoint(db: Db, webhooks: readonly WebhookSettings[], id: string): Promise<EndpointView> {
  const settings = settingsEndpoints(webhooks).find((endpoint) => endpoint.id === id);
  if (settings) {
    const { webhookId: _id, ...endpoint } = settings;
    return endpoint;
  }
  const row = ENDPOINT_ID.test(id) ? (await queryRows<EndpointRow>(db, sql`SELECT ${COLUMNS} FROM webhook_endpoints WHERE id = ${id}`))[0] : undefined;
  if (!row) throw new AppError('NOT_FOUND', { message: 'No such webhook endpoint' });
  return view(row);
}

/** 403 for a settings endpoint (changed only by the settings), 404 for none; the row, locked, otherwise. */
async function writable(db: Db, webhooks: readonly WebhookSettings[], id: string): Promise<EndpointView> {
  const endpoint = await findEndpoint(db, webhooks, id);
  if (endpoint.source === 'settings') throw new AppError('FORBIDDEN', { message: 'This endpoint comes from the settings (EVENTS_WEBHOOK_URL): change it there' });
  await db.execute(sql`SELECT 1 FROM webhook_endpoints WHERE id = ${id} FOR UPDATE`);
  return endpoint;
}

/** Ends the endpoint's pending deliveries as failed (`endpoint_removed`): it was disabled or deleted. */
async function endPending(db: Db, id: string): Promise<number> {
  const rows = await queryRows<{ one: number }>(
    db,
    sql`UPDATE event_deliveries SET failed_at = now(), last_error = 'endpoint_removed', locked_until = NULL
        WHERE webhook_id = ${id} AND delivered_at IS NULL AND failed_at IS NULL RETURNING 1 AS one`,
  );
  return rows.length;
}

export interface EndpointChange {
  url?: string | undefined;
  description?: string | null | undefined;
  eventTypes?: string[] | undefined;
  enabled?: boolean | undefined;
}

/** Changes an endpoint: a new `url` applies from the next attempt; disabling ends its pending deliveries as failed. */
export async function updateEndpoint(work: Work, webhooks: readonly WebhookSettings[], rules: UrlRules, id: string, change: EndpointChange): Promise<EndpointView> {
  const before = await writable(work.db, webhooks, id);
  const url = change.url === undefined ? undefined : await checkEndpointUrl(change.url, rules);
  const eventTypes = change.eventTypes === undefined ? undefined : checkEventTypes(change.eventTypes);
  const set = [sql`updated_at = now()`];
  if (url !== undefined) set.push(sql`url = ${url}`, sql`endpoint = ${publicEndpoint(url)}`);
  if (change.description !== undefined) set.push(sql`description = ${change.description}`);
  if (eventTypes != null) set.push(sql`event_types = ARRAY[${sql.join(eventTypes.map((type) => sql`${type}`), sql`, `)}]::text[]`);
  if (change.enabled !== undefined) set.push(sql`enabled = ${change.enabled}`);
  const [row] = await queryRows<EndpointRow>(work.db, sql`UPDATE webhook_endpoints SET ${sql.join(set, sql`, `)} WHERE id = ${id} RETURNING ${COLUMNS}`);
  // The log shows where the next attempts go.
  if (url !== undefined) {
    await work.db.execute(sql`UPDATE event_deliveries SET endpoint = ${publicEndpoint(url)} WHERE webhook_id = ${id} AND delivered_at IS NULL AND failed_at IS NULL`);
  }
  const ended = before.enabled && change.enabled === false ? await endPending(work.db, id) : 0;
  const changed = Object.keys(change).filter((key) => change[key as keyof EndpointChange] !== undefined);
  await audit(work, 'updated', id, { changed, ...(url !== undefined ? { endpoint: publicEndpoint(url) } : {}), ...(change.enabled !== undefined ? { enabled: change.enabled } : {}), ...(ended ? { deliveriesEnded: ended } : {}) });
  return view(row as EndpointRow);
}

/** Deletes an endpoint and its secrets; its pending deliveries end as failed, its delivered ones stay in the log. */
export async function deleteEndpoint(work: Work, webhooks: readonly WebhookSettings[], id: string): Promise<void> {
  const before = await writable(work.db, webhooks, id);
  const ended = await endPending(work.db, id);
  await work.db.execute(sql`DELETE FROM webhook_endpoints WHERE id = ${id}`);
  await audit(work, 'deleted', id, { endpoint: publicEndpoint(before.url), ...(ended ? { deliveriesEnded: ended } : {}) });
}

/**
 * A new secret for an endpoint; the current one keeps signing beside it for `overlapSeconds`. A
 * rotation during an overlap ends the older overlap: at most two secrets sign.
 */
export async function rotateEndpointSecret(work: Work, keyring: Keyring, webhooks: readonly WebhookSettings[], id: string, overlapSeconds: number): Promise<{ secret: string; overlapEndsAt: string }> {
  await writable(work.db, webhooks, id);
  await work.db.execute(sql`DELETE FROM webhook_endpoint_secrets WHERE endpoint_id = ${id} AND expires_at IS NOT NULL`);
  const [ends] = await queryRows<{ at: string }>(
    work.db,
    sql`UPDATE webhook_endpoint_secrets SET expires_at = now() + ${overlapSeconds}::int * interval '1 second'
        WHERE endpoint_id = ${id} AND expires_at IS NULL
        RETURNING to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at`,
  );
  const secret = await storeSecret(work.db, keyring, id);
  const overlapEndsAt = ends?.at ?? new Date().toISOString();
  await audit(work, 'secret_rotated', id, { overlapSeconds, overlapEndsAt });
  return { secret, overlapEndsAt };
}

/** An endpoint made through the API as the dispatcher uses it: where to send, and its signing keys (newest first). */
export interface EndpointTarget {
  url: string;
  enabled: boolean;
  secrets: string[];
}

/** The enabled-or-not targets of endpoint ids, their secrets still signing opened (the current and any in its overlap). */
export async function endpointTargets(db: Db, keyring: Keyring | undefined, ids: readonly string[]): Promise<Map<string, EndpointTarget>> {
  const targets = new Map<string, EndpointTarget>();
  if (ids.length === 0) return targets;
  const list = sql.join(
    ids.map((id) => sql`${id}`),
    sql`, `,
  );
  const rows = await queryRows<{ id: string; url: string; enabled: boolean; secret_id: string | null; key_id: string | null; envelope: string | null }>(
    db,
    sql`SELECT w.id, w.url, w.enabled, s.id AS secret_id, s.key_id, s.envelope
        FROM webhook_endpoints w LEFT JOIN webhook_endpoint_secrets s ON s.endpoint_id = w.id AND (s.expires_at IS NULL OR s.expires_at > now())
        WHERE w.id IN (${list})
        ORDER BY w.id, s.id DESC`,
  );
  for (const row of rows) {
    const target = targets.get(row.id) ?? { url: row.url, enabled: row.enabled, secrets: [] };
    targets.set(row.id, target);
    if (row.secret_id && row.key_id && row.envelope && keyring) {
      try {
        target.secrets.push(open(keyring, endpointSecretBinding(row.id, row.secret_id), { keyId: row.key_id, envelope: row.envelope }));
      } catch {
        // Sealed under a key no longer in ENCRYPTION_KEYS (readiness says so): that secret does not sign.
      }
    }
  }
  return targets;
}

/** Opens an endpoint's signing keys for a send (newest first). */
export const endpointKeys = (target: EndpointTarget) => target.secrets.map(signingKey);

/**
 * Writes a `webhook.test` event (`data: {endpointId}`) and its one delivery, to that endpoint
 * alone whatever its `eventTypes`, in no organization; a disabled endpoint → 409 `CONFLICT`.
 * Committed at once (its own statement) so that the dispatcher may attempt it now.
 */
export async function queueTestEvent(db: Db, webhooks: readonly WebhookSettings[], id: string): Promise<{ organizationId: string; eventId: string; webhookId: string }> {
  const endpoint = await findEndpoint(db, webhooks, id);
  if (!endpoint.enabled) throw new AppError('CONFLICT', { message: 'The endpoint is disabled: enable it to send it a test event' });
  const hook = endpoint.source === 'settings' ? (settingsEndpoints(webhooks).find((listed) => listed.id === id)?.webhookId as string) : id;
  const eventId = `evt_${newId()}`;
  await db.execute(sql`
    WITH event AS (
      INSERT INTO events (organization_id, id, type, data) VALUES (${NO_ORGANIZATION}, ${eventId}, ${WEBHOOK_TEST}, ${JSON.stringify({ endpointId: id })}::jsonb)
      RETURNING organization_id, id
    )
    INSERT INTO event_deliveries (organization_id, event_id, webhook_id, endpoint) SELECT event.organization_id, event.id, ${hook}, ${publicEndpoint(endpoint.url)} FROM event`);
  return { organizationId: NO_ORGANIZATION, eventId, webhookId: hook };
}
