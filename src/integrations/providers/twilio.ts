import { defineProvider } from './engine.ts';

/**
 * Twilio, with an Account SID and its Auth Token a person enters: HTTP Basic, the SID as the
 * user name. The SID is not secret (it names the account in every URL) and is kept in
 * metadata as `accountSid`; the pair is checked by fetching that account
 * (`GET /2010-04-01/Accounts/{AccountSid}.json`), which Twilio refuses with 401 (error 20003)
 * for a wrong or rotated token.
 */
export const twilio = defineProvider({
  id: 'twilio',
  displayName: 'Twilio',
  authMode: {
    mode: 'basic',
    credentials: [
      { name: 'accountSid', label: 'Account SID', secret: false },
      { name: 'authToken', label: 'Auth token', secret: true },
    ],
    basic: { username: '{accountSid}', password: '{authToken}' },
    metadata: ['accountSid'],
  },
  endpoints: { authUrl: '', tokenUrl: '', apiUrl: 'https://api.twilio.com' },
  defaultScopes: [],
  account: { url: '{apiUrl}/2010-04-01/Accounts/{accountSid}.json', id: 'sid', username: ['friendly_name', 'sid'] },
});
