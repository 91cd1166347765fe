import { type Config, ConfigError, loadConfig } from './config/load.ts';
import { createLogger } from './http/logging.ts';
import { tracesWanted } from './telemetry/tracing.ts';

let config: Config;
try {
  config = loadConfig();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  for (const problem of error.problems) process.stderr.write(`config: ${problem}\n`);
  process.exit(1);
}

const logger = createLogger({ level: config.log.level, format: config.log.format });
// Traces start before the server and the database drivers are loaded (hence the imports below
// are dynamic), so the instrumentations see them; unasked, no OpenTelemetry code is loaded at all.
const tracing = tracesWanted(process.env) ? await (await import('./telemetry/otel.ts')).startTracing(process.env, logger) : null;
const [{ startServer }, { DataDirLockedError }] = await Promise.all([import('./server.ts'), import('./db/client.ts')]);

try {
  const server = await startServer(config, logger);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      server.logger.info({ signal }, 'shutting down');
      server
        .stop()
        // The last spans are exported before exit; a collector that is gone does not fail the shutdown.
        .then(() => tracing?.shutdown().catch(() => {}))
        .then(
          () => process.exit(0),
          (error: unknown) => {
            server.logger.error({ err: error }, 'shutdown failed');
            process.exit(1);
          },
        );
    });
  }
} catch (error) {
  if (error instanceof ConfigError) {
    for (const problem of error.problems) process.stderr.write(`config: ${problem}\n`);
    process.exit(1);
  }
  if (error instanceof DataDirLockedError) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  process.stderr.write(`tessera failed to start: ${(error as Error).message}\n`);
  process.exit(1);
}
