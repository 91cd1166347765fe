/**
 * The agents room (docs/contract.md §9, §9a): minting and revoking capabilities, their metadata
 * documents, the MCP endpoint, and the authorization server MCP clients sign in with. It sits above the integrations core and calls the proxy's
 * function, as GraphQL and the pages do; a capability itself is one more credential kind of
 * identity's authentication step (src/identity/capabilities.ts).
 */
import type { TypedFastify } from '../http/typed.ts';
import type { Services } from '../services.ts';
import { consentRoutes } from './consent-page.ts';
import { grantRoutes } from './grant-routes.ts';
import { mcpRoutes } from './mcp-route.ts';
import { oauthRoutes } from './oauth-routes.ts';

/** Every route of the agents room. */
export function agentRoutes(app: TypedFastify, services: Services): void {
  oauthRoutes(app, services);
  grantRoutes(app, services);
  consentRoutes(app, services);
  mcpRoutes(app, services);
}
