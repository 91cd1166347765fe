import type { Current, TokenLifecycle } from '../../src/integrations/lifecycle.ts';
import type { TokenSet } from '../../src/integrations/providers/types.ts';

/** Reaches the lifecycle's private store step, to test what it keeps. */
export function storeRefreshedForTest(lifecycle: TokenLifecycle, current: Current, tokens: TokenSet): Promise<Current> {
  const store = (lifecycle as unknown as { storeRefreshed(c: Current, t: TokenSet, a: unknown): Promise<Current> }).storeRefreshed.bind(lifecycle);
  return store(current, tokens, { principal: null, requestId: null });
}
