/**
 * `tessera fakes`: the loopback fakes of GitHub and Slack that the demo and the tests use
 * (test/fakes), for developing a product against a Tessera of one's own without registering
 * OAuth apps. stdout carries only the settings — `KEY=value` lines, an env file as it is — and
 * the words for people go to stderr. Runs until Ctrl-C (decision 175).
 */
import type { FakeProvider } from '../../test/fakes/common.ts';
import { CliFailure, line, printJson } from './output.ts';

const USERS = { github: 'octocat', slack: 'slackbot' } as const;

/** The fakes' modules, which only a checkout has: a production install leaves test/ out. */
async function loadFakes() {
  try {
    const [common, github, slack] = await Promise.all([import('../../test/fakes/common.ts'), import('../../test/fakes/github.ts'), import('../../test/fakes/slack.ts')]);
    return { providerEnv: common.providerEnv, startFakeGitHub: github.startFakeGitHub, startFakeSlack: slack.startFakeSlack };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw error;
    throw new CliFailure('the fake providers live in test/fakes, which this installation does not have', { fix: 'run `tessera fakes` in a checkout of the repository (after npm ci)' });
  }
}

/** `tessera fakes [--port <n>]`: GitHub on the port, Slack on the next (any free ports by default). */
export async function runFakes(options: { json?: boolean; port?: number }): Promise<'running'> {
  const { providerEnv, startFakeGitHub, startFakeSlack } = await loadFakes();
  const started: FakeProvider[] = [];
  const closeAll = () => Promise.all(started.map((fake) => fake.close().catch(() => {})));
  try {
    // Expiring tokens with rotating refresh tokens, as GitHub Apps issue them, so a refresh does something (as in the demo).
    const github = await startFakeGitHub({ port: options.port ?? 0, tokenExpiresIn: 8 * 3600, appName: 'your Tessera' });
    started.push(github);
    const slack = await startFakeSlack({ port: options.port ? options.port + 1 : 0, tokenExpiresIn: 12 * 3600, appName: 'your Tessera', teamName: 'Fake Workspace' });
    started.push(slack);
    github.addUser({ login: USERS.github, email: 'octocat@example.com', name: 'The Octocat' });
    slack.addUser({ login: USERS.slack, email: 'slackbot@example.com', name: 'Slackbot' });

    // The fakes' client secrets are their own fixed test values, made for this: printing them is the point.
    const env = { ...providerEnv(github), ...providerEnv(slack) };
    if (options.json) {
      printJson({ providers: started.map((fake) => ({ id: fake.id, url: fake.url, user: USERS[fake.id as keyof typeof USERS] })), env });
    } else {
      for (const [key, value] of Object.entries(env)) line(`${key}=${value}`);
      process.stderr.write(
        [
          '',
          `Fake GitHub at ${github.url} and fake Slack at ${slack.url}, on loopback only.`,
          'Give a Tessera the settings above (they are this command\'s standard output: `tessera fakes > fakes.env`),',
          `then connect through it: the fakes' consent pages let you approve as "${USERS.github}" / "${USERS.slack}".`,
          'Ctrl-C stops them.',
          '',
        ].join('\n'),
      );
    }
  } catch (error) {
    await closeAll();
    if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      throw new CliFailure(`port ${options.port} or ${(options.port ?? 0) + 1} is in use`, { fix: 'choose other ports with --port, or leave it out for any free ones' });
    }
    throw error;
  }
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void closeAll().then(() => process.exit(0));
    });
  }
  return 'running';
}
