import { and, eq } from 'drizzle-orm';
import type { AuditActor } from '../../audit/audit.ts';
import { integrations } from '../../db/schema.ts';
import { AppError } from '../../http/errors.ts';
import type { Services } from '../../services.ts';
import type { IntegrationRow } from '../integrations.ts';
import { ProviderError, type ProviderFailureKind, type TokenSet } from '../providers/types.ts';
import { applyTransition, type Transition } from '../status.ts';
import { tokenRequest } from '../token-endpoint.ts';
import { FastReads } from './fast-read.ts';
import { type LoadedIntegration, loadById, withSecrets } from './loaded.ts';
import { expiresWithin, FAILURE_POLICY, failureAnswer, refreshDue } from './policy.ts';
import { SingleFlight } from './refresh.ts';
import { storeRotated } from './store-rotated.ts';

/** How a live validation ended: valid, or the provider's failure (its kind, and the error itself). */
export type ValidationOutcome = { kind: 'valid' } | { kind: ProviderFailureKind; failure: ProviderError };

/**
 * Keeps tokens alive: refresh (single-flight, refresh.ts), validation with the 401 retry
 * rules, and the status transitions both lead to (policy.ts says which). Never holds a
 * transaction across a provider call. The hot read path is `reads` (fast-read.ts).
 */
export class TokenLifecycle {
  readonly reads: FastReads;
  private readonly services: Services;
  private readonly singleFlight: SingleFlight;

  constructor(services: Services) {
    this.services = services;
    this.reads = new FastReads(services);
    this.singleFlight = new SingleFlight({
      db: services.db,
      leaseMs: services.config.oauth.providerTimeout * 2000 + 5000,
      withSecrets: (row) => withSecrets(services, row),
    });
  }

  /** Identifies this process in refresh leases. */
  get instanceId(): string {
    return this.singleFlight.instanceId;
  }

  /**
   * A token to hand out: refreshed first when it expires within 5 minutes and a refresh
   * token exists. If that refresh cannot reach the provider, a token still valid is
   * served (decision 38). An `invalid` (or expired, unrefreshable) integration is a 409.
   */
  async usable(loaded: LoadedIntegration, actor: AuditActor): Promise<LoadedIntegration> {
    if (loaded.row.status === 'invalid') throw new AppError('TOKEN_VALIDATION_FAILED');
    const expired = () => expiresWithin(loaded.row.tokenExpiresAt, 0);
    if (!refreshDue(loaded.row)) {
      if (!expired()) return loaded;
      throw new AppError('TOKEN_VALIDATION_FAILED', { message: 'The token has expired; reconnect the integration' });
    }
    try {
      return await this.refresh(loaded.row, actor);
    } catch (error) {
      const stillValid = !expired();
      if (stillValid && error instanceof AppError && (error.code === 'PROVIDER_ERROR' || error.code === 'PROVIDER_RATE_LIMITED')) return loaded;
      throw error;
    }
  }

  /**
   * Refreshes the integration `seen` (as the caller read it), once for all concurrent callers
   * in this process and across processes; its secrets are read under the lease.
   */
  refresh(seen: IntegrationRow, actor: AuditActor): Promise<LoadedIntegration> {
    return this.singleFlight.run(seen, (latest) => this.refreshHoldingLease(latest, actor));
  }

  private async refreshHoldingLease(loaded: LoadedIntegration, actor: AuditActor): Promise<LoadedIntegration> {
    const refreshToken = loaded.secrets.refresh_token;
    if (!refreshToken) {
      // Nothing to refresh with: re-validate the current token and hand it back.
      const { loaded: after, outcome } = await this.validate(loaded, actor, { recover: false });
      if (outcome.kind !== 'valid' && FAILURE_POLICY.validate[outcome.kind].answer !== 'passthrough') throw failureAnswer(outcome.failure, 'validate');
      return after;
    }
    let tokens: TokenSet;
    try {
      tokens = await tokenRequest(loaded.provider, { grant_type: 'refresh_token', refresh_token: refreshToken });
      this.services.metrics?.refreshOutcome(loaded.provider.id, 'ok');
    } catch (error) {
      this.services.metrics?.refreshOutcome(loaded.provider.id, error instanceof ProviderError ? error.kind : 'error');
      if (error instanceof ProviderError && error.kind === 'revoked') {
        // invalid_grant is not yet proof: if the stored refresh token changed, another refresh won (decision 36).
        const latest = await loadById(this.services, loaded.row.organizationId, loaded.row.id);
        if (latest.secrets.refresh_token !== refreshToken) return latest;
        await this.apply(latest, FAILURE_POLICY.refresh.revoked.transition, actor);
      }
      throw failureAnswer(error, 'refresh');
    }
    // The provider has already retired the old refresh token: store the new one before anything else.
    const stored = await storeRotated(this.services, loaded, tokens, actor);
    if (!stored) {
      this.services.logger.error({ integrationId: loaded.row.id, provider: loaded.row.provider }, 'refreshed token lost a compare-and-set; keeping the stored one');
      return loadById(this.services, loaded.row.organizationId, loaded.row.id);
    }
    // Only a rejection keeps the new token from being served: a provider that cannot be reached or
    // rate-limits its validation leaves the status to say so (decision 35).
    const { loaded: validated, outcome } = await this.validate(stored, actor, { recover: false });
    if (outcome.kind === 'revoked') throw failureAnswer(outcome.failure, 'validate');
    return validated;
  }

  /**
   * Validates the current token live and persists what follows (policy.ts, stage
   * `validate`). A rejection first goes through the 401 rules (re-read; else refresh; retry
   * once) unless `recover` is false. A rate limit leaves the status alone and reschedules.
   */
  async validate(loaded: LoadedIntegration, actor: AuditActor, options: { recover?: boolean } = {}): Promise<{ loaded: LoadedIntegration; outcome: ValidationOutcome }> {
    const token = loaded.secrets.access_token;
    if (!token) throw new AppError('INTERNAL', { message: 'integration has no access token' });
    const nextValidationAt = new Date(Date.now() + this.services.config.oauth.validationInterval * 1000);
    try {
      await loaded.provider.definition.validate(loaded.provider.contextFor(loaded.row.metadata), token);
    } catch (error) {
      if (!(error instanceof ProviderError)) throw error;
      this.services.metrics?.validationOutcome(loaded.provider.id, error.kind);
      return this.validationFailed(loaded, error, actor, { nextValidationAt, recover: options.recover !== false, usedToken: token });
    }
    this.services.metrics?.validationOutcome(loaded.provider.id, 'valid');
    const row = await this.apply(loaded, { status: 'connected', lastError: null, tokenValid: true, validated: true, nextValidationAt }, actor);
    return { loaded: { ...loaded, row }, outcome: { kind: 'valid' } };
  }

  private async validationFailed(
    loaded: LoadedIntegration,
    failure: ProviderError,
    actor: AuditActor,
    options: { nextValidationAt: Date; recover: boolean; usedToken: string },
  ): Promise<{ loaded: LoadedIntegration; outcome: ValidationOutcome }> {
    if (failure.kind === 'revoked' && options.recover) {
      const recovered = await this.recover(loaded, options.usedToken, actor);
      if (recovered) return this.validate(recovered, actor, { recover: false });
    }
    const outcome: ValidationOutcome = { kind: failure.kind, failure };
    if (failure.kind === 'rateLimited') {
      // Not a verdict on the token: come back after the provider's Retry-After.
      await this.services.db
        .update(integrations)
        .set({ nextValidationAt: new Date(Date.now() + (failure.retryAfter ?? 60) * 1000) })
        .where(and(eq(integrations.organizationId, loaded.row.organizationId), eq(integrations.id, loaded.row.id)));
      return { loaded, outcome };
    }
    const transition = FAILURE_POLICY.validate[failure.kind].transition;
    // A validation that reached the provider counts as one; an unreachable provider does not.
    const row = await this.apply(loaded, transition && { ...transition, validated: failure.kind !== 'transient', nextValidationAt: options.nextValidationAt }, actor);
    return { loaded: { ...loaded, row }, outcome };
  }

  /**
   * After the provider rejected `usedToken`: a 401 is not yet proof of revocation (a rotation
   * kills the old token at once). Returns a newer token to retry with — the stored one if it
   * changed meanwhile, else a refresh (joining one in flight) — or null (decision 37).
   */
  async recover(loaded: LoadedIntegration, usedToken: string, actor: AuditActor): Promise<LoadedIntegration | null> {
    const latest = await loadById(this.services, loaded.row.organizationId, loaded.row.id);
    if (latest.secrets.access_token && latest.secrets.access_token !== usedToken) return latest;
    if (!latest.secrets.refresh_token) return null;
    try {
      return await this.refresh(latest.row, actor);
    } catch (error) {
      if (error instanceof AppError && error.code === 'TOKEN_VALIDATION_FAILED') return null;
      throw error;
    }
  }

  /**
   * Persists a transition of the failure policy in its own short transaction (with its audit
   * row and event, only when the status changes); returns the row after it (the one given
   * when there is nothing to apply, or the row is gone).
   */
  async apply(loaded: LoadedIntegration, transition: Transition | null, actor: AuditActor): Promise<IntegrationRow> {
    if (!transition) return loaded.row;
    const deps = { db: this.services.db, outbox: this.services.outbox, actor, logger: this.services.logger };
    return (await applyTransition(deps, loaded.row.organizationId, loaded.row.id, transition)) ?? loaded.row;
  }
}
