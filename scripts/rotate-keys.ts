/**
 * `tessera rotate-keys` under its old name (`npm run rotate-keys` now runs the command line
 * itself): kept so that scripts calling this file keep working, `--help` included.
 */
import { runCli } from '../src/cli/index.ts';

await runCli(['rotate-keys', ...process.argv.slice(2)]);
