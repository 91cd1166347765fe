import type { Database } from '../db/client.ts';
import type { TypedFastify } from './typed.ts';
import { HealthResponse } from './schemas.ts';

/** A readiness condition: returns a short reason while not ready, or null. */
export type ReadinessCheck = () => Promise<string | null>;

export interface Readiness {
  /** Why start-up has not finished (e.g. "migrations are running"), or null once every step has. */
  pending: string | null;
  checks: ReadinessCheck[];
}

/** `GET /livez` and `GET /readyz` (docs/contract.md §1), unversioned and unauthenticated. */
export function healthRoutes(app: TypedFastify, database: Database, readiness: Readiness): void {
  const schema = (summary: string) => ({
    summary,
    tags: ['health'],
    response: { 200: HealthResponse, 503: HealthResponse },
  });

  app.get('/livez', { config: { auth: 'unauthenticated', errors: [] }, schema: schema('Process is up') }, async () => ({ status: 'ok' }));

  app.get('/readyz', { config: { auth: 'unauthenticated', errors: [] }, schema: schema('Ready to serve traffic') }, async (_request, reply) => {
    const reason = await notReadyReason(database, readiness);
    if (reason) {
      reply.code(503);
      return { status: 'unavailable', reason };
    }
    return { status: 'ok' };
  });
}

async function notReadyReason(database: Database, readiness: Readiness): Promise<string | null> {
  if (readiness.pending) return readiness.pending;
  try {
    await withTimeout(database.ping(), 2000);
  } catch {
    return 'database unreachable';
  }
  for (const check of readiness.checks) {
    // A check that fails (the database went away between the ping and the check) is "not ready", never a 500.
    const reason = await withTimeout(check(), 2000).catch(() => 'readiness check failed');
    if (reason) return reason;
  }
  return null;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
