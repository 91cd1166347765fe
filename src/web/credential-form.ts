/**
 * The hosted connect page's form for credentials a person enters (docs/contract.md §5a, §5c):
 * a labelled field per credential (secret ones as password inputs, never filled back in), a
 * plain form post that works without JavaScript, guarded like every form of ours
 * (http/form-guard.ts). A rejection shows the form again saying why, and the session stays
 * usable; an acceptance completes the session and goes on to its redirect URI as a finished
 * OAuth flow does.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { AppError, type ErrorCode } from '../ground/errors.ts';
import { formRoutes, NONCE_FIELD, stringFields } from '../http/form-guard.ts';
import { contentSecurityPolicy, escapeHtml } from '../http/html.ts';
import type { TypedFastify } from '../http/typed.ts';
import { unitOfWorkAs } from '../http/unit-of-work.ts';
import { callbackRedirect, recordFailedAttempt } from '../integrations/connect/callback.ts';
import { CONNECT_PAGE_HEADERS, connectPage, flowDonePage } from '../integrations/connect/pages.ts';
import { OAUTH_COOKIE_PATH } from '../integrations/connect/start.ts';
import { SessionUnusable } from '../integrations/connect/finish.ts';
import { connectWithCredentials } from '../integrations/credentials/connect.ts';
import type { ConfiguredProvider } from '../integrations/providers/registry.ts';
import type { ConnectSession } from '../integrations/sessions/sessions.ts';
import { toAnswer } from '../integrations/tokens/policy.ts';
import type { Services } from '../services.ts';
import { errorWords } from './static/error-words.js';

/** Form field names carry this prefix, so a credential named like the nonce cannot shadow it. */
const FIELD_PREFIX = 'credential.';

/** What the hosted page hands over: opening a session by its link's secret, and its "cannot use" answers. */
export interface SessionPages {
  open(secret: string): Promise<{ session: ConnectSession } | { unusable: { status: number; html: string } }>;
  unusable(reply: FastifyReply, page: { status: number; html: string }): string;
  notAllowed: { status: number; html: string };
}

/** Where a provider's credential form posts: under the `oauth_tx` cookie's path, beside the hosted page's start. */
export function credentialsPath(secret: string, provider: string): string {
  return `${OAUTH_COOKIE_PATH}/connect/${secret}/credentials/${provider}`;
}

/** Whether a provider is connected with this form rather than a sign-in page. */
export function takesEnteredCredentials(provider: ConfiguredProvider): boolean {
  return provider.traits.connects === 'entered';
}

/** Why the form is shown again, in words a person can act on: the pages' one table (static/error-words.js). */
function problemText(code: ErrorCode, provider: ConfiguredProvider): string {
  return errorWords('form', { code }, provider.displayName);
}

/**
 * The form for `provider` within a usable session: its fields, a fresh nonce for this browser,
 * and — after a refusal — the reason, with the non-secret values entered kept.
 */
export async function credentialFormPage(
  services: Services,
  request: FastifyRequest,
  reply: FastifyReply,
  view: { session: ConnectSession; secret: string; provider: ConfiguredProvider; popup: boolean; problem?: ErrorCode; values?: Record<string, string> },
): Promise<string> {
  const { provider } = view;
  const action = credentialsPath(view.secret, provider.id);
  const nonce = await services.forms.issue(request, reply, action);
  reply.headers({ ...CONNECT_PAGE_HEADERS, 'content-security-policy': contentSecurityPolicy() }).type('text/html; charset=utf-8');
  const fields = provider.definition.credentialFields
    .map((field) => {
      const id = `field-${field.name}`;
      const kept = !field.secret && view.values?.[field.name] ? ` value="${escapeHtml(view.values[field.name] as string)}"` : '';
      return `<p class="field"><label for="${escapeHtml(id)}">${escapeHtml(field.label)}</label>
<input id="${escapeHtml(id)}" name="${escapeHtml(FIELD_PREFIX + field.name)}" type="${field.secret ? 'password' : 'text'}" autocomplete="off" spellcheck="false" required${kept}></p>`;
    })
    .join('\n');
  const problem = view.problem ? `<p class="notice" role="alert">${escapeHtml(problemText(view.problem, provider))}</p>\n` : '';
  return connectPage(
    `Connect ${provider.displayName}`,
    `<h1>Connect ${escapeHtml(provider.displayName)}</h1>
${problem}<p>Enter the credentials ${escapeHtml(provider.displayName)} gave you. They are checked with ${escapeHtml(provider.displayName)} before anything is saved, and stored encrypted.</p>
<form method="post" action="${escapeHtml(action)}">
<input type="hidden" name="${NONCE_FIELD}" value="${escapeHtml(nonce)}">
${view.popup ? '<input type="hidden" name="popup" value="1">\n' : ''}${fields}
<button class="provider" type="submit">Connect ${escapeHtml(provider.displayName)}</button>
</form>
<p class="fine"><a href="/connect/${escapeHtml(view.secret)}${view.popup ? '?popup=1' : ''}">Choose another service</a></p>`,
  );
}

const Params = Type.Object({ secret: Type.String({ maxLength: 64 }), provider: Type.String({ maxLength: 64 }) });
const Body = Type.Object(
  { [NONCE_FIELD]: Type.String({ maxLength: 64 }), popup: Type.Optional(Type.String({ maxLength: 5 })) },
  { additionalProperties: Type.String({ maxLength: 4096 }), maxProperties: 24 },
);

/** The form's own routes: the post that verifies and stores, and a GET of its URL that shows the form again. */
export function credentialFormRoutes(app: TypedFastify, services: Services, pages: SessionPages): void {
  /** The session and provider a form URL names, if both can be used now; else the page saying why not. */
  const target = async (secret: string, providerId: string): Promise<{ page: { status: number; html: string } } | { session: ConnectSession; provider: ConfiguredProvider }> => {
    const opened = await pages.open(secret);
    if ('unusable' in opened) return { page: opened.unusable };
    const provider = services.providers.get(providerId);
    if (!provider || !opened.session.allowedProviders.includes(provider.id) || !takesEnteredCredentials(provider)) return { page: pages.notAllowed };
    return { session: opened.session, provider };
  };
  const again = async (request: FastifyRequest, reply: FastifyReply, popup: boolean) => {
    const params = stringFields(request.params);
    const secret = params.secret ?? '';
    const found = await target(secret, params.provider ?? '');
    if ('page' in found) return pages.unusable(reply, found.page);
    reply.code(403);
    return credentialFormPage(services, request, reply, { session: found.session, secret, provider: found.provider, popup });
  };
  formRoutes(app, services.forms, (forms) => {
    forms.get(
      credentialsPath(':secret', ':provider'),
      { config: { auth: 'public', noStore: true, errors: [] }, schema: { params: Params, hide: true } },
      async (request, reply) => {
        const found = await target(request.params.secret, request.params.provider);
        if ('page' in found) return pages.unusable(reply, found.page);
        return credentialFormPage(services, request, reply, { session: found.session, secret: request.params.secret, provider: found.provider, popup: false });
      },
    );
    forms.post(
      credentialsPath(':secret', ':provider'),
      {
        config: { auth: 'public', noStore: true, errors: [], formRefused: (request, reply) => again(request, reply, stringFields(request.body).popup === '1') },
        schema: { summary: "Connects a provider with entered credentials (the hosted page's form)", tags: ['connect'], params: Params, body: Body, hide: true },
      },
      async (request, reply) => {
        const { secret } = request.params;
        const found = await target(secret, request.params.provider);
        if ('page' in found) return pages.unusable(reply, found.page);
        const { session, provider } = found;
        const popup = request.body.popup === '1';
        const values: Record<string, string> = {};
        for (const [name, value] of Object.entries(request.body)) if (name.startsWith(FIELD_PREFIX) && typeof value === 'string') values[name.slice(FIELD_PREFIX.length)] = value;
        const state = { organizationId: session.organizationId, provider: provider.id, redirectUri: session.redirectUri, connectSessionId: session.id };
        let integrationId: string;
        try {
          // Verified with no transaction open; stored, and the session completed, in the request's own (connect/finish.ts).
          const input = { organizationId: session.organizationId, provider, credentials: values, session, actor: { principal: null, requestId: request.id }, log: request.log };
          integrationId = (await connectWithCredentials(services, input, unitOfWorkAs(request, services))).integration.id;
        } catch (error) {
          const answer = toAnswer(error);
          if (!(answer instanceof AppError)) throw error;
          // As at the callback: what the request stored is undone, then the failed attempt recorded on its own.
          await request.ctx.rollback();
          await recordFailedAttempt(services, state, answer.code, request.id);
          // A session that ended meanwhile (used, revoked, its minter's authority gone) shows its page.
          if (answer instanceof SessionUnusable) {
            const now = await target(secret, provider.id);
            return pages.unusable(reply, 'page' in now ? now.page : pages.notAllowed);
          }
          reply.code(answer.status);
          return credentialFormPage(services, request, reply, { session, secret, provider, popup, problem: answer.code, values });
        }
        if (popup) {
          reply.headers(CONNECT_PAGE_HEADERS).type('text/html; charset=utf-8');
          return flowDonePage(services.providers, state, { integrationId });
        }
        reply.code(303).header('location', callbackRedirect(state, { integrationId }));
        return null;
      },
    );
  });
}
