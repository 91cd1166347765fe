import { type Config, ConfigError, loadConfig } from './config/load.ts';
import { DataDirLockedError } from './db/client.ts';
import { startServer } from './server.ts';

let config: Config;
try {
  config = loadConfig();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  for (const problem of error.problems) process.stderr.write(`config: ${problem}\n`);
  process.exit(1);
}

try {
  const server = await startServer(config);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      server.logger.info({ signal }, 'shutting down');
      server.stop().then(
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
