import { bearerOf, basicOf, type EnteredFake, type EnteredRequest, randomText, startEnteredFake } from '../entered.ts';

// From Stripe's API reference ("Authentication", "Errors", "Retrieve account"): secret keys
// `sk_test_…`/`sk_live_…` sent with HTTP Basic (the key as the user name) or as a bearer; an
// unknown or rolled key answers 401 `invalid_request_error` with the key shown redacted and
// `WWW-Authenticate: Basic realm="Stripe"`; no key at all, 401 too; lists are
// `{object:"list", data, has_more, url}`.

export interface StripeAccount {
  id: string;
  email: string;
  displayName: string;
  /** The live secret key; rolling it kills the old one at once. */
  key: string;
}

export interface FakeStripe extends EnteredFake {
  addAccount(displayName: string): StripeAccount;
  /** Rolls the account's key (Dashboard → API keys → Roll key, expiring now): the old one gets 401. */
  rollKey(account: StripeAccount): void;
  /** Every key this fake ever issued (for the secrets scan). */
  keysEverIssued: string[];
}

const unauthorized = (message: string) => ({
  status: 401,
  json: { error: { type: 'invalid_request_error', message } },
  headers: { 'www-authenticate': 'Basic realm="Stripe"' },
});

/** A loopback fake of Stripe's API: `GET /v1/account`, `GET /v1/customers`. */
export async function startFakeStripe(): Promise<FakeStripe> {
  const accounts: StripeAccount[] = [];
  const keysEverIssued: string[] = [];
  const caller = (request: EnteredRequest) => {
    const key = bearerOf(request) ?? basicOf(request)?.user ?? null;
    if (!key) return { error: unauthorized('You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth.') };
    const account = accounts.find((candidate) => candidate.key === key);
    // Stripe shows the key it did not know redacted to its last four characters.
    return account ? { account } : { error: unauthorized(`Invalid API Key provided: ${key.slice(0, 8)}${'*'.repeat(12)}${key.slice(-4)}`) };
  };
  const fake = await startEnteredFake({
    'GET /v1/account': (request) => {
      const found = caller(request);
      if (found.error) return found.error;
      const { account } = found;
      return { status: 200, json: { id: account.id, object: 'account', email: account.email, business_profile: { name: account.displayName }, settings: { dashboard: { display_name: account.displayName } }, charges_enabled: true } };
    },
    'GET /v1/customers': (request) => {
      const found = caller(request);
      if (found.error) return found.error;
      return { status: 200, json: { object: 'list', data: [], has_more: false, url: '/v1/customers' } };
    },
  });
  return Object.assign(fake, {
    keysEverIssued,
    addAccount(displayName: string) {
      const account = { id: `acct_${randomText(16)}`, email: `${displayName.toLowerCase().replace(/\W+/g, '')}@example.com`, displayName, key: `sk_test_${randomText(24)}` };
      accounts.push(account);
      keysEverIssued.push(account.key);
      return account;
    },
    rollKey(account: StripeAccount) {
      account.key = `sk_test_${randomText(24)}`;
      keysEverIssued.push(account.key);
    },
  });
}
