// Provisioning from a product's backend (docs/embedding.md): one Tessera organization per
// customer, found again by the customer's id in the product (`externalId`), an API token for
// each, and a connect link for the customer's end user. No dependencies; Node 22.18 or later.
//
//   TESSERA_URL=http://127.0.0.1:8080 TESSERA_EMAIL=ops@product.example TESSERA_PASSWORD=… \
//   REDIRECT_URI=http://127.0.0.1:3000/integrations/done node docs/examples/provision.mjs acme globex
//
// Prints one JSON line per customer: its organization, API token and connect link. Store the
// token in your secret store: Tessera shows it only once.

import { resolve } from 'node:path';

/** Calls Tessera; throws with the error's code when the answer is not a success. */
async function call(base, path, body, token) {
  const res = await fetch(new URL(path, base), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  const answer = await res.json();
  const code = answer.code ?? answer.errors?.[0]?.extensions?.code;
  if (!res.ok || code) throw new Error(`${path}: ${res.status} ${code ?? ''}`.trim());
  return answer;
}

/**
 * For each customer ({id, name}): its organization (created the first time, found by
 * `externalId` afterwards), a new API token for it, and a connect session for its end user.
 */
export async function provision({ url, email, password, customers, redirectUri, allowedProviders }) {
  const { accessToken } = await call(url, '/v1/login', { email, password });
  const graphql = async (query, variables) => (await call(url, '/query', { query, variables }, accessToken)).data;
  const results = [];
  for (const customer of customers) {
    const found = await graphql('query ($id: String!) { organizationByExternalId(externalId: $id) { id } }', { id: customer.id });
    const organization =
      found.organizationByExternalId ??
      (await graphql('mutation ($name: String!, $id: String) { createOrganization(name: $name, externalId: $id) { id } }', { name: customer.name, id: customer.id }))
        .createOrganization;
    const { createAPIToken } = await graphql('mutation ($org: ID) { createAPIToken(name: "product backend", organizationId: $org) { token } }', { org: organization.id });
    const { session } = await call(url, '/v1/connect/sessions', { redirectUri, allowedProviders, endUser: { id: customer.id, displayName: customer.name } }, createAPIToken.token);
    results.push({ customer: customer.id, organizationId: organization.id, apiToken: createAPIToken.token, sessionId: session.id, connectUrl: session.url });
  }
  return results;
}

if (import.meta.filename === resolve(process.argv[1] ?? '')) {
  const { TESSERA_URL, TESSERA_EMAIL, TESSERA_PASSWORD, REDIRECT_URI } = process.env;
  const customers = process.argv.slice(2).map((id) => ({ id, name: id }));
  const results = await provision({ url: TESSERA_URL, email: TESSERA_EMAIL, password: TESSERA_PASSWORD, customers, redirectUri: REDIRECT_URI });
  for (const result of results) console.log(JSON.stringify(result));
}
