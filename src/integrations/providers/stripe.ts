import { defineProvider } from './engine.ts';

/**
 * Stripe, with a secret (or restricted) API key a person enters: every request carries it as
 * a bearer token. The key is checked with `GET /v1/account` (the account the key belongs to);
 * Stripe answers a key it does not know, or a rolled one, with 401, and a restricted key
 * lacking a permission with 403.
 */
export const stripe = defineProvider({
  id: 'stripe',
  displayName: 'Stripe',
  authMode: {
    mode: 'api_key',
    credentials: [{ name: 'apiKey', label: 'Secret key (sk_… or rk_…)', secret: true }],
    headers: { authorization: 'Bearer {apiKey}' },
  },
  endpoints: { authUrl: '', tokenUrl: '', apiUrl: 'https://api.stripe.com' },
  defaultScopes: [],
  account: { url: '{apiUrl}/v1/account', id: 'id', username: ['settings.dashboard.display_name', 'business_profile.name', 'email', 'id'], email: 'email' },
});
