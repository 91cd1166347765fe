import { eq } from 'drizzle-orm';
import { ConfigError } from '../config/load.ts';
import { users } from '../db/schema.ts';
import { systemUnitOfWork } from '../ground/work.ts';
import { createOrganization } from '../organizations/organizations.ts';
import type { Services } from '../services.ts';
import { findUserByEmail, insertUser, setDefaultOrganization } from './users.ts';

/** What start-up did about BOOTSTRAP_ADMIN_*: made the user, made an existing user a system administrator, found them one, or nothing is set. */
export type BootstrapOutcome = 'created' | 'promoted' | 'present' | 'unset';

/** Ensures the configured system administrator exists (BOOTSTRAP_ADMIN_EMAIL/PASSWORD). */
export async function ensureBootstrapAdmin(services: Services): Promise<BootstrapOutcome> {
  const admin = services.config.auth.bootstrapAdmin;
  if (!admin) return 'unset';
  const existing = await findUserByEmail(services.db, admin.email);
  if (existing) {
    if (existing.systemAdmin) return 'present';
    // Registration is public: anyone could have registered this e-mail first. Promote only its proven owner.
    if (!(await services.passwords.verify(admin.password, existing.passwordHash))) {
      throw new ConfigError([
        'BOOTSTRAP_ADMIN_EMAIL (auth.bootstrapAdmin.email): a user with this e-mail already exists and BOOTSTRAP_ADMIN_PASSWORD is not its password; refusing to make it a system administrator. Use another e-mail, or that user\'s password.',
      ]);
    }
    await services.db.update(users).set({ systemAdmin: true }).where(eq(users.id, existing.id));
    return 'promoted';
  }
  const passwordHash = await services.passwords.hash(admin.password);
  // Its event is delivered once the transaction has committed (the outbox wakes the dispatcher).
  await systemUnitOfWork(services.db, services.outbox, { principal: null, requestId: null }, async (work) => {
    const user = await insertUser(work.db, { email: admin.email, name: 'Administrator', passwordHash, systemAdmin: true });
    const organization = await createOrganization({ ...work, actor: { ...work.actor, userId: user.id } }, { name: 'Administration', ownerUserId: user.id });
    await setDefaultOrganization(work.db, user.id, organization.id);
  });
  return 'created';
}
