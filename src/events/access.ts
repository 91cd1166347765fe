/**
 * Who manages the deployment's webhooks — its endpoints and its delivery log (docs/contract.md §7,
 * §11): a system administrator as themselves, or a service token (decision 283).
 */
import { AppError } from '../ground/errors.ts';
import type { Principal } from '../ground/principal.ts';
import { requireSystemAdmin } from '../identity/authorize.ts';
import { serviceTokenRoute } from '../identity/service-token-rights.ts';

/**
 * The caller of `method route` if it may manage the deployment's webhooks. A service token reaches
 * such a route only where its one list (identity/service-token-rights.ts) names it at the
 * `deployment` scope, and there it acts in no organization (`organizationId` '', ground/principal.ts):
 * that is the case recognised here, so no credential kind is compared. Everyone else must be a
 * system administrator acting as themselves (a session or PAT, not impersonating, not entered).
 */
export function requireWebhookOperator(principal: Principal | null, method: string, route: string | undefined): Principal {
  if (!principal) throw new AppError('UNAUTHENTICATED');
  if (principal.organizationId === '' && serviceTokenRoute(method, route)?.scope === 'deployment') return principal;
  return requireSystemAdmin(principal);
}
