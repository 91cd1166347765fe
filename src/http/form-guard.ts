/**
 * The one check every state-changing form of our HTML pages passes (docs/contract.md §5a): a post
 * is the page's own only when it carries a nonce that page was shown, bound to a cookie the
 * page set in this browser, used once, and the browser says it did not come from another
 * site. Anything else — a link, a GET, another site's form, a replayed or invented nonce — is
 * refused before the route's handler runs, and the route shows its page again.
 *
 * It lives with the HTTP layer rather than beside one page: it needs only the request, the
 * database and PUBLIC_URL, and every feature that serves a form (the hosted connect page, a
 * credential form, console pages) must reach it without depending on another feature.
 */
import { createHash } from 'node:crypto';
import type {} from '@fastify/cookie';
import type { FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { type Db, queryRows, sql } from '../db/client.ts';
import { newSecret, SECRET } from '../lib/ids.ts';
import { utf8Body } from './json-limits.ts';
import type { TypedFastify } from './typed.ts';

/** The cookie that binds a form's nonce to the browser it was shown to. */
export const FORM_COOKIE = 'form_binding';
/** The form field carrying the nonce. */
export const NONCE_FIELD = 'nonce';
/** How long a shown form stays usable: a person who leaves the page open longer presses again on a fresh page. */
const NONCE_TTL_SECONDS = 3600;
/** Bodies of a form are a few fields. */
const FORM_BODY_LIMIT = 8 * 1024;
/** Browsers' `Sec-Fetch-Site` values of a request the page itself made (`none`: the person, e.g. a reload). */
const OWN_SITE = new Set(['same-origin', 'none']);
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Why a post was not taken as the page's own: for the log line, never shown. */
export type FormRefusal = 'cross-site' | 'foreign-origin' | 'no-nonce' | 'bad-nonce';

/** What a form route answers when its post is refused: the page again (HTML, 200 or a 4xx), starting nothing. */
export type FormRefusedHandler = (request: FastifyRequest, reply: FastifyReply, refusal: FormRefusal) => Promise<unknown>;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set on every route registered through `formRoutes`: step 9's generic Origin check leaves these to the guard, which is stricter and answers with the page. */
    formGuard?: boolean;
    /** Required on a form route's unsafe methods: the answer to a refused post. */
    formRefused?: FormRefusedHandler;
  }
}

export interface FormGuardOptions {
  /** PUBLIC_URL's origin: the only `Origin` a form post may carry. */
  publicOrigin: string;
  /** The cookie is `Secure` (production). */
  secure: boolean;
}

/** Issues nonces for pages' forms and checks the posts that come back. */
export class FormGuard {
  private readonly db: Db;
  private readonly options: FormGuardOptions;

  constructor(db: Db, options: FormGuardOptions) {
    this.db = db;
    this.options = options;
  }

  /**
   * A nonce for a form posting to `action` (a path of ours), stored hashed with the browser's
   * binding: the form cookie (HttpOnly, SameSite=Strict, scoped to `action`) is set here, or
   * kept when the browser sent one — so a page shown again keeps its other tabs' forms valid.
   */
  async issue(request: FastifyRequest, reply: FastifyReply, action: string): Promise<string> {
    const sent = request.cookies[FORM_COOKIE];
    const binding = sent && SECRET.test(sent) && pathOf(request) === action ? sent : newSecret();
    const nonce = newSecret();
    await this.db.execute(sql`
      WITH purge AS (
        DELETE FROM form_nonces WHERE nonce_hash IN (SELECT nonce_hash FROM form_nonces WHERE expires_at < now() LIMIT 100 FOR UPDATE SKIP LOCKED)
      )
      INSERT INTO form_nonces (nonce_hash, binding_hash, action_hash, expires_at)
      VALUES (${sha256Hex(nonce)}, ${sha256Hex(binding)}, ${sha256Hex(action)}, now() + ${`${NONCE_TTL_SECONDS} seconds`}::interval)`);
    reply.setCookie(FORM_COOKIE, binding, { path: action, httpOnly: true, sameSite: 'strict', secure: this.options.secure, maxAge: NONCE_TTL_SECONDS });
    return nonce;
  }

  /**
   * Null when `request` is a post of the page's own form: not from another site (`Sec-Fetch-Site`
   * and `Origin`, where sent and not `null`), and carrying a nonce shown to this browser (the form cookie) for
   * this very path, unexpired — which this call uses up, so it allows one post. Else why not.
   */
  async verify(request: FastifyRequest, nonce: unknown): Promise<FormRefusal | null> {
    const site = request.headers['sec-fetch-site'];
    if (site !== undefined && !OWN_SITE.has(String(site))) return 'cross-site';
    // `null` says nothing: our pages' `Referrer-Policy: no-referrer` makes browsers send it on
    // their own forms' posts (the Fetch standard). Another site is told apart by
    // `Sec-Fetch-Site` above, and by the SameSite cookie and the nonce below.
    const origin = request.headers.origin;
    if (origin !== undefined && origin !== 'null' && origin !== this.options.publicOrigin) return 'foreign-origin';
    const binding = request.cookies[FORM_COOKIE];
    if (typeof nonce !== 'string' || !SECRET.test(nonce) || !binding || !SECRET.test(binding)) return 'no-nonce';
    // One statement: of two posts racing with one nonce, exactly one deletes it.
    const used = await queryRows<{ one: number }>(
      this.db,
      sql`DELETE FROM form_nonces
          WHERE nonce_hash = ${sha256Hex(nonce)} AND binding_hash = ${sha256Hex(binding)} AND action_hash = ${sha256Hex(pathOf(request))} AND expires_at > now()
          RETURNING 1 AS one`,
    );
    return used.length === 1 ? null : 'bad-nonce';
  }
}

/**
 * Registers a page's form routes in a context of their own: form-encoded bodies are parsed
 * there only (every other route keeps answering 415 to anything but JSON), a body of another
 * type reaches the guard as no body, and every unsafe route is guarded — `guard.verify` runs
 * before its handler, and a refused post gets the route's `formRefused` answer instead.
 * A route without `formRefused` fails registration.
 */
export function formRoutes(app: TypedFastify, guard: FormGuard, register: (forms: TypedFastify) => void): void {
  app.register(async (forms) => {
    forms.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer', bodyLimit: FORM_BODY_LIMIT }, (_request, body, done) => {
      try {
        done(null, Object.fromEntries(new URLSearchParams(utf8Body(body as Buffer, true))));
      } catch (error) {
        done(error as Error, undefined);
      }
    });
    // Another site's form may say text/plain or multipart: not ours either way, so its body is not read as anything.
    forms.addContentTypeParser('*', { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT }, (_request, _body, done) => done(null, undefined));
    forms.addHook('onRoute', (route) => guardRoute(route, guard));
    register(forms as unknown as TypedFastify);
  });
}

function guardRoute(route: RouteOptions, guard: FormGuard): void {
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  route.config = { ...route.config, formGuard: true };
  if (methods.every((method) => SAFE_METHODS.has(method))) return;
  const refused = route.config.formRefused;
  if (!refused) throw new Error(`form route ${methods.join(',')} ${route.url} declares no formRefused answer`);
  // A body that fails the schema is still a post to refuse with the page, not a JSON 400.
  route.attachValidation = true;
  const handler = route.handler;
  route.handler = async function guarded(this: unknown, request: FastifyRequest, reply: FastifyReply) {
    const nonce = request.validationError ? undefined : stringFields(request.body)[NONCE_FIELD];
    const refusal = await guard.verify(request, nonce);
    if (refusal) {
      request.log.info({ formRefused: refusal }, 'form post refused: not the page’s own');
      return refused(request, reply, refusal);
    }
    return handler.call(this as never, request, reply);
  };
}

/**
 * The text fields of a request's parsed input (a form's body, a route's params) by name, read
 * without trusting its shape: where the route's typed schema does not reach — a `formRefused`
 * answer, which runs for posts that failed it — this is how a form's input is read. Anything but
 * an object has none; values that are not text are left out.
 */
export function stringFields(input: unknown): Record<string, string> {
  if (typeof input !== 'object' || input === null) return {};
  // Defined, not assigned: a field named `__proto__` stays a field.
  return Object.fromEntries(Object.entries(input).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
}

function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** The request's path, without its query: the form's action as the browser posted it. */
function pathOf(request: FastifyRequest): string {
  const at = request.url.indexOf('?');
  return at === -1 ? request.url : request.url.slice(0, at);
}
