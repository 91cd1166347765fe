import { parseJson, ProviderError, type ProviderDefinition, type ProviderResponse, retryAfterSeconds } from './types.ts';

interface GitHubUser {
  id?: number;
  login?: string;
  email?: string | null;
}

/** GitHub (and GitHub Enterprise through the endpoint overrides). */
export const github = {
  id: 'github',
  displayName: 'GitHub',
  endpoints: {
    authUrl: 'https://github.com/login/oauth/authorize',
    tokenUrl: 'https://github.com/login/oauth/access_token',
    apiUrl: 'https://api.github.com',
  },
  defaultScopes: ['read:user', 'user:email', 'repo'],
  scopeSeparator: ' ',
  scopeParam: 'scope',
  pkce: true,
  clientAuth: 'client_secret_post',
  tokenRequestHeaders: { accept: 'application/json' },

  parseTokenResponse(response) {
    const body = parseJson(response.body) as Record<string, unknown> | undefined;
    if (response.status >= 500 || !body || typeof body !== 'object') {
      throw new ProviderError('transient', 'GitHub token endpoint answered badly', { status: response.status });
    }
    // GitHub refuses with HTTP 200 and an `error` field.
    if (typeof body.error === 'string') {
      throw new ProviderError('revoked', 'GitHub refused the grant', { status: response.status, providerCode: body.error });
    }
    if (typeof body.access_token !== 'string' || !body.access_token) {
      throw new ProviderError('transient', 'GitHub token response carries no access token', { status: response.status });
    }
    return {
      accessToken: body.access_token,
      ...(typeof body.refresh_token === 'string' && body.refresh_token ? { refreshToken: body.refresh_token } : {}),
      ...(typeof body.expires_in === 'number' ? { expiresIn: body.expires_in } : {}),
      ...(typeof body.refresh_token_expires_in === 'number' ? { refreshTokenExpiresIn: body.refresh_token_expires_in } : {}),
      scopes: typeof body.scope === 'string' ? body.scope.split(/[\s,]+/).filter(Boolean) : [],
      tokenType: typeof body.token_type === 'string' ? body.token_type : 'bearer',
    };
  },

  async validate(context, accessToken) {
    const headers = { authorization: `token ${accessToken}`, accept: 'application/vnd.github+json' };
    const response = await context.request(`${context.endpoints.apiUrl}/user`, { method: 'GET', headers });
    const failure = github.classify(response);
    if (failure) throw failure;
    const user = parseJson(response.body) as GitHubUser | undefined;
    if (response.status !== 200 || typeof user?.id !== 'number' || typeof user.login !== 'string') {
      throw new ProviderError('transient', 'GitHub /user answered badly', { status: response.status });
    }
    let email = typeof user.email === 'string' && user.email ? user.email : undefined;
    if (!email) {
      // `/user` shows only a public e-mail; `/user/emails` needs the user:email scope.
      const emails = await context.request(`${context.endpoints.apiUrl}/user/emails`, { method: 'GET', headers }).catch(() => undefined);
      const list = emails?.status === 200 ? (parseJson(emails.body) as { email?: string; primary?: boolean; verified?: boolean }[] | undefined) : undefined;
      const primary = Array.isArray(list) ? (list.find((entry) => entry.primary && entry.verified) ?? list.find((entry) => entry.verified)) : undefined;
      if (typeof primary?.email === 'string') email = primary.email;
    }
    return { id: String(user.id), username: user.login, ...(email ? { email } : {}) };
  },

  authorization: (accessToken) => `token ${accessToken}`,

  classify(response: ProviderResponse) {
    const { status, headers } = response;
    if (status === 401) return new ProviderError('revoked', 'GitHub rejected the token', { status });
    if (status === 429) return new ProviderError('rateLimited', 'GitHub rate limit', { status, retryAfter: retryAfterSeconds(headers) });
    if (status === 403) {
      const secondary = /secondary rate limit/i.test(response.body);
      if (headers.get('x-ratelimit-remaining') === '0' || headers.has('retry-after') || secondary) {
        return new ProviderError('rateLimited', 'GitHub rate limit', { status, retryAfter: retryAfterSeconds(headers) });
      }
      return new ProviderError('forbidden', 'GitHub forbade the call', { status });
    }
    if (status >= 500) return new ProviderError('transient', 'GitHub answered with a server error', { status });
    return null;
  },

  async revoke(context, tokens) {
    const basic = Buffer.from(`${context.clientId}:${context.clientSecret}`).toString('base64');
    const response = await context.request(`${context.endpoints.apiUrl}/applications/${encodeURIComponent(context.clientId)}/grant`, {
      method: 'DELETE',
      headers: { authorization: `Basic ${basic}`, accept: 'application/vnd.github+json', 'content-type': 'application/json' },
      body: JSON.stringify({ access_token: tokens.accessToken }),
    });
    if (response.status !== 204 && response.status !== 404) {
      throw new ProviderError(response.status >= 500 ? 'transient' : 'forbidden', 'GitHub did not revoke the grant', { status: response.status });
    }
  },
} satisfies ProviderDefinition;
