/**
 * What an auth mode means for the rest of Tessera, derived once per definition: how an
 * integration connects, how it renews, what it keeps for requests to carry. Code outside this
 * room reads these traits — `provider.traits` of a configured provider — and never asks a mode
 * by its name, so a new mode is one row of `MODES` and the hooks its definition brings.
 */
import type { AuthMode, CredentialField, ProviderDefinition } from './types.ts';

/** An auth mode's traits (docs/contract.md §5c). */
export interface AuthTraits {
  /** The mode's name, as the API reports it (`GET /v1/providers`, a token read): to say, never to branch on. */
  mode: AuthMode;
  /**
   * How an integration is connected: the browser sent to the provider's authorize page
   * (`redirect`), to an app's install page, which takes only the state and comes back with an
   * installation to prove (`installation`), or credentials a person enters (`entered`).
   */
  connects: 'redirect' | 'installation' | 'entered';
  /** The fields a person enters: none unless the mode connects by `entered` credentials. */
  fields: readonly CredentialField[];
  /**
   * How a token is renewed without the person: the refresh grant, when the provider issued a
   * refresh token (`refresh_token`); the definition's `mint`, which also validates (`mint`); or
   * not at all — requests carry what was entered (`never`).
   */
  renews: 'refresh_token' | 'mint' | 'never';
  /** The stored secret requests carry: an access token (OAuth, minted), or the entered credentials themselves. */
  presents: 'access_token' | 'credentials';
  /** How an integration's description names the mode (`OAuth integration with github for octocat`, decision 202). */
  label: string;
  /** Whether a token read names the mode (`authMode`): every mode but the OAuth code flow, whose answer stays §5's as it was. */
  namedInTokenRead: boolean;
}

/** What each mode is, beside what its definition's hooks say. */
const MODES: Record<AuthMode, Pick<AuthTraits, 'connects' | 'label' | 'namedInTokenRead'>> = {
  oauth2: { connects: 'redirect', label: 'OAuth', namedInTokenRead: false },
  app_installation: { connects: 'installation', label: 'GitHub App', namedInTokenRead: true },
  api_key: { connects: 'entered', label: 'API key', namedInTokenRead: true },
  basic: { connects: 'entered', label: 'Basic credentials', namedInTokenRead: true },
  client_credentials: { connects: 'entered', label: 'Client credentials', namedInTokenRead: true },
};

const derived = new WeakMap<ProviderDefinition, AuthTraits>();

/**
 * The traits of `definition`, derived on first use and kept with it. Read from the finished
 * definition, not its data: a definition file may add its hooks after the engine built it (a
 * GitHub App's `mint`).
 */
export function authTraits(definition: ProviderDefinition): AuthTraits {
  const known = derived.get(definition);
  if (known) return known;
  const { connects, label, namedInTokenRead } = MODES[definition.authMode];
  const renews = definition.mint !== undefined ? 'mint' : connects === 'redirect' ? 'refresh_token' : 'never';
  const traits: AuthTraits = Object.freeze({
    mode: definition.authMode,
    connects,
    fields: connects === 'entered' ? definition.credentialFields : [],
    renews,
    presents: definition.presents,
    label,
    namedInTokenRead,
  });
  derived.set(definition, traits);
  return traits;
}
