/**
 * The pages an end user sees when a product sends them through a connect session
 * (docs/contract.md §5a): the hosted page listing the allowed providers and the pages for a session
 * that cannot be used (the page ending a popup's flow is the callback's: integrations/connect/
 * pages.ts). Server-rendered HTML with every value escaped, no inline script or style (the CSP
 * allows none), a plain form that works without JavaScript — and a flow starts only from that form.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { formRoutes, NONCE_FIELD, stringFields } from '../http/form-guard.ts';
import type { TypedFastify } from '../http/typed.ts';
import { getOrganization } from '../organizations/organizations.ts';
import { currentAccounts } from '../integrations/integrations.ts';
import type { Services } from '../services.ts';
import { CONNECT_PAGE_HEADERS, connectPage } from '../integrations/connect/pages.ts';
import { beginFlow, OAUTH_COOKIE_PATH, OAUTH_TX_COOKIE, txCookieOptions } from '../integrations/connect/start.ts';
import { type ConnectSession, type ConnectSessionRow, sessionBySecret, sessionStatus } from '../integrations/sessions/sessions.ts';
import type { ConfiguredProvider } from '../integrations/providers/registry.ts';
import { contentSecurityPolicy, escapeHtml } from '../http/html.ts';
import { credentialFormPage, credentialFormRoutes, takesEnteredCredentials } from './credential-form.ts';
import { staticFileRoutes } from './static-files.ts';

const ASSETS = [
  { url: '/connect.js', file: 'connect.js', type: 'text/javascript; charset=utf-8' },
  { url: '/connect/assets/done.js', file: 'connect-done.js', type: 'text/javascript; charset=utf-8' },
  { url: '/connect/assets/connect.css', file: 'connect.css', type: 'text/css; charset=utf-8' },
] as const;

const SecretParams = Type.Object({ secret: Type.String({ maxLength: 64 }) });
const PopupQuery = Type.Object({ popup: Type.Optional(Type.String({ maxLength: 5 })) });

/** Why a session cannot be used, in words a person understands, with its status code. */
const UNUSABLE = {
  unknown: { status: 404, title: 'This link does not work', text: 'The link is not valid. Ask the app that sent you here for a new one.' },
  expired: { status: 410, title: 'This link has expired', text: 'Connect links work for a limited time. Go back to the app and start again to get a new one.' },
  completed: { status: 410, title: 'This link has been used', text: 'An account was already connected with this link. Go back to the app; if you need to connect again, it can give you a new link.' },
  revoked: { status: 410, title: 'This link was cancelled', text: 'The app cancelled this link. Go back to the app and start again.' },
} as const;

/** A provider the session does not allow (a tampered form). */
const NOT_ALLOWED = {
  status: 400,
  html: connectPage('This service is not available here', '<h1>This service is not available here</h1>\n<p>This link does not connect that service. Go back and choose one of those listed.</p>'),
};

function unusablePage(kind: keyof typeof UNUSABLE): { status: number; html: string } {
  const { status, title, text } = UNUSABLE[kind];
  return { status, html: connectPage(title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(text)}</p>`) };
}

/** Shown above the form when a start was refused: the person sees why nothing happened, and starts from here. */
const REFUSED_NOTICE = 'Nothing was started. To connect an account, choose the service below.';

/**
 * The hosted page of a usable session: the organization, and one form — a button per
 * allowed provider, and a nonce for this browser (docs/contract.md §5a). Its policy lets the form's
 * answer redirect to those providers' sign-in pages and nowhere else.
 */
async function hostedPage(services: Services, request: FastifyRequest, reply: FastifyReply, session: ConnectSession, secret: string, options: { popup: boolean; refused?: boolean }): Promise<string> {
  const organization = await getOrganization(services.db, session.organizationId);
  const name = organization?.name ?? 'your organization';
  const providers = session.allowedProviders.map((id) => services.providers.get(id)).filter((provider) => provider !== undefined);
  const action = startPath(secret);
  const nonce = await services.forms.issue(request, reply, action);
  // Providers whose credentials are entered here have no sign-in page to go to.
  const signInOrigins = [...new Set(providers.filter((provider) => !takesEnteredCredentials(provider)).map((provider) => new URL(provider.context.endpoints.authUrl).origin))];
  reply.headers({ ...CONNECT_PAGE_HEADERS, 'content-security-policy': contentSecurityPolicy(signInOrigins) }).type('text/html; charset=utf-8');
  // Before the person leaves for a provider, they learn which account is connected now and that continuing replaces it (docs/contract.md §5d).
  const connected = await currentAccounts(services, session.organizationId, session.endUser?.id ?? null);
  const buttons = providers
    .map((provider) => {
      const account = connected.get(provider.id);
      const now = account
        ? `\n<span class="current">Connected now as <strong>${escapeHtml(account.username)}</strong>. Continuing replaces that account.</span>`
        : '';
      return `<li><button class="provider" type="submit" name="provider" value="${escapeHtml(provider.id)}">${account ? 'Reconnect' : 'Connect'} ${escapeHtml(provider.displayName)}</button>${now}</li>`;
    })
    .join('\n');
  return connectPage(
    `Connect an account · ${name}`,
    `<p class="eyebrow">${escapeHtml(name)}</p>
<h1>Connect an account</h1>
${options.refused ? `<p class="notice" role="status">${escapeHtml(REFUSED_NOTICE)}</p>\n` : ''}<p>Choose the service to connect. You will sign in there and approve access for <strong>${escapeHtml(name)}</strong>; you then come back here.</p>
<form method="post" action="${escapeHtml(action)}">
<input type="hidden" name="${NONCE_FIELD}" value="${escapeHtml(nonce)}">
${options.popup ? '<input type="hidden" name="popup" value="1">\n' : ''}<ul class="providers">
${buttons}
</ul>
</form>
<p class="fine">Your password stays with that service. You can remove access there at any time.</p>`,
  );
}

/** `GET /connect/<secret>`, the start its form posts to (`startPath`), and the assets of those pages and of connect.js. */
export function connectPageRoutes(app: TypedFastify, services: Services): void {
  assetRoutes(app);
  hostedPageRoute(app, services);
  startRoutes(app, services);
  credentialFormRoutes(app, services, { open: (secret) => openSession(services, secret), unusable: unusableAnswer, notAllowed: NOT_ALLOWED });
}

/** connect.js and the pages' own script and style, read once; revalidated by ETag. */
function assetRoutes(app: TypedFastify): void {
  staticFileRoutes(app, ASSETS, { 'x-content-type-options': 'nosniff', 'cache-control': 'no-cache' });
}

/**
 * The session a link's secret opens, if it can be used now — pending, unexpired, its minting
 * credential still able to mint it (`sessionStatus`) — else the page saying why not.
 */
async function openSession(services: Services, secret: string): Promise<{ session: ConnectSession } | { unusable: { status: number; html: string } }> {
  const session = await sessionBySecret(services.db, secret);
  const status = session ? sessionStatus(session) : 'unknown';
  if (!session || status !== 'pending') return { unusable: unusablePage(status === 'pending' ? 'unknown' : status) };
  return { session };
}

function unusableAnswer(reply: FastifyReply, unusable: { status: number; html: string }): string {
  reply.headers(CONNECT_PAGE_HEADERS).type('text/html; charset=utf-8').code(unusable.status);
  return unusable.html;
}

/** The page a session's link opens, or the page saying why it cannot be used. */
function hostedPageRoute(app: TypedFastify, services: Services): void {
  app.get(
    '/connect/:secret',
    {
      config: { auth: 'public', noStore: true, errors: [] },
      schema: { summary: "A connect session's hosted page (HTML)", tags: ['connect'], params: SecretParams, querystring: PopupQuery, hide: true },
    },
    async (request, reply) => {
      const opened = await openSession(services, request.params.secret);
      if ('unusable' in opened) return unusableAnswer(reply, opened.unusable);
      return hostedPage(services, request, reply, opened.session, request.params.secret, { popup: request.query.popup === '1' });
    },
  );
}

/**
 * Where the hosted page's form posts: under the `oauth_tx` cookie's path, so that a browser
 * already in a flow sends its cookie and the new flow shares it (a second flow started does
 * not break the first, as with `POST /v1/integrations/oauth/start`).
 */
export function startPath(secret: string): string {
  return `${OAUTH_COOKIE_PATH}/connect/${secret}/start`;
}

/** Anything at the start but the page's own form — a link, a GET, another site's post, a spent nonce — gets the page again, and nothing starts. */
async function pageAgain(services: Services, request: FastifyRequest, reply: FastifyReply, secret: string, popup: boolean): Promise<string> {
  const opened = await openSession(services, secret);
  if ('unusable' in opened) return unusableAnswer(reply, opened.unusable);
  reply.code(403);
  return hostedPage(services, request, reply, opened.session, secret, { popup, refused: true });
}

const StartBody = Type.Object(
  { [NONCE_FIELD]: Type.String({ maxLength: 64 }), provider: Type.String({ maxLength: 64 }), popup: Type.Optional(Type.String({ maxLength: 5 })) },
  { additionalProperties: false },
);

/**
 * The hosted page's form: a post that the form guard took as the page's own (src/http/form-guard.ts)
 * starts the flow bound to this browser and to the session, if the session is still usable
 * and allows that provider. The start's URL by GET only shows the page.
 */
function startRoutes(app: TypedFastify, services: Services): void {
  formRoutes(app, services.forms, (forms) => {
    forms.get(
      startPath(':secret'),
      { config: { auth: 'public', noStore: true, errors: [] }, schema: { params: SecretParams, querystring: PopupQuery, hide: true } },
      async (request, reply) => pageAgain(services, request, reply, request.params.secret, request.query.popup === '1'),
    );
    forms.post(
      startPath(':secret'),
      {
        config: {
          auth: 'public',
          noStore: true,
          errors: [],
          formRefused: (request, reply) => pageAgain(services, request, reply, stringFields(request.params).secret ?? '', stringFields(request.body).popup === '1'),
        },
        schema: { summary: "Starts a connect session's flow with one of its providers (the hosted page's form)", tags: ['connect'], params: SecretParams, body: StartBody, hide: true },
      },
      async (request, reply) => {
        const opened = await openSession(services, request.params.secret);
        if ('unusable' in opened) return unusableAnswer(reply, opened.unusable);
        const { session } = opened;
        const provider = services.providers.get(request.body.provider);
        if (!provider || !session.allowedProviders.includes(provider.id)) return unusableAnswer(reply, NOT_ALLOWED);
        const popup = request.body.popup === '1';
        // Credentials a person enters: their form, on our own page (docs/contract.md §5c).
        if (takesEnteredCredentials(provider)) return credentialFormPage(services, request, reply, { session, secret: request.params.secret, provider, popup });
        // The session's app for its own provider, the organization's default for the others (docs/contract.md §5e).
        const app = await sessionApp(services, session, provider.id);
        if (!app) return unusableAnswer(reply, NOT_ALLOWED);
        const flow = await beginFlow(
          services,
          services.db,
          { organizationId: session.organizationId, userId: null, connectSessionId: session.id, popup, provider: app, scopes: app.scopes, redirectUri: session.redirectUri },
          request.cookies[OAUTH_TX_COOKIE],
        );
        reply.setCookie(OAUTH_TX_COOKIE, flow.txValue, txCookieOptions(services));
        // 303: the browser follows with a GET, whatever method brought it here.
        reply.code(303).header('location', flow.authUrl);
        return null;
      },
    );
  });
}

/** The app a session's flow for `providerId` goes through; undefined when it may use none. */
async function sessionApp(services: Services, session: Pick<ConnectSessionRow, 'organizationId' | 'appId'>, providerId: string): Promise<ConfiguredProvider | undefined> {
  const chosen = session.appId ? await services.apps.usable(services.db, session.organizationId, session.appId) : undefined;
  if (chosen?.id === providerId) return chosen;
  return services.apps.choose(services.db, session.organizationId, providerId, undefined).catch(() => undefined);
}
