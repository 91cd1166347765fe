import type { Config } from './config/load.ts';
import type { Database, Db } from './db/client.ts';
import type { Dispatcher } from './events/dispatcher.ts';
import type { Outbox } from './events/outbox.ts';
import type { FormGuard } from './http/form-guard.ts';
import type { RateLimiter } from './http/rate-limit.ts';
import type { AppCatalog } from './integrations/apps/catalog.ts';
import type { EventKeySets } from './integrations/events/security-event-token.ts';
import type { BudgetMetrics, ProviderBudgets } from './integrations/budgets.ts';
import type { ProviderRegistry } from './integrations/providers/registry.ts';
import type { OutboundGuard } from './lib/outbound.ts';
import type { Revocations } from './integrations/revocations.ts';
import type { GroupedDeliveries } from './integrations/events/grouped.ts';
import type { LifecycleMetrics, TokenLifecycle } from './integrations/tokens/lifecycle.ts';
import type { StateCodec } from './integrations/state.ts';
import type { Logger } from 'pino';
import type { SessionTokens } from './identity/credentials.ts';
import type { PasswordHasher } from './identity/password.ts';

/** What routes and background work share, built once at start. */
export interface Services {
  config: Config;
  database: Database;
  /** The root handle: for system operations that commit on their own. */
  db: Db;
  passwords: PasswordHasher;
  sessionTokens: SessionTokens;
  rateLimiter: RateLimiter;
  outbox: Outbox;
  dispatcher: Dispatcher;
  providers: ProviderRegistry;
  /** The apps grants are made with (docs/contract.md §5e): the deployment's, and organizations' own. */
  apps: AppCatalog;
  /** The key sets providers sign their security event tokens with (Google's RISC), kept per configuration document. */
  eventKeys: EventKeySets;
  /** The outbound guard (lib/outbound.ts): every fetch of a URL the settings did not fix goes through it (docs/contract.md §1). */
  outbound: OutboundGuard;
  stateCodec: StateCodec;
  /** Nonces of the pages' forms, and the check of their posts. */
  forms: FormGuard;
  lifecycle: TokenLifecycle;
  /** Provider revocation deliveries arriving together, acted on in one transaction (decision 331). */
  providerEvents: GroupedDeliveries;
  /** Provider budgets (docs/contract.md §5f): read with each API call, learned from its answers. */
  budgets: ProviderBudgets;
  /** Grants to revoke at their providers after a commit (integrations/revocations.ts). */
  revocations: Revocations;
  logger: Logger;
  metrics?: LifecycleMetrics &
    BudgetMetrics & {
    providerCall(provider: string, outcome: string, seconds: number): void;
    retentionPurged(kind: string, count: number): void;
    providerEvent(provider: string, type: string, outcome: string): void;
  };
}
