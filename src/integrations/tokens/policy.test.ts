import { describe, expect, it } from 'vitest';
import { AppError } from '../../ground/errors.ts';
import type { IntegrationRow } from '../integrations.ts';
import { PROVIDER_FAILURE_KINDS, ProviderError, type ProviderFailureKind } from '../providers/types.ts';
import { statusObject } from '../status.ts';
import { FAILURE_POINTS, FAILURE_POLICY, type FailurePoint, JudgedFailure, judged, toAnswer } from './policy.ts';

/**
 * What a person or a client notices for each failure at each point, written out here apart
 * from the table: the status the integration shows after (null: unchanged), the actions the
 * status object offers, the HTTP answer (or `go on`), and what the core does besides.
 */
type Expected = {
  status: 'invalid' | 'warning' | null;
  actions?: string[];
  answer: [number, string] | 'go on';
  recheck?: 'reread' | 'retry' | 'challenge';
  serveStored?: true;
  reschedule?: true;
  counts?: true;
  configFault?: true;
  backOff?: true;
};

const CONFIGURE: Expected = { status: 'warning', actions: ['configure'], answer: [502, 'PROVIDER_MISCONFIGURED'], configFault: true };
const SUSPICIOUS: Expected = { status: 'warning', actions: ['refresh', 'configure'], answer: 'go on' };

const EXPECTED: Record<FailurePoint, Record<ProviderFailureKind, Expected>> = {
  exchange: {
    revoked: { status: null, answer: [400, 'OAUTH_EXCHANGE_FAILED'] },
    misconfigured: CONFIGURE,
    forbidden: { status: null, answer: [409, 'TOKEN_VALIDATION_FAILED'] },
    rateLimited: { status: null, answer: [429, 'PROVIDER_RATE_LIMITED'] },
    transient: { status: null, answer: [502, 'PROVIDER_ERROR'] },
    challenged: { status: null, answer: [400, 'OAUTH_EXCHANGE_FAILED'] },
  },
  connect: {
    revoked: { status: null, answer: [409, 'TOKEN_VALIDATION_FAILED'] },
    misconfigured: CONFIGURE,
    forbidden: { status: null, answer: [409, 'TOKEN_VALIDATION_FAILED'] },
    rateLimited: { status: null, answer: [429, 'PROVIDER_RATE_LIMITED'] },
    transient: { status: null, answer: [502, 'PROVIDER_ERROR'] },
    challenged: { status: null, answer: [409, 'TOKEN_VALIDATION_FAILED'] },
  },
  refresh: {
    revoked: { status: 'invalid', actions: ['reconnect'], answer: [409, 'TOKEN_VALIDATION_FAILED'], recheck: 'reread' },
    misconfigured: { ...CONFIGURE, serveStored: true },
    forbidden: { status: null, answer: [409, 'TOKEN_VALIDATION_FAILED'] },
    rateLimited: { status: null, answer: [429, 'PROVIDER_RATE_LIMITED'], serveStored: true, backOff: true },
    transient: { status: null, answer: [502, 'PROVIDER_ERROR'], serveStored: true },
    challenged: { status: 'invalid', actions: ['reconnect'], answer: [409, 'TOKEN_VALIDATION_FAILED'], recheck: 'reread' },
  },
  validate: {
    revoked: { status: 'invalid', actions: ['reconnect'], answer: [409, 'TOKEN_VALIDATION_FAILED'], recheck: 'retry', counts: true },
    misconfigured: { ...CONFIGURE, serveStored: true },
    forbidden: { ...SUSPICIOUS, serveStored: true, counts: true },
    rateLimited: { status: null, answer: [429, 'PROVIDER_RATE_LIMITED'], serveStored: true, reschedule: true, backOff: true },
    transient: { status: 'warning', actions: ['refresh', 'configure'], answer: [502, 'PROVIDER_ERROR'], serveStored: true },
    challenged: { status: 'invalid', actions: ['reconnect'], answer: [409, 'TOKEN_VALIDATION_FAILED'], recheck: 'challenge', counts: true },
  },
  call: {
    revoked: { status: 'invalid', actions: ['reconnect'], answer: [409, 'TOKEN_VALIDATION_FAILED'], recheck: 'retry' },
    misconfigured: CONFIGURE,
    forbidden: SUSPICIOUS,
    rateLimited: { status: null, answer: [429, 'PROVIDER_RATE_LIMITED'] },
    transient: { status: null, answer: [502, 'PROVIDER_ERROR'] },
    challenged: { status: 'invalid', actions: ['reconnect'], answer: [409, 'TOKEN_VALIDATION_FAILED'], recheck: 'challenge' },
  },
  event: {
    revoked: { status: 'invalid', actions: ['reconnect'], answer: 'go on' },
    misconfigured: { status: null, answer: 'go on' },
    forbidden: { status: null, answer: 'go on' },
    rateLimited: { status: null, answer: 'go on' },
    transient: { status: null, answer: 'go on' },
    challenged: { status: 'invalid', actions: ['reconnect'], answer: 'go on' },
  },
  verify: {
    revoked: { status: null, answer: [400, 'INVALID_CREDENTIALS'] },
    misconfigured: CONFIGURE,
    forbidden: { status: null, answer: [400, 'INVALID_CREDENTIALS'] },
    rateLimited: { status: null, answer: [429, 'PROVIDER_RATE_LIMITED'] },
    transient: { status: null, answer: [502, 'PROVIDER_ERROR'] },
    challenged: { status: null, answer: [400, 'INVALID_CREDENTIALS'] },
  },
  // The one refresh answering a claims challenge: the stored token is refused already, never served; unreachable → warning.
  challenge: {
    revoked: { status: 'invalid', actions: ['reconnect'], answer: [409, 'TOKEN_VALIDATION_FAILED'], recheck: 'reread' },
    misconfigured: CONFIGURE,
    forbidden: { status: null, answer: [409, 'TOKEN_VALIDATION_FAILED'] },
    rateLimited: { status: null, answer: [429, 'PROVIDER_RATE_LIMITED'], backOff: true },
    transient: { status: 'warning', actions: ['refresh', 'configure'], answer: [502, 'PROVIDER_ERROR'] },
    challenged: { status: 'invalid', actions: ['reconnect'], answer: [409, 'TOKEN_VALIDATION_FAILED'], recheck: 'reread' },
  },
};

/** How each point names the way a change was learnt (`integration.status_changed`'s `source`). */
const SOURCES: Record<FailurePoint, string> = { exchange: 'connect', connect: 'connect', refresh: 'refresh', validate: 'validation', call: 'proxy', event: 'provider_event', verify: 'connect', challenge: 'refresh' };

const connectedRow = {
  provider: 'github',
  status: 'connected',
  tokenValid: true,
  tokenExpiresAt: new Date(Date.now() + 3_600_000),
  hasRefreshToken: true,
  lastValidatedAt: null,
  lastError: null,
  detectedAt: null,
} as unknown as IntegrationRow;

const failureOf = (kind: ProviderFailureKind) => new ProviderError(kind, `a ${kind} failure`, kind === 'rateLimited' ? { retryAfter: 17 } : {});

describe('the failure policy', () => {
  const rows = FAILURE_POINTS.flatMap((point) => PROVIDER_FAILURE_KINDS.map((kind) => [point, kind] as const));

  it('has a verdict for every point and every kind, and nothing else', () => {
    expect(Object.keys(FAILURE_POLICY).sort()).toEqual([...FAILURE_POINTS].sort());
    for (const point of FAILURE_POINTS) expect(Object.keys(FAILURE_POLICY[point]).sort()).toEqual([...PROVIDER_FAILURE_KINDS].sort());
  });

  it.each(rows)('%s × %s: the status a person sees after, and the answer a client gets', (point, kind) => {
    const expected = EXPECTED[point][kind];
    const failure = new JudgedFailure(failureOf(kind), point);
    const { verdict } = failure;

    // The status object the integration shows once the transition is applied.
    expect(verdict.transition?.status ?? null).toBe(expected.status);
    if (verdict.transition) {
      expect(verdict.transition.source).toBe(SOURCES[point]);
      const after = { ...connectedRow, status: verdict.transition.status, lastError: verdict.transition.lastError, tokenValid: verdict.transition.tokenValid ?? true };
      expect(statusObject(after, 'GitHub').actions).toEqual(expected.actions);
    }

    // The answer at the route edge: the §2 code and its status, or the request goes on.
    if (expected.answer === 'go on') {
      expect(verdict.answer).toBe('passthrough');
    } else {
      const answer = toAnswer(failure) as AppError;
      expect(answer).toBeInstanceOf(AppError);
      expect([answer.status, answer.code]).toEqual(expected.answer);
      expect(answer.cause).toBe(failure.failure);
      if (answer.code === 'PROVIDER_RATE_LIMITED') expect(answer.headers).toEqual({ 'retry-after': '17' });
    }

    // What the core does besides.
    expect(verdict.recheck).toBe(expected.recheck ?? 'none');
    expect(verdict.serveStored).toBe(expected.serveStored === true);
    expect(verdict.reschedule).toBe(expected.reschedule === true);
    expect(verdict.counts).toBe(expected.counts === true);
    expect(verdict.configFault).toBe(expected.configFault === true);
    expect(verdict.backOff).toBe(expected.backOff === true);
  });

  it('never makes an integration invalid for rejected client credentials, nor changes a status for a rate limit', () => {
    for (const point of FAILURE_POINTS) {
      expect(FAILURE_POLICY[point].misconfigured.transition?.status).not.toBe('invalid');
      expect(FAILURE_POLICY[point].rateLimited.transition).toBeNull();
    }
  });

  it('gives up a recovery only on a rejection of the credentials themselves', () => {
    for (const [point, kind] of rows) {
      const dead = FAILURE_POLICY[point][kind].dead;
      // A claims challenge refuses the token presented as a dead token does (Microsoft, docs/contract.md §5b).
      expect(dead, `${point} × ${kind}`).toBe(kind === 'revoked' || kind === 'challenged' || (kind === 'forbidden' && ['exchange', 'connect', 'refresh', 'verify', 'challenge'].includes(point)));
    }
  });

  it('judges anything else a provider call throws as transient, keeping it as the cause', () => {
    const bug = new TypeError('cannot read the answer');
    const failure = judged(bug, 'refresh');
    expect(failure.kind).toBe('transient');
    expect(failure.failure.cause).toBe(bug);
    expect(judged(failure, 'call')).toBe(failure);
    expect((toAnswer(failure) as AppError).code).toBe('PROVIDER_ERROR');
  });

  it('leaves errors that are not judged failures to the error handler', () => {
    const error = new AppError('INTEGRATION_NOT_FOUND');
    expect(toAnswer(error)).toBe(error);
  });

  it("answers with the failure's own words when it has them (a proxied answer over 10 MiB)", () => {
    const failure = new JudgedFailure(new ProviderError('transient', 'provider answer too large', { answer: 'The provider answer is larger than 10 MiB' }), 'call');
    expect((toAnswer(failure) as AppError).message).toBe('The provider answer is larger than 10 MiB');
  });
});
