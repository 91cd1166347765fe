/**
 * Fault 3 — PostgreSQL restarts under steady traffic. Tessera runs on a throwaway cluster
 * of its own; four clients loop over GET …/github/status, GET …/github/token and
 * GET /v1/integrations, and /readyz is polled every 50 ms. Two outages:
 *   A. `pg_ctl restart -m fast` (the brief outage of a restart),
 *   B. `pg_ctl stop -m fast`, 3 s down, `pg_ctl start` (long enough to watch /readyz).
 *
 * Expected: /readyz answers 503 while the database is down (B; A if the outage is long
 * enough to be sampled) and never anything but 200 or 503, a request that fails during the outage
 * answers 503 SERVICE_UNAVAILABLE with Retry-After (docs/contract.md §2; 500 before issue 35),
 * Tessera recovers by itself (same process, never restarted), no
 * 5xx or network failure for requests started after /readyz is 200 again, no request hangs
 * during the outage beyond DB_CONNECT_TIMEOUT + margin, and nothing is lost (the
 * integrations and the very same tokens are still readable).
 *
 * Usage: node bench/faults/postgres-restart.ts
 */
import { startFakeGitHub } from '../../test/fakes/github.ts';
import { type Answer, baseEnv, call, connectProvider, latencySummary, providerEnv, Report, registerAndLogin, sleep, spawnService, startCluster, statusCounts, waitReady } from './lib.ts';

const WORKERS = 4;
const ORGS = 3;
const CONNECT_TIMEOUT_S = 2;
const STEADY_MS = 4000;

const report = new Report('PostgreSQL restarted under load (own throwaway cluster)');
const gh = await startFakeGitHub();
const cluster = await startCluster();
let service: Awaited<ReturnType<typeof spawnService>> | undefined;

interface Sample extends Answer {
  path: string;
  endedAt: number;
}

try {
  const url = await cluster.createDatabase('tessera_faults');
  service = await spawnService(baseEnv({ DATABASE_URL: url, ...providerEnv(gh), DB_POOL_MAX: '6', DB_CONNECT_TIMEOUT: String(CONNECT_TIMEOUT_S), PROVIDER_TIMEOUT: '2' }));
  await waitReady(service);
  const base = service.url;
  const pid = service.child.pid;
  const orgs: { token: string; login: string; accessToken?: string; integrationId: string }[] = [];
  for (let i = 0; i < ORGS; i++) {
    const login = `pgrestart${i}`;
    const { token } = await registerAndLogin(base, `${login}@example.com`);
    const integrationId = await connectProvider(base, token, gh, login);
    const read = await call(base, 'GET', '/v1/integrations/github/token', { token });
    orgs.push({ token, login, integrationId, accessToken: read.json.token?.accessToken });
  }

  // Steady traffic.
  const samples: Sample[] = [];
  const readyz: { at: number; status: number }[] = [];
  let running = true;
  const paths = ['/v1/integrations/github/status', '/v1/integrations/github/token', '/v1/integrations'];
  const worker = async (index: number) => {
    for (let i = index; running; i++) {
      const org = orgs[i % orgs.length] as (typeof orgs)[number];
      const path = paths[i % paths.length] as string;
      const answer = await call(base, 'GET', path, { token: org.token, timeoutMs: 20_000 });
      samples.push({ ...answer, path, endedAt: performance.now() });
      if (answer.status !== 200) await sleep(20); // do not spin on fast failures
    }
  };
  const poller = async () => {
    while (running) {
      const answer = await call(base, 'GET', '/readyz', { timeoutMs: 5000 });
      readyz.push({ at: answer.startedAt, status: answer.status });
      await sleep(50);
    }
  };
  const loops = [...Array.from({ length: WORKERS }, (_, i) => worker(i)), poller()];

  /** First /readyz 200 that started after `t`. */
  const readyAgainAfter = async (t: number, timeoutMs = 60_000) => {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      const hit = readyz.find((r) => r.at > t && r.status === 200);
      if (hit) return hit.at;
      await sleep(20);
    }
    return null;
  };

  const outages: { name: string; start: number; dbBack: number; recovered: number | null }[] = [];
  await sleep(STEADY_MS);
  const aStart = performance.now();
  await cluster.restart();
  const aBack = performance.now();
  outages.push({ name: 'A restart -m fast', start: aStart, dbBack: aBack, recovered: await readyAgainAfter(aBack) });
  await sleep(STEADY_MS);
  const bStart = performance.now();
  await cluster.stop();
  await sleep(3000);
  await cluster.start();
  const bBack = performance.now();
  outages.push({ name: 'B stop, 3 s, start', start: bStart, dbBack: bBack, recovered: await readyAgainAfter(bBack) });
  await sleep(STEADY_MS);
  running = false;
  await Promise.all(loops);

  const alive = service.child.exitCode === null && service.child.signalCode === null && service.child.pid === pid;
  report.check('Tessera kept running (same process, never restarted)', alive, `pid ${pid}`);
  /** Checks that every sample is a 200; failures are shown with their error log lines. */
  const explain = (name: string, list: Sample[], since: number) => {
    const bad = list.filter((s) => s.status !== 200);
    const detail = bad
      .slice(0, 5)
      .map((s) => `${s.path} ${s.status} ${s.json.code ?? s.error ?? ''} at +${(s.startedAt - since).toFixed(0)} ms, request ${s.headers.get('x-request-id')}`)
      .join('; ');
    report.check(name, list.length > 0 && bad.length === 0, `${statusCounts(list)}; ${latencySummary(list.map((s) => s.ms))}${bad.length ? ` — ${detail}` : ''}`);
    for (const s of bad.slice(0, 5)) {
      const id = s.headers.get('x-request-id') ?? '';
      const line = service?.output().split('\n').find((l) => id && l.includes(id) && l.includes('"level":50'));
      if (line) report.note(`log of ${id}: ${line.slice(0, 700)}`);
    }
  };
  explain('steady traffic before the first outage is all 200', samples.filter((s) => s.endedAt < aStart), samples[0]?.startedAt ?? 0);
  for (const [index, outage] of outages.entries()) {
    const end = outage.recovered ?? Number.POSITIVE_INFINITY;
    const next = outages[index + 1]?.start ?? Number.POSITIVE_INFINITY;
    const downReadyz = readyz.filter((r) => r.at >= outage.start && r.at < end);
    const saw503 = downReadyz.some((r) => r.status === 503);
    const recoveredIn = outage.recovered === null ? 'never' : `${((outage.recovered - outage.dbBack) / 1000).toFixed(2)} s after PostgreSQL was back (${((outage.recovered - outage.start) / 1000).toFixed(2)} s after the fault began)`;
    report.check(`[${outage.name}] /readyz is 200 again without restarting Tessera`, outage.recovered !== null, recoveredIn);
    if (outage.name.startsWith('B') || saw503) {
      report.check(`[${outage.name}] /readyz answered 503 while the database was down`, saw503, `readyz during the outage: ${statusCounts(downReadyz)}`);
    } else {
      report.note(`[${outage.name}] the outage was too short for the 50 ms /readyz poll to see a 503 (readyz: ${statusCounts(downReadyz)})`);
    }
    const during = samples.filter((s) => s.endedAt >= outage.start && s.startedAt < end);
    const failed = during.filter((s) => s.status !== 200);
    const slowest = Math.max(0, ...during.map((s) => s.ms));
    report.check(
      `[${outage.name}] requests during the outage fail fast (≤ DB_CONNECT_TIMEOUT ${CONNECT_TIMEOUT_S} s + 3 s), never hang`,
      slowest <= CONNECT_TIMEOUT_S * 1000 + 3000 && during.every((s) => s.status !== 0),
      `${statusCounts(during)}; failures ${latencySummary(failed.map((s) => s.ms))}; slowest ${slowest.toFixed(0)} ms; codes ${[...new Set(failed.map((s) => s.json.code ?? s.error))].join(',')}`,
    );
    // docs/contract.md §2: an unreachable database is a 503 SERVICE_UNAVAILABLE with Retry-After, never a 500 (issue 35).
    const notUnavailable = failed.filter((s) => !(s.status === 503 && s.json.code === 'SERVICE_UNAVAILABLE' && s.json.success === false && typeof s.json.requestId === 'string' && /^\d+$/.test(s.headers.get('retry-after') ?? '')));
    report.check(
      `[${outage.name}] every request that failed during the outage answered 503 SERVICE_UNAVAILABLE with Retry-After (§2 shape)`,
      notUnavailable.length === 0,
      `${failed.length} failed; Retry-After ${[...new Set(failed.map((s) => s.headers.get('retry-after')))].join(',')}${notUnavailable.length ? ` — not: ${notUnavailable.slice(0, 5).map((s) => `${s.path} ${s.status} ${s.json.code ?? s.error ?? ''}`).join('; ')}` : ''}`,
    );
    // Until the next outage begins: a request still running when it does is that outage's.
    const after = samples.filter((s) => s.startedAt >= end && s.endedAt < next);
    explain(`[${outage.name}] no 5xx after recovery`, after, end);
  }

  const oddReadyz = readyz.filter((r) => r.status !== 200 && r.status !== 503);
  report.check('/readyz only ever answers 200 or 503 (docs/contract.md §1), never 500 or a timeout', oddReadyz.length === 0, `${statusCounts(readyz)} over ${readyz.length} polls`);

  // Nothing lost.
  let lost = 0;
  for (const org of orgs) {
    const list = await call(base, 'GET', '/v1/integrations', { token: org.token });
    const read = await call(base, 'GET', '/v1/integrations/github/token', { token: org.token });
    const proxied = await call(base, 'GET', '/v1/integrations/github/proxy/user', { token: org.token });
    const listed = (list.json.integrations as { id: string }[] | undefined)?.some((i) => i.id === org.integrationId);
    if (!listed || read.json.token?.accessToken !== org.accessToken || proxied.status !== 200) lost++;
  }
  report.check('nothing lost: every integration listed, the same token readable, proxied GET /user 200', lost === 0, `${orgs.length - lost}/${orgs.length} intact`);
  report.checkLogClean('no token in the service log', service.output(), orgs.map((o) => o.accessToken));
  report.finish();
} catch (error) {
  report.finish(error);
} finally {
  await service?.stop();
  await gh.close();
  cluster.destroy();
}
