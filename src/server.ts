import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { type App, buildApp } from './app.ts';
import { storeGeneratedSecrets } from './config/generated-secrets.ts';
import type { Config } from './config/load.ts';
import { type Database, openPglite, openPostgres } from './db/client.ts';
import { databaseFailure } from './db/failure.ts';
import { connectionSlotsWarning, readConnectionSlots } from './db/slots.ts';
import { users } from './db/schema.ts';
import { createLogger } from './http/logging.ts';
import { type BootstrapOutcome, ensureBootstrapAdmin } from './identity/bootstrap.ts';

export interface Server {
  app: App;
  database: Database;
  logger: Logger;
  /** Stops accepting, lets in-flight requests finish (bounded), stops loops, closes the database. */
  stop(): Promise<void>;
}

/** Opens the database chosen by the config. */
export async function openDatabase(config: Config): Promise<Database> {
  if (config.db.url) return openPostgres({ url: config.db.url, ...config.db });
  return openPglite({ dataDir: config.db.dataDir });
}

/** A database failure named after DATABASE_URL when it is one (db/failure.ts), else the error itself. */
const named = (error: unknown, config: Config) => databaseFailure(error, config) ?? error;

/**
 * Starts the whole service: generated secrets stored, database, migrations, HTTP listener. Says
 * what it did as it goes (decision 148): warnings about the configuration, the providers
 * configured, secrets generated this start, migrations applied, and "ready" last.
 */
export async function startServer(config: Config, logger = createLogger({ level: config.log.level, format: config.log.format })): Promise<Server> {
  for (const warning of config.warnings) logger.warn(`config: ${warning}`);
  // Loading the configuration only read; keeping what development mode generated is start-up's first step.
  reportGeneratedSecrets(config, logger);
  storeGeneratedSecrets(config.secretsToStore);
  const database = await openDatabase(config);
  let app: App;
  try {
    // Reached before listening: a database that cannot be reached fails start-up naming DATABASE_URL, with nothing said about listening.
    await database.ping().catch((error: unknown) => {
      throw named(error, config);
    });
    app = await buildApp({ config, database, logger });
  } catch (error) {
    await database.close().catch(() => {});
    throw error;
  }
  // Offered to organizations' own apps only: an entry without complete client credentials (docs/contract.md §5e).
  const all = app.services.providers.list();
  const providers = all.filter((provider) => provider.app !== null || provider.traits.connects === 'entered').map((provider) => provider.id);
  const ownAppsOnly = all.filter((provider) => provider.app === null && provider.traits.connects !== 'entered').map((provider) => provider.id);
  if (providers.length > 0) logger.info({ providers }, `providers configured: ${providers.join(', ')}`);
  if (ownAppsOnly.length > 0) logger.info({ providers: ownAppsOnly }, `providers offered to organizations' own apps only: ${ownAppsOnly.join(', ')}`);
  if (providers.length === 0 && ownAppsOnly.length === 0) logger.warn('no provider is configured: set INTEGRATION_OAUTH_<P>_CLIENT_ID and INTEGRATION_OAUTH_<P>_CLIENT_SECRET (docs/providers.md)');

  const { readiness } = app;
  // Binding first lets /livez answer during migrations (which may wait for another instance's
  // lock); /readyz says 200 only once every step below has finished, and never after one failed.
  readiness.pending = 'migrations are running';
  try {
    await app.fastify.listen({
      host: config.server.host,
      port: config.server.port,
      listenTextResolver: (address) => `accepting connections at ${address} while start-up runs (/readyz answers 503 until it is done)`,
    });
    let bootstrap: BootstrapOutcome = 'unset';
    const { applied } = await database.migrate(async () => {
      readiness.pending = 'start-up is running';
      bootstrap = await ensureBootstrapAdmin(app.services);
    });
    logger.info({ applied }, applied > 0 ? `database migrated: ${applied} migration${applied === 1 ? '' : 's'} applied` : 'database schema is up to date');
    reportBootstrapAdmin(bootstrap, config, logger);
    await warnAboutConnectionSlots(database, config, logger);
    app.startBackground();
    readiness.pending = null;
  } catch (error) {
    readiness.pending = 'start-up failed';
    await app.fastify.close().catch(() => {});
    await database.close().catch(() => {});
    throw named(error, config);
  }
  await reportFirstUser(app, config, logger);
  const address = app.fastify.server.address() as AddressInfo;
  logger.info({ db: database.kind, url: config.server.publicUrl }, `tessera is ready, listening on ${address.address}:${address.port} (${config.server.publicUrl})`);

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      const timer = setTimeout(() => {
        logger.error('shutdown timed out; closing the database with requests still in flight');
        void database.close().finally(() => process.exit(1));
      }, config.server.shutdownTimeout * 1000);
      timer.unref();
      await app.fastify.close();
      await database.close();
      clearTimeout(timer);
    })();
    return stopping;
  };
  return { app, database, logger, stop };
}

/**
 * On PostgreSQL, warns when this instance and the others connected now, each with DB_POOL_MAX
 * connections, plus the other clients' connections, can exceed the server's slots (decision 253).
 * A check that cannot run says so and start-up goes on.
 */
async function warnAboutConnectionSlots(database: Database, config: Config, logger: Logger): Promise<void> {
  if (database.kind !== 'pg') return;
  try {
    const slots = await readConnectionSlots(database.db, database.applicationName);
    const instances = slots.otherInstances + 1;
    const warning = connectionSlotsWarning(slots, instances, config.db.poolMax);
    if (warning) logger.warn({ ...slots, instances, poolMax: config.db.poolMax }, warning);
  } catch (error) {
    logger.warn({ err: error instanceof Error ? error.message.split('\n')[0] : String(error) }, 'connection slots: could not read max_connections and pg_stat_activity');
  }
}

/** Generated secrets are news only on the start that generated them; later starts say where they come from, quietly. */
function reportGeneratedSecrets(config: Config, logger: Logger): void {
  const names = config.generatedSecrets;
  if (names.length === 0) return;
  const file = config.secretsToStore?.file;
  if (file) {
    for (const name of names) {
      logger.warn(
        { setting: name, file },
        `${name} is not set: development mode generated one and stored it in ${file} (mode 0600). It serves this instance only; set ${name} for production or for several instances.`,
      );
    }
  } else {
    logger.info({ settings: names, dataDir: config.db.dataDir }, `${names.join(' and ')}: using the value${names.length > 1 ? 's' : ''} development mode generated earlier (DATA_DIR/generated-secrets.json)`);
  }
}

/**
 * With nobody to sign in yet, says how the first administrator comes to be (decision 149): the
 * BOOTSTRAP_ADMIN_* settings, in development and in production alike.
 */
/** Says what start-up did with BOOTSTRAP_ADMIN_* when it did something: an operator sees their first sign-in is ready. */
function reportBootstrapAdmin(outcome: BootstrapOutcome, config: Config, logger: Logger): void {
  const email = config.auth.bootstrapAdmin?.email;
  if (outcome === 'created') logger.info({ bootstrapAdmin: 'created' }, `system administrator ${email} created from BOOTSTRAP_ADMIN_EMAIL: sign in at ${config.server.publicUrl}/ with BOOTSTRAP_ADMIN_PASSWORD`);
  else if (outcome === 'promoted') logger.info({ bootstrapAdmin: 'promoted' }, `${email} (BOOTSTRAP_ADMIN_EMAIL) is now a system administrator`);
}

async function reportFirstUser(app: App, config: Config, logger: Logger): Promise<void> {
  const [someone] = await app.services.db.select({ id: users.id }).from(users).limit(1);
  if (someone) return;
  const register = config.auth.registration === 'open' ? '; or register through POST /v1/register (REGISTRATION is open)' : '';
  logger.warn(
    { registration: config.auth.registration },
    `no user yet: to create the first administrator, set BOOTSTRAP_ADMIN_EMAIL and BOOTSTRAP_ADMIN_PASSWORD (12+ characters) and restart, then sign in at ${config.server.publicUrl}/${register}`,
  );
}
