/**
 * `tessera`, the command line (docs/contract.md §10; decisions 171–176). commander parses; every
 * command's code is imported only when that command runs, so `--help` (which commander answers
 * before any action) runs nothing, and `serve` reaches src/main.ts with no server module loaded
 * yet — main.ts starts tracing before it loads the HTTP server and the database drivers.
 */
import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError, Option } from 'commander';
import { CliFailure, reportFailure } from './output.ts';

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

/** Options every command that talks to a running Tessera takes. */
export interface ApiOptions {
  url?: string;
  token?: string;
  org?: string;
  json?: boolean;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** The options of `tessera apps add` and `update`: secrets only as files, which no process list shows. */
export interface AppOptions extends ApiOptions {
  clientId?: string;
  clientSecretFile?: string;
  name?: string;
  scope?: string[];
  eventsSecretFile?: string;
  appId?: string;
  slug?: string;
  privateKeyFile?: string;
  default?: boolean;
}

/**
 * Wraps an action: a failure is reported with its code (`--json`: as JSON) and exits 1; a
 * command that finished exits with the code it set. `keepsRunning` commands (serve, fakes) are
 * left to their own signal handlers.
 */
function action<A extends unknown[]>(run: (...args: A) => Promise<number | 'running'>) {
  return async (...args: A) => {
    const command = args.at(-1) as Command;
    const json = command.opts<{ json?: boolean }>().json === true;
    let code: number;
    try {
      const outcome = await run(...args);
      if (outcome === 'running') return;
      code = outcome;
    } catch (error) {
      code = reportFailure(error, json);
    }
    // Exit now rather than when the event loop drains: an idle keep-alive socket must not hold a finished command open.
    process.stdout.write('', () => process.exit(code));
  };
}

/** Adds the connection options of §10 to a command that talks to a running Tessera. */
function apiCommand(parent: Command, name: string, description: string): Command {
  return parent
    .command(name)
    .description(description)
    .addOption(new Option('--url <url>', "Tessera's base URL, e.g. https://tessera.example.com").env('TESSERA_URL'))
    .addOption(new Option('--token <token>', 'an API token (tsa_), service token (tss_) or personal access token (tsp_); prefer the variable, which no process list shows').env('TESSERA_TOKEN'))
    .option('--org <id>', "the organization to act in (a service token's customer, or one of a personal token's)")
    .option('--json', 'print JSON for scripts instead of a table');
}

/** The program: every command, its options and its help. */
export function buildProgram(): Command {
  const program = new Command('tessera')
    .description('Tessera: organization-scoped OAuth integrations. With no command, `tessera` serves (as `tessera serve`).')
    .version(version, '-v, --version')
    .showHelpAfterError('(add --help for usage)')
    .addHelpText(
      'after',
      [
        '',
        'Local commands (serve, migrate, doctor, rotate-keys) read the same settings as the server: environment',
        'variables and CONFIG_FILE (README "Configuration"). API commands reach a running Tessera at TESSERA_URL',
        'with TESSERA_TOKEN (or --url/--token). Every command takes --help; failures exit 1 with their code.',
      ].join('\n'),
    );

  program
    .command('serve')
    .description('run Tessera: migrate the database, then serve HTTP on HOST:PORT (what npm start runs)')
    .action(
      action(async () => {
        await import('../main.ts');
        return 'running';
      }),
    );
  program
    .command('migrate')
    .description('apply pending database migrations and exit (start-up does this too)')
    .option('--json', 'print JSON for scripts')
    .action(action(async (options: { json?: boolean }) => (await import('./local.ts')).migrate(options)));
  program
    .command('doctor')
    .description("check this deployment: configuration, database, keyring, each configured provider's endpoints")
    .option('--timeout <seconds>', 'seconds to wait for each provider endpoint', positiveInteger, 5)
    .option('--json', 'print JSON for scripts')
    .action(action(async (options: { json?: boolean; timeout: number }) => (await import('./doctor.ts')).doctor(options)));
  program
    .command('rotate-keys')
    .description('re-encrypt every stored secret under the first key of ENCRYPTION_KEYS (resumable)')
    .option('--json', 'print JSON for scripts')
    .addHelpText('after', '\nKeep the old key listed after the new one until this finishes and /readyz is green; then remove it.')
    .action(action(async (options: { json?: boolean }) => (await import('./local.ts')).rotateKeys(options)));
  program
    .command('fakes')
    .description('run loopback fakes of GitHub and Slack for local development and print the settings that point Tessera at them')
    .option('--port <port>', 'the fake GitHub on this port and the fake Slack on the next (default: any free ports)', positiveInteger)
    .option('--json', 'print the settings as JSON')
    .action(action(async (options: { json?: boolean; port?: number }) => (await import('./fakes.ts')).runFakes(options)));

  const api = () =>
    import('./api.ts').catch((error: unknown) => {
      // The production image installs the server only (decision 176): the client package is a checkout's workspace.
      if ((error as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND' || !String((error as Error).message).includes('@tessera/client')) throw error;
      throw new CliFailure('the API commands need @tessera/client, which this installation does not have', {
        fix: 'run them from a checkout (npm ci, then npx tessera …) or any machine that reaches TESSERA_URL',
      });
    });
  apiCommand(program, 'providers', 'list the configured providers').action(action(async (options: ApiOptions) => (await api()).providers(options)));

  const integrations = program.command('integrations').description("an organization's integrations (its own, or an end user's with --end-user)");
  apiCommand(integrations, 'list', 'list integrations')
    .option('--provider <id>', 'only this provider')
    .option('--end-user <id>', "only this end user's")
    .action(action(async (options: ApiOptions & { provider?: string; endUser?: string }) => (await api()).listIntegrations(options)));
  apiCommand(integrations, 'status <provider>', "an integration's status, validated at the provider when the last check is old")
    .option('--end-user <id>', "the end user's integration instead of the organization's own")
    .action(action(async (provider: string, options: ApiOptions & { endUser?: string }) => (await api()).integrationStatus(provider, options)));
  apiCommand(integrations, 'refresh <provider>', "refresh an integration's token now (the token itself is never printed)")
    .option('--end-user <id>', "the end user's integration instead of the organization's own")
    .action(action(async (provider: string, options: ApiOptions & { endUser?: string }) => (await api()).refreshIntegration(provider, options)));
  apiCommand(integrations, 'delete <id>', 'delete an integration by id and revoke its grant at the provider').action(
    action(async (id: string, options: ApiOptions) => (await api()).deleteIntegration(id, options)),
  );

  const sessions = program.command('sessions').description('connect sessions: links through which an end user connects an account');
  apiCommand(sessions, 'create', 'mint a connect session and print its link (shown this once)')
    .requiredOption('--redirect-uri <uri>', 'where the browser returns after connecting')
    .option('--provider <id>', 'a provider the session may connect (repeat for several; default: any)', collect)
    .option('--end-user <id>', "the product's id for the end user who connects")
    .action(action(async (options: ApiOptions & { redirectUri: string; provider?: string[]; endUser?: string }) => (await api()).createSession(options)));

  const orgs = program.command('orgs').description('organizations (a service token creates one per customer)');
  apiCommand(orgs, 'create <name>', 'create an organization')
    .option('--external-id <id>', "the product's key for the customer (a service token or a system administrator; unique)")
    .action(action(async (name: string, options: ApiOptions & { externalId?: string }) => (await api()).createOrganization(name, options)));

  const apps = program.command('apps').description("the organization's OAuth apps: the deployment's it may use, and its own (owner/admin, API token, or service token with --org)");
  apiCommand(apps, 'list', "list the apps (never a secret): the deployment's, read-only, then the organization's own")
    .option('--provider <id>', 'only this provider')
    .action(action(async (options: ApiOptions & { provider?: string }) => (await api()).listApps(options)));
  apiCommand(apps, 'add <provider>', "add one of the organization's own apps; secrets are read from files (- for standard input), never from the command line")
    .requiredOption('--client-id <id>', 'the client id the provider issued')
    .option('--client-secret-file <path>', 'a file holding the client secret (- reads standard input)')
    .option('--name <name>', 'what people see (default: the provider\'s name)')
    .option('--scope <scope>', 'a scope the app may request (repeat for several; default: the provider\'s configured set)', collect)
    .option('--events-secret-file <path>', "a file holding the provider's events signing secret")
    .option('--app-id <id>', "a GitHub App's numeric id")
    .option('--slug <slug>', "a GitHub App's slug")
    .option('--private-key-file <path>', "a GitHub App's private key (.pem)")
    .option('--default', "make it the organization's default app of the provider")
    .action(action(async (provider: string, options: AppOptions) => (await api()).addApp(provider, options)));
  apiCommand(apps, 'update <id>', "change an app (a deployment app: --default or --no-default only); secrets are read from files")
    .option('--name <name>', 'a new name')
    .option('--client-secret-file <path>', 'a file holding the new client secret (- reads standard input)')
    .option('--scope <scope>', 'the scopes it may request, replacing the list (repeat for several)', collect)
    .option('--events-secret-file <path>', "a file holding a new events signing secret")
    .option('--private-key-file <path>', "a GitHub App's new private key (.pem)")
    .option('--default', "make it the organization's default app of the provider")
    .option('--no-default', 'stop it being the default')
    .action(action(async (id: string, options: AppOptions) => (await api()).updateApp(id, options)));
  apiCommand(apps, 'delete <id>', "delete one of the organization's own apps (refused while integrations, pending sessions or flows use it)").action(
    action(async (id: string, options: ApiOptions) => (await api()).deleteApp(id, options)),
  );

  const webhooks = program.command('webhooks').description("the deployment's webhook endpoints (a system administrator's personal token, or a service token)");
  apiCommand(webhooks, 'list', 'list the endpoints, the settings ones included (never a secret)').action(action(async (options: ApiOptions) => (await api()).listWebhooks(options)));
  apiCommand(webhooks, 'add <url>', 'add an endpoint and print its secret (shown this once)')
    .option('--event-type <type>', 'an event type it receives (repeat for several; default: every type)', collect)
    .option('--description <text>', 'what it is for')
    .option('--disabled', 'add it disabled')
    .action(action(async (url: string, options: ApiOptions & { eventType?: string[]; description?: string; disabled?: boolean }) => (await api()).addWebhook(url, options)));
  apiCommand(webhooks, 'rotate <id>', 'give an endpoint a new secret and print it (shown this once); the old one keeps signing for the overlap')
    .option('--overlap <seconds>', 'how long the old secret keeps signing (default 86400)', positiveInteger)
    .action(action(async (id: string, options: ApiOptions & { overlap?: number }) => (await api()).rotateWebhook(id, options)));
  apiCommand(webhooks, 'test <id>', 'send a webhook.test event to one endpoint now and print its delivery').action(
    action(async (id: string, options: ApiOptions) => (await api()).testWebhook(id, options)),
  );
  apiCommand(webhooks, 'delete <id>', 'delete an endpoint (its pending deliveries end as failed)').action(
    action(async (id: string, options: ApiOptions) => (await api()).deleteWebhook(id, options)),
  );

  const serviceTokens = program
    .command('service-tokens')
    .description("the deployment's service tokens, on the configured database (the operator's commands, like migrate: no login; the embedded database needs the server stopped)");
  serviceTokens
    .command('create <name>')
    .description('create a service token and print its value beside its id (shown this once)')
    .option('--expires-in <days>', 'days until it expires (default: never)', positiveInteger)
    .option('--json', 'print JSON for scripts')
    .action(action(async (name: string, options: { expiresIn?: number; json?: boolean }) => (await import('./service-tokens.ts')).createCommand(name, options)));
  serviceTokens
    .command('list')
    .description('list the service tokens, newest first (never a value)')
    .option('--json', 'print JSON for scripts')
    .action(action(async (options: { json?: boolean }) => (await import('./service-tokens.ts')).listCommand(options)));
  serviceTokens
    .command('revoke <id>')
    .description('revoke a service token: refused from its next request on, and the connect sessions it minted end')
    .option('--json', 'print JSON for scripts')
    .action(action(async (id: string, options: { json?: boolean }) => (await import('./service-tokens.ts')).revokeCommand(id, options)));

  const apiTokens = program.command('api-tokens').description("an organization's API tokens");
  apiCommand(apiTokens, 'create <name>', 'create an API token and print it (shown this once)').action(
    action(async (name: string, options: ApiOptions) => (await api()).createApiToken(name, options)),
  );
  return program;
}

function positiveInteger(value: string): number {
  const number = Number(value);
  if (!/^\d+$/.test(value) || number < 1) throw new InvalidArgumentError('expected a whole number of at least 1');
  return number;
}

/** Runs the command line on `argv` (without node and the script). No arguments at all: `serve`, as before there was a command line. */
export async function runCli(argv: readonly string[]): Promise<void> {
  await buildProgram().parseAsync(argv.length === 0 ? ['serve'] : [...argv], { from: 'user' });
}
