/**
 * npm run rotate-keys — re-encrypts every stored secret under the first key of
 * ENCRYPTION_KEYS. Keep the old key listed (after the new one) until this finishes
 * and /readyz is green; then it can be removed. Resumable: run it again after a stop.
 */
import { ConfigError, loadConfig } from '../src/config/load.ts';
import { openDatabase } from '../src/server.ts';
import { rotateSecrets } from '../src/secrets/rotate.ts';

try {
  const config = loadConfig();
  const database = await openDatabase(config);
  try {
    await database.migrate();
    const started = Date.now();
    const result = await rotateSecrets(database.db, config.keyring, {
      onProgress: ({ done, total }) => {
        const width = 30;
        const filled = total === 0 ? width : Math.round((done / total) * width);
        process.stderr.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} secrets re-encrypted`);
      },
    });
    process.stderr.write(`\nrotated ${result.done} secrets to key "${config.keyring.activeId}" in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  } finally {
    await database.close();
  }
} catch (error) {
  if (error instanceof ConfigError) {
    for (const problem of error.problems) process.stderr.write(`config: ${problem}\n`);
  } else {
    process.stderr.write(`rotate-keys failed: ${(error as Error).message}\n`);
  }
  process.exit(1);
}
