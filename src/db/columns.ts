import { timestamp } from 'drizzle-orm/pg-core';

/** A timestamp with time zone, read as a Date. */
export const time = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });
export const createdAt = () => time('created_at').notNull().defaultNow();
export const updatedAt = () => time('updated_at').notNull().defaultNow();
