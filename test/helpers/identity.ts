import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';

export interface Account {
  userId: string;
  organizationId: string;
  email: string;
  password: string;
  token: string;
  /** The Set-Cookie values of the login: `session` and `csrf_token`. */
  cookies: Record<string, string>;
}

let counter = 0;

/** Registers a user through the API and signs in. */
export async function registerAndLogin(app: FastifyInstance, name = 'user'): Promise<Account> {
  counter += 1;
  const email = `${name}-${counter}-${Date.now()}@example.com`;
  const password = `correct horse battery ${counter}`;
  const registered = await app.inject({ method: 'POST', url: '/v1/register', payload: { email, password, name } });
  expect(registered.statusCode, registered.body).toBe(201);
  return login(app, email, password);
}

export async function login(app: FastifyInstance, email: string, password: string): Promise<Account> {
  const res = await app.inject({ method: 'POST', url: '/v1/login', payload: { email, password } });
  expect(res.statusCode, res.body).toBe(200);
  const body = res.json();
  const cookies: Record<string, string> = {};
  for (const cookie of res.cookies) cookies[cookie.name] = cookie.value;
  return { userId: body.user.id, organizationId: body.organizationId, email, password, token: body.accessToken, cookies };
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/** Headers of a cookie-authenticated browser request that passes CSRF. */
export function browser(account: Account, origin = 'http://127.0.0.1:8080'): Record<string, string> {
  return {
    cookie: `session=${account.cookies.session}; csrf_token=${account.cookies.csrf_token}`,
    'x-csrf-token': account.cookies.csrf_token ?? '',
    origin,
  };
}
