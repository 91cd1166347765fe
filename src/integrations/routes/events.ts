import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { AppError } from '../../ground/errors.ts';
import type { TypedFastify } from '../../http/typed.ts';
import type { Services } from '../../services.ts';
import type { EventsApp } from '../apps/catalog.ts';
import { type EventAnswer, receiveDelivery } from '../events/receive.ts';
import { loadById } from '../tokens/loaded.ts';
import { ProviderParams } from './shared.ts';

/** Bodies over 1 MiB get 413 (docs/contract.md §5b), as everywhere. */
const BODY_LIMIT = 1024 * 1024;

const AppParams = Type.Object({ id: Type.String({ maxLength: 64, description: "The app's id: a deployment app's (`github`, `github-readonly`) or an organization's own (a ULID)" }) });

const SCHEMES =
  'Authenticated only by the signature over the raw body (Slack v0, GitHub X-Hub-Signature-256, Zoom v0, Linear-Signature with the body webhookTimestamp, Discord X-Signature-Ed25519 over X-Signature-Timestamp and the body, checked with the application\'s public key). A handshake (Slack url_verification, Zoom endpoint.url_validation) is answered with its fields; any other well-signed event with {"success": true} once its effects have committed, whether or not it named an integration. Discord: 204 with no body, its PING included.';

/**
 * `POST /v1/providers/{provider}/events` (docs/contract.md §5b) — the default deployment app's —
 * and `POST /v1/apps/{id}/events` (§5e) — any app's, the default's included: a provider's signed
 * revocation events, checked with that app's events secret and acting only on that app's
 * integrations. Registered in a context of its own whose JSON bodies stay raw bytes — the
 * signature covers them byte for byte, and nothing is parsed before it holds.
 */
export function providerEventsRoute(app: TypedFastify, services: Services): void {
  app.register(async (context) => {
    context.removeContentTypeParser('application/json');
    context.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_request, body, done) => done(null, body));
    const scope = context as unknown as TypedFastify;
    const body = Type.Unknown({ description: "The provider's event, as it sent it (application/json)" });
    const response = {
      200: Type.Record(Type.String(), Type.Union([Type.String(), Type.Boolean()])),
      204: Type.Null({ description: 'Accepted, for a provider that expects no body (Discord)' }),
    };
    scope.post(
      '/v1/providers/:provider/events',
      {
        config: { auth: 'public', noStore: true, errors: ['NOT_FOUND', 'UNAUTHENTICATED'] },
        schema: {
          summary: "A provider's signed events to its default app: revocations and uninstalls known in seconds",
          description: `${SCHEMES} The default deployment app's route (its id is the provider's), the same as /v1/apps/{provider}/events: acts only on integrations made with that app. 404 for a provider without events or without INTEGRATION_OAUTH_<P>_EVENTS_SECRET.`,
          tags: ['integrations'],
          params: ProviderParams,
          body,
          response,
        },
      },
      async (request, reply) => {
        const { provider } = request.params;
        const deployment = services.providers.deploymentApp(provider);
        // Only the app whose id is the provider's: another deployment app of it has a route of its own.
        const found = deployment && deployment.ref.id === deployment.provider ? await services.apps.eventsApp(services.db, provider) : undefined;
        return receive(services, request, reply, found, `provider ${provider}`);
      },
    );
    scope.post(
      '/v1/apps/:id/events',
      {
        config: { auth: 'public', noStore: true, errors: ['NOT_FOUND', 'UNAUTHENTICATED'] },
        schema: {
          summary: "A provider's signed events to one app: revocations and uninstalls known in seconds",
          description: `${SCHEMES} Checked with that app's events secret (a deployment app's from the settings, an organization's own from its sealed secrets); acts only on integrations made with that app. 404 for an unknown app, one whose provider has no events, or one without an events secret.`,
          tags: ['integrations'],
          params: AppParams,
          body,
          response,
        },
      },
      async (request, reply) => receive(services, request, reply, await services.apps.eventsApp(services.db, request.params.id), `app ${request.params.id}`),
    );
  });
}

/**
 * One delivery to `found` (undefined: no such app): 404 unless it has events and an events
 * secret; else received as §5b says, and answered as its provider expects (`EventsSpec.accepted`).
 */
async function receive(services: Services, request: FastifyRequest, reply: FastifyReply, found: EventsApp | undefined, named: string): Promise<EventAnswer | null> {
  const events = found?.provider.definition.events;
  const secret = found?.eventsSecret;
  // The same answer whether the app is unknown, another organization's without a secret, or has no events: a route names nothing.
  if (!found || !events || !secret) throw new AppError('NOT_FOUND', { message: `No events route for ${named}` });
  const provider = found.provider.id;
  const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
  const secretSetting =
    found.ref.id === provider ? `INTEGRATION_OAUTH_${provider.toUpperCase()}_EVENTS_SECRET` : found.ref.owner === 'deployment' ? `integrationOauthApps "${found.ref.id}" eventsSecret` : `the eventsSecret of app ${found.ref.id}`;
  const answer = await receiveDelivery(
    {
      db: services.db,
      outbox: services.outbox,
      lifecycle: services.lifecycle,
      logger: request.log,
      ...(services.metrics ? { metrics: services.metrics } : {}),
      limit: () => services.rateLimiter.checkProviderEvents(request, reply, found.ref.id),
      // GitHub's `unsuspend`: the integration validated again, its outcome persisted by the lifecycle.
      revalidate: async (organizationId, integrationId, actor) => {
        await services.lifecycle.validate(await loadById(services, organizationId, integrationId), actor);
      },
      // A GitHub body seen before: the one live check (the user's token, or a mint), its verdict left for the delivery to act on.
      liveCheck: async (organizationId, integrationId, actor) => {
        let loaded: Awaited<ReturnType<typeof loadById>>;
        try {
          loaded = await loadById(services, organizationId, integrationId);
        } catch (error) {
          if (error instanceof AppError && error.code === 'INTEGRATION_NOT_FOUND') return null;
          throw error;
        }
        return (await services.lifecycle.check(loaded, actor, {}, { settle: false })).outcome;
      },
    },
    {
      provider,
      app: { id: found.ref.id, clientId: found.clientId, secretSetting, ...(found.organizationId !== undefined ? { organizationId: found.organizationId } : {}) },
      events,
      secret,
      headers: request.headers,
      raw,
      requestId: request.id,
    },
  );
  if (events.accepted !== 204) return answer;
  reply.code(204);
  return null;
}
