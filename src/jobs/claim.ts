/**
 * Deployment-wide background jobs, run once in total however many instances run: an instance
 * runs a job only when one statement moved the job's `next_run_at` ahead for it.
 */
import { type Db, queryRows, sql } from '../db/client.ts';

/**
 * Claims the job `name` if it is due (or has never run), scheduling its next run
 * `everySeconds` ahead in the same statement: true for exactly one of the instances asking
 * while it is due.
 */
export async function claimJob(db: Db, name: string, everySeconds: number): Promise<boolean> {
  const rows = await queryRows(
    db,
    sql`INSERT INTO background_jobs (name, next_run_at, last_run_at)
        VALUES (${name}, now() + ${everySeconds}::int * interval '1 second', now())
        ON CONFLICT (name) DO UPDATE SET next_run_at = EXCLUDED.next_run_at, last_run_at = now()
        WHERE background_jobs.next_run_at <= now()
        RETURNING 1`,
  );
  return rows.length === 1;
}
