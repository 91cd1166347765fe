/**
 * `tessera migrate` and `tessera rotate-keys`: the server's own modules, run once against the
 * configured database (they load the configuration exactly as start-up does, and store nothing
 * development mode might generate: only a starting server keeps them, decision 90).
 */
import { rotateSecrets } from '../secrets/rotate.ts';
import { missingKeyIds } from '../secrets/keyring-check.ts';
import { databaseLabel, loadSettings, openConfiguredDatabase } from './database.ts';
import { CliFailure, line, printJson } from './output.ts';

/** `tessera migrate`. */
export async function migrate(options: { json?: boolean }): Promise<number> {
  const config = loadSettings();
  const database = await openConfiguredDatabase(config);
  try {
    const { applied } = await database.migrate();
    if (options.json) printJson({ applied, database: database.kind });
    else line(applied > 0 ? `${databaseLabel(config)}: ${applied} migration${applied === 1 ? '' : 's'} applied` : `${databaseLabel(config)}: the schema is up to date`);
    return 0;
  } finally {
    await database.close();
  }
}

/** Draws progress on a terminal as one bar redrawn in place; elsewhere (a log, a pipe) as a plain line at each tenth. */
function progressReporter(): { update(done: number, total: number): void; end(): void } {
  const stream = process.stderr;
  if (stream.isTTY) {
    let drawn = false;
    return {
      update(done, total) {
        const width = 30;
        const filled = total === 0 ? width : Math.round((done / total) * width);
        stream.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} secrets re-encrypted`);
        drawn = true;
      },
      end: () => {
        if (drawn) stream.write('\n');
      },
    };
  }
  let lastTenth = -1;
  return {
    update(done, total) {
      const tenth = total === 0 ? 10 : Math.floor((done / total) * 10);
      if (tenth === lastTenth) return;
      lastTenth = tenth;
      stream.write(`${done}/${total} secrets re-encrypted\n`);
    },
    end: () => {},
  };
}

/**
 * `tessera rotate-keys` — re-encrypts every stored secret under the first key of
 * ENCRYPTION_KEYS. Keep the old key listed (after the new one) until this finishes and
 * /readyz is green; then it can be removed. Resumable: run it again after a stop.
 */
export async function rotateKeys(options: { json?: boolean }): Promise<number> {
  const config = loadSettings();
  const database = await openConfiguredDatabase(config);
  try {
    await database.migrate();
    // A secret under a key no longer listed cannot be re-encrypted: say which key is missing before touching anything.
    const missing = await missingKeyIds(database.db, config.keyring);
    if (missing.length > 0) {
      throw new CliFailure(`stored secrets are encrypted under key id(s) missing from ENCRYPTION_KEYS: ${missing.join(', ')}`, {
        fix: 'list the old key(s) in ENCRYPTION_KEYS after the new first one, run rotate-keys, then remove them',
      });
    }
    const started = Date.now();
    const progress = progressReporter();
    const result = await rotateSecrets(database.db, config.keyring, { onProgress: ({ done, total }) => progress.update(done, total) }).finally(() => progress.end());
    const seconds = Number(((Date.now() - started) / 1000).toFixed(1));
    if (options.json) printJson({ rotated: result.done, keyId: config.keyring.activeId, seconds });
    else line(`rotated ${result.done} secrets to key "${config.keyring.activeId}" in ${seconds.toFixed(1)} s`);
    return 0;
  } finally {
    await database.close();
  }
}
