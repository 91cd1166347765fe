/**
 * The apps of an organization over REST (docs/contract.md §5e): `/v1/apps` lists the deployment's
 * apps it may use beside its own; owners and admins, API tokens and service tokens (with
 * `X-Organization-ID`) make, change and delete its own. No answer carries a secret.
 */
import { Type } from 'typebox';
import { NameSchema } from '../../ground/names.ts';
import type { TypedFastify } from '../../http/typed.ts';
import { unitOfWork } from '../../http/unit-of-work.ts';
import type { Services } from '../../services.ts';
import { createApp, deleteApp, getApp, listApps, NAME_MAX, PRIVATE_KEY_MAX, SCOPES_MAX, SECRET_MAX, updateApp } from './store.ts';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Union([schema, Type.Null()]);

const AppSchema = Type.Object({
  id: Type.String({ description: "A deployment app's id (the provider's for its settings' app), or a ULID for one of the organization's own" }),
  provider: Type.String(),
  owner: Type.Union([Type.Literal('deployment'), Type.Literal('organization')]),
  name: Type.String(),
  clientId: Type.String(),
  scopes: Nullable(Type.Array(Type.String(), { description: "The scopes it may request; null: the provider's configured set" })),
  default: Type.Boolean({ description: "This organization's default app of its provider (false until it chooses one)" }),
  redirectUri: Type.String({ description: 'The callback to register at the provider (the same for every app of a provider)' }),
  eventsUrl: Nullable(Type.String({ description: "Where the provider sends this app's events; null for a provider without events" })),
  hasEventsSecret: Type.Boolean(),
  createdAt: Type.String({ format: 'date-time', description: "A deployment app's: this process's start" }),
  updatedAt: Type.String({ format: 'date-time' }),
});

const Name = NameSchema({ minLength: 1, maxLength: NAME_MAX });
const Secret = (description: string, maxLength = SECRET_MAX) => Type.String({ minLength: 1, maxLength, description: `${description}; never shown again` });
const Scopes = Type.Array(Type.String({ minLength: 1, maxLength: 200, pattern: '^\\S+$' }), { minItems: 1, maxItems: SCOPES_MAX, description: "The scopes it may request (a start's own scopes must lie within them); absent: the provider's configured set" });
const PrivateKey = Secret("A GitHub App's private key: the whole .pem file (an RSA key of at least 2048 bits)", PRIVATE_KEY_MAX);
const Default = Type.Boolean({ description: "Make it the organization's default app of its provider (true), or stop it being the default (false)" });
const IdParams = Type.Object({ id: Type.String({ maxLength: 64 }) });
const AppAnswer = Type.Object({ success: Type.Literal(true), app: AppSchema });

/** The routes of `/v1/apps` (its `/events` route is the provider events room's). */
export function appRoutes(app: TypedFastify, services: Services): void {
  app.post(
    '/v1/apps',
    {
      config: { auth: 'authenticated', errors: ['PROVIDER_NOT_CONFIGURED', 'CONFLICT'] },
      schema: {
        summary:
          "Add one of the organization's own apps of a provider (owner/admin, API token, service token): its client secret (and a GitHub App's private key) sealed, never shown again. At most LIMIT_APPS_PER_ORGANIZATION (409)",
        tags: ['apps'],
        body: Type.Object(
          {
            provider: Type.String({ minLength: 1, maxLength: 64, description: 'A provider this deployment offers (not one whose credentials people enter)' }),
            name: Type.Optional(Name),
            clientId: Type.String({ minLength: 1, maxLength: 255, pattern: '^[A-Za-z0-9._~-]{1,255}$' }),
            clientSecret: Type.Optional(Secret('Required')),
            scopes: Type.Optional(Scopes),
            eventsSecret: Type.Optional(Secret("The provider's signing secret of its events (docs/contract.md §5b)")),
            appId: Type.Optional(Type.String({ minLength: 1, maxLength: 20, pattern: '^[0-9]+$', description: "A GitHub App's numeric id (githubapp only, required there)" })),
            slug: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: '^[a-z0-9][a-z0-9-]{0,99}$', description: "A GitHub App's slug (githubapp only, required there)" })),
            privateKey: Type.Optional(PrivateKey),
            default: Type.Optional(Default),
          },
          { additionalProperties: false },
        ),
        response: { 201: AppAnswer },
      },
    },
    async (request, reply) => {
      const created = await createApp(services, await unitOfWork(request, services), request.body);
      reply.code(201);
      return { success: true as const, app: created };
    },
  );

  app.get(
    '/v1/apps',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary: "The apps this organization may use: the deployment's (read-only) and its own (any member); never a secret",
        tags: ['apps'],
        querystring: Type.Object({ provider: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: "Only this provider's apps" })) }, { additionalProperties: false }),
        response: { 200: Type.Object({ success: Type.Literal(true), apps: Type.Array(AppSchema) }) },
      },
    },
    async (request) => ({ success: true as const, apps: await listApps(services, await unitOfWork(request, services), request.query.provider) }),
  );

  app.get(
    '/v1/apps/:id',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: { summary: 'One app this organization may use (any member); never a secret', tags: ['apps'], params: IdParams, response: { 200: AppAnswer } },
    },
    async (request) => ({ success: true as const, app: await getApp(services, await unitOfWork(request, services), request.params.id) }),
  );

  app.patch(
    '/v1/apps/:id',
    {
      config: { auth: 'authenticated', errors: [] },
      schema: {
        summary:
          "Change one of the organization's own apps: a new secret applies to its integrations from their next use, no reconnect. A deployment app: default alone (else 403). The client id and provider never change",
        tags: ['apps'],
        params: IdParams,
        body: Type.Object(
          {
            name: Type.Optional(Name),
            clientSecret: Type.Optional(Secret('A new client secret')),
            scopes: Type.Optional(Nullable(Scopes)),
            eventsSecret: Type.Optional(Nullable(Secret('A new events signing secret (null removes it)'))),
            privateKey: Type.Optional(PrivateKey),
            default: Type.Optional(Default),
          },
          { additionalProperties: false },
        ),
        response: { 200: AppAnswer },
      },
    },
    async (request) => ({ success: true as const, app: await updateApp(services, await unitOfWork(request, services), request.params.id, request.body) }),
  );

  app.delete(
    '/v1/apps/:id',
    {
      config: { auth: 'authenticated', errors: ['CONFLICT'] },
      schema: {
        summary: "Delete one of the organization's own apps; 409 while integrations, pending connect sessions or unexpired OAuth states use it (saying which). A deployment app → 403",
        tags: ['apps'],
        params: IdParams,
        response: { 200: Type.Object({ success: Type.Literal(true) }) },
      },
    },
    async (request) => {
      await deleteApp(services, await unitOfWork(request, services), request.params.id);
      return { success: true as const };
    },
  );
}
