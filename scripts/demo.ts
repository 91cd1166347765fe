/**
 * `npm run demo`: Tessera and its integrations page against loopback fakes of GitHub and
 * Slack (the ones the tests use), on a throwaway embedded database. No credentials, no
 * network: everything runs on 127.0.0.1 and is deleted on Ctrl-C.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Tessera } from '@tessera/client';
import { type App, buildApp } from '../src/app.ts';
import { ConfigError, loadConfig } from '../src/config/load.ts';
import type { Database } from '../src/db/client.ts';
import { createLogger } from '../src/http/logging.ts';
import { ensureBootstrapAdmin } from '../src/identity/bootstrap.ts';
import { openDatabase } from '../src/server.ts';
import { webRoutes } from '../src/web/routes.ts';
import { type FakeProvider, providerEnv } from '../test/fakes/common.ts';
import { startFakeGitHub } from '../test/fakes/github.ts';
import { startFakeSlack } from '../test/fakes/slack.ts';
import { freePort } from '../test/helpers/process.ts';
import { agentCapability } from './demo-agent.ts';
import { type DemoProduct, startDemoProduct } from './demo-product.ts';

const DEMO_EMAIL = 'demo@example.com';
const DEMO_PASSWORD = 'tessera-demo-password';
/** The deployment's own administrator (BOOTSTRAP_ADMIN_*): the operator's screens — organizations, service tokens, deliveries. */
const OPERATOR_EMAIL = 'operator@example.com';
const OPERATOR_PASSWORD = 'tessera-demo-operator';
const GITHUB_LOGIN = 'octocat';
const SLACK_LOGIN = 'slackbot';

/** Whether something already listens on the port. */
function portTaken(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(true));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(false)));
  });
}

/** PORT when set (it must be free), else 8080, else any free port. */
async function choosePort(): Promise<number> {
  const wanted = process.env.PORT;
  if (wanted) {
    const port = Number(wanted);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`PORT: expected a port number, got "${wanted}"`);
    if (await portTaken(port)) throw new Error(`port ${port} is in use: stop what listens there, or run PORT=<another> npm run demo`);
    return port;
  }
  return (await portTaken(8080)) ? freePort() : 8080;
}


/** Signs in as the demo user and creates the API token the demo product's backend uses. */
async function demoApiToken(url: string): Promise<string> {
  const demo = await Tessera.login({ baseUrl: url, email: DEMO_EMAIL, password: DEMO_PASSWORD });
  return (await demo.apiTokens.create({ name: 'demo product backend' })).token;
}

async function main(): Promise<void> {
  const cleanups: (() => Promise<void> | void)[] = [];
  const cleanUp = async () => {
    for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => {});
    cleanups.length = 0;
  };

  process.stdout.write('Starting the Tessera demo (the embedded database takes a few seconds to create)…\n');
  let app: App | undefined;
  let database: Database | undefined;
  let url = '';
  let github: FakeProvider;
  let slack: FakeProvider;
  let product: DemoProduct;
  let apiToken = '';
  try {
    // GitHub with expiring tokens (ghu_ + rotating ghr_), as GitHub Apps issue them, so Refresh does something.
    github = await startFakeGitHub({ tokenExpiresIn: 8 * 3600, appName: 'Tessera demo' });
    cleanups.push(() => github.close());
    slack = await startFakeSlack({ tokenExpiresIn: 12 * 3600, appName: 'Tessera demo', teamName: 'Demo Workspace' });
    cleanups.push(() => slack.close());
    github.addUser({ login: GITHUB_LOGIN, email: 'octocat@example.com', name: 'The Octocat' });
    slack.addUser({ login: SLACK_LOGIN, email: 'slackbot@example.com', name: 'Slackbot' });

    // A stand-in for the product that embeds Tessera: its redirect origin is allowed and it receives the events.
    // The product verifies every delivery with it (verifyWebhook).
    const webhookSecret = `whsec_${randomBytes(32).toString('base64')}`;
    product = await startDemoProduct(webhookSecret);
    cleanups.push(() => product.close());

    const dataDir = mkdtempSync(join(tmpdir(), 'tessera-demo-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const port = await choosePort();
    url = `http://127.0.0.1:${port}`;
    const config = loadConfig({
      env: {
        APP_ENV: 'development',
        HOST: '127.0.0.1',
        PORT: String(port),
        PUBLIC_URL: url,
        DATA_DIR: dataDir,
        // Fresh secrets for a database that lives as long as the demo.
        ENCRYPTION_KEYS: `demo:${randomBytes(32).toString('base64')}`,
        JWT_SECRET: randomBytes(48).toString('base64url'),
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
        // "Refresh status" re-validates at the provider when the last check is older than this.
        OAUTH_STATUS_MAX_AGE: '5',
        OAUTH_REDIRECT_ORIGINS: `${url},${product.url}`,
        EVENTS_WEBHOOK_URL: product.webhookUrl,
        EVENTS_WEBHOOK_SECRET: webhookSecret,
        EVENTS_POLL_INTERVAL: '1',
        BOOTSTRAP_ADMIN_EMAIL: OPERATOR_EMAIL,
        BOOTSTRAP_ADMIN_PASSWORD: OPERATOR_PASSWORD,
        ...providerEnv(github),
        ...providerEnv(slack),
      },
    });
    const logger = createLogger({ level: config.log.level });
    database = await openDatabase(config);
    const db = database;
    cleanups.push(() => db.close());
    await database.migrate();
    // The page is served by every Tessera; registering it here too is harmless (webRoutes runs once per instance).
    app = await buildApp({ config, database, logger, routes: (fastify) => webRoutes(fastify) });
    const fastify = app.fastify;
    cleanups.push(() => fastify.close());
    await fastify.listen({ host: config.server.host, port: config.server.port });
    app.startBackground();
    await ensureBootstrapAdmin(app.services);

    const registered = await fetch(`${url}/v1/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: DEMO_EMAIL, password: DEMO_PASSWORD, name: 'Demo User' }),
    });
    if (registered.status !== 201) throw new Error(`could not create the demo user (HTTP ${registered.status}: ${await registered.text()})`);
    apiToken = await demoApiToken(url);
    product.connect(url, apiToken);
  } catch (error) {
    await cleanUp();
    const message = error instanceof ConfigError ? error.problems.join('\n') : (error as Error).message;
    process.stderr.write(`demo failed to start: ${message}\n`);
    process.exit(1);
  }

  const terminal = process.stdin.isTTY === true;
  process.stdout.write(
    [
      '',
      'Tessera demo is running — everything on this machine, nothing needs credentials.',
      '',
      `  Open      ${url}/`,
      `  Sign in   ${DEMO_EMAIL}  /  ${DEMO_PASSWORD}   (an organization's owner: its integrations, members, tokens)`,
      `  Operator  ${OPERATOR_EMAIL}  /  ${OPERATOR_PASSWORD}   (the deployment's administrator: organizations, service tokens, deliveries)`,
      '',
      `  Connect GitHub or Slack: their (fake) consent pages let you approve as "${GITHUB_LOGIN}" / "${SLACK_LOGIN}".`,
      `  Embedded   ${product.url}/  a demo product that lets its end user connect through connect.js (docs/embedding.md)`,
      `  Fake GitHub ${github.url}   Fake Slack ${slack.url}`,
      `  API description: ${url}/api-docs`,
      '',
      terminal
        ? '  Type "revoke" + Enter to make the providers revoke every token, then press "Refresh status" on the page.'
        : '  Commands are read from standard input, one per line (e.g. `printf "revoke\\n" | npm run demo`): revoke, agent, quit.',
      terminal ? '  Type "agent" + Enter (once GitHub is connected) to mint an agent capability and see how to point an MCP client at it (docs/agents.md).' : '',
      '  Ctrl-C stops everything and deletes the demo data.',
      '',
    ].join('\n'),
  );

  let stopping = false;
  const stop = async (reason: string) => {
    if (stopping) {
      process.stderr.write('forced exit\n');
      process.exit(1);
    }
    stopping = true;
    process.stdout.write(`\n${reason}: stopping the demo and deleting its data…\n`);
    await cleanUp();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('Ctrl-C'));
  process.on('SIGTERM', () => void stop('SIGTERM'));

  {
    // Commands come from a terminal or a pipe alike. terminal: false keeps a TTY in line mode, so Ctrl-C stays a signal.
    const input = createInterface({ input: process.stdin, terminal: false });
    input.on('line', (line) => {
      const command = line.trim().toLowerCase();
      if (command === 'revoke') {
        github.revokeUser(GITHUB_LOGIN);
        slack.revokeUser(SLACK_LOGIN);
        process.stdout.write(
          `The fake GitHub and Slack revoked every token of ${GITHUB_LOGIN} and ${SLACK_LOGIN}. ` +
            'Press "Refresh status" on the page: connected integrations turn Invalid and offer Reconnect.\n',
        );
      } else if (command === 'agent') {
        void agentCapability(url, apiToken).then(
          (lines) => process.stdout.write(lines),
          (error: Error) => process.stdout.write(`${error.message}\n`),
        );
      } else if (command === 'quit' || command === 'exit') {
        void stop('quit');
      } else if (command) {
        process.stdout.write('Commands: revoke (the providers revoke every token), agent (mint an agent capability for MCP), quit. Ctrl-C also stops.\n');
      }
    });
    // A terminal's end of input (Ctrl-D) stops the demo; a pipe's end only ends the commands: it runs on until Ctrl-C.
    input.on('close', () => {
      if (terminal) void stop('end of input');
    });
  }
}

await main();
