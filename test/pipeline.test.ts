import { sql } from 'drizzle-orm';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryRows } from '../src/db/client.ts';
import { ErrorLogThrottle } from '../src/http/error-handler.ts';
import { AppError } from '../src/ground/errors.ts';
import { STEP_NAMES, type Step } from '../src/http/pipeline.ts';
import { createTestApp, type TestApp } from './helpers/app.ts';

const BASE = ['request-id', 'logging', 'recovery', 'mime', 'transaction'];
const FULL_CHAIN = [...BASE, 'impersonation', 'authentication', 'system-admin', 'csrf', 'rate-limit', 'handler'];
const SLOT_STEPS = ['impersonation', 'authentication', 'system-admin', 'csrf', 'rate-limit'];

let t: TestApp;
const seen: Record<string, string[]> = {};
const afterCommitSeen: { id: string; visibleFromOutside: boolean }[] = [];
/** Per request id: the runner's trace when the answer went out (what the pipeline ran, in order). */
const traces = new Map<string, string[]>();
/** Per request id: the slot steps that ran, as recorded by the steps themselves. */
const ran = new Map<string, string[]>();
const handled = new Set<string>();

/**
 * A stand-in for a step 6–9: notes that it ran, fails when `x-fail-at` names it, then
 * does `inner` (the authentication stand-in lets requests carrying `x-test-user` through).
 */
function spy(name: string, inner?: (request: FastifyRequest) => void): Step {
  return async (request: FastifyRequest, _reply: FastifyReply) => {
    ran.set(request.id, [...(ran.get(request.id) ?? []), name]);
    if (request.headers['x-fail-at'] === name) throw new AppError(name === 'authentication' ? 'UNAUTHENTICATED' : 'FORBIDDEN', { message: `failed at ${name}` });
    inner?.(request);
  };
}

async function probeRows(id: string): Promise<number> {
  const rows = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM probe WHERE id = ${id}`);
  return rows[0]?.n ?? 0;
}

const echoBody = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: { name: { type: 'string', minLength: 1 }, password: { type: 'string' }, count: { type: 'integer' } },
} as const;

beforeAll(async () => {
  t = await createTestApp({
    prepare: async (database) => {
      await database.db.execute(sql`CREATE TABLE probe (id text PRIMARY KEY)`);
      // A deferred constraint fails at COMMIT, not at INSERT: the way to force a commit failure.
      await database.db.execute(
        sql`CREATE TABLE deferred_probe (id text, CONSTRAINT deferred_unique UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)`,
      );
    },
    slots: {
      impersonation: spy('impersonation'),
      authentication: spy('authentication', (request) => {
        if (request.headers['x-test-user'] !== 'yes') throw new AppError('UNAUTHENTICATED');
      }),
      systemAdmin: spy('system-admin'),
      csrf: spy('csrf'),
      rateLimit: spy('rate-limit'),
    },
    routes: (app) => {
      app.addHook('onResponse', async (request) => {
        traces.set(request.id, [...request.ctx.trace]);
      });
      for (const auth of ['authenticated', 'public', 'unauthenticated'] as const) {
        app.get(`/test/trace/${auth}`, { config: { auth, noStore: true, errors: [] }, schema: { hide: true } }, async (request) => {
          seen[auth] = [...request.ctx.trace];
          handled.add(request.id);
          return { ok: true, hasLog: typeof request.ctx.log.info === 'function', requestId: request.ctx.requestId };
        });
      }
      app.post('/test/authenticated-body', { config: { auth: 'authenticated', errors: [] }, schema: { hide: true, body: echoBody } }, async (request) => {
        handled.add(request.id);
        return { ok: true };
      });
      app.post('/test/write/:id', { config: { auth: 'unauthenticated', errors: [] }, schema: { hide: true } }, async (request) => {
        const { id } = request.params as { id: string };
        const tx = await request.ctx.tx();
        await tx.execute(sql`INSERT INTO probe (id) VALUES (${id})`);
        request.ctx.afterCommit(async () => {
          afterCommitSeen.push({ id, visibleFromOutside: (await probeRows(id)) === 1 });
        });
        if (id.startsWith('fail')) throw new Error('handler failed after writing');
        return { ok: true };
      });
      app.post('/test/commit-fails', { config: { auth: 'unauthenticated', errors: [] }, schema: { hide: true } }, async (request) => {
        const tx = await request.ctx.tx();
        await tx.execute(sql`INSERT INTO deferred_probe (id) VALUES ('same'), ('same')`);
        request.ctx.afterCommit(() => afterCommitSeen.push({ id: 'commit-fails', visibleFromOutside: true }));
        return { ok: true };
      });
      app.get('/test/throws', { config: { auth: 'unauthenticated', errors: [] }, schema: { hide: true } }, async () => {
        throw new TypeError('secret internals: SELECT * FROM users');
      });
      app.post('/test/echo', { config: { auth: 'public', errors: [] }, schema: { hide: true, body: echoBody } }, async (request) => {
        // A careless handler: logs headers and body. The logger must still keep secrets out.
        request.log.info({ headers: request.headers, body: request.body }, 'echo');
        return { ok: true };
      });
    },
  });
});

afterAll(async () => {
  await t?.close();
});

/** Sends a request with its own id; returns the answer with what the pipeline ran for it. */
async function traced(options: { method?: 'GET' | 'POST'; url: string; headers?: Record<string, string>; payload?: string }) {
  const id = `trace-${Math.random().toString(36).slice(2)}`;
  const res = await t.fastify.inject({ method: options.method ?? 'GET', url: options.url, headers: { 'x-request-id': id, ...options.headers }, ...(options.payload === undefined ? {} : { payload: options.payload }) });
  await expect.poll(() => traces.has(id)).toBe(true);
  return { res, trace: traces.get(id), slotsRan: ran.get(id) ?? [], handled: handled.has(id), logged: t.logs.entries.filter((entry) => entry.requestId === id).map((entry) => entry.msg) };
}

describe('pipeline order', () => {
  it('lists the contract\'s steps in the contract\'s order', () => {
    expect([...STEP_NAMES]).toEqual([...BASE, ...SLOT_STEPS]);
  });

  it('runs base + 6–9 on authenticated routes, in order', async () => {
    const res = await t.fastify.inject({ method: 'GET', url: '/test/trace/authenticated', headers: { 'x-test-user': 'yes' } });
    expect(res.statusCode).toBe(200);
    expect(res.json().hasLog).toBe(true);
    expect(seen.authenticated).toEqual(FULL_CHAIN);
    const { trace, slotsRan, handled: reached } = await traced({ url: '/test/trace/authenticated', headers: { 'x-test-user': 'yes' } });
    expect(trace).toEqual(FULL_CHAIN);
    // The steps' own record agrees with the runner's: each ran when it was recorded, in that order.
    expect(slotsRan).toEqual(SLOT_STEPS);
    expect(reached).toBe(true);
  });

  it('runs base + 9 on public routes', async () => {
    await t.fastify.inject({ method: 'GET', url: '/test/trace/public' });
    expect(seen.public).toEqual(['request-id', 'logging', 'recovery', 'mime', 'transaction', 'csrf', 'rate-limit', 'handler']);
    expect((await traced({ url: '/test/trace/public' })).slotsRan).toEqual(['csrf', 'rate-limit']);
  });

  it('runs only the base on unauthenticated routes', async () => {
    await t.fastify.inject({ method: 'GET', url: '/test/trace/unauthenticated' });
    expect(seen.unauthenticated).toEqual(['request-id', 'logging', 'recovery', 'mime', 'transaction', 'handler']);
    expect((await traced({ url: '/test/trace/unauthenticated' })).slotsRan).toEqual([]);
  });

  it('stops at a step that fails: no later step and no handler runs, and the earlier ones did their work', async () => {
    for (const [index, step] of SLOT_STEPS.entries()) {
      const { res, trace, slotsRan, handled: reached, logged } = await traced({ url: '/test/trace/authenticated', headers: { 'x-test-user': 'yes', 'x-fail-at': step } });
      expect(res.statusCode, step).toBe(step === 'authentication' ? 401 : 403);
      expect(res.json().error, step).toBe(`failed at ${step}`);
      expect(trace, step).toEqual([...BASE, ...SLOT_STEPS.slice(0, index + 1)]);
      expect(slotsRan, step).toEqual(SLOT_STEPS.slice(0, index + 1));
      expect(reached, step).toBe(false);
      // Steps 1–4 ran before it: the answer has its id, the start line was logged, no-store and JSON were set.
      expect(res.headers['x-request-id']).toBe(res.json().requestId);
      expect(logged).toEqual(['request start', 'request finish']);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['content-type']).toMatch(/^application\/json/);
    }
  });

  it('rejects an authenticated route without credentials with 401 before the handler', async () => {
    delete seen.authenticated;
    const res = await t.fastify.inject({ method: 'GET', url: '/test/trace/authenticated', headers: { 'x-request-id': 'r-401' } });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ success: false, error: 'Authentication required', code: 'UNAUTHENTICATED', requestId: 'r-401' });
    expect(seen.authenticated).toBeUndefined();
    expect(traces.get('r-401')).toEqual([...BASE, 'impersonation', 'authentication']);
  });

  it('answers an unauthenticated request 401 whatever its body: authentication runs before the body is read', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024) });
    const bodies = [
      { headers: { 'content-type': 'text/plain' }, payload: 'name=a', withCredentials: 415 },
      { headers: { 'content-type': 'application/json' }, payload: big, withCredentials: 413 },
      { headers: { 'content-type': 'application/json' }, payload: '{"name":', withCredentials: 400 },
    ];
    for (const body of bodies) {
      const anonymous = await traced({ method: 'POST', url: '/test/authenticated-body', headers: body.headers, payload: body.payload });
      expect(anonymous.res.statusCode, body.headers['content-type']).toBe(401);
      expect(anonymous.trace).toEqual([...BASE, 'impersonation', 'authentication']);
      const signedIn = await traced({ method: 'POST', url: '/test/authenticated-body', headers: { ...body.headers, 'x-test-user': 'yes' }, payload: body.payload });
      expect(signedIn.res.statusCode).toBe(body.withCredentials);
      // Every step ran, then the body was refused: the handler never did.
      expect(signedIn.trace).toEqual(FULL_CHAIN.slice(0, -1));
      expect(signedIn.handled).toBe(false);
    }
  });

  it('refuses to register a route that declares no auth class', async () => {
    const { default: Fastify } = await import('fastify');
    const { installPipeline, defaultSlots } = await import('../src/http/pipeline.ts');
    const bare = Fastify();
    installPipeline(bare, t.database.db, defaultSlots);
    expect(() => bare.get('/x', async () => ({}))).toThrow(/declares no auth class/);
    await bare.close();
  });
});

describe('transaction per request', () => {
  it('commits a successful handler before answering, then runs afterCommit', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/test/write/ok-1' });
    expect(res.statusCode).toBe(200);
    expect(await probeRows('ok-1')).toBe(1);
    await expect.poll(() => afterCommitSeen.find((entry) => entry.id === 'ok-1')).toEqual({ id: 'ok-1', visibleFromOutside: true });
  });

  it('rolls back every write when the handler throws after writing, and skips afterCommit', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/test/write/fail-1' });
    expect(res.statusCode).toBe(500);
    expect(await probeRows('fail-1')).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(afterCommitSeen.find((entry) => entry.id === 'fail-1')).toBeUndefined();
  });

  it('answers 500 with the error shape when the commit itself fails', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/test/commit-fails', headers: { 'x-request-id': 'commit-1' } });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ success: false, error: 'Internal server error', code: 'INTERNAL', requestId: 'commit-1' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(afterCommitSeen.find((entry) => entry.id === 'commit-fails')).toBeUndefined();
    const rows = await queryRows<{ n: number }>(t.database.db, sql`SELECT count(*)::int AS n FROM deferred_probe`);
    expect(rows[0]?.n).toBe(0);
  });

  it('keeps serving after failures (no leaked transaction holds the database)', async () => {
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => t.fastify.inject({ method: 'POST', url: `/test/write/${i % 2 ? 'fail' : 'ok'}-c${i}` })),
    );
    expect(results.map((r) => r.statusCode)).toEqual(Array.from({ length: 10 }, (_, i) => (i % 2 ? 500 : 200)));
    expect(await probeRows('ok-c0')).toBe(1);
    expect(await probeRows('fail-c1')).toBe(0);
  });
});

describe('errors', () => {
  it('turns a thrown error into 500 without internals, and logs the stack with the request id', async () => {
    const res = await t.fastify.inject({ method: 'GET', url: '/test/throws', headers: { 'x-request-id': 'boom-1' } });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ success: false, error: 'Internal server error', code: 'INTERNAL', requestId: 'boom-1' });
    expect(res.body).not.toMatch(/SELECT|TypeError|at /);
    const logged = t.logs.entries.find((entry) => entry.requestId === 'boom-1' && entry.level === 50) as { err?: { stack?: string } };
    expect(logged?.err?.stack).toMatch(/TypeError: secret internals[\s\S]*pipeline\.test\.ts/);
  });

  it('logs the same failure with a stack once per window, then only counts it (no log flood in an outage)', async () => {
    for (const id of ['boom-2', 'boom-3', 'boom-4']) {
      expect((await t.fastify.inject({ method: 'GET', url: '/test/throws', headers: { 'x-request-id': id } })).statusCode).toBe(500);
    }
    const errors = t.logs.entries.filter((entry) => ['boom-2', 'boom-3', 'boom-4'].includes(entry.requestId as string) && entry.level === 50);
    expect(errors).toEqual([]);
    const finished = t.logs.entries.filter((entry) => ['boom-2', 'boom-3', 'boom-4'].includes(entry.requestId as string) && entry.msg === 'request finish');
    expect(finished.map((entry) => entry.status)).toEqual([500, 500, 500]);

    const throttle = new ErrorLogThrottle(1000);
    const failure = () => new Error('Failed query: SELECT 1\nparams: secret', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { name: 'Error' }) });
    expect(throttle.admit(failure(), 0)).toBe(0);
    expect([throttle.admit(failure(), 10), throttle.admit(failure(), 999)]).toEqual([null, null]);
    expect(throttle.admit(new TypeError('another bug'), 500)).toBe(0);
    expect(throttle.admit(failure(), 1000)).toBe(2);
  });

  it('answers an unknown route with 404 NOT_FOUND in JSON with the request id', async () => {
    const res = await t.fastify.inject({ method: 'GET', url: '/no/such/route?x=1' });
    expect(res.statusCode).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = res.json();
    expect(body).toMatchObject({ success: false, code: 'NOT_FOUND' });
    expect(body.requestId).toBe(res.headers['x-request-id']);
  });

  it('answers malformed JSON with 400 INVALID_INPUT', async () => {
    const res = await t.fastify.inject({ method: 'POST', url: '/test/echo', headers: { 'content-type': 'application/json' }, payload: '{"name":' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ success: false, code: 'INVALID_INPUT', details: [{ path: 'body' }] });
  });

  it('answers schema failures with 400 and details naming the field', async () => {
    const missing = await t.fastify.inject({ method: 'POST', url: '/test/echo', payload: {} });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().details).toEqual([{ path: 'body.name', message: 'is required' }]);

    const unknown = await t.fastify.inject({ method: 'POST', url: '/test/echo', payload: { name: 'a', extra: 1 } });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().details).toEqual([{ path: 'body.extra', message: 'is not an accepted field' }]);

    const wrongType = await t.fastify.inject({ method: 'POST', url: '/test/echo', payload: { name: 'a', count: '3' } });
    expect(wrongType.statusCode).toBe(400);
    expect(wrongType.json().details[0].path).toBe('body.count');
  });

  it('answers a non-JSON body with 415', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/graphql']) {
      const res = await t.fastify.inject({ method: 'POST', url: '/test/echo', headers: { 'content-type': type }, payload: 'name=a' });
      expect(res.statusCode, type).toBe(415);
      expect(res.json()).toMatchObject({ success: false, code: 'UNSUPPORTED_MEDIA_TYPE' });
    }
  });

  it('answers a body over 1 MiB with 413', async () => {
    const payload = JSON.stringify({ name: 'x'.repeat(1024 * 1024) });
    const res = await t.fastify.inject({ method: 'POST', url: '/test/echo', headers: { 'content-type': 'application/json' }, payload });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({ success: false, code: 'PAYLOAD_TOO_LARGE' });
  });
});

describe('request id', () => {
  it('propagates a valid X-Request-ID to the response and every log line of the request', async () => {
    const res = await t.fastify.inject({ method: 'GET', url: '/test/trace/unauthenticated', headers: { 'x-request-id': 'client-chosen id 42' } });
    expect(res.headers['x-request-id']).toBe('client-chosen id 42');
    expect(res.json().requestId).toBe('client-chosen id 42');
    const lines = t.logs.entries.filter((entry) => entry.requestId === 'client-chosen id 42');
    expect(lines.map((entry) => entry.msg)).toEqual(['request start', 'request finish']);
    expect(lines[1]).toMatchObject({ method: 'GET', route: '/test/trace/unauthenticated', status: 200 });
    expect(typeof lines[1]?.durationMs).toBe('number');
  });

  it('generates a ULID when the header is absent, too long or not printable', async () => {
    for (const header of [undefined, 'x'.repeat(129), 'bad\u0001id', '']) {
      const res = await t.fastify.inject({ method: 'GET', url: '/livez', headers: header === undefined ? {} : { 'x-request-id': header } });
      expect(res.headers['x-request-id']).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    }
    const a = await t.fastify.inject({ method: 'GET', url: '/livez' });
    const b = await t.fastify.inject({ method: 'GET', url: '/livez' });
    expect(a.headers['x-request-id']).not.toBe(b.headers['x-request-id']);
  });

  it('accepts exactly 128 printable characters', async () => {
    const id = '~'.repeat(128);
    const res = await t.fastify.inject({ method: 'GET', url: '/livez', headers: { 'x-request-id': id } });
    expect(res.headers['x-request-id']).toBe(id);
  });
});

describe('log redaction', () => {
  it('keeps bearer tokens, passwords and query strings out of every log line', async () => {
    const bearer = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.c2lnbmF0dXJlLXZhbHVl';
    const res = await t.fastify.inject({
      method: 'POST',
      url: '/test/echo?code=oauth-code-123&state=state-456',
      headers: { authorization: `Bearer ${bearer}`, cookie: 'session=cookie-secret-789' },
      payload: { name: 'someone', password: 'hunter2-correct-horse' },
    });
    expect(res.statusCode).toBe(200);
    const text = t.logs.text;
    expect(text).toContain('"msg":"echo"');
    for (const secret of [bearer, 'hunter2-correct-horse', 'cookie-secret-789', 'oauth-code-123', 'state-456']) {
      expect(text).not.toContain(secret);
    }
  });
});

describe('health', () => {
  it('answers /livez and /readyz', async () => {
    expect((await t.fastify.inject({ url: '/livez' })).json()).toEqual({ status: 'ok' });
    expect((await t.fastify.inject({ url: '/readyz' })).json()).toEqual({ status: 'ok' });
  });

  it('answers /readyz 503 while migrations run', async () => {
    t.app.readiness.pending = 'migrations are running';
    try {
      const res = await t.fastify.inject({ url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ status: 'unavailable', reason: 'migrations are running' });
    } finally {
      t.app.readiness.pending = null;
    }
  });
});
