import { eq } from 'drizzle-orm';
import { newId as ulid } from '../lib/ids.ts';
import type { Db } from '../db/client.ts';
import { users } from '../db/schema.ts';
import { AppError } from '../ground/errors.ts';
import { normalizeEmail } from '../organizations/organizations.ts';

export type UserRow = typeof users.$inferSelect;

export interface PublicUser {
  id: string;
  email: string;
  name: string;
}

export function publicUser(user: Pick<UserRow, 'id' | 'email' | 'name'>): PublicUser {
  return { id: user.id, email: user.email, name: user.name };
}

export async function findUserByEmail(db: Db, email: string): Promise<UserRow | null> {
  const [user] = await db.select().from(users).where(eq(users.emailNormalized, normalizeEmail(email)));
  return user ?? null;
}

export async function findUserById(db: Db, id: string): Promise<UserRow | null> {
  const [user] = await db.select().from(users).where(eq(users.id, id));
  return user ?? null;
}

/** Inserts a user; an e-mail already registered (in any letter case) is a 409. */
export async function insertUser(
  db: Db,
  input: { email: string; name: string; passwordHash: string; systemAdmin?: boolean },
): Promise<UserRow> {
  const rows = await db
    .insert(users)
    .values({
      id: ulid(),
      email: input.email.trim(),
      emailNormalized: normalizeEmail(input.email),
      name: input.name,
      passwordHash: input.passwordHash,
      systemAdmin: input.systemAdmin ?? false,
    })
    .onConflictDoNothing({ target: users.emailNormalized })
    .returning();
  const [user] = rows;
  if (!user) throw new AppError('CONFLICT', { message: 'That e-mail is already registered' });
  return user;
}

export async function setDefaultOrganization(db: Db, userId: string, organizationId: string): Promise<void> {
  await db.update(users).set({ defaultOrganizationId: organizationId, updatedAt: new Date() }).where(eq(users.id, userId));
}
