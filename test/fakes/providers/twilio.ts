import { basicOf, type EnteredFake, type EnteredRequest, randomText, startEnteredFake } from '../entered.ts';

// From Twilio's REST API docs ("Authenticate with HTTP", "Account resource", error 20003):
// HTTP Basic with the Account SID (`AC` + 32 hex) as the user and the Auth Token as the
// password; a wrong or rotated token answers 401 `{code:20003, message, more_info, status}`;
// `GET /2010-04-01/Accounts/{AccountSid}.json` returns the account (its `auth_token`
// included, as Twilio's does); another account's SID in the path answers 404 (20404).

export interface TwilioAccount {
  sid: string;
  authToken: string;
  friendlyName: string;
}

export interface FakeTwilio extends EnteredFake {
  addAccount(friendlyName: string): TwilioAccount;
  /** Promotes a secondary token (Console → Auth tokens): the old one gets 401 at once. */
  rotateToken(account: TwilioAccount): void;
  /** Every auth token this fake ever issued (for the secrets scan). */
  tokensEverIssued: string[];
}

const HEX = '0123456789abcdef';
const authError = { status: 401, json: { code: 20003, message: 'Authenticate', more_info: 'https://www.twilio.com/docs/errors/20003', status: 401 }, headers: { 'www-authenticate': 'Basic realm="Twilio API"' } };
const notFound = { status: 404, json: { code: 20404, message: 'The requested resource was not found', more_info: 'https://www.twilio.com/docs/errors/20404', status: 404 } };

/** A loopback fake of Twilio's REST API: the account, and its messages. */
export async function startFakeTwilio(): Promise<FakeTwilio> {
  const accounts: TwilioAccount[] = [];
  const tokensEverIssued: string[] = [];
  const caller = (request: EnteredRequest, sid: string) => {
    const basic = basicOf(request);
    const account = basic ? accounts.find((candidate) => candidate.sid === basic.user && candidate.authToken === basic.password) : undefined;
    if (!account) return { error: authError };
    if (sid !== account.sid) return { error: notFound };
    return { account };
  };
  const fake = await startEnteredFake({
    'GET /2010-04-01/Accounts/:sid': (request, [file = '']) => {
      const found = caller(request, file.replace(/\.json$/, ''));
      if (found.error) return found.error;
      const { account } = found;
      return { status: 200, json: { sid: account.sid, friendly_name: account.friendlyName, status: 'active', type: 'Full', auth_token: account.authToken, owner_account_sid: account.sid, uri: `/2010-04-01/Accounts/${account.sid}.json` } };
    },
    'GET /2010-04-01/Accounts/:sid/Messages.json': (request, [sid = '']) => {
      const found = caller(request, sid);
      if (found.error) return found.error;
      return { status: 200, json: { messages: [], page: 0, page_size: 50, uri: `/2010-04-01/Accounts/${sid}/Messages.json` } };
    },
  });
  return Object.assign(fake, {
    tokensEverIssued,
    addAccount(friendlyName: string) {
      const account = { sid: `AC${randomText(32, HEX)}`, authToken: randomText(32, HEX), friendlyName };
      accounts.push(account);
      tokensEverIssued.push(account.authToken);
      return account;
    },
    rotateToken(account: TwilioAccount) {
      account.authToken = randomText(32, HEX);
      tokensEverIssued.push(account.authToken);
    },
  });
}
