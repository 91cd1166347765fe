/**
 * The settings and the database for the local commands (migrate, doctor, rotate-keys): the
 * server's own configuration loader and database client, without loading the HTTP server.
 */
import { type Config, ConfigError, loadConfig } from '../config/load.ts';
import { type Database, DataDirLockedError, openPglite, openPostgres } from '../db/client.ts';
import { databaseFailure } from '../db/failure.ts';
import { CliFailure } from './output.ts';

/** The configuration as the server would load it; invalid, a failure listing each problem (they name the setting and the fix). */
export function loadSettings(): Config {
  try {
    return loadConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    throw new CliFailure('invalid configuration', { details: error.problems.map((problem) => ({ path: 'config', message: problem })), fix: 'set each setting named above (README "Configuration")' });
  }
}

/** Where the configured database is, without any credential: `PostgreSQL at host:port/db` or the embedded one's directory. */
export function databaseLabel(config: Config): string {
  if (!config.db.url) return `the embedded database under DATA_DIR (${config.db.dataDir})`;
  const url = URL.parse(config.db.url);
  return url ? `PostgreSQL at ${url.hostname}:${url.port || '5432'}${url.pathname.length > 1 ? url.pathname : ''}` : 'PostgreSQL at DATABASE_URL (unparsable)';
}

/** What to do when the database cannot be used. */
export function databaseFix(config: Config): string {
  return config.db.url
    ? 'start PostgreSQL there, or set DATABASE_URL to one that runs (unset, Tessera uses the embedded database under DATA_DIR)'
    : 'check that DATA_DIR is writable by this user and holds a Tessera database (or is empty)';
}

/**
 * Opens and pings the configured database; a failure names DATABASE_URL (host and port only) or DATA_DIR, with the fix.
 * A command's embedded database gets 16 MB of buffers, not a server's 128 MB: it reads little, and starts ~0.45 s sooner (decision 341).
 */
export async function openConfiguredDatabase(config: Config): Promise<Database> {
  let database: Database | undefined;
  try {
    database = config.db.url ? await openPostgres({ url: config.db.url, ...config.db, applicationName: 'tessera-cli' }) : await openPglite({ dataDir: config.db.dataDir, sharedBuffers: '16MB' });
    await database.ping();
    return database;
  } catch (error) {
    await database?.close().catch(() => {});
    if (error instanceof DataDirLockedError) throw new CliFailure(error.message, { fix: 'stop the Tessera that uses DATA_DIR, or run this against PostgreSQL (DATABASE_URL)', cause: error });
    const named = databaseFailure(error, config) ?? (error as Error);
    throw new CliFailure(named.message, { fix: databaseFix(config), cause: error });
  }
}
