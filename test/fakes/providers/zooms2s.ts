import { basicOf, bearerOf, type EnteredFake, randomText, startEnteredFake } from '../entered.ts';

// From Zoom's "Server-to-Server OAuth" docs: `POST /oauth/token?grant_type=account_credentials
// &account_id=…` with the app's client id and secret in HTTP Basic; the answer is
// `{access_token, token_type:"bearer", expires_in:3600, scope}` — no refresh token; many tokens
// may be live at once; a wrong client answers 400 `invalid_client`, an unknown account 400
// `invalid_request`; tokens stop working when the app is deactivated. API errors are
// `{code, message}` with 124 for an invalid token.

export interface ZoomS2SApp {
  accountId: string;
  clientId: string;
  clientSecret: string;
  active: boolean;
}

export interface FakeZoomS2S extends EnteredFake {
  addApp(): ZoomS2SApp;
  /** Deactivates the app: its tokens die and it mints no more. */
  deactivate(app: ZoomS2SApp): void;
  /** Seconds a minted token lives (Zoom: 3600). */
  expiresIn: number;
  /** Milliseconds the token endpoint takes (so concurrent readers overlap). */
  mintDelayMs: number;
  /** Every app created (for the secrets scan). */
  apps: ZoomS2SApp[];
  /** Tokens minted so far, in order. */
  minted: { token: string; app: ZoomS2SApp; expiresAt: number }[];
}

/** A loopback fake of Zoom's Server-to-Server OAuth token endpoint and a little of its API under `/v2`. */
export async function startFakeZoomS2S(): Promise<FakeZoomS2S> {
  const apps: ZoomS2SApp[] = [];
  const state = { expiresIn: 3600, mintDelayMs: 0, minted: [] as { token: string; app: ZoomS2SApp; expiresAt: number }[] };
  const fake = await startEnteredFake({
    'POST /oauth/token': async (request) => {
      await new Promise((resolve) => setTimeout(resolve, self.mintDelayMs));
      const basic = basicOf(request);
      const app = basic ? apps.find((candidate) => candidate.clientId === basic.user && candidate.clientSecret === basic.password && candidate.active) : undefined;
      if (!app) return { status: 400, json: { reason: 'Invalid client_id or client_secret', error: 'invalid_client' } };
      if (request.query.get('grant_type') !== 'account_credentials') return { status: 400, json: { reason: 'Unsupported grant type', error: 'unsupported_grant_type' } };
      if (request.query.get('account_id') !== app.accountId) return { status: 400, json: { reason: 'Invalid request : Account does not exist.', error: 'invalid_request' } };
      const token = `eyJzdiI6IjAwMDAwMSIsImFsZyI6IkhTNTEyIn0.${randomText(40)}`;
      state.minted.push({ token, app, expiresAt: Date.now() + self.expiresIn * 1000 });
      return { status: 200, json: { access_token: token, token_type: 'bearer', expires_in: self.expiresIn, scope: 'user:read:admin meeting:read:admin' } };
    },
    'GET /v2/users': (request) => {
      const token = bearerOf(request);
      const found = state.minted.find((entry) => entry.token === token);
      if (!found || !found.app.active || found.expiresAt <= Date.now()) return { status: 401, json: { code: 124, message: 'Invalid access token.' } };
      return { status: 200, json: { page_count: 1, page_number: 1, page_size: 30, total_records: 0, users: [] } };
    },
  });
  const self: FakeZoomS2S = Object.assign(fake, {
    expiresIn: 3600,
    mintDelayMs: 0,
    minted: state.minted,
    apps,
    addApp() {
      const app = { accountId: randomText(22), clientId: randomText(22), clientSecret: randomText(32), active: true };
      apps.push(app);
      return app;
    },
    deactivate(app: ZoomS2SApp) {
      app.active = false;
    },
  });
  return self;
}
