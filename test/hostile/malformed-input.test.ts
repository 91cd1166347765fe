// Inputs the properties once found to break something, pinned: malformed percent-encoding and
// over-long path parameters, GraphQL queries that are not GraphQL text, NUL characters and unpaired
// surrogates PostgreSQL refuses, deeply nested bodies, expanded-year dates, an encoded provider id.
import { describe, expect, it } from 'vitest';
import { bearer } from '../helpers/identity.ts';
import { logProblems, responseProblems, send } from './checks.ts';
import { gh, heal, t, useHostileWorld, world } from './world.ts';

useHostileWorld();

describe('malformed input is an input error in the contract shape, never a 500', () => {
  it('answers malformed percent-encoding and over-long path parameters in the contract error shape', async () => {
    const problems: string[] = [];
    for (const method of ['GET', 'HEAD', 'POST']) {
      for (const url of ['/v1/integrations/%ZZ/token', '/v1/integrations/github/proxy/%E0%A4%A', `/v1/integrations/${'x'.repeat(201)}/status`, `/v1/integrations/${'x'.repeat(201)}/proxy/user`]) {
        const sent = { method, url, headers: bearer(world.owner.token), body: '' };
        problems.push(...responseProblems(sent, await send(sent)).map((p) => `${method} ${url.slice(0, 60)}: ${p}`));
      }
    }
    expect(problems).toEqual([]);
  });

  it('treats a GraphQL query that is not GraphQL text (JSON literals, hand-made ASTs) as an input error', async () => {
    const problems: string[] = [];
    for (const query of ['0', '1', '"x"', 'null', '[]', '{}', '{"kind":"Document","definitions":[{}]}', '{"kind":"Document"}']) {
      const sent = { method: 'POST', url: '/query', headers: { ...bearer(world.owner.token), 'content-type': 'application/json' }, body: JSON.stringify({ query }) };
      const res = await send(sent, sent.body);
      problems.push(...responseProblems(sent, res).map((p) => `${JSON.stringify(query)}: ${p}`));
    }
    problems.push(...logProblems());
    expect(problems).toEqual([]);
  });

  it('answers NUL characters in any string input with an input error, never a 500 (PostgreSQL refuses U+0000 in text)', async () => {
    await heal();
    const problems: string[] = [];
    const NUL = '\u0000';
    const rest: [string, string, Record<string, string>, unknown][] = [
      ['POST', '/v1/login', {}, { email: `a${NUL}@example.com`, password: 'whatever it is' }],
      ['POST', '/v1/register', {}, { email: `nul-${Date.now()}@example.com`, password: 'long enough password', name: `a${NUL}` }],
      ['POST', '/v1/organizations', bearer(world.owner.token), { name: `a${NUL}` }],
      ['POST', '/v1/account/switch', bearer(world.owner.token), { organizationId: `a${NUL}` }],
    ];
    for (const [method, url, headers, body] of rest) {
      const sent = { method, url, headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) };
      problems.push(...responseProblems(sent, await send(sent, sent.body)).map((p) => `${url}: ${p}`));
    }
    const graphql = [
      '{ auditLogs(after: "\\u0000") { nodes { id } } }',
      '{ integration(id: "a\\u0000") { id } }',
      'mutation { createOrganization(name: "a\\u0000") { id } }',
      'mutation { addMember(email: "a\\u0000@example.com", role: "member") { role } }',
      'mutation { acceptInvitation(id: "\\u0000", token: "\\u0000") { id } }',
      'mutation { declineInvitation(id: "\\u0000") { id } }',
      'mutation { revokeInvitation(id: "\\u0000") { id } }',
      'mutation { setMemberRole(email: "a\\u0000@example.com", role: "admin") { role } }',
      'mutation { removeMember(email: "a\\u0000@example.com") }',
      'mutation { switchOrganization(organizationId: "\\u0000") { organizationId } }',
      'mutation { refreshIntegration(id: "\\u0000") { id } }',
      'mutation { createPersonalAccessToken(name: "\\u0000") { id } }',
      'mutation { revokePersonalAccessToken(id: "\\u0000") { id } }',
      'mutation { createAPIToken(name: "\\u0000") { id } }',
      'mutation { revokeAPIToken(id: "\\u0000") { id } }',
    ];
    for (const query of graphql) {
      const sent = { method: 'POST', url: '/query', headers: { ...bearer(world.owner.token), 'content-type': 'application/json' }, body: JSON.stringify({ query }) };
      problems.push(...responseProblems(sent, await send(sent, sent.body)).map((p) => `${query}: ${p}`));
    }
    expect(problems).toEqual([]);
  });

  it('answers unpaired UTF-16 surrogates in string input with an input error, never a 500 (PostgreSQL json refuses them)', async () => {
    await heal();
    const problems: string[] = [];
    const rest: [string, string, Record<string, string>, string][] = [
      ['POST', '/v1/organizations', bearer(world.owner.token), '{"name":"\\ud800"}'],
      ['POST', '/v1/organizations', bearer(world.owner.token), '{"name":"a\\udfff"}'],
      ['POST', '/v1/register', {}, `{"email":"lone-${Date.now()}@example.com","password":"long enough password","name":"\\ud83d"}`],
    ];
    for (const [method, url, headers, body] of rest) {
      const sent = { method, url, headers: { ...headers, 'content-type': 'application/json' }, body };
      problems.push(...responseProblems(sent, await send(sent, body)).map((p) => `${url} ${body}: ${p}`));
    }
    const query = 'mutation { createOrganization(name: "\\ud800") { id } }';
    const sent = { method: 'POST', url: '/query', headers: { ...bearer(world.owner.token), 'content-type': 'application/json' }, body: JSON.stringify({ query }) };
    problems.push(...responseProblems(sent, await send(sent, sent.body)).map((p) => `${query}: ${p}`));
    expect(problems).toEqual([]);
  });

  it('answers deeply nested JSON bodies to the proxy without a 500', async () => {
    await heal();
    const problems: string[] = [];
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      const body = `${'['.repeat(5000)}${']'.repeat(5000)}`;
      const sent = { method, url: '/v1/integrations/github/proxy/echo', headers: { ...bearer(world.owner.token), 'content-type': 'application/json' }, body: '(5000 nested arrays)' };
      problems.push(...responseProblems(sent, await send(sent, body)).map((p) => `${method}: ${p}`));
    }
    expect(problems).toEqual([]);
  });

  it('answers expanded-year dates (+275760-…) in token expiries with an input error, never a resolver failure', async () => {
    const problems: string[] = [];
    for (const date of ['+275760-09-13T00:00:00.000Z', '+010000-01-01T00:00:00Z']) {
      for (const mutation of ['createPersonalAccessToken', 'createAPIToken']) {
        const query = `mutation { ${mutation}(name: "far", expiresAt: ${JSON.stringify(date)}) { id expiresAt } }`;
        const sent = { method: 'POST', url: '/query', headers: { ...bearer(world.owner.token), 'content-type': 'application/json' }, body: JSON.stringify({ query }) };
        problems.push(...responseProblems(sent, await send(sent, sent.body)).map((p) => `${mutation} ${date}: ${p}`));
      }
    }
    expect(problems).toEqual([]);
  });

  it('forwards the same provider path whether the provider id in our URL is percent-encoded or not', async () => {
    await heal();
    const forwarded: string[] = [];
    for (const provider of ['github', '%67ithub', '%67%69%74%68%75%62']) {
      const before = gh.requests.length;
      const res = await t.fastify.inject({ method: 'GET', url: `/v1/integrations/${provider}/proxy/echo/a`, headers: bearer(world.owner.token) });
      // Either refused outright, or forwarded to exactly /api/echo/a.
      forwarded.push(`${provider} → ${gh.requests.slice(before).map((r) => r.path).join(', ') || `refused ${res.statusCode}`}`);
    }
    expect(forwarded).toEqual(['github → /api/echo/a', expect.stringMatching(/^%67ithub → (\/api\/echo\/a|refused 4\d\d)$/), expect.stringMatching(/^%67%69%74%68%75%62 → (\/api\/echo\/a|refused 4\d\d)$/)]);
  });
});
