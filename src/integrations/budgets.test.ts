// What a provider's answer teaches about an account's budget (docs/contract.md §5f), from hostile and
// edge-case headers: a reset already past blocks nothing, a header's absurd value blocks a day at
// most, and a smaller resource's budget (GitHub's `search`) never blocks the account.
import { describe, expect, it } from 'vitest';
import { changes, readBudget } from './budgets.ts';
import { DEFINITIONS } from './providers/registry.ts';
import { ProviderError, type ProviderDefinition } from './providers/types.ts';

const github = DEFINITIONS.find((definition) => definition.id === 'github') as ProviderDefinition;
const NOW = Date.parse('2026-11-28T10:00:00Z');
const DAY = 24 * 60 * 60 * 1000;
const answer = (headers: Record<string, string>) => ({ headers: new Headers(headers) });
const limited = (retryAfter?: number) => new ProviderError('rateLimited', 'rate limit', { status: 429, ...(retryAfter !== undefined ? { retryAfter } : {}) });

describe('readBudget', () => {
  it('an epoch reset that has just passed blocks nothing (never read as ~56 years from now)', () => {
    const past = String(Math.floor(NOW / 1000) - 1);
    const budget = readBudget(github, answer({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': past, 'x-ratelimit-resource': 'core' }), null, NOW);
    expect(budget?.remaining).toBe(0);
    expect(budget?.blockedUntil).toBeNull();
    expect(changes(null, budget as NonNullable<typeof budget>, NOW)).toBe(false);
  });

  it('an epoch reset ahead blocks until it; a delta reset (IETF) counts from now', () => {
    const ahead = Math.floor(NOW / 1000) + 120;
    expect(readBudget(github, answer({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(ahead) }), null, NOW)?.blockedUntil).toBe(ahead * 1000);
    expect(readBudget(github, answer({ 'ratelimit-remaining': '0', 'ratelimit-reset': '30' }), null, NOW)?.blockedUntil).toBe(NOW + 30_000);
  });

  it('absurd values block a day at most and always make a storable date', () => {
    for (const reset of ['99999999999999999999', '1e400', '4102444800']) {
      const budget = readBudget(github, answer({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset }), null, NOW);
      if (budget?.blockedUntil != null) expect(budget.blockedUntil).toBeLessThanOrEqual(NOW + DAY);
    }
    const huge = readBudget(github, answer({}), limited(1e20), NOW);
    expect(huge?.blockedUntil).toBe(NOW + DAY);
    expect(() => new Date(huge?.blockedUntil as number).toISOString()).not.toThrow();
    const remaining = readBudget(github, answer({ 'x-ratelimit-remaining': '99999999999999999999', 'x-ratelimit-reset': '60' }), null, NOW);
    expect(remaining?.remaining).toBe(2 ** 31 - 1);
  });

  it("GitHub's search budget spent — even a rate limit on it — does not block the account; core's does", () => {
    const reset = String(Math.floor(NOW / 1000) + 60);
    expect(readBudget(github, answer({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset, 'x-ratelimit-resource': 'search' }), null, NOW)).toBeNull();
    expect(readBudget(github, answer({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset, 'x-ratelimit-resource': 'search' }), limited(60), NOW)).toBeNull();
    expect(readBudget(github, answer({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset, 'x-ratelimit-resource': 'core' }), null, NOW)?.blockedUntil).toBe(Number(reset) * 1000);
    // A rate limit with no budget headers at all still blocks for its Retry-After.
    expect(readBudget(github, answer({}), limited(5), NOW)?.blockedUntil).toBe(NOW + 5000);
  });
});
