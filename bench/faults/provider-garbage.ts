/**
 * Fault 2 — the provider answers garbage: mode `garbage` (HTTP 200, `<html>oops`) and
 * mode `down` (HTTP 503 with an HTML page), on the token endpoint and on the API.
 *
 * Expected: 502 PROVIDER_ERROR wherever Tessera itself must read the answer (code exchange,
 * refresh, re-validation), with none of the provider's body in our response or our log;
 * nothing stored by a failed exchange; no status set to `invalid` (a status check reports
 * `warning`, our words); the proxy answers 502 for the 503 page; everything recovers after.
 *
 * GitHub is configured with expiring tokens (so a refresh calls the token endpoint), Slack
 * with non-rotating ones (so a refresh re-validates through the API).
 *
 * Usage: node bench/faults/provider-garbage.ts [--backend=pg|pglite]
 */
import type { FakeApiMode, FakeProvider } from '../../test/fakes/common.ts';
import { startFakeGitHub } from '../../test/fakes/github.ts';
import { startFakeSlack } from '../../test/fakes/slack.ts';
import { type Answer, backendArg, baseEnv, call, connectProvider, leaked, providerEnv, Report, registerAndLogin, spawnService, storage, waitReady } from './lib.ts';

/** What a provider's body looks like in each mode: none of it may reach a client or a log line. */
const PROVIDER_TEXT = ['oops', '<html', 'Service Unavailable', 'unavailable</p>'];

const backend = backendArg();
const report = new Report(`provider answers garbage/HTML (${backend})`);
const gh = await startFakeGitHub({ tokenExpiresIn: 28800 });
const slack = await startFakeSlack();
const store = await storage(backend);
let service: Awaited<ReturnType<typeof spawnService>> | undefined;

const clean = (answer: Answer) => leaked(answer.text, PROVIDER_TEXT).length === 0;
const is502 = (answer: Answer) => answer.status === 502 && answer.json.code === 'PROVIDER_ERROR' && clean(answer);
const show = (answer: Answer) => `${answer.status} ${answer.json.code ?? ''}${clean(answer) ? '' : ' (provider body leaked!)'}`;

try {
  service = await spawnService(baseEnv({ ...store.env, ...providerEnv(gh), ...providerEnv(slack), PROVIDER_TIMEOUT: '2', OAUTH_STATUS_MAX_AGE: '1', LOG_LEVEL: 'info' }));
  await waitReady(service);
  const base = service.url;
  const ghOrg = await registerAndLogin(base, 'garbage-gh@example.com');
  await connectProvider(base, ghOrg.token, gh, 'garbagegh');
  const slackOrg = await registerAndLogin(base, 'garbage-slack@example.com');
  await connectProvider(base, slackOrg.token, slack, 'garbageslack');

  const statusOf = async (token: string, provider: string) => (await call(base, 'GET', `/v1/integrations/${provider}/status`, { token })).json.status ?? {};
  const setMode = (fake: FakeProvider, part: 'token' | 'api', mode: FakeApiMode) => {
    if (part === 'token') fake.mode.token = mode as typeof fake.mode.token;
    else fake.mode.api = mode;
  };

  for (const mode of ['garbage', 'down'] as const) {
    // --- token endpoint
    setMode(gh, 'token', mode);
    const refresh = await call(base, 'POST', '/v1/integrations/github/refresh', { token: ghOrg.token });
    report.check(`[${mode}] token endpoint: POST /github/refresh → 502 PROVIDER_ERROR, no provider body`, is502(refresh), show(refresh));
    const newcomer = await registerAndLogin(base, `garbage-new-${mode}@example.com`);
    let exchange: Answer | undefined;
    try {
      await connectProvider(base, newcomer.token, gh, `garbagenew${mode}`);
    } catch (error) {
      exchange = { status: Number(/callback: (\d+)/.exec(String(error))?.[1] ?? 0), json: { code: /"code":"([A-Z_]+)"/.exec(String(error))?.[1] }, text: String(error), headers: new Headers(), ms: 0, startedAt: 0 };
    }
    const stored = await call(base, 'GET', '/v1/integrations', { token: newcomer.token });
    report.check(
      `[${mode}] token endpoint: code exchange → 502 PROVIDER_ERROR, nothing stored`,
      exchange !== undefined && is502(exchange) && (stored.json.integrations as unknown[]).length === 0,
      `${exchange ? show(exchange) : 'connected!'}; integrations stored: ${(stored.json.integrations as unknown[]).length}`,
    );
    const read = await call(base, 'GET', '/v1/integrations/github/token', { token: ghOrg.token });
    report.check(`[${mode}] token endpoint: a token read (no refresh due) still answers 200`, read.status === 200, String(read.status));
    const afterToken = await statusOf(ghOrg.token, 'github');
    report.check(`[${mode}] token endpoint: status not invalid`, afterToken.status !== 'invalid', `github status ${afterToken.status}`);
    setMode(gh, 'token', 'ok');

    // --- API
    setMode(gh, 'api', mode);
    setMode(slack, 'api', mode);
    const proxied = await call(base, 'GET', '/v1/integrations/github/proxy/user', { token: ghOrg.token });
    if (mode === 'down') {
      report.check('[down] API: proxied GET /user (503 HTML) → 502 PROVIDER_ERROR, no provider body', is502(proxied), show(proxied));
    } else {
      // A 200 is the provider's own answer: the proxy is transparent for 2xx (GitHub serves text/plain and raw
      // media types legitimately). It must come back sandboxed, and the status must not move.
      const sandboxed = proxied.headers.get('content-security-policy') === 'sandbox' && proxied.headers.get('x-content-type-options') === 'nosniff';
      report.check('[garbage] API: proxied GET /user with a 200 HTML answer is passed through sandboxed (CSP sandbox, nosniff)', proxied.status === 200 && sandboxed, `${proxied.status} ${proxied.headers.get('content-type')} csp=${proxied.headers.get('content-security-policy')}`);
    }
    const revalidate = await call(base, 'POST', '/v1/integrations/slack/refresh', { token: slackOrg.token });
    report.check(`[${mode}] API: POST /slack/refresh (no refresh token: re-validates) → 502 PROVIDER_ERROR, no provider body`, is502(revalidate), show(revalidate));
    await new Promise((resolve) => setTimeout(resolve, 1100)); // past OAUTH_STATUS_MAX_AGE: the next status check is live
    const liveGh = await call(base, 'GET', '/v1/integrations/github/status', { token: ghOrg.token });
    const liveSlack = await call(base, 'GET', '/v1/integrations/slack/status', { token: slackOrg.token });
    const reported = [liveGh, liveSlack].map((a) => a.json.status ?? {});
    report.check(
      `[${mode}] API: live status check → 200, status warning (not invalid), our words only`,
      [liveGh, liveSlack].every((a) => a.status === 200 && clean(a)) && reported.every((s) => s.status === 'warning'),
      reported.map((s) => `${s.provider}: ${s.status} "${s.lastError ?? ''}"`).join('; '),
    );
    setMode(gh, 'api', 'ok');
    setMode(slack, 'api', 'ok');

    // --- recovery
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const back = [await statusOf(ghOrg.token, 'github'), await statusOf(slackOrg.token, 'slack')];
    const proxiedBack = await call(base, 'GET', '/v1/integrations/github/proxy/user', { token: ghOrg.token });
    report.check(
      `[${mode}] recovery: next live check → connected; proxy 200`,
      back.every((s) => s.status === 'connected') && proxiedBack.status === 200,
      `${back.map((s) => `${s.provider}: ${s.status}`).join(', ')}; proxy ${proxiedBack.status}`,
    );
  }
  const refreshed = await call(base, 'POST', '/v1/integrations/github/refresh', { token: ghOrg.token });
  report.check('after both faults a GitHub refresh works (the refresh token survived)', refreshed.status === 200, `${refreshed.status}`);

  const providerTokens = [gh, slack].flatMap((f) => ['garbagegh', 'garbageslack'].flatMap((l) => f.tokensOf(l).flatMap((t) => [t.accessToken, t.refreshToken])));
  report.checkLogClean('no provider body, token or client secret in the service log (LOG_LEVEL=info)', service.output(), [...PROVIDER_TEXT, ...providerTokens, gh.clientSecret, slack.clientSecret]);
  report.finish();
} catch (error) {
  report.finish(error);
} finally {
  await service?.stop();
  await gh.close();
  await slack.close();
  store.cleanup();
}
