import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { AppError } from '../../ground/errors.ts';
import type { TypedFastify } from '../../http/typed.ts';
import type { Services } from '../../services.ts';
import type { EventsApp } from '../apps/catalog.ts';
import { allowedScheme } from '../../config/checks.ts';
import { ProviderError } from '../providers/types.ts';
import { tokenScheme } from '../events/delivery.ts';
import { type EventAnswer, type ReceivingApp, receiveDelivery } from '../events/receive.ts';
import { type FetchJson, KeysUnavailable, SetRefused } from '../events/security-event-token.ts';
import { loadById } from '../tokens/loaded.ts';
import { ProviderParams } from './shared.ts';

/** Bodies over 1 MiB get 413 (docs/contract.md §5b), as everywhere. */
const BODY_LIMIT = 1024 * 1024;

const AppParams = Type.Object({ id: Type.String({ maxLength: 64, description: "The app's id: a deployment app's (`github`, `github-readonly`) or an organization's own (a ULID)" }) });

const SCHEMES =
  'Authenticated only by the signature over the raw body (Slack v0, GitHub X-Hub-Signature-256, Zoom v0, Linear-Signature with the body webhookTimestamp, Discord X-Signature-Ed25519 over X-Signature-Timestamp and the body, checked with the application\'s public key; Google: an RFC 8417 security event token, application/secevent+jwt, signed RS256 by a key of the JWKS its RISC configuration names). A handshake (Slack url_verification, Zoom endpoint.url_validation) is answered with its fields; any other well-signed event with {"success": true} once its effects have committed, whether or not it named an integration. Discord: 204 with no body, its PING included. Google answers as RFC 8935 says: 202 with no body when accepted (its verification event too), 400 {"err", "description"} when refused, 503 with Retry-After when its keys cannot be fetched.';

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
    // RFC 8935: a security event token is posted as `application/secevent+jwt` (Google's RISC).
    context.addContentTypeParser('application/secevent+jwt', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_request, body, done) => done(null, body));
    const scope = context as unknown as TypedFastify;
    const body = Type.Unknown({ description: "The provider's event, as it sent it (application/json; Google: application/secevent+jwt)" });
    const response = {
      200: Type.Record(Type.String(), Type.Union([Type.String(), Type.Boolean()])),
      204: Type.Null({ description: 'Accepted, for a provider that expects no body (Discord)' }),
      // Written as JSON Schema, as /mcp's 202: the answer is an empty body, sent as text.
      202: { type: 'null', description: 'A security event token accepted (RFC 8935 §2.2): no body' },
      400: Type.Object(
        { err: Type.String({ description: 'invalid_request, invalid_key, invalid_issuer or invalid_audience' }), description: Type.String() },
        { description: 'A security event token refused (RFC 8935 §2.3); nothing changed' },
      ),
    };
    scope.post(
      '/v1/providers/:provider/events',
      {
        config: { auth: 'public', noStore: true, errors: ['NOT_FOUND', 'UNAUTHENTICATED'] },
        schema: {
          summary: "A provider's signed events to its default app: revocations and uninstalls known in seconds",
          description: `${SCHEMES} The default deployment app's route (its id is the provider's), the same as /v1/apps/{provider}/events: acts only on integrations made with that app. 404 for a provider without events or without INTEGRATION_OAUTH_<P>_EVENTS_SECRET (Google: without INTEGRATION_OAUTH_GOOGLE_RISC=true). Google accepts here a token whose aud is the client id of any deployment app of google, and acts on that app's integrations.`,
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
          description: `${SCHEMES} Checked with that app's events secret (a deployment app's from the settings, an organization's own from its sealed secrets); acts only on integrations made with that app. 404 for an unknown app, one whose provider has no events, or one without an events secret (a Google app needs none: INTEGRATION_OAUTH_GOOGLE_RISC=true opens its route, for tokens whose aud is its client id).`,
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

/** The receiving app as the events room reads it; `secretSetting` names where its events secret is set (never the value). */
function receivingApp(ref: EventsApp['ref'], provider: string, clientId: string, organizationId?: string): ReceivingApp {
  const secretSetting =
    ref.id === provider ? `INTEGRATION_OAUTH_${provider.toUpperCase()}_EVENTS_SECRET` : ref.owner === 'deployment' ? `integrationOauthApps "${ref.id}" eventsSecret` : `the eventsSecret of app ${ref.id}`;
  return { id: ref.id, clientId, secretSetting, ...(organizationId !== undefined ? { organizationId } : {}) };
}

const KEY_DOCUMENT_BYTES = 256 * 1024;

/**
 * One delivery to `found` (undefined: no such app): 404 unless it has events and what checks them —
 * an events secret, or (a provider signing with its own keys) those events switched on; else received
 * as §5b says, and answered as its provider expects (`EventsSpec.accepted`, RFC 8935's 202).
 */
async function receive(
  services: Services,
  request: FastifyRequest,
  reply: FastifyReply,
  found: EventsApp | undefined,
  named: string,
): Promise<EventAnswer | '' | null> {
  const events = found?.provider.definition.events;
  const scheme = events ? tokenScheme(events) : undefined;
  const configurationUrl = found?.provider.eventsConfigurationUrl;
  const secret = found?.eventsSecret;
  // The same answer whether the app is unknown, another organization's without a secret, or has no events: a route names nothing.
  if (!found || !events || (scheme ? !configurationUrl : !secret)) throw new AppError('NOT_FOUND', { message: `No events route for ${named}` });
  const provider = found.provider.id;
  const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
  const app = receivingApp(found.ref, provider, found.clientId, found.organizationId);
  // A provider signing with its own keys names the app by its `aud` (docs/contract.md §5e): at the default app's route
  // (`/v1/providers/{p}/events`, the same as `/v1/apps/{p}/events`) any deployment app of the provider, elsewhere that app alone.
  const audience =
    found.ref.owner === 'deployment' && found.ref.id === provider
      ? services.providers
          .deploymentApps()
          .filter((candidate) => candidate.provider === provider)
          .map((candidate) => receivingApp(candidate.ref, candidate.provider, candidate.clientId))
      : [app];
  // The configuration document is the settings' URL; the key set is one it chose: through the outbound guard, https unless loopback in development.
  const fetchJson: FetchJson = async (url, origin) => {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new Error('the configuration names a key set URL that does not parse');
    }
    if (!allowedScheme(parsed, services.config.isProduction) || parsed.username || parsed.password) throw new Error('the key set URL must be https');
    let answer: Awaited<ReturnType<typeof found.provider.send>>;
    try {
      answer = await found.provider.send({ url: parsed, method: 'GET', headers: { accept: 'application/json' }, ...(origin ? { outbound: origin } : {}) }, KEY_DOCUMENT_BYTES);
    } catch (error) {
      throw new Error(error instanceof ProviderError ? error.message : 'the key set could not be fetched');
    }
    if (answer.status !== 200) throw new Error(`the ${origin ? 'key set' : 'configuration document'} answered ${answer.status}`);
    try {
      return JSON.parse(answer.body.toString('utf8')) as unknown;
    } catch {
      throw new Error(`the ${origin ? 'key set' : 'configuration document'} is not JSON`);
    }
  };
  try {
    const answer = await receiveDelivery(
      {
        db: services.db,
        outbox: services.outbox,
        lifecycle: services.lifecycle,
        logger: request.log,
        ...(services.metrics ? { metrics: services.metrics } : {}),
        limit: () => services.rateLimiter.checkProviderEvents(request, reply, found.ref.id),
        group: services.providerEvents,
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
        app,
        events,
        ...(secret ? { secret } : {}),
        ...(scheme && configurationUrl ? { keys: { sets: services.eventKeys, configurationUrl, fetchJson }, audience } : {}),
        headers: request.headers,
        raw,
        requestId: request.id,
      },
    );
    if (!scheme) {
      if (events.accepted !== 204) return answer;
      reply.code(204);
      return null;
    }
    // RFC 8935 §2.2: accepted, no body.
    reply.code(202);
    return '';
  } catch (error) {
    if (scheme && error instanceof SetRefused) {
      reply.code(400);
      return { err: error.err, description: error.message };
    }
    if (scheme && error instanceof KeysUnavailable) {
      reply.code(503).header('retry-after', String(error.retryAfterSeconds));
      return '';
    }
    throw error;
  }
}
