// A product's backend, the Tessera part of it (docs/embedding.md): a connect link for the signed-in customer, and the webhook that hears a connection and reads the token.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
const { TESSERA_URL, EVENTS_WEBHOOK_SECRET, CUSTOMER_TOKENS, PORT = '3000', RETURN_URL = 'http://127.0.0.1:3000/integrations' } = process.env;
const apiTokens = JSON.parse(CUSTOMER_TOKENS); // { "<organization id>": "tsa_…" }, from provision.mjs; keep them in your secret store
const tessera = (path, token, body) => fetch(TESSERA_URL + path, { method: body ? 'POST' : 'GET', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body && JSON.stringify(body) }).then((res) => res.json());
const signed = ({ 'webhook-id': id, 'webhook-timestamp': at, 'webhook-signature': header = '' }, body) => { // Standard Webhooks
  const expected = createHmac('sha256', Buffer.from(EVENTS_WEBHOOK_SECRET.slice(6), 'base64')).update(`${id}.${at}.${body}`).digest();
  const matches = (part) => part.startsWith('v1,') && Buffer.from(part.slice(3), 'base64').length === expected.length && timingSafeEqual(Buffer.from(part.slice(3), 'base64'), expected);
  return Math.abs(Date.now() / 1000 - Number(at)) < 300 && header.split(' ').some(matches);
};
createServer(async (req, res) => {
  let body = '';
  for await (const chunk of req) body += chunk;
  if (req.url === '/connect-link') { // your app knows which customer (organization) and end user is signed in; here, headers stand in
    const { session } = await tessera('/v1/connect/sessions', apiTokens[req.headers['x-organization']], { redirectUri: RETURN_URL, endUser: { id: req.headers['x-user'] } });
    return res.end(JSON.stringify({ url: session.url })); // the page calls Tessera.connect(url)
  }
  if (req.url !== '/webhooks/tessera') return res.writeHead(404).end();
  if (!signed(req.headers, body)) return res.writeHead(401).end();
  const { type, data } = JSON.parse(body);
  if (type === 'integration.connected' && apiTokens[data.organizationId]) { // events of organizations this backend does not serve are acknowledged and ignored
    const whose = data.endUser ? `?endUser=${encodeURIComponent(data.endUser.id)}` : ''; // an end user's own connection, or the organization's
    const { token } = await tessera(`/v1/integrations/${data.provider}/token${whose}`, apiTokens[data.organizationId]);
    console.log(`connected ${data.organizationId} ${data.provider} for ${data.endUser?.id}; token expires ${token.expiresAt}`); // use token.accessToken; never log it
  }
  res.writeHead(204).end();
}).listen(Number(PORT), '127.0.0.1');
