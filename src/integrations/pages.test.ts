// `Tessera-Next-Page` as each definition reads its provider's list answers (docs/contract.md §5f), from
// answers shaped as the providers document them; a next link outside the API base is never shown.
import { describe, expect, it } from 'vitest';
import { nextLink, nextPage } from './pages.ts';
import { customProvider } from './providers/custom.ts';
import { DEFINITIONS } from './providers/registry.ts';
import type { ProviderDefinition } from './providers/types.ts';

const byId = new Map(DEFINITIONS.map((definition) => [definition.id, definition]));
const pagination = (id: string) => (byId.get(id) as ProviderDefinition).pagination;
const answer = (body: unknown, headers: Record<string, string> = {}, status = 200) => ({ status, headers: new Headers(headers), body: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)) });

describe('each built-in definition', () => {
  it('GitHub and GitLab: the RFC 8288 Link rel="next", as a path under the API base', () => {
    const base = 'https://api.github.com';
    const target = new URL(`${base}/user/repos?per_page=2`);
    const link = '<https://api.github.com/user/repos?per_page=2&page=2>; rel="next", <https://api.github.com/user/repos?per_page=2&page=5>; rel="last"';
    expect(nextPage(pagination('github'), answer([], { link }), target, base)).toBe('user/repos?per_page=2&page=2');
    const gitlab = 'https://gitlab.example.com/api/v4';
    const keyset = '<https://gitlab.example.com/api/v4/projects?pagination=keyset&id_after=42>; rel="next"';
    expect(nextPage(pagination('gitlab'), answer([], { link: keyset }), new URL(`${gitlab}/projects`), gitlab)).toBe('projects?pagination=keyset&id_after=42');
    expect(nextPage(pagination('github'), answer([], { link: '<https://api.github.com/user/repos?page=1>; rel="prev"' }), target, base)).toBeNull();
  });

  it('Slack: response_metadata.next_cursor → cursor; none on the last page', () => {
    const base = 'https://slack.com/api';
    const target = new URL(`${base}/conversations.list?limit=2`);
    // Only a JSON answer is read for a cursor: one that says it is something else is not parsed.
    expect(nextPage(pagination('slack'), answer({ ok: true, response_metadata: { next_cursor: 'abc' } }, { 'content-type': 'application/json; charset=utf-8' }), target, base)).toBe('conversations.list?limit=2&cursor=abc');
    expect(nextPage(pagination('slack'), answer({ ok: true, response_metadata: { next_cursor: 'abc' } }, { 'content-type': 'text/html' }), target, base)).toBeNull();
    expect(nextPage(pagination('slack'), answer({ ok: true, response_metadata: { next_cursor: 'dXNlcjpVMDYxTkZUVDI=' } }), target, base)).toBe('conversations.list?limit=2&cursor=dXNlcjpVMDYxTkZUVDI%3D');
    expect(nextPage(pagination('slack'), answer({ ok: true, response_metadata: { next_cursor: '' } }), target, base)).toBeNull();
  });

  it('Notion: next_cursor → start_cursor, only while has_more', () => {
    const base = 'https://api.notion.com/v1';
    const target = new URL(`${base}/users?page_size=1`);
    expect(nextPage(pagination('notion'), answer({ object: 'list', has_more: true, next_cursor: 'fe2cc560-036c-44cd-90e8-294d5a74cebc' }), target, base)).toBe(
      'users?page_size=1&start_cursor=fe2cc560-036c-44cd-90e8-294d5a74cebc',
    );
    expect(nextPage(pagination('notion'), answer({ object: 'list', has_more: false, next_cursor: 'fe2cc560' }), target, base)).toBeNull();
  });

  it('Zoom: next_page_token; Google: nextPageToken → pageToken', () => {
    const zoom = 'https://api.zoom.us/v2';
    expect(nextPage(pagination('zoom'), answer({ next_page_token: 'Tva2CuIdTgsv8wAnhyAdU3m06Y2HuLQtlh3', page_size: 30 }), new URL(`${zoom}/users/me/meetings`), zoom)).toBe(
      'users/me/meetings?next_page_token=Tva2CuIdTgsv8wAnhyAdU3m06Y2HuLQtlh3',
    );
    expect(nextPage(pagination('zoom'), answer({ next_page_token: '' }), new URL(`${zoom}/users/me/meetings`), zoom)).toBeNull();
    const google = 'https://www.googleapis.com';
    expect(nextPage(pagination('google'), answer({ files: [], nextPageToken: '~!!~AI9FV7T' }), new URL(`${google}/drive/v3/files`), google)).toBe('drive/v3/files?pageToken=%7E%21%21%7EAI9FV7T');
  });

  it('Microsoft: @odata.nextLink (a key holding dots), and Bitbucket: next — whole URLs under the base', () => {
    const graph = 'https://graph.microsoft.com/v1.0';
    const nextLinkUrl = 'https://graph.microsoft.com/v1.0/me/messages?%24skip=10&%24top=10';
    expect(nextPage(pagination('microsoft'), answer({ value: [], '@odata.nextLink': nextLinkUrl }), new URL(`${graph}/me/messages?$top=10`), graph)).toBe('me/messages?%24skip=10&%24top=10');
    const bitbucket = 'https://api.bitbucket.org/2.0';
    expect(nextPage(pagination('bitbucket'), answer({ values: [], next: 'https://api.bitbucket.org/2.0/repositories?page=2' }), new URL(`${bitbucket}/repositories`), bitbucket)).toBe('repositories?page=2');
  });

  it('a provider without pagination data shows none, and an error answer never has a next page', () => {
    const base = 'https://api.linear.app';
    expect(nextPage(pagination('linear'), answer({ data: {} }, { link: '<https://api.linear.app/graphql?page=2>; rel="next"' }), new URL(`${base}/graphql`), base)).toBeNull();
    const github = 'https://api.github.com';
    expect(nextPage(pagination('github'), answer({}, { link: '<https://api.github.com/x?page=2>; rel="next"' }, 404), new URL(`${github}/x`), github)).toBeNull();
  });
});

describe('a next link outside the API base', () => {
  const base = 'https://gitlab.example.com/api/v4';
  const target = new URL(`${base}/projects`);
  const shown = (url: string) => nextPage({ type: 'link' }, answer([], { link: `<${url}>; rel="next"` }), target, base);

  it('is never shown: another origin, another scheme or port, credentials in it, or a path beside the base', () => {
    expect(shown('https://evil.example/api/v4/projects?page=2')).toBeNull();
    expect(shown('http://gitlab.example.com/api/v4/projects?page=2')).toBeNull();
    expect(shown('https://gitlab.example.com:8443/api/v4/projects?page=2')).toBeNull();
    expect(shown('https://user:pw@gitlab.example.com/api/v4/projects?page=2')).toBeNull();
    expect(shown('https://gitlab.example.com/api/v4other/projects?page=2')).toBeNull();
    expect(shown('https://gitlab.example.com/api/v4/../../oauth/token?page=2')).toBeNull();
    expect(shown('https://gitlab.example.com/oauth/authorize?page=2')).toBeNull();
    expect(nextPage({ type: 'next_url', from: 'next' }, answer({ next: 'https://evil.example/2.0/x' }), target, base)).toBeNull();
    expect(nextPage({ type: 'next_url', from: 'next' }, answer({ next: 'javascript:alert(1)' }), target, base)).toBeNull();
  });

  it('is read relative to the call when relative, and never shows the credentials a definition carries in the query', () => {
    expect(shown('/api/v4/projects?page=3')).toBe('projects?page=3');
    expect(nextPage({ type: 'link' }, answer([], { link: `<${base}/projects?page=2&api_key=secret>; rel="next"` }), target, base, ['api_key'])).toBe('projects?page=2');
  });
});

describe('Link headers', () => {
  it('find rel="next" among several values and parameters, quoted or not', () => {
    expect(nextLink('<https://a/x?page=2>; rel=next')).toBe('https://a/x?page=2');
    expect(nextLink('<https://a/1>; rel="prev", <https://a/3>; title="n, o"; rel="last next"')).toBe('https://a/3');
    expect(nextLink('<https://a/1>; rel="prev"')).toBeNull();
    expect(nextLink(null)).toBeNull();
  });
});

describe('custom definitions', () => {
  const raw = (pagination: unknown) => ({
    displayName: 'Acme',
    authUrl: 'https://acme.example/authorize',
    tokenUrl: 'https://acme.example/token',
    apiUrl: 'https://api.acme.example/v1',
    userInfo: { url: 'https://api.acme.example/v1/me', id: 'id' },
    ...(pagination === undefined ? {} : { pagination }),
  });

  it('may say pagination: link, or a cursor at a dot path sent back as a query parameter; default none', () => {
    const link = customProvider('acme', raw({ type: 'link' }), true) as ProviderDefinition;
    expect(link.pagination).toEqual({ type: 'link' });
    const cursor = customProvider('acme', raw({ type: 'cursor', from: 'meta.next', param: 'after' }), true) as ProviderDefinition;
    const base = 'https://api.acme.example/v1';
    expect(nextPage(cursor.pagination, answer({ items: [], meta: { next: 'abc' } }), new URL(`${base}/items?limit=5`), base)).toBe('items?limit=5&after=abc');
    expect((customProvider('acme', raw(undefined), true) as ProviderDefinition).pagination).toBeNull();
  });

  it('refuses a malformed pagination at start, naming the key', () => {
    const problems = customProvider('acme', raw({ type: 'cursor', from: 'meta.next' }), true);
    expect(Array.isArray(problems) && problems.join('\n')).toMatch(/integrationOauthProvider\.acme\.definition\.pagination/);
  });
});
