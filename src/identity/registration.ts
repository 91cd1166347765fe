/**
 * Who may register (docs/contract.md §5d): everyone (`open`), only an address with a pending
 * invitation (`invite`), or nobody (`closed`, production's default: a deployment must be public
 * for its hosted connect pages, and that must not open sign-up to the internet).
 */
import { type Db, queryRows, sql } from '../db/client.ts';
import { AppError } from '../ground/errors.ts';

export type RegistrationMode = 'open' | 'invite' | 'closed';

/**
 * Throws 403 unless `mode` lets `normalizedEmail` register. The refusal reads the same whether
 * or not the address already has an account, so it tells nobody who is registered.
 */
export async function assertMayRegister(db: Db, mode: RegistrationMode, normalizedEmail: string): Promise<void> {
  if (mode === 'open') return;
  if (mode === 'invite') {
    const [invited] = await queryRows<{ found: number }>(
      db,
      sql`SELECT 1 AS found FROM invitations WHERE email_normalized = ${normalizedEmail} AND status = 'pending' AND expires_at > now() LIMIT 1`,
    );
    if (invited) return;
  }
  throw new AppError('FORBIDDEN', {
    message: mode === 'invite' ? 'Registration is closed: only an invited e-mail address may register' : 'Registration is closed on this deployment',
  });
}
