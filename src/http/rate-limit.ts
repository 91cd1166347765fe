import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from './errors.ts';

type Limit = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

export interface RateLimiter {
  /** Step 9: per credential when authenticated, else per client IP. */
  check: Limit;
  /** Login and registration: per e-mail, on top of per IP. */
  checkEmail: Limit;
}

const noop: Limit = async () => {};

/**
 * @fastify/rate-limit's handlers, invoked by the pipeline at step 9 rather than as
 * their own hook, so the limit applies after authentication and keys by credential.
 * The plugin runs once per registration and request, so each key has its own. Counters are per instance (in memory).
 */
export async function createRateLimiter(app: FastifyInstance, options: { max: number; windowSeconds: number }): Promise<RateLimiter> {
  if (options.max === 0) return { check: noop, checkEmail: noop };
  const common = {
    max: options.max,
    timeWindow: options.windowSeconds * 1000,
    errorResponseBuilder: (_request: FastifyRequest, context: { ttl: number }) =>
      new AppError('RATE_LIMITED', { headers: { 'retry-after': String(Math.max(1, Math.ceil(context.ttl / 1000))) } }),
  };
  // Each limiter lives in a context of its own: a child would inherit its parent's
  // `rateLimit` decorator, and with it the parent's once-per-request guard.
  const limiter = async (keyGenerator: (request: FastifyRequest) => string): Promise<Limit> => {
    let limit: Limit = noop;
    await app.register(async (child) => {
      await child.register(rateLimit, { global: false });
      limit = child.rateLimit({ ...common, keyGenerator }) as Limit;
    });
    return limit;
  };
  const byCredential = await limiter((request) => {
    const key = request.ctx?.credentialKey;
    return key ? `cred:${key}` : `ip:${request.ip}`;
  });
  const byEmail = await limiter((request) => {
    const email = (request.body as { email?: unknown } | undefined)?.email;
    return `email:${typeof email === 'string' ? email.trim().toLowerCase() : ''}`;
  });
  return { check: byCredential, checkEmail: byEmail };
}
