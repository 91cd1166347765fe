import fastifyCookie from '@fastify/cookie';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config/load.ts';
import type { Database } from './db/client.ts';
import { agentRoutes } from './agents/routes.ts';
import { openCorsPath } from './agents/oauth-routes.ts';
import { createDispatcher } from './events/dispatcher.ts';
import { createOutbox } from './events/outbox.ts';
import { webhookEndpointRoutes } from './events/endpoint-routes.ts';
import { webhookDeliveryRoutes } from './events/routes.ts';
import { createFastify } from './http/fastify.ts';
import { FormGuard } from './http/form-guard.ts';
import { healthRoutes, type Readiness } from './http/health.ts';
import { createLogger } from './http/logging.ts';
import { Metrics, metricsRoutes } from './http/metrics.ts';
import { apiDocsRoute, registerOpenApi } from './http/openapi.ts';
import { installPipeline, type PipelineSlots } from './http/pipeline.ts';
import { createRateLimiter } from './http/rate-limit.ts';
import type { TypedFastify } from './http/typed.ts';
import { graphqlRoutes } from './graphql/route.ts';
import { SessionTokens } from './identity/credentials.ts';
import { PasswordHasher } from './identity/password.ts';
import { identityRoutes } from './identity/routes.ts';
import { identitySlots } from './identity/steps.ts';
import { EventKeySets } from './integrations/events/security-event-token.ts';
import { AppCatalog } from './integrations/apps/catalog.ts';
import { buildProviderRegistry } from './integrations/providers/registry.ts';
import { createOutboundGuard, type OutboundGuardOptions } from './lib/outbound.ts';
import { integrationRoutes } from './integrations/routes/index.ts';
import { Revocations } from './integrations/revocations.ts';
import { GroupedDeliveries } from './integrations/events/grouped.ts';
import { TokenLifecycle } from './integrations/tokens/lifecycle.ts';
import { ProviderBudgets } from './integrations/budgets.ts';
import { StateCodec } from './integrations/state.ts';
import { startValidationScheduler } from './integrations/validator.ts';
import { startRetentionScheduler } from './jobs/retention.ts';
import { organizationRoutes } from './organizations/routes.ts';
import { keyringReadiness } from './secrets/keyring-check.ts';
import type { Services } from './services.ts';
import { connectPageRoutes } from './web/connect-pages.ts';
import { webRoutes } from './web/routes.ts';

export interface AppOptions {
  config: Config;
  database: Database;
  logger?: Logger;
  /** Replaces pipeline steps (tests observe them). */
  slots?: Partial<PipelineSlots>;
  /** Registers extra routes inside the pipeline (tests). */
  routes?: (app: FastifyInstance, services: Services) => void | Promise<void>;
  /** The outbound guard's resolver and extra trusted CAs (tests answer DNS and serve https fakes). */
  outbound?: Pick<OutboundGuardOptions, 'lookup' | 'ca'>;
}

export interface App {
  fastify: FastifyInstance;
  services: Services;
  readiness: Readiness;
  /** Starts background work (event delivery); call once the database is migrated. */
  startBackground(): void;
}

/** Builds the HTTP application: services, pipeline, routes and OpenAPI. Does not listen or migrate. */
export async function buildApp(options: AppOptions): Promise<App> {
  const { config, database } = options;
  const logger = options.logger ?? createLogger({ level: config.log.level, format: config.log.format });
  const fastify = createFastify(config, logger);
  await fastify.register(fastifyCookie);

  const { services, metrics, dispatcher } = await createServices(fastify, config, database, logger, options.outbound);
  let validator: { stop(): Promise<void> } | null = null;
  let retention: { stop(): Promise<void> } | null = null;
  fastify.addHook('onClose', async () => {
    await validator?.stop();
    await retention?.stop();
    await services.revocations.stop();
    await dispatcher.stop();
  });

  installPipeline(fastify, database.db, { ...identitySlots(services), ...options.slots }, config.server.corsOrigins, openCorsPath);

  await registerOpenApi(fastify, config);

  const readiness: Readiness = { pending: null, checks: [keyringReadiness(database.db, config.keyring)] };
  healthRoutes(fastify, database, readiness);
  metricsRoutes(fastify, metrics, config.server.metricsEnabled);
  apiDocsRoute(fastify);
  identityRoutes(fastify, services);
  organizationRoutes(fastify, services);
  integrationRoutes(fastify, services);
  connectPageRoutes(fastify, services);
  webhookDeliveryRoutes(fastify, services);
  webhookEndpointRoutes(fastify, services);
  agentRoutes(fastify, services);
  await graphqlRoutes(fastify, services);
  webRoutes(fastify);
  await options.routes?.(fastify, services);
  await fastify.ready();
  return {
    fastify,
    services,
    readiness,
    startBackground: () => {
      dispatcher.start();
      // Commits run a round of revocations at once either way; this retries what failed, and what another instance left.
      services.revocations.start();
      // A pass at least every minute: rows come due one interval after their last check.
      validator ??= startValidationScheduler(services, Math.min(config.oauth.validationInterval, 60) * 1000);
      retention ??= startRetentionScheduler(services);
    },
  };
}

/** What routes and background work share, built once; the rate limiter registers its plugins on `fastify`. */
async function createServices(fastify: TypedFastify, config: Config, database: Database, logger: Logger, outbound: AppOptions['outbound'] = {}) {
  const metrics = new Metrics(database);
  // One guard for every URL the settings did not fix (docs/contract.md §1): entered values, and the webhook endpoints made through the API.
  const outboundGuard = createOutboundGuard({
    enforce: config.isProduction,
    allowCidrs: config.outbound.allowCidrs,
    ...outbound,
    onRefused: (refused, origin) => logger.warn({ outbound: origin, host: refused.host, address: refused.address, addressClass: refused.addressClass }, 'the outbound guard refused an address'),
  });
  const dispatcher = createDispatcher({
    db: database.db,
    webhooks: config.events.webhooks,
    pollIntervalMs: config.events.pollInterval * 1000,
    logger,
    onDelivered: (lagMs) => metrics.delivered(lagMs),
    backoff: { baseMs: config.events.retryBase * 1000, maxMs: config.events.retryMax * 1000 },
    maxAgeSeconds: config.events.maxAge,
    keyring: config.keyring,
    guard: outboundGuard,
  });
  const passwords = new PasswordHasher({ cost: config.auth.passwordCost });
  void passwords.prepare();
  const db = database.db;
  const outbox = createOutbox({ webhooks: config.events.webhooks, wake: () => dispatcher.wake(), keyring: config.keyring });
  const providers = buildProviderRegistry(config, undefined, (provider, outcome, seconds) => metrics.providerCall(provider, outcome, seconds), outboundGuard);
  const apps = new AppCatalog({ providers, config });
  const budgets = new ProviderBudgets({ db, logger, metrics });
  const pool = { pglite: database.kind === 'pglite', size: config.db.poolMax };
  // The token core gets what it uses, not this bag (decision 135).
  const lifecycle = new TokenLifecycle({
    db,
    providers,
    apps,
    config: { keyring: config.keyring },
    pool,
    outbox,
    metrics,
    budgets,
    logger,
    timeouts: { providerMs: config.oauth.providerTimeout * 1000, validationIntervalMs: config.oauth.validationInterval * 1000 },
  });
  const services: Services = {
    config,
    outbound: outboundGuard,
    database,
    db,
    passwords,
    sessionTokens: new SessionTokens(config.jwtKeys),
    rateLimiter: await createRateLimiter(fastify, {
      max: config.rateLimit.max,
      windowSeconds: config.rateLimit.window,
      organizationMax: config.rateLimit.organizationMax,
      serviceMax: config.rateLimit.serviceMax,
    }),
    outbox,
    dispatcher,
    providers,
    apps,
    eventKeys: new EventKeySets(),
    stateCodec: new StateCodec(config.keyring),
    forms: new FormGuard(db, { publicOrigin: config.server.publicOrigin, secure: config.isProduction }),
    lifecycle,
    providerEvents: new GroupedDeliveries({ db, outbox, lifecycle, pool }),
    revocations: new Revocations({ db, config, providers, apps, logger }),
    budgets,
    logger,
    metrics,
  };
  return { services, metrics, dispatcher };
}
