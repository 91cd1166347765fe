// Provisioning from a product's backend (docs/embedding.md), with @tessera/client
// (packages/client): one Tessera organization per customer, found again by the customer's id in
// the product (`externalId`), an API token for each, and a connect link for the customer's end
// user — as the deployment's system administrator (only they and service tokens set `externalId`,
// the product's key), for a product without a service token. Node 20.11 or later.
//
//   TESSERA_URL=http://127.0.0.1:8080 TESSERA_EMAIL=ops@product.example TESSERA_PASSWORD=… \
//   REDIRECT_URI=http://127.0.0.1:3000/integrations/done node docs/examples/provision.mjs acme globex
//
// Prints one JSON line per customer: its organization, API token and connect link. Store the
// token in your secret store: Tessera shows it only once. With a service token, the same is
// `tessera.organizations.list({ externalId })` / `.create({ name, externalId })` (the README of packages/client).

import { resolve } from 'node:path';
import { Tessera } from '@tessera/client';

const FIND = 'query ($id: String!) { organizationByExternalId(externalId: $id) { id } }';

/**
 * For each customer ({id, name}): its organization (created the first time, found by
 * `externalId` afterwards), a new API token for it, and a connect session for its end user.
 */
export async function provision({ url, email, password, customers, redirectUri, allowedProviders }) {
  const ops = await Tessera.login({ baseUrl: url, email, password });
  const results = [];
  for (const customer of customers) {
    // Finding by externalId is GraphQL for a person (REST's list is a service token's); the key is unique, so one is found or none.
    const { organizationByExternalId: found } = await ops.graphql(FIND, { id: customer.id });
    const organization = found ?? (await ops.organizations.create({ name: customer.name, externalId: customer.id })).organization;
    const apiToken = await ops.apiTokens.create({ name: 'product backend', organizationId: organization.id });
    const customerTessera = new Tessera({ baseUrl: url, apiToken: apiToken.token });
    const { session } = await customerTessera.connectSessions.create({ redirectUri, allowedProviders, endUser: { id: customer.id, displayName: customer.name } });
    results.push({ customer: customer.id, organizationId: organization.id, apiToken: apiToken.token, sessionId: session.id, connectUrl: session.url });
  }
  return results;
}

if (import.meta.filename === resolve(process.argv[1] ?? '')) {
  const { TESSERA_URL, TESSERA_EMAIL, TESSERA_PASSWORD, REDIRECT_URI } = process.env;
  const customers = process.argv.slice(2).map((id) => ({ id, name: id }));
  const results = await provision({ url: TESSERA_URL, email: TESSERA_EMAIL, password: TESSERA_PASSWORD, customers, redirectUri: REDIRECT_URI });
  for (const result of results) console.log(JSON.stringify(result));
}
