import type { TypedFastify } from '../../http/typed.ts';
import type { Services } from '../../services.ts';
import { appRoutes } from '../apps/routes.ts';
import { callbackGetRoute, callbackPostRoute } from './callback.ts';
import { connectSessionRoutes } from './connect-sessions.ts';
import { credentialsRoute } from './credentials.ts';
import { providerEventsRoute } from './events.ts';
import { integrationListRoutes } from './integrations.ts';
import { providersRoute } from './providers.ts';
import { proxyRoute } from './proxy.ts';
import { refreshRoute } from './refresh.ts';
import { startRoute } from './start.ts';
import { statusRoute } from './status.ts';
import { tokenRoute } from './token.ts';

/** Every REST route of the integrations feature (docs/contract.md §5): one file per endpoint or small group. */
export function integrationRoutes(app: TypedFastify, services: Services): void {
  providersRoute(app, services);
  startRoute(app, services);
  callbackPostRoute(app, services);
  callbackGetRoute(app, services);
  credentialsRoute(app, services);
  integrationListRoutes(app, services);
  tokenRoute(app, services);
  statusRoute(app, services);
  refreshRoute(app, services);
  proxyRoute(app, services);
  connectSessionRoutes(app, services);
  providerEventsRoute(app, services);
  appRoutes(app, services);
}
