// A product's backend, the Tessera part of it (docs/embedding.md), with @tessera/client (packages/client): a connect link for the signed-in customer, and the webhook that hears a connection and reads the token.
import { createServer } from 'node:http';
import { Tessera, verifyWebhook, WebhookVerificationError } from '@tessera/client';
const { TESSERA_URL, TESSERA_SERVICE_TOKEN, EVENTS_WEBHOOK_SECRET, PORT = '3000', RETURN_URL = 'http://127.0.0.1:3000/integrations' } = process.env;
const service = new Tessera({ baseUrl: TESSERA_URL, serviceToken: TESSERA_SERVICE_TOKEN }); // one service token (tss_…) for every customer; keep it in your secret store
const tessera = (organizationId) => service.forOrganization(organizationId); // acts inside that customer's organization (X-Organization-ID)
createServer(async (req, res) => {
  let body = '';
  for await (const chunk of req) body += chunk;
  if (req.url === '/connect-link') { // your app knows which customer (organization) and end user is signed in; here, headers stand in
    const { session } = await tessera(req.headers['x-organization']).connectSessions.create({ redirectUri: RETURN_URL, endUser: { id: req.headers['x-user'] } });
    return res.end(JSON.stringify({ url: session.url })); // the page calls Tessera.connect(url)
  }
  if (req.url !== '/webhooks/tessera') return res.writeHead(404).end();
  let event;
  try {
    event = verifyWebhook(body, req.headers, EVENTS_WEBHOOK_SECRET); // Standard Webhooks: signature and timestamp, over the body as received
  } catch (error) {
    if (error instanceof WebhookVerificationError) return res.writeHead(401).end();
    throw error;
  }
  const { type, data } = event;
  if (type === 'integration.connected' && data.externalId !== null) { // your customers' organizations carry your key; events of others are acknowledged and ignored
    // An end user's own connection, or the organization's (endUser undefined).
    const { token } = await tessera(data.organizationId).integrations.token(data.provider, { endUser: data.endUser?.id });
    console.log(`connected ${data.organizationId} ${data.provider} for ${data.endUser?.id}; token expires ${token.expiresAt}`); // use token.accessToken; never log it
  }
  res.writeHead(204).end();
}).listen(Number(PORT), '127.0.0.1');
