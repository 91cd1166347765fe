/** npm run docs:api — writes docs/api.md, the API reference rendered from the OpenAPI document (a test checks it matches). */
import { writeFileSync } from 'node:fs';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config/load.ts';
import { openPglite } from '../src/db/client.ts';
import { renderApiReference } from '../src/http/api-reference.ts';
import { createLogger } from '../src/http/logging.ts';

// Any valid settings do: the routes, not the configuration, make the document (its `servers` are not rendered).
const config = loadConfig({
  env: { ENCRYPTION_KEYS: `docs:${Buffer.alloc(32, 1).toString('base64')}`, JWT_SECRET: 'a-jwt-secret-only-for-rendering-the-api-docs', LOG_LEVEL: 'silent' },
  persistGeneratedSecrets: false,
});
const database = await openPglite({ dataDir: 'memory://' });
const app = await buildApp({ config, database, logger: createLogger({ level: 'silent' }) });
await app.fastify.ready();
const target = new URL('../docs/api.md', import.meta.url);
writeFileSync(target, renderApiReference(app.fastify.swagger() as never));
await app.fastify.close();
await database.close();
process.stdout.write(`wrote ${target.pathname}\n`);
