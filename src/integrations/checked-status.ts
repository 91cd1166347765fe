/**
 * "Status, checked live when stale" (docs/contract.md §5, §9's `integration_status`): the one use
 * case behind the status route, the MCP tool and any later consumer — each only translates its
 * input in and the status object out (decision 271).
 */
import { AppError } from '../ground/errors.ts';
import type { Work } from '../ground/work.ts';
import { requireRole } from '../identity/authorize.ts';
import { capabilityAccess } from '../identity/capabilities.ts';
import { PROVIDER_ID } from '../lib/ids.ts';
import type { Services } from '../services.ts';
import { findIntegrationByProvider } from './integrations.ts';
import { type StatusObject, statusObject } from './status.ts';
import { withSecrets } from './tokens/loaded.ts';

/** Whose status: a provider id as the caller named it, and the end user asked for (null: the organization's own). */
export interface StatusInput {
  provider: string;
  endUserId: string | null;
}

/**
 * The status of the caller's integration with `input.provider`: the stored one while its last
 * validation is younger than OAUTH_STATUS_MAX_AGE (or it is `invalid` already, which only a
 * reconnect mends), else validated live first — the provider asked, the transition its answer
 * leads to applied. It reports: a provider failure is the status it leaves, never an error.
 *
 * The caller must be a member of its organization (a capability narrows it further: its
 * providers, its end user); a malformed provider id names no integration (404, decision 41).
 * A live check is not sent while the account's provider budget is known exhausted (§5f, `check`):
 * the stored status is the answer then.
 * `work.db` must be the database, never an open transaction: the live check calls the provider
 * and commits its transitions on their own.
 */
export async function checkedStatus(services: Pick<Services, 'providers' | 'apps' | 'config' | 'lifecycle'>, work: Work, input: StatusInput): Promise<StatusObject> {
  const caller = work.actor.principal;
  const principal = requireRole(caller, caller?.organizationId ?? '', 'member');
  if (!PROVIDER_ID.test(input.provider)) throw new AppError('INTEGRATION_NOT_FOUND');
  const endUserId = principal.capability ? capabilityAccess(principal.capability, input.provider, false, input.endUserId) : input.endUserId;
  const row = await findIntegrationByProvider(work.db, principal.organizationId, input.provider, endUserId);
  const configured = row ? services.providers.get(row.provider) : undefined;
  if (!row || !configured) throw new AppError('INTEGRATION_NOT_FOUND');
  const age = Date.now() - (row.lastValidatedAt?.getTime() ?? 0);
  // Secrets are read and the provider asked only when the last validation is too old.
  if (row.status === 'invalid' || age <= services.config.oauth.statusMaxAge * 1000) return statusObject(row, configured.displayName);
  const { loaded } = await services.lifecycle.check(await withSecrets({ db: work.db, providers: services.providers, apps: services.apps, config: services.config }, row), work.actor);
  return statusObject(loaded.row, loaded.provider.displayName);
}
