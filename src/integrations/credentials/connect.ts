/**
 * Connecting with credentials a person enters (docs/contract.md §5c: api_key, basic,
 * client_credentials), for any consumer — the REST route, the hosted connect page: the fields
 * checked by name, the definition's verification (its call, or a first mint) with no
 * transaction open, then the same store as a finished OAuth flow (connect/store.ts). A
 * rejection is judged by policy.ts (point `verify`: 400 `INVALID_CREDENTIALS`) and nothing is
 * stored. An entered value never reaches an error, a log line or metadata unless the
 * definition names it as a non-secret metadata field.
 */
import type { Logger } from 'pino';
import type { AuditActor } from '../../ground/work.ts';
import type { EndUser } from '../../db/schema.ts';
import { AppError, type ErrorDetail } from '../../ground/errors.ts';
import type { UnitOfWork } from '../../ground/work.ts';
import type { Services } from '../../services.ts';
import type { OpenWork } from '../connect/callback.ts';
import { finishConnect } from '../connect/finish.ts';
import type { ConnectedResult } from '../connect/store.ts';
import { findIntegrationByProvider } from '../integrations.ts';
import type { ConfiguredProvider } from '../providers/registry.ts';
import { type Metadata, type MintedToken, type ProviderAccount, ProviderError } from '../providers/types.ts';
import { HOST_LABEL } from '../providers/url-template.ts';
import { OutboundRefused } from '../../lib/outbound.ts';
import type { ConnectSession } from '../sessions/sessions.ts';
import { tokenSetOf } from '../tokens/mint.ts';
import { judged } from '../tokens/policy.ts';

/** An entered value: what fits a form field, without control characters. */
const VALUE = /^[^\x00-\x1f\x7f]{1,4096}$/;
/** A value kept in metadata and filled into URLs (an account id, a region): no slash, no space. */
const METADATA_VALUE = /^[A-Za-z0-9._~:@-]{1,256}$/;

/** Credentials a person entered, for a provider whose mode takes them. */
export interface CredentialsInput {
  organizationId: string;
  provider: ConfiguredProvider;
  /** As posted: checked here by name, never echoed. */
  credentials: Record<string, unknown>;
  /** The connect session they came through, if any; else `endUser` (absent: the organization's own). */
  session?: ConnectSession;
  endUser?: EndUser | null;
  actor: AuditActor;
  log: Pick<Logger, 'warn'>;
}

/** 400 for a provider whose integrations are not connected by entered credentials. */
export function requireEnteredMode(provider: ConfiguredProvider): void {
  if (provider.traits.connects !== 'entered') {
    throw new AppError('INVALID_INPUT', { details: [{ path: 'provider', message: `${provider.displayName} connects through its sign-in flow, not entered credentials` }] });
  }
}

/**
 * The entered fields as the definition names them: every field present, nothing else, each a
 * string of at most 4096 printable characters (metadata fields: no slash or space). Else 400
 * `INVALID_INPUT` naming the fields — never a value.
 */
export function checkFields(provider: ConfiguredProvider, raw: Record<string, unknown>): Record<string, string> {
  const { metadataFields } = provider.definition;
  const credentialFields = provider.traits.fields;
  const known = new Set(credentialFields.map((field) => field.name));
  const details: ErrorDetail[] = [];
  for (const name of Object.keys(raw)) if (!known.has(name)) details.push({ path: `credentials.${name.slice(0, 64)}`, message: 'is not a field of this provider' });
  const fields: Record<string, string> = {};
  for (const field of credentialFields) {
    const value = raw[field.name];
    const trimmed = typeof value === 'string' ? value.trim() : value;
    if (trimmed === undefined || trimmed === '') details.push({ path: `credentials.${field.name}`, message: 'is required' });
    else if (typeof trimmed !== 'string' || !VALUE.test(trimmed)) details.push({ path: `credentials.${field.name}`, message: 'must be text of at most 4096 characters' });
    else if (provider.hostFields.has(field.name)) {
      // §5c: it fills a host label under a fixed suffix — as entered, lower-cased, with no decoding or IDNA mapping.
      const label = trimmed.toLowerCase();
      if (HOST_LABEL.test(label)) fields[field.name] = label;
      else details.push({ path: `credentials.${field.name}`, message: 'must be a host name label: letters, digits and hyphens (at most 63, no hyphen first or last)' });
    } else if (metadataFields.includes(field.name) && (!METADATA_VALUE.test(trimmed) || /^\.+$/.test(trimmed))) {
      details.push({ path: `credentials.${field.name}`, message: 'must be letters, digits and . _ ~ : @ - only (not dots alone)' });
    } else fields[field.name] = trimmed;
  }
  if (details.length > 0) throw new AppError('INVALID_INPUT', { details });
  return fields;
}

/** Entered credentials the provider accepted: what is stored once a unit of work is open. */
export interface VerifiedCredentials {
  input: CredentialsInput;
  fields: Record<string, string>;
  account: ProviderAccount;
  minted?: MintedToken;
  metadata: Metadata;
}

/**
 * Checks the fields and verifies them with the provider (its call, or a first mint), with no
 * transaction open. Failures: 400 `INVALID_INPUT` (fields), or a JudgedFailure at `verify`
 * (rejected → `INVALID_CREDENTIALS`, unreachable → `PROVIDER_ERROR`…), logged without a value.
 */
export async function verifyCredentials(services: Services, input: CredentialsInput): Promise<VerifiedCredentials> {
  const { provider, organizationId, session } = input;
  requireEnteredMode(provider);
  const fields = checkFields(provider, input.credentials);
  const entered: Metadata = Object.fromEntries(provider.definition.metadataFields.map((name) => [name, fields[name]]));
  try {
    const verify = provider.definition.verify;
    if (!verify) throw new Error(`provider ${provider.id} has no verification`);
    const { account, minted } = await verify(provider.contextFor(entered), fields);
    return { input, fields, account, ...(minted ? { minted } : {}), metadata: { ...minted?.metadata, ...account.metadata, ...entered } };
  } catch (error) {
    // The request chose this URL: an address the outbound guard refuses is the input's fault (docs/contract.md §1).
    if (error instanceof ProviderError && error.cause instanceof OutboundRefused) {
      input.log.warn({ provider: provider.id, stage: 'verify', outbound: 'refused', addressClass: error.cause.addressClass }, 'the outbound guard refused the verification call');
      const named = [...provider.hostFields];
      throw new AppError('INVALID_INPUT', {
        details: (named.length > 0 ? named : ['provider']).map((name) => ({ path: name === 'provider' ? name : `credentials.${name}`, message: 'leads to an address Tessera does not reach' })),
      });
    }
    const failed = judged(error, 'verify');
    input.log.warn({ provider: provider.id, stage: 'verify', kind: failed.kind, providerCode: failed.failure.providerCode }, 'entered credentials failed verification');
    // A configuration fault concerns the integration being replaced, if there is one; a rejection changes nothing stored.
    const endUserId = session ? (session.endUser?.id ?? null) : (input.endUser?.id ?? null);
    const existing = failed.verdict.transition ? await findIntegrationByProvider(services.db, organizationId, provider.id, endUserId) : null;
    await services.lifecycle.settle({ organizationId, provider: provider.id, id: existing?.id ?? null }, failed, input.actor);
    throw failed;
  }
}

/**
 * Stores verified credentials in `work`'s transaction as a finished OAuth flow is stored
 * (connect/finish.ts): the integration created, or replaced keeping its id; a connect session
 * completed in the same transaction (`SessionUnusable` when it ended meanwhile: the caller rolls back).
 */
export async function storeCredentials(services: Services, work: UnitOfWork, verified: VerifiedCredentials): Promise<ConnectedResult> {
  const { input, fields, account, minted, metadata } = verified;
  const { organizationId, provider, session } = input;
  return finishConnect(services, work, {
    organizationId,
    provider,
    tokens: minted ? tokenSetOf(minted) : null,
    credentials: fields,
    account,
    metadata,
    ...(session ? { session } : { endUser: input.endUser ?? null }),
  });
}

/** Verifies entered credentials, then stores them in the unit of work `openWork` opens (only after the provider answered). */
export async function connectWithCredentials(services: Services, input: CredentialsInput, openWork: OpenWork): Promise<ConnectedResult> {
  const verified = await verifyCredentials(services, input);
  return storeCredentials(services, await openWork(input.actor), verified);
}
