/**
 * `GET|POST /oauth/authorize` (docs/contract.md §9a): the authorization endpoint and its consent
 * page. Server-rendered HTML with every value escaped, no script, framed by nothing, a plain form
 * that posts to the page itself and works without JavaScript; every post passes the form guard
 * (src/http/form-guard.ts: a nonce for this browser, used once, never from another site). A person
 * signs in here (the console's session, under the login rules of §3/§4) when they have no
 * session, then chooses the organization, the providers and read or write, an end user and how
 * long. With OAUTH_CONSENT_HANDOFF_URL set, the request goes to the product instead.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { AppError } from '../ground/errors.ts';
import { formRoutes, NONCE_FIELD, stringFields } from '../http/form-guard.ts';
import { contentSecurityPolicy, escapeHtml, HTML_HEADERS } from '../http/html.ts';
import type { TypedFastify } from '../http/typed.ts';
import { unitOfWork } from '../http/unit-of-work.ts';
import { authenticateOptional } from '../identity/authenticate.ts';
import { roleAtLeast } from '../identity/authorize.ts';
import { KIND } from '../identity/credential-kinds.ts';
import { PERSON_GRANTOR } from '../identity/grantor.ts';
import { issueSession, passwordSignIn } from '../identity/session-routes.ts';
import { findUserById } from '../identity/users.ts';
import { connectPage } from '../integrations/connect/pages.ts';
import { endUserKey, listIntegrations } from '../integrations/integrations.ts';
import { ULID } from '../lib/ids.ts';
import { membershipOf, organizationsOf } from '../organizations/organizations.ts';
import type { Services } from '../services.ts';
import { providersOf } from '../identity/capabilities.ts';
import { type AuthorizationDeps, decideAuthorization, findAuthorization, GRANT_LIFETIME, openAuthorization, type PendingAuthorization, redirectWith, checkApproval } from './authorization.ts';
import { redirectKind } from './clients.ts';
import { OAuthError } from './exchange.ts';
import { authorizationDeps } from './oauth-routes.ts';

const PATH = '/oauth/authorize';
/** What a person may choose for how long a grant lives. */
const DURATIONS: [number, string][] = [
  [3600, '1 hour'],
  [86400, '1 day'],
  [7 * 86400, '7 days'],
  [GRANT_LIFETIME.max, '30 days'],
];

/** The query of the authorization request, each parameter once (a repeated one is not taken). */
const AuthorizeQuery = Type.Object(
  {
    response_type: Type.Optional(Type.String({ maxLength: 64 })),
    client_id: Type.Optional(Type.String({ maxLength: 2000 })),
    redirect_uri: Type.Optional(Type.String({ maxLength: 2000 })),
    code_challenge: Type.Optional(Type.String({ maxLength: 256 })),
    code_challenge_method: Type.Optional(Type.String({ maxLength: 16 })),
    state: Type.Optional(Type.String({ maxLength: 1000 })),
    scope: Type.Optional(Type.String({ maxLength: 4000 })),
    resource: Type.Optional(Type.String({ maxLength: 2000 })),
  },
  { additionalProperties: true },
);

/** Where a decided request's redirect may go: the CSP's form-action holds it after a post (browsers apply it to the redirect). */
function formTarget(redirectUri: string): string {
  const url = new URL(redirectUri);
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : url.protocol;
}

function html(reply: FastifyReply, status: number, body: string, formTargets: string[] = []): string {
  reply
    .code(status)
    .headers({ ...HTML_HEADERS, 'content-security-policy': contentSecurityPolicy(formTargets), 'cache-control': 'no-store' })
    .type('text/html; charset=utf-8');
  return body;
}

/** The 400 page of a request that names no known client or redirect URI: nothing to go back to. */
function refusedPage(reply: FastifyReply, message: string, status = 400): string {
  return html(reply, status, connectPage('This sign-in link does not work', `<h1>This sign-in link does not work</h1>\n<p>${escapeHtml(message)}</p>\n<p>Go back to the application and try connecting again.</p>`));
}

/** The person the page's session cookie names (never an Authorization header), or null. */
async function cookiePerson(services: Services, request: FastifyRequest): Promise<{ userId: string; email: string } | null> {
  if (request.headers.authorization !== undefined) return null;
  const principal = await authenticateOptional(services, request);
  if (principal?.kind !== KIND.jwt || !principal.userId || principal.impersonatorId) return null;
  const user = await findUserById(services.db, principal.userId);
  return user ? { userId: user.id, email: user.email } : null;
}

interface View {
  requestId: string;
  request: PendingAuthorization;
  person: { userId: string; email: string } | null;
  notice?: string;
  status?: number;
  /** What was chosen, to show again after a refusal. */
  chosen?: Record<string, string>;
}

/** The page of a pending request: the sign-in form without a person, else the consent form. */
async function requestPage(services: Services, request: FastifyRequest, reply: FastifyReply, view: View): Promise<string> {
  const nonce = await services.forms.issue(request, reply, PATH);
  const { client } = view.request;
  const kind = redirectKind(view.request.redirectUri);
  const flag =
    kind === 'web'
      ? ''
      : ` <strong class="flag">(${kind === 'loopback' ? 'an app on this computer' : 'an app on this device'}: make sure you started this)</strong>`;
  // One nonce for the page's forms: they are alternatives, and whichever is sent uses it up.
  const hidden = `<input type="hidden" name="${NONCE_FIELD}" value="${escapeHtml(nonce)}">\n<input type="hidden" name="request" value="${escapeHtml(view.requestId)}">`;
  const notice = view.notice ? `<p class="notice" role="alert">${escapeHtml(view.notice)}</p>\n` : '';
  const who = `<p><strong>${escapeHtml(client.name)}</strong> (${escapeHtml(client.host)})${flag} asks to use your connected accounts through this service.</p>`;
  const targets = [formTarget(view.request.redirectUri)];
  if (!view.person) {
    return html(
      reply,
      view.status ?? 200,
      connectPage(
        'Sign in to continue',
        `<h1>Sign in to continue</h1>
${notice}${who}
<form method="post" action="${PATH}">
${hidden}
<input type="hidden" name="step" value="signin">
<p><label for="email">E-mail</label><br><input id="email" name="email" type="email" autocomplete="username" required value="${escapeHtml(view.chosen?.email ?? '')}"></p>
<p><label for="password">Password</label><br><input id="password" name="password" type="password" autocomplete="current-password" required></p>
<p><button type="submit">Sign in</button></p>
</form>
<form method="post" action="${PATH}">
${hidden}
<p><button type="submit" name="step" value="deny">Cancel</button></p>
</form>`,
      ),
      targets,
    );
  }
  const organizations = await organizationsOf(services.db, view.person.userId);
  const asked = providersOf(view.request.scopes);
  const offered = view.request.scopes.length > 0 ? [...asked.keys()] : services.providers.list().map((provider) => provider.id);
  const chosen = view.chosen ?? {};
  // A provider starts at "read" where the organization shown first has connected it, else at "no access": approving as shown then works.
  const shownFirst = organizations.find((org) => org.id === chosen.organization)?.id ?? organizations[0]?.id ?? '';
  const connected = new Set(
    shownFirst ? (await listIntegrations(services.db, shownFirst)).filter((row) => row.endUserKey === endUserKey(null)).map((row) => row.provider) : [],
  );
  const organizationOptions = organizations
    .map((org) => `<option value="${escapeHtml(org.id)}"${chosen.organization === org.id ? ' selected' : ''}>${escapeHtml(org.name)} (${escapeHtml(org.role)})</option>`)
    .join('');
  const providerRows = offered
    .map((id) => {
      const provider = services.providers.get(id);
      const writable = view.request.scopes.length === 0 || asked.get(id) === 'write';
      const value = chosen[`access.${id}`] ?? (connected.has(id) ? 'read' : 'none');
      const option = (v: string, label: string) => `<option value="${v}"${value === v ? ' selected' : ''}>${label}</option>`;
      return `<li><label for="access-${escapeHtml(id)}">${escapeHtml(provider?.displayName ?? id)}</label> <select id="access-${escapeHtml(id)}" name="access.${escapeHtml(id)}">${option('none', 'No access')}${option('read', 'Read')}${writable ? option('write', 'Read and write (owners and admins)') : ''}</select></li>`;
    })
    .join('\n');
  const durationOptions = DURATIONS.map(([seconds, label]) => `<option value="${seconds}"${(chosen.duration ?? String(GRANT_LIFETIME.max)) === String(seconds) ? ' selected' : ''}>${label}</option>`).join('');
  return html(
    reply,
    view.status ?? 200,
    connectPage(
      `Allow ${client.name}?`,
      `<h1>Allow ${escapeHtml(client.name)}?</h1>
${notice}${who}
<p class="fine">Signed in as ${escapeHtml(view.person.email)}. It will return to ${escapeHtml(new URL(view.request.redirectUri).host || view.request.redirectUri.split(':')[0] || '')}.</p>
<form method="post" action="${PATH}">
${hidden}
<p><label for="organization">Organization</label><br><select id="organization" name="organization">${organizationOptions}</select></p>
<fieldset><legend>Services</legend><ul class="providers">
${providerRows}
</ul></fieldset>
<p><label for="end_user">Only this end user's accounts (optional)</label><br><input id="end_user" name="end_user" maxlength="128" value="${escapeHtml(chosen.end_user ?? '')}"></p>
<p><label for="duration">For how long</label><br><select id="duration" name="duration">${durationOptions}</select></p>
<p><button type="submit" name="step" value="approve">Allow</button> <button type="submit" name="step" value="deny">Deny</button></p>
</form>`,
    ),
    targets,
  );
}

const PostBody = Type.Object(
  {
    [NONCE_FIELD]: Type.String({ maxLength: 64 }),
    request: Type.String({ maxLength: 64 }),
    step: Type.String({ maxLength: 16 }),
  },
  { additionalProperties: Type.String({ maxLength: 512 }) },
);

/** `GET /oauth/authorize` and the page's own posts. */
export function consentRoutes(app: TypedFastify, services: Services): void {
  const deps: AuthorizationDeps = authorizationDeps(services);
  const handoff = services.config.oauth.consentHandoffUrl;

  app.get(
    PATH,
    {
      config: { auth: 'public', noStore: true, errors: [] },
      schema: {
        summary: "An MCP client's authorization request (OAuth 2.1, PKCE S256): the consent page (HTML), or a redirect back with an error or to the consent handoff",
        tags: ['agents'],
        querystring: AuthorizeQuery,
        hide: true,
      },
    },
    async (request, reply) => {
      const query = stringFields(request.query);
      // The root handle: the page's nonce is written with it too, and a request transaction held open meanwhile would wait on itself (PGlite).
      const outcome = await openAuthorization(deps, services.db, query);
      if (outcome.kind === 'refused') return refusedPage(reply, outcome.message);
      if (outcome.kind === 'redirect') {
        reply.code(302).header('location', outcome.location);
        return null;
      }
      if (handoff !== null) {
        reply.code(302).header('location', redirectWith(handoff, { request: outcome.requestId }));
        return null;
      }
      return requestPage(services, request, reply, { requestId: outcome.requestId, request: outcome.request, person: await cookiePerson(services, request) });
    },
  );

  formRoutes(app, services.forms, (forms) => {
    forms.post(
      PATH,
      {
        config: {
          auth: 'public',
          noStore: true,
          errors: [],
          formRefused: async (request, reply) => {
            if (handoff !== null) return refusedPage(reply, 'The application that sent you here signs you in itself. Go back to it.');
            const requestId = stringFields(request.body).request ?? '';
            const found = await findAuthorization(services.db, requestId);
            if (!found || found.status !== 'pending') return refusedPage(reply, 'This page has expired or was used already.');
            return requestPage(services, request, reply, {
              requestId,
              request: found,
              person: await cookiePerson(services, request),
              notice: 'Nothing was done: the form was stale. Check the choices and send it again.',
              status: 403,
            });
          },
        },
        schema: { summary: 'The consent page: sign in, approve or deny', tags: ['agents'], body: PostBody, hide: true },
      },
      async (request, reply) => {
        // With the consent handoff the product decides (docs/contract.md §9a): this page decides nothing.
        if (handoff !== null) return refusedPage(reply, 'The application that sent you here signs you in itself. Go back to it.');
        const fields = stringFields(request.body);
        const requestId = fields.request ?? '';
        const found = await findAuthorization(services.db, requestId);
        if (!found) return refusedPage(reply, 'This request has expired. Go back to the application and start again.');
        if (found.status !== 'pending') return refusedPage(reply, 'This request was answered already.', 409);
        if (fields.step === 'deny') return decided(reply, found, await decideAuthorization(deps, await unitOfWork(request, services), found.idHash, 'deny'));
        if (fields.step === 'signin') return signIn(services, request, reply, requestId, found, fields);
        const person = await cookiePerson(services, request);
        if (!person) return requestPage(services, request, reply, { requestId, request: found, person: null, notice: 'Sign in first.', status: 401 });
        if (fields.step !== 'approve') return requestPage(services, request, reply, { requestId, request: found, person, status: 400 });
        const again = (notice: string, status = 400) => requestPage(services, request, reply, { requestId, request: found, person, notice, status, chosen: fields });
        const membership = ULID.test(fields.organization ?? '') ? await membershipOf(services.db, fields.organization ?? '', person.userId) : null;
        if (!membership) return again('Choose an organization you belong to.');
        const scopes = Object.entries(fields)
          .filter(([name, value]) => name.startsWith('access.') && (value === 'read' || value === 'write'))
          .map(([name, value]) => `integrations:${name.slice('access.'.length)}:${value}`);
        const approval = {
          organizationId: membership.id,
          approver: { role: membership.role, organizationId: membership.id },
          subject: { kind: PERSON_GRANTOR, id: person.userId, userId: person.userId },
          scopes,
          endUserId: fields.end_user ? fields.end_user : null,
          grantSeconds: Number(fields.duration ?? GRANT_LIFETIME.max),
        };
        try {
          await checkApproval(deps, services.db, found, approval);
        } catch (error) {
          if (!(error instanceof OAuthError)) throw error;
          const message = !roleAtLeast(membership.role, 'admin') && scopes.some((scope) => scope.endsWith(':write')) ? 'As a member you may grant read access only.' : error.message;
          return again(message);
        }
        return decided(reply, found, await decideAuthorization(deps, await unitOfWork(request, services, person.userId), found.idHash, approval));
      },
    );
  });
}

/** The way back to the client: 303, so the browser follows with a GET. */
function decided(reply: FastifyReply, found: PendingAuthorization, result: { redirectTo: string }): null {
  reply.code(303).headers({ 'content-security-policy': contentSecurityPolicy([formTarget(found.redirectUri)]) }).header('location', result.redirectTo);
  return null;
}

/** The page's sign-in: the login's own rules; a refusal shows the form again saying why (the same words whether or not the e-mail exists). */
async function signIn(services: Services, request: FastifyRequest, reply: FastifyReply, requestId: string, found: PendingAuthorization, fields: Record<string, string>): Promise<string> {
  const email = (fields.email ?? '').slice(0, 254);
  const password = (fields.password ?? '').slice(0, 256);
  try {
    if (!email || !password) throw new AppError('UNAUTHENTICATED', { message: 'Invalid e-mail or password' });
    const grant = await passwordSignIn(services, request, reply, { email, password });
    issueSession(services, reply, grant);
    // The session commits now: the page's nonce is written with the root handle, which must not wait on this transaction.
    await request.ctx.commit();
    return requestPage(services, request, reply, { requestId, request: found, person: { userId: grant.user.id, email: grant.user.email } });
  } catch (error) {
    if (!(error instanceof AppError) || (error.code !== 'UNAUTHENTICATED' && error.code !== 'RATE_LIMITED')) throw error;
    if (error.code === 'UNAUTHENTICATED') services.rateLimiter.failures.record(request.ip);
    else for (const [name, value] of Object.entries(error.headers ?? {})) reply.header(name, value);
    const notice = error.code === 'RATE_LIMITED' ? 'Too many attempts. Wait a moment and try again.' : 'Invalid e-mail or password.';
    return requestPage(services, request, reply, { requestId, request: found, person: null, notice, status: error.code === 'RATE_LIMITED' ? 429 : 401, chosen: { email } });
  }
}
