import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { remember } from '../lib/bounded.ts';
import { AppError } from '../ground/errors.ts';

type Limit = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

export interface RateLimiter {
  /**
   * Step 9: per principal (a user, all their sessions and PATs; or an API token) when
   * authenticated, else per client IP — a service token with its own, larger budget; and per
   * organization, every credential acting in it together (service tokens included), so that
   * more tokens never buy more capacity.
   */
  check: Limit;
  /** Login and registration: per `email` (normalized: `normalizeEmail`) and client IP together, on top of per IP. */
  checkEmail: (request: FastifyRequest, reply: FastifyReply, email: string) => Promise<void>;
  /** Failed authentications per client IP (decision 78). */
  failures: FailedAuthentications;
  /** A provider's signed event deliveries, all of one app's together (docs/contract.md §5b, §5e): ten times RATE_LIMIT_MAX each. */
  checkProviderEvents: (request: FastifyRequest, reply: FastifyReply, appId: string) => Promise<void>;
}

const noop: Limit = async () => {};

/**
 * How a `credentialKey` in the service budget starts: it counts against RATE_LIMIT_SERVICE_MAX
 * instead of RATE_LIMIT_MAX. Which credentials have it is their kind's row (identity/credential-kinds.ts).
 */
export const SERVICE_BUDGET_KEY = 'service:';

/**
 * @fastify/rate-limit's handlers, invoked by the pipeline at step 9 rather than as
 * their own hook, so the limit applies after authentication and keys by credential.
 * The plugin runs once per registration and request, so each key has its own. Counters are per instance (in memory).
 */
export async function createRateLimiter(
  app: FastifyInstance,
  options: { max: number; windowSeconds: number; organizationMax: number; serviceMax?: number },
): Promise<RateLimiter> {
  const failures = new FailedAuthentications(options);
  if (options.max === 0) return { check: noop, checkEmail: noop, failures, checkProviderEvents: noop };
  const common = {
    timeWindow: options.windowSeconds * 1000,
    errorResponseBuilder: (_request: FastifyRequest, context: { ttl: number }) =>
      new AppError('RATE_LIMITED', { headers: { 'retry-after': String(Math.max(1, Math.ceil(context.ttl / 1000))) } }),
  };
  // Each limiter lives in a context of its own: a child would inherit its parent's
  // `rateLimit` decorator, and with it the parent's once-per-request guard.
  const limiter = async (keyGenerator: (request: FastifyRequest) => string, max = options.max): Promise<Limit> => {
    if (max === 0) return noop;
    let limit: Limit = noop;
    await app.register(async (child) => {
      await child.register(rateLimit, { global: false });
      limit = child.rateLimit({ ...common, max, keyGenerator }) as Limit;
    });
    return limit;
  };
  const byCredential = await limiter((request) => {
    const key = request.ctx?.credentialKey;
    return key ? `cred:${key}` : `ip:${request.ip}`;
  });
  const byServiceToken = await limiter((request) => `cred:${request.ctx?.credentialKey ?? ''}`, options.serviceMax ?? options.max * 10);
  const byOrganization = await limiter((request) => `org:${request.ctx?.organizationKey ?? ''}`, options.organizationMax);
  const check: Limit = async (request, reply) => {
    await (request.ctx?.credentialKey?.startsWith(SERVICE_BUDGET_KEY) ? byServiceToken : byCredential)(request, reply);
    if (request.ctx?.organizationKey) await byOrganization(request, reply);
  };
  // Per e-mail *and* address: a flood of wrong passwords for one e-mail from elsewhere never
  // refuses its owner on an address of their own (docs/contract.md §4). The plugin's key
  // generator sees only the request: the handler hands the e-mail over here, typed.
  const emails = new WeakMap<FastifyRequest, string>();
  const byEmail = await limiter((request) => `email:${emails.get(request) ?? ''} ip:${request.ip}`);
  const checkEmail = (request: FastifyRequest, reply: FastifyReply, email: string) => {
    emails.set(request, email);
    return byEmail(request, reply);
  };
  // Keyed by the receiving app (the default app's id is its provider's), not the address: a provider delivers from many.
  const apps = new WeakMap<FastifyRequest, string>();
  const byApp = await limiter((request) => `provider-events:${apps.get(request) ?? ''}`, options.max * 10);
  const checkProviderEvents = (request: FastifyRequest, reply: FastifyReply, appId: string) => {
    apps.set(request, appId);
    return byApp(request, reply);
  };
  return { check, checkEmail, failures, checkProviderEvents };
}

/**
 * Failed authentications (invalid bearer values, unknown tokens, bad passwords) counted per
 * client IP in fixed windows, with the same limit as requests. Once an address is over it,
 * its further attempts are refused with 429 before any credential lookup or password hash:
 * guessing costs the guesser, not the database. In memory, per instance, like the limiter.
 */
export class FailedAuthentications {
  private readonly max: number;
  private readonly windowMs: number;
  private readonly counts = new Map<string, { count: number; resetAt: number }>();

  constructor(options: { max: number; windowSeconds: number }) {
    this.max = options.max;
    this.windowMs = options.windowSeconds * 1000;
  }

  /** Throws 429 when `ip` is over its limit of failures in this window. */
  assertAllowed(ip: string, now = Date.now()): void {
    if (this.max === 0) return;
    const entry = this.counts.get(ip);
    if (entry && now < entry.resetAt && entry.count >= this.max) {
      throw new AppError('RATE_LIMITED', {
        message: 'Too many failed sign-in attempts from this address',
        headers: { 'retry-after': String(Math.max(1, Math.ceil((entry.resetAt - now) / 1000))) },
      });
    }
  }

  /** Counts one failure against `ip`. */
  record(ip: string, now = Date.now()): void {
    if (this.max === 0) return;
    const entry = this.counts.get(ip);
    if (entry && now < entry.resetAt) {
      entry.count++;
      return;
    }
    // Bounded: windows are set in the order they start, so the oldest entry — dropped when the
    // map is full — is the one that ends first; a flood of addresses costs no sweep.
    remember(this.counts, ip, { count: 1, resetAt: now + this.windowMs }, 100_000);
  }
}
