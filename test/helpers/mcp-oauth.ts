// What the MCP sign-in tests (docs/contract.md §9a) drive Tessera with: a browser that keeps its
// cookies and reads the consent page's forms, and the MCP SDK's OAuthClientProvider kept in memory,
// as a host would keep it.
import { createHash, randomBytes } from 'node:crypto';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';

/** A browser without JavaScript: cookies kept (paths ignored), redirects not followed, forms read from the HTML. */
export class FormBrowser {
  readonly cookies = new Map<string, string>();

  private remember(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1).trim();
      if (/max-age=0|expires=thu, 01 jan 1970/i.test(line) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  private cookieHeader(): Record<string, string> {
    return this.cookies.size === 0 ? {} : { cookie: [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ') };
  }

  async get(url: string | URL, headers: Record<string, string> = {}): Promise<Page> {
    const res = await fetch(url, { redirect: 'manual', headers: { ...this.cookieHeader(), 'sec-fetch-site': 'none', ...headers } });
    this.remember(res);
    return new Page(res, await res.text());
  }

  /** Posts `fields` form-encoded as the page's own form would (same-origin). */
  async post(url: string | URL, fields: Record<string, string>, headers: Record<string, string> = {}): Promise<Page> {
    const res = await fetch(url, {
      method: 'POST',
      redirect: 'manual',
      headers: { ...this.cookieHeader(), 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin', ...headers },
      body: new URLSearchParams(fields),
    });
    this.remember(res);
    return new Page(res, await res.text());
  }
}

/** An answer of the page: its status, headers and HTML, and the hidden fields of its forms. */
export class Page {
  readonly status: number;
  readonly headers: Headers;
  readonly html: string;
  constructor(res: Response, html: string) {
    this.status = res.status;
    this.headers = res.headers;
    this.html = html;
  }
  get location(): string | null {
    return this.headers.get('location');
  }
  /** The value of the first hidden field `name` (the nth with `index`). */
  hidden(name: string, index = 0): string {
    const values = [...this.html.matchAll(new RegExp(`<input type="hidden" name="${name}" value="([^"]*)">`, 'g'))].map((match) => match[1] ?? '');
    const value = values[index];
    if (value === undefined) throw new Error(`no hidden ${name} on the page (${this.status}): ${this.html.slice(0, 400)}`);
    return value;
  }
}

/** A PKCE pair (RFC 7636, S256). */
export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** The MCP SDK's client-side OAuth state, in memory: what a host stores between its steps. */
export class MemoryOAuthProvider implements OAuthClientProvider {
  readonly redirectUrl: string;
  readonly clientMetadataUrl: string | undefined;
  client: OAuthClientInformationMixed | undefined;
  stored: OAuthTokens | undefined;
  verifier = '';
  authorizationUrl: URL | undefined;
  readonly stateValue = randomBytes(8).toString('hex');

  constructor(redirectUrl: string, clientMetadataUrl?: string) {
    this.redirectUrl = redirectUrl;
    this.clientMetadataUrl = clientMetadataUrl;
  }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'Test Host', redirect_uris: [this.redirectUrl], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  state(): string {
    return this.stateValue;
  }
  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed): void {
    this.client = info;
  }
  tokens(): OAuthTokens | undefined {
    return this.stored;
  }
  saveTokens(tokens: OAuthTokens): void {
    this.stored = tokens;
  }
  redirectToAuthorization(url: URL): void {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }
  codeVerifier(): string {
    return this.verifier;
  }
}
