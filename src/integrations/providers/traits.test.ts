import { describe, expect, it } from 'vitest';
import { customProvider } from './custom.ts';
import { DEFINITIONS } from './registry.ts';
import { authTraits } from './traits.ts';
import type { ProviderDefinition } from './types.ts';

const byId = (id: string): ProviderDefinition => DEFINITIONS.find((definition) => definition.id === id) as ProviderDefinition;

describe('authTraits', () => {
  it('says how each built-in connects, renews and what it stores', () => {
    const table = Object.fromEntries(DEFINITIONS.map((definition) => [definition.id, (({ connects, renews, presents }) => ({ connects, renews, presents }))(authTraits(definition))]));
    expect(table.github).toEqual({ connects: 'redirect', renews: 'refresh_token', presents: 'access_token' });
    expect(table.slack).toEqual({ connects: 'redirect', renews: 'refresh_token', presents: 'access_token' });
    // Its `mint` is added to the definition after the engine built it: the traits see the finished definition.
    expect(table.githubapp).toEqual({ connects: 'installation', renews: 'mint', presents: 'access_token' });
    expect(table.stripe).toEqual({ connects: 'entered', renews: 'never', presents: 'credentials' });
    expect(table.twilio).toEqual({ connects: 'entered', renews: 'never', presents: 'credentials' });
    expect(table.zooms2s).toEqual({ connects: 'entered', renews: 'mint', presents: 'access_token' });
  });

  it('carries the entered fields only for a mode that connects by entered credentials, and names the mode in a token read except for OAuth', () => {
    expect(authTraits(byId('github')).fields).toEqual([]);
    expect(authTraits(byId('githubapp')).fields).toEqual([]);
    expect(authTraits(byId('twilio')).fields.map((field) => field.name)).toEqual(byId('twilio').credentialFields.map((field) => field.name));
    expect(authTraits(byId('twilio')).fields.length).toBeGreaterThan(0);
    expect(authTraits(byId('github')).namedInTokenRead).toBe(false);
    expect(DEFINITIONS.filter((definition) => definition.id !== 'github' && authTraits(definition).connects !== 'redirect').every((definition) => authTraits(definition).namedInTokenRead)).toBe(true);
    expect([authTraits(byId('github')).label, authTraits(byId('githubapp')).label, authTraits(byId('stripe')).label, authTraits(byId('zooms2s')).label]).toEqual([
      'OAuth',
      'GitHub App',
      'API key',
      'Client credentials',
    ]);
  });

  it('is derived once per definition, custom ones alike', () => {
    expect(authTraits(byId('slack'))).toBe(authTraits(byId('slack')));
    const custom = customProvider(
      'acme',
      {
        displayName: 'Acme',
        authMode: 'client_credentials',
        apiUrl: 'https://api.acme.example',
        tokenUrl: 'https://api.acme.example/token',
        credentials: [
          { name: 'clientId', label: 'Client id', secret: false },
          { name: 'clientSecret', label: 'Client secret', secret: true },
        ],
      },
      true,
    );
    if (Array.isArray(custom)) throw new Error(custom.join('; '));
    const traits = authTraits(custom);
    expect(traits).toMatchObject({ mode: 'client_credentials', connects: 'entered', renews: 'mint', presents: 'access_token' });
    expect(Object.isFrozen(traits)).toBe(true);
    expect(authTraits(custom)).toBe(traits);
  });
});
