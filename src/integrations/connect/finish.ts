/**
 * Finishing a connect, whatever started it — a provider's callback (connect/callback.ts) or
 * credentials a person entered (credentials/connect.ts), through the API or the hosted page's
 * form: one function, so that a connect session ends the same way from every door (decision 273).
 */
import { AppError } from '../../ground/errors.ts';
import type { UnitOfWork } from '../../ground/work.ts';
import type { Services } from '../../services.ts';
import { type ConnectSession, completeSession, findSession, grantorLost, sessionStatus } from '../sessions/sessions.ts';
import { type ConnectedResult, type Connection, storeConnection } from './store.ts';

/**
 * A connect session that can no longer connect anything (docs/contract.md §5a): 403 `FORBIDDEN`
 * when the credential that minted it lost the authority to mint it, 409 `CONFLICT` when it was
 * used, revoked or expired. Where a flow meets one it records a failed attempt, as for any
 * other failure; the hosted page then shows the session's own page.
 */
export class SessionUnusable extends AppError {}

/** Why `session` cannot be used now, or null while it can (pending, unexpired, its grantor still able to mint it). */
export function sessionUnusable(session: ConnectSession): SessionUnusable | null {
  if (grantorLost(session)) return new SessionUnusable('FORBIDDEN', { message: 'The credential that created this connect session can no longer create it' });
  if (sessionStatus(session) !== 'pending') return new SessionUnusable('CONFLICT', { message: 'This connect session has already been used or has ended' });
  return null;
}

/**
 * Finishes a connect once the provider has answered: the connection stored in `work`'s
 * transaction (connect/store.ts) and, for a connect session's, the session completed in that
 * same transaction. A session connects one integration — of two flows it started, the first to
 * finish wins — and none once its minting credential lost the authority to mint it: checked again
 * here, since the flow spent time at the provider. Then `SessionUnusable` is thrown and the
 * caller rolls `work` back, so nothing is stored.
 */
export async function finishConnect(services: Pick<Services, 'config' | 'revocations' | 'logger'>, work: UnitOfWork, connection: Connection): Promise<ConnectedResult> {
  const result = await storeConnection(services, work, connection);
  const { session } = connection;
  if (session && !(await completeSession(work.db, connection.organizationId, session.id, result.integration.id))) {
    const now = await findSession(work.db, connection.organizationId, session.id);
    throw sessionUnusable(now) ?? new SessionUnusable('CONFLICT', { message: 'This connect session has already been used or has ended' });
  }
  return result;
}
