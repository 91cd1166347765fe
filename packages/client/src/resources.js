// @ts-check
// The groups of methods a `Tessera` has (`tessera.integrations.*`, …): each one route's call
// through the generated client, settled into its success body or a TesseraError.
/** @import { CreatedApiToken, EndUserOption, QueryOf, RequestBody, SuccessBody } from './types.js' */
/** @import { Tessera } from './client.js' */

/** `providers.*`: what this Tessera is configured for. */
export class Providers {
  #t;
  /** @param {Tessera} tessera */
  constructor(tessera) {
    this.#t = tessera;
  }
  /** The configured providers: id, display name, default scopes (`GET /v1/providers`). @returns {Promise<SuccessBody<'integrations_listProviders'>>} */
  list() {
    return this.#t.settle(this.#t.raw.GET('/v1/providers'));
  }
}

/** `integrations.*`: connections, their tokens and status (docs/contract.md §5, §5d). */
export class Integrations {
  #t;
  /** @param {Tessera} tessera */
  constructor(tessera) {
    this.#t = tessera;
  }
  /**
   * The organization's integrations — its own and every end user's — or those of one provider or end user (`GET /v1/integrations`).
   * @param {QueryOf<'integrations_list'>} [filter]
   * @returns {Promise<SuccessBody<'integrations_list'>>}
   */
  list(filter = {}) {
    return this.#t.settle(this.#t.raw.GET('/v1/integrations', { params: { query: filter } }));
  }
  /**
   * The access token, refreshed first when it is about to expire (`GET /v1/integrations/{provider}/token`).
   * @param {string} provider
   * @param {EndUserOption} [options]
   * @returns {Promise<SuccessBody<'integrations_getToken'>>}
   */
  token(provider, options = {}) {
    return this.#t.settle(this.#t.raw.GET('/v1/integrations/{provider}/token', { params: { path: { provider }, query: { endUser: options.endUser } } }));
  }
  /**
   * The status object, validated live when the last check is old (`GET /v1/integrations/{provider}/status`).
   * @param {string} provider
   * @param {EndUserOption} [options]
   * @returns {Promise<SuccessBody<'integrations_getStatus'>>}
   */
  status(provider, options = {}) {
    return this.#t.settle(this.#t.raw.GET('/v1/integrations/{provider}/status', { params: { path: { provider }, query: { endUser: options.endUser } } }));
  }
  /**
   * Refreshes the token now (`POST /v1/integrations/{provider}/refresh`).
   * @param {string} provider
   * @param {EndUserOption} [options]
   * @returns {Promise<SuccessBody<'integrations_refresh'>>}
   */
  refresh(provider, options = {}) {
    return this.#t.settle(this.#t.raw.POST('/v1/integrations/{provider}/refresh', { params: { path: { provider }, query: { endUser: options.endUser } } }));
  }
  /**
   * Connects a provider with credentials a person entered — an API key, basic credentials, client credentials — verified with the provider first (`POST /v1/integrations/{provider}/credentials`).
   * @param {string} provider
   * @param {Record<string, string>} credentials the provider's fields by name (`providers.list()` gives them)
   * @param {EndUserOption} [options]
   * @returns {Promise<SuccessBody<'integrations_createCredential'>>}
   */
  connectCredentials(provider, credentials, options = {}) {
    return this.#t.settle(this.#t.raw.POST('/v1/integrations/{provider}/credentials', { params: { path: { provider }, query: { endUser: options.endUser } }, body: { credentials } }));
  }
  /**
   * Deletes an integration by id and revokes its grant at the provider (`DELETE /v1/integrations/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'integrations_delete'>>}
   */
  delete(id) {
    return this.#t.settle(this.#t.raw.DELETE('/v1/integrations/{id}', { params: { path: { id } } }));
  }
  /**
   * Deletes every integration of one end user (`DELETE /v1/integrations?endUser=`).
   * @param {string} endUser
   * @returns {Promise<SuccessBody<'integrations_deleteForEndUser'>>}
   */
  deleteForEndUser(endUser) {
    return this.#t.settle(this.#t.raw.DELETE('/v1/integrations', { params: { query: { endUser } } }));
  }
}

/** `connectSessions.*`: links through which a product's end users connect (docs/contract.md §5a). */
export class ConnectSessions {
  #t;
  /** @param {Tessera} tessera */
  constructor(tessera) {
    this.#t = tessera;
  }
  /**
   * Mints a session; its `url` (shown only here) is what the end user's browser opens (`POST /v1/connect/sessions`).
   * @param {RequestBody<'connect_createSession'>} session
   * @returns {Promise<SuccessBody<'connect_createSession'>>}
   */
  create(session) {
    return this.#t.settle(this.#t.raw.POST('/v1/connect/sessions', { body: session }));
  }
  /**
   * A session's state: pending, completed (with `integrationId`), expired or revoked (`GET /v1/connect/sessions/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'connect_getSession'>>}
   */
  get(id) {
    return this.#t.settle(this.#t.raw.GET('/v1/connect/sessions/{id}', { params: { path: { id } } }));
  }
  /**
   * Revokes a pending session (`DELETE /v1/connect/sessions/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'connect_deleteSession'>>}
   */
  revoke(id) {
    return this.#t.settle(this.#t.raw.DELETE('/v1/connect/sessions/{id}', { params: { path: { id } } }));
  }
}

/** `organizations.*`: one per customer, managed by a service token (docs/contract.md §3, §5d). */
export class Organizations {
  #t;
  /** @param {Tessera} tessera */
  constructor(tessera) {
    this.#t = tessera;
  }
  /**
   * Creates an organization, optionally with the product's key for the customer, `externalId` (a service token or a system administrator) (`POST /v1/organizations`).
   * @param {RequestBody<'organizations_create'>} organization
   * @returns {Promise<SuccessBody<'organizations_create'>>}
   */
  create(organization) {
    return this.#t.settle(this.#t.raw.POST('/v1/organizations', { body: organization }));
  }
  /**
   * The organizations a service token created, newest first, paged; `externalId` finds one (`GET /v1/organizations`).
   * @param {QueryOf<'organizations_list'>} [query]
   * @returns {Promise<SuccessBody<'organizations_list'>>}
   */
  list(query = {}) {
    return this.#t.settle(this.#t.raw.GET('/v1/organizations', { params: { query } }));
  }
  /**
   * One organization (`GET /v1/organizations/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'organizations_get'>>}
   */
  get(id) {
    return this.#t.settle(this.#t.raw.GET('/v1/organizations/{id}', { params: { path: { id } } }));
  }
  /**
   * Renames an organization, or links it to the product's key with `externalId` (null clears it; a service token or a system administrator) (`PATCH /v1/organizations/{id}`).
   * @param {string} id
   * @param {RequestBody<'organizations_update'>} changes
   * @returns {Promise<SuccessBody<'organizations_update'>>}
   */
  update(id, changes) {
    return this.#t.settle(this.#t.raw.PATCH('/v1/organizations/{id}', { params: { path: { id } }, body: changes }));
  }
  /**
   * Deletes an organization with its integrations, revoking every grant (`DELETE /v1/organizations/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'organizations_delete'>>}
   */
  delete(id) {
    return this.#t.settle(this.#t.raw.DELETE('/v1/organizations/{id}', { params: { path: { id } } }));
  }
}

/** `apiTokens.*`: an organization's own credentials (GraphQL; docs/contract.md §3). */
export class ApiTokens {
  #t;
  /** @param {Tessera} tessera */
  constructor(tessera) {
    this.#t = tessera;
  }
  /**
   * Creates an API token (`createAPIToken`); its `token` is shown this once. By default in the
   * organization the credentials act in (a service token's `organizationId`).
   * @param {{ name: string, expiresAt?: string | undefined, organizationId?: string | undefined }} token
   * @returns {Promise<CreatedApiToken>}
   */
  async create({ name, expiresAt, organizationId }) {
    const query = 'mutation ($name: String!, $expiresAt: String, $org: ID) { createAPIToken(name: $name, expiresAt: $expiresAt, organizationId: $org) { id name display expiresAt createdAt token } }';
    const data = /** @type {{ createAPIToken: CreatedApiToken }} */ (await this.#t.graphql(query, { name, expiresAt, org: organizationId }));
    return data.createAPIToken;
  }
}

/** `webhookEndpoints.*`: where the deployment's events go (a system administrator or a service token; docs/contract.md §7). */
export class WebhookEndpoints {
  #t;
  /** @param {Tessera} tessera */
  constructor(tessera) {
    this.#t = tessera;
  }
  /** Every endpoint, the settings' ones (`settings-<n>`, read-only) included; never a secret (`GET /v1/webhook-endpoints`). @returns {Promise<SuccessBody<'webhooks_listWebhookEndpoints'>>} */
  list() {
    return this.#t.settle(this.#t.raw.GET('/v1/webhook-endpoints'));
  }
  /**
   * Adds an endpoint; its `secret` is shown only in this answer (`POST /v1/webhook-endpoints`).
   * @param {RequestBody<'webhooks_createWebhookEndpoint'>} endpoint
   * @returns {Promise<SuccessBody<'webhooks_createWebhookEndpoint'>>}
   */
  create(endpoint) {
    return this.#t.settle(this.#t.raw.POST('/v1/webhook-endpoints', { body: endpoint }));
  }
  /**
   * One endpoint (`GET /v1/webhook-endpoints/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'webhooks_getWebhookEndpoint'>>}
   */
  get(id) {
    return this.#t.settle(this.#t.raw.GET('/v1/webhook-endpoints/{id}', { params: { path: { id } } }));
  }
  /**
   * Changes an endpoint: url, description, eventTypes, enabled (`PATCH /v1/webhook-endpoints/{id}`).
   * @param {string} id
   * @param {RequestBody<'webhooks_updateWebhookEndpoint'>} changes
   * @returns {Promise<SuccessBody<'webhooks_updateWebhookEndpoint'>>}
   */
  update(id, changes) {
    return this.#t.settle(this.#t.raw.PATCH('/v1/webhook-endpoints/{id}', { params: { path: { id } }, body: changes }));
  }
  /**
   * Deletes an endpoint; its pending deliveries end as failed (`DELETE /v1/webhook-endpoints/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'webhooks_deleteWebhookEndpoint'>>}
   */
  delete(id) {
    return this.#t.settle(this.#t.raw.DELETE('/v1/webhook-endpoints/{id}', { params: { path: { id } } }));
  }
  /**
   * A new secret (shown only here); the old one keeps signing for `overlapSeconds` (`POST /v1/webhook-endpoints/{id}/rotate-secret`).
   * @param {string} id
   * @param {{ overlapSeconds?: number | undefined }} [options]
   * @returns {Promise<SuccessBody<'webhooks_webhookEndpointsRotateSecret'>>}
   */
  rotateSecret(id, options = {}) {
    const body = options.overlapSeconds === undefined ? {} : { overlapSeconds: options.overlapSeconds };
    return this.#t.settle(this.#t.raw.POST('/v1/webhook-endpoints/{id}/rotate-secret', { params: { path: { id } }, body }));
  }
  /**
   * Sends a `webhook.test` event to this endpoint alone, now; answers its delivery (`POST /v1/webhook-endpoints/{id}/test`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'webhooks_webhookEndpointsTest'>>}
   */
  test(id) {
    return this.#t.settle(this.#t.raw.POST('/v1/webhook-endpoints/{id}/test', { params: { path: { id } } }));
  }
}

/** `apps.*`: the OAuth apps the organization may use — the deployment's, read-only, and its own (docs/contract.md §5e). Never a secret in an answer. */
export class Apps {
  #t;
  /** @param {Tessera} tessera */
  constructor(tessera) {
    this.#t = tessera;
  }
  /**
   * The deployment's apps this organization may use and its own, of one provider or all (`GET /v1/apps`).
   * @param {QueryOf<'apps_list'>} [filter]
   * @returns {Promise<SuccessBody<'apps_list'>>}
   */
  list(filter = {}) {
    return this.#t.settle(this.#t.raw.GET('/v1/apps', { params: { query: filter } }));
  }
  /**
   * One app (`GET /v1/apps/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'apps_get'>>}
   */
  get(id) {
    return this.#t.settle(this.#t.raw.GET('/v1/apps/{id}', { params: { path: { id } } }));
  }
  /**
   * Adds one of the organization's own apps: its secrets are sealed and never shown again (`POST /v1/apps`).
   * @param {RequestBody<'apps_create'>} app
   * @returns {Promise<SuccessBody<'apps_create'>>}
   */
  create(app) {
    return this.#t.settle(this.#t.raw.POST('/v1/apps', { body: app }));
  }
  /**
   * Changes an app: name, clientSecret, scopes, eventsSecret, privateKey, default — a deployment app's default alone (`PATCH /v1/apps/{id}`).
   * @param {string} id
   * @param {RequestBody<'apps_update'>} changes
   * @returns {Promise<SuccessBody<'apps_update'>>}
   */
  update(id, changes) {
    return this.#t.settle(this.#t.raw.PATCH('/v1/apps/{id}', { params: { path: { id } }, body: changes }));
  }
  /**
   * Deletes one of the organization's own apps; 409 while integrations, pending connect sessions or OAuth flows use it (`DELETE /v1/apps/{id}`).
   * @param {string} id
   * @returns {Promise<SuccessBody<'apps_delete'>>}
   */
  delete(id) {
    return this.#t.settle(this.#t.raw.DELETE('/v1/apps/{id}', { params: { path: { id } } }));
  }
}
