import type { Logger } from 'pino';
import { type App, buildApp } from './app.ts';
import { storeGeneratedSecrets } from './config/generated-secrets.ts';
import type { Config } from './config/load.ts';
import { type Database, openPglite, openPostgres } from './db/client.ts';
import { createLogger } from './http/logging.ts';
import { ensureBootstrapAdmin } from './identity/bootstrap.ts';

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

/** Starts the whole service: generated secrets stored, database, migrations, HTTP listener. */
export async function startServer(config: Config, logger = createLogger({ level: config.log.level })): Promise<Server> {
  // Loading the configuration only read; keeping what development mode generated is start-up's first step.
  storeGeneratedSecrets(config.secretsToStore);
  for (const name of config.generatedSecrets) {
    logger.warn(
      { setting: name, dataDir: config.db.dataDir },
      `${name} is not set: development mode generated one and stored it under DATA_DIR (mode 0600). It serves this instance only; set ${name} for production or for several instances.`,
    );
  }
  const database = await openDatabase(config);
  let app: App;
  try {
    app = await buildApp({ config, database, logger });
  } catch (error) {
    await database.close().catch(() => {});
    throw error;
  }
  const { readiness } = app;
  // Listening first lets /livez answer during migrations; /readyz says 200 only once every
  // step below has finished, and never again after one failed.
  readiness.pending = 'migrations are running';
  try {
    await app.fastify.listen({ host: config.server.host, port: config.server.port });
    await database.migrate(async () => {
      readiness.pending = 'start-up is running';
      await ensureBootstrapAdmin(app.services);
    });
    app.startBackground();
    readiness.pending = null;
  } catch (error) {
    readiness.pending = 'start-up failed';
    await app.fastify.close().catch(() => {});
    await database.close().catch(() => {});
    throw error;
  }
  logger.info({ db: database.kind, url: config.server.publicUrl }, 'tessera is ready');

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
