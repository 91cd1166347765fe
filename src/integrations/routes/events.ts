import { Type } from 'typebox';
import { AppError } from '../../ground/errors.ts';
import type { TypedFastify } from '../../http/typed.ts';
import type { Services } from '../../services.ts';
import { receiveDelivery } from '../events/receive.ts';
import { loadById } from '../tokens/loaded.ts';
import { ProviderParams } from './shared.ts';

/** Bodies over 1 MiB get 413 (docs/contract.md §5b), as everywhere. */
const BODY_LIMIT = 1024 * 1024;

/**
 * `POST /v1/providers/{provider}/events` (docs/contract.md §5b): a provider's signed
 * revocation events. Registered in a context of its own whose JSON bodies stay raw bytes — the
 * signature covers them byte for byte, and nothing is parsed before it holds.
 */
export function providerEventsRoute(app: TypedFastify, services: Services): void {
  app.register(async (context) => {
    context.removeContentTypeParser('application/json');
    context.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_request, body, done) => done(null, body));
    const scope = context as unknown as TypedFastify;
    scope.post(
      '/v1/providers/:provider/events',
      {
        config: { auth: 'public', noStore: true, errors: ['NOT_FOUND', 'UNAUTHENTICATED'] },
        schema: {
          summary: "A provider's signed events: revocations and uninstalls known in seconds",
          description:
            'Authenticated only by the provider\'s signature over the raw body (Slack v0, GitHub X-Hub-Signature-256, Zoom v0). A handshake (Slack url_verification, Zoom endpoint.url_validation) is answered with its fields; any other well-signed event with {"success": true} once its effects have committed, whether or not it named an integration. 404 for a provider without events or without INTEGRATION_OAUTH_<P>_EVENTS_SECRET.',
          tags: ['integrations'],
          params: ProviderParams,
          body: Type.Unknown({ description: "The provider's event, as it sent it (application/json)" }),
          response: { 200: Type.Record(Type.String(), Type.Union([Type.String(), Type.Boolean()])) },
        },
      },
      async (request, reply) => {
        const { provider } = request.params;
        const configured = services.providers.get(provider);
        const events = configured?.definition.events;
        const secret = services.config.providers[provider]?.eventsSecret;
        if (!events || !secret) throw new AppError('NOT_FOUND', { message: `No events route for provider ${provider}` });
        const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        return receiveDelivery(
          {
            db: services.db,
            outbox: services.outbox,
            lifecycle: services.lifecycle,
            logger: request.log,
            ...(services.metrics ? { metrics: services.metrics } : {}),
            limit: () => services.rateLimiter.checkProviderEvents(request, reply, provider),
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
          { provider, events, secret, headers: request.headers, raw, requestId: request.id },
        );
      },
    );
  });
}
