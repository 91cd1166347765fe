import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import { bearer } from './identity.ts';

/** One `POST /query` with a bearer token (or the given headers): its status, parsed body and raw text. */
export async function graphqlRequest(app: FastifyInstance, auth: string | Record<string, string>, query: string, variables?: Record<string, unknown>) {
  const headers = typeof auth === 'string' ? bearer(auth) : auth;
  const res = await app.inject({ method: 'POST', url: '/query', headers, payload: { query, ...(variables ? { variables } : {}) } });
  return { status: res.statusCode, body: res.json(), raw: res.body };
}

/** The data of a request that must succeed: 200 and no errors. */
// biome-ignore lint/suspicious/noExplicitAny: each test reads the fields its own query asked for
export async function graphqlData(app: FastifyInstance, token: string, query: string, variables?: Record<string, unknown>): Promise<any> {
  const { status, body, raw } = await graphqlRequest(app, token, query, variables);
  expect(status, raw).toBe(200);
  expect(body.errors, raw).toBeUndefined();
  return body.data;
}
