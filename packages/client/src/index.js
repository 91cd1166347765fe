// @ts-check
/**
 * @tessera/client — Tessera's REST API, typed from its OpenAPI document (docs/contract.md §10).
 * @module
 */
export { Tessera } from './client.js';
export { TesseraError } from './errors.js';
export { pathSerializer } from './path-serializer.js';
export { verifyWebhook, WebhookVerificationError } from './webhooks.js';

/** @typedef {import('./types.js').TesseraOptions} TesseraOptions */
/** @typedef {import('./types.js').ProxyRequest} ProxyRequest */
/** @typedef {import('./types.js').ProxyResponse} ProxyResponse */
/** @typedef {import('./types.js').EndUserOption} EndUserOption */
/** @typedef {import('./types.js').Provider} Provider */
/** @typedef {import('./types.js').Integration} Integration */
/** @typedef {import('./types.js').IntegrationStatus} IntegrationStatus */
/** @typedef {import('./types.js').Token} Token */
/** @typedef {import('./types.js').EndUser} EndUser */
/** @typedef {import('./types.js').ConnectSession} ConnectSession */
/** @typedef {import('./types.js').NewConnectSession} NewConnectSession */
/** @typedef {import('./types.js').Organization} Organization */
/** @typedef {import('./types.js').CreatedApiToken} CreatedApiToken */
/** @typedef {import('./types.js').ErrorBody} ErrorBody */
/** @typedef {import('./errors.js').ErrorCode} ErrorCode */
/** @typedef {import('./errors.js').TesseraErrorCode} TesseraErrorCode */
/** @typedef {import('./webhooks.js').WebhookEvent} WebhookEvent */
/** @typedef {import('./webhooks.js').WebhookEvents} WebhookEvents */
/** @typedef {import('./webhooks.js').WebhookHeaders} WebhookHeaders */
/** @typedef {import('./generated/openapi.js').paths} paths */
/** @typedef {import('./generated/openapi.js').components} components */
/** @typedef {import('./generated/openapi.js').operations} operations */
/**
 * @template {keyof import('./generated/openapi.js').operations} Id
 * @typedef {import('./types.js').SuccessBody<Id>} SuccessBody
 */
/**
 * @template {keyof import('./generated/openapi.js').operations} Id
 * @typedef {import('./types.js').RequestBody<Id>} RequestBody
 */
