/**
 * Every event type and the schema of its `data` (docs/contract.md §7): one declaration each, which
 * types what `Outbox.emit` accepts, documents the OpenAPI document's `webhooks` object and is
 * the reference docs/webhooks.md is checked against. A field added to an event is added here
 * first, or the emitting code does not compile.
 */
import { type Static, type TSchema, Type } from 'typebox';

const Id = Type.String({ description: 'A ULID' });
const Nullable = <T extends TSchema>(schema: T, description?: string) => Type.Union([schema, Type.Null()], description ? { description } : {});

/** The product's end user an integration or a connect attempt belongs to (null: the organization's own). */
const EndUser = Nullable(
  Type.Object({ id: Type.String(), email: Type.Optional(Type.String()), displayName: Type.Optional(Type.String()) }, { additionalProperties: false }),
  "The product's end user (docs/contract.md §5d); null for the organization's own integration",
);

/** Fields every event's data carries: added by the outbox. */
const Common = {
  organizationId: Type.String({ description: 'The organization the event is about' }),
  externalId: Nullable(Type.String(), "The organization's externalId (the product's key for its customer), null when it has none"),
};

/** Fields every event about an integration or a connect attempt carries. */
const AboutIntegration = {
  provider: Type.String({ description: 'The provider id (github, slack, …)' }),
  endUser: EndUser,
};

const IntegrationRef = Type.Object({ id: Id, provider: Type.String(), name: Type.Optional(Type.String()) }, { additionalProperties: false });

const data = <T extends Record<string, TSchema>>(properties: T, description: string) =>
  Type.Object({ ...Common, ...properties }, { additionalProperties: false, description });

/** The `data` schema of each event type. */
export const EVENT_DATA = {
  'organization.created': data(
    {
      organization: Type.Object({ id: Id, name: Type.String(), externalId: Type.Optional(Type.String()) }, { additionalProperties: false }),
      createdBy: Nullable(Type.String(), 'The user who created it; null when a service token did'),
    },
    'An organization was created (registration, a person, or a service token provisioning a customer).',
  ),
  'organization.deleted': data(
    {
      organization: Type.Object({ id: Id, name: Type.String(), externalId: Nullable(Type.String()) }, { additionalProperties: false }),
      deleted: Type.Object({ integrations: Type.Integer({ minimum: 0 }) }, { additionalProperties: false }),
    },
    'An organization was offboarded: it and its integrations, secrets, sessions and tokens are gone; each grant is revoked at its provider after commit.',
  ),
  'organization.member_invited': data(
    {
      invitationId: Id,
      email: Type.String({ description: 'As the inviter wrote it' }),
      role: Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('member')]),
      acceptToken: Type.String({ description: 'The single-use secret the invitee needs to accept; deliver it only to that address' }),
      acceptUrl: Type.String({ description: '<PUBLIC_URL>/invitations/<id>#token=<acceptToken>: the page where the invitee accepts' }),
      invitation: Type.Object(
        { id: Id, email: Type.String(), role: Type.String(), expiresAt: Type.String({ format: 'date-time' }) },
        { additionalProperties: false },
      ),
      organization: Type.Object({ id: Id, name: Type.String() }, { additionalProperties: false }),
      invitedBy: Nullable(Type.String(), 'The inviting user; null when an API or service token invited'),
    },
    'Someone was invited to an organization: send them acceptUrl.',
  ),
  'integration.connected': data(
    {
      ...AboutIntegration,
      integration: IntegrationRef,
      reconnected: Type.Boolean({ description: 'The integration existed and keeps its id' }),
      accountChanged: Type.Boolean({ description: 'A different provider account replaced the previous one (its grant is revoked)' }),
      previousAccount: Type.Optional(Type.Object({ id: Type.String(), username: Type.String() }, { additionalProperties: false })),
      app: Type.Object({ id: Type.String({ description: 'The app that made the grant (docs/contract.md §5e)' }) }, { additionalProperties: false }),
      appChanged: Type.Boolean({ description: 'The grant was made through another app than the one it replaces (whose grant is revoked)' }),
      previousApp: Type.Optional(Type.Object({ id: Type.String() }, { additionalProperties: false })),
      sessionId: Type.Optional(Type.String({ description: 'The connect session it came through' })),
    },
    'An account was connected (or reconnected) at a provider.',
  ),
  'integration.connect_failed': data(
    {
      ...AboutIntegration,
      sessionId: Nullable(Type.String(), 'The connect session of the attempt; null for a flow an owner or admin started'),
      code: Type.String({ description: 'The error code of docs/contract.md §2 (ACCESS_DENIED, OAUTH_EXCHANGE_FAILED, …)' }),
    },
    'A connect attempt through a connect session or the page failed.',
  ),
  'integration.status_changed': data(
    {
      ...AboutIntegration,
      integration: IntegrationRef,
      from: Type.String({ description: 'connected, warning, expired or invalid' }),
      to: Type.String({ description: 'connected, warning, expired or invalid' }),
      reason: Nullable(Type.String(), "Our words for the failure (never the provider's raw text)"),
      source: Type.Optional(Type.String({ description: 'How it was learnt: provider_event, proxy, validation, refresh, …' })),
    },
    "An integration's status changed (e.g. to invalid when the provider revoked it).",
  ),
  'integration.deleted': data(
    { ...AboutIntegration, integration: IntegrationRef },
    'An integration was deleted; its grant is revoked at the provider after commit.',
  ),
} as const;

export type EventType = keyof typeof EVENT_DATA;
export const EVENT_TYPES = Object.keys(EVENT_DATA) as EventType[];

/** What an emitter gives for an event of `type`: its data without the fields the outbox adds. */
export type EventData<T extends EventType> = Omit<Static<(typeof EVENT_DATA)[T]>, 'organizationId' | 'externalId'> & { externalId?: string | null };

/**
 * `webhook.test` (docs/contract.md §7): sent by `POST /v1/webhook-endpoints/{id}/test` to that
 * endpoint alone. A type of its own, not an `EventType`: about no organization, never emitted by
 * the outbox, refused in an endpoint's `eventTypes`.
 */
export const WEBHOOK_TEST_TYPE = 'webhook.test';
export const WEBHOOK_TEST_DATA = Type.Object(
  { endpointId: Type.String({ description: 'The endpoint it was sent to (whe_… or settings-<n>)' }) },
  { additionalProperties: false, description: 'A test event sent to one endpoint by hand; about no organization. Answer 2xx.' },
);

/** The body a webhook receives (Standard Webhooks signs it). */
export function eventEnvelope(type: EventType | typeof WEBHOOK_TEST_TYPE): TSchema {
  return Type.Object(
    {
      id: Type.String({ description: 'evt_<ULID>; also the webhook-id header, the same on every retry' }),
      type: Type.Literal(type),
      occurredAt: Type.String({ format: 'date-time' }),
      data: type === WEBHOOK_TEST_TYPE ? WEBHOOK_TEST_DATA : EVENT_DATA[type],
    },
    { additionalProperties: false },
  );
}
