import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { type App, buildApp, type AppOptions } from '../../src/app.ts';
import { type Config, loadConfig } from '../../src/config/load.ts';
import type { Database } from '../../src/db/client.ts';
import { createLogger } from '../../src/http/logging.ts';
import { createTestDatabase } from './database.ts';

/** Log lines written by the app under test, as raw strings and parsed objects. */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _encoding: string, callback: () => void): void {
    for (const line of chunk.toString('utf8').split('\n')) if (line) this.lines.push(line);
    callback();
  }
  get entries(): Record<string, unknown>[] {
    return this.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  }
  get text(): string {
    return this.lines.join('\n');
  }
}

export const TEST_ENCRYPTION_KEY = `test1:${Buffer.alloc(32, 7).toString('base64')}`;
export const TEST_JWT_SECRET = 'test-jwt-secret-that-is-at-least-32-characters-long';

/** Config for tests: fixed secrets, cheap password hashing, everything else as given. */
export function testConfig(env: Record<string, string> = {}, overrides: Record<string, unknown> = {}): Config {
  return loadConfig({
    env: {
      ENCRYPTION_KEYS: TEST_ENCRYPTION_KEY,
      JWT_SECRET: TEST_JWT_SECRET,
      PASSWORD_COST: '10',
      LOG_LEVEL: 'info',
      ...env,
    },
    overrides,
    persistGeneratedSecrets: false,
  });
}

export interface TestApp {
  app: App;
  fastify: FastifyInstance;
  database: Database;
  config: Config;
  logs: LogCapture;
  close(): Promise<void>;
}

export interface TestAppOptions extends Partial<Omit<AppOptions, 'config' | 'database'>> {
  env?: Record<string, string>;
  overrides?: Record<string, unknown>;
  /** Start background work (event delivery, validation passes); default true. */
  background?: boolean;
  /** Runs against the migrated database before the app is built (extra tables for tests). */
  prepare?: (database: Database) => Promise<void>;
  /** Sees the text of every statement the app's database runs (tests count them). */
  onQuery?: (query: string) => void;
}

/** The app on a database of its own, with its logs captured. */
export async function createTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const { database, drop } = await createTestDatabase(options.onQuery ? { onQuery: options.onQuery } : {});
  await options.prepare?.(database);
  const config = testConfig(options.env, options.overrides);
  const logs = new LogCapture();
  const logger = createLogger({ level: config.log.level, stream: logs });
  const app = await buildApp({ ...options, config, database, logger });
  if (options.background !== false) app.startBackground();
  return {
    app,
    fastify: app.fastify,
    database,
    config,
    logs,
    close: async () => {
      await app.fastify.close();
      await drop();
    },
  };
}
