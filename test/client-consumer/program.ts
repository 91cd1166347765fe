// A product's backend using @tessera/client as installed from its tarball (test/client-package.test.ts
// copies this file into an empty project, type-checks it strictly and runs it). Every method of
// docs/contract.md §10, against a live Tessera with fake providers. Phase `setup` provisions a customer
// and mints a connect link; the test then connects the end user in a "browser"; phase `use` does the
// rest. Prints one JSON line of what it saw; throws on anything unexpected.
import { type Integration, Tessera, TesseraError, verifyWebhook, type WebhookEvent } from '@tessera/client';

// No Node types in this project: the program reads its settings the way any runtime can.
const env = (globalThis as unknown as { process: { env: Record<string, string | undefined>; argv: string[] } }).process;
const setting = (name: string): string => {
  const value = env.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const baseUrl = setting('TESSERA_URL');
const serviceToken = setting('TESSERA_SERVICE_TOKEN');

function check(condition: boolean, what: string): asserts condition {
  if (!condition) throw new Error(`unexpected: ${what}`);
}

async function refused(call: () => Promise<unknown>): Promise<TesseraError> {
  try {
    await call();
  } catch (error) {
    if (error instanceof TesseraError) return error;
    throw error;
  }
  throw new Error('expected a TesseraError');
}

async function setup(): Promise<unknown> {
  const backend = new Tessera({ baseUrl, serviceToken });
  const { organization } = await backend.organizations.create({ name: 'Acme Corp', externalId: 'acme-42' });
  const found = await backend.organizations.list({ externalId: 'acme-42' });
  check(found.organizations.length === 1 && found.organizations[0]?.id === organization.id, 'organizations.list by externalId');
  check((await backend.organizations.get(organization.id)).organization.externalId === 'acme-42', 'organizations.get');

  const acme = new Tessera({ baseUrl, serviceToken, organizationId: organization.id });
  const { providers } = await acme.providers.list();
  check(providers.some((provider) => provider.id === 'github'), 'providers.list names github');
  const { session } = await acme.connectSessions.create({ redirectUri: setting('REDIRECT_URI'), allowedProviders: ['github'], endUser: { id: 'dana', displayName: 'Dana' } });
  const pending = (await acme.connectSessions.get(session.id)).session;
  check(pending.status === 'pending', `a new session is pending: ${JSON.stringify(pending)}`);
  // A second session, revoked.
  const spare = (await acme.connectSessions.create({ redirectUri: setting('REDIRECT_URI') })).session;
  await acme.connectSessions.revoke(spare.id);
  check((await acme.connectSessions.get(spare.id)).session.status === 'revoked', 'connectSessions.revoke');
  return { organizationId: organization.id, sessionId: session.id, sessionUrl: session.url, revokedSession: spare.id };
}

async function use(organizationId: string, sessionId: string): Promise<unknown> {
  const acme = new Tessera({ baseUrl, serviceToken, organizationId });
  const completed = (await acme.connectSessions.get(sessionId)).session;
  check(completed.status === 'completed' && typeof completed.integrationId === 'string', 'the session completed');

  // The webhook the product received for that connection.
  const delivery = JSON.parse(setting('WEBHOOK_DELIVERY')) as { body: string; headers: Record<string, string> };
  const event: WebhookEvent = verifyWebhook(delivery.body, delivery.headers, setting('WEBHOOK_SECRET'));
  if (event.type !== 'integration.connected') throw new Error(`unexpected event ${event.type}`);
  const endUser = event.data.endUser?.id;
  check(endUser === 'dana' && event.data.provider === 'github', 'the event names the end user and provider');

  const { integrations } = await acme.integrations.list({ endUser });
  const integration: Integration | undefined = integrations[0];
  check(integrations.length === 1 && integration?.id === completed.integrationId, 'integrations.list for the end user');
  const read = await acme.integrations.token('github', { endUser });
  const status = await acme.integrations.status('github', { endUser });
  const refreshed = await acme.integrations.refresh('github', { endUser });
  // Since §5c the token read answers `credentials` instead of `token` for API-key and basic providers.
  check(refreshed.token?.accessToken !== read.token?.accessToken, 'refresh issued a new token');

  // A multi-segment path through the generated client itself: sent as user/repos, not user%2Frepos.
  const viaRaw = await acme.settle(acme.raw.GET('/v1/integrations/{provider}/proxy/{path}', { params: { path: { provider: 'github', path: 'user/repos' }, query: { endUser } } }));
  const viaProxy = await acme.proxy('github', { method: 'GET', path: 'user/repos', query: { per_page: 5 }, endUser });
  const user = await acme.proxy('github', { method: 'GET', path: 'user', endUser });
  // The provider's own 404 comes back as its answer, not as an error.
  const missing = await acme.proxy('github', { path: 'no/such/thing', endUser });

  // Tessera's own refusals are TesseraErrors with the §2 code and the request's id.
  const notConnected = await refused(() => acme.integrations.token('github'));
  const proxyRefused = await refused(() => acme.proxy('github', { path: 'user' }));
  const badInput = await refused(() => acme.connectSessions.create({ redirectUri: 'not a url' }));

  // An API token for the customer, and a client holding it.
  const created = await acme.apiTokens.create({ name: 'from the client' });
  const byApiToken = new Tessera({ baseUrl, apiToken: created.token });
  const listedByApiToken = (await byApiToken.integrations.list()).integrations.map((item) => item.id);

  await acme.integrations.delete(completed.integrationId as string);
  const afterDelete = await refused(() => acme.integrations.status('github', { endUser }));
  const deleted = await new Tessera({ baseUrl, serviceToken }).organizations.delete(organizationId);

  return {
    event: { type: event.type, endUser },
    tokenRead: { provider: read.provider, endUser: read.endUser?.id, hasToken: (read.token?.accessToken.length ?? 0) > 0 },
    status: status.status.status,
    rawRepos: viaRaw,
    proxy: { status: viaProxy.status, body: viaProxy.body, contentType: viaProxy.headers['content-type'] },
    login: (user.body as { login?: string }).login,
    missing: missing.status,
    errors: [notConnected, proxyRefused, badInput, afterDelete].map((error) => ({ status: error.status, code: error.code, requestId: error.requestId, details: error.details })),
    apiToken: { prefix: created.token.slice(0, 4), lists: listedByApiToken },
    deleted: deleted.deleted,
  };
}

/** Misuses the compiler must refuse (never called). */
export function misuses(tessera: Tessera): void {
  // @ts-expect-error a proxy call's method is one of GET, HEAD, POST, PUT, PATCH, DELETE
  void tessera.proxy('github', { method: 'FETCH', path: 'user' });
  // @ts-expect-error a connect session needs its redirectUri
  void tessera.connectSessions.create({ allowedProviders: ['github'] });
  // @ts-expect-error an API token acts in its own organization only
  void new Tessera({ baseUrl: 'https://tessera.example', apiToken: 'tsa_x', organizationId: 'org' });
  // @ts-expect-error the generated client knows every route, and this is none
  void tessera.raw.GET('/v1/no-such-route');
  void tessera.integrations.token('github').then((read) => {
    // @ts-expect-error the token read's body has no `refreshToken`
    void read.token?.refreshToken;
  });
}

const [phase, ...args] = env.argv.slice(2);
const result = phase === 'setup' ? await setup() : await use(args[0] as string, args[1] as string);
console.log(JSON.stringify(result));
