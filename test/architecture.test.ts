// Consumers are adapters (issue 36, decisions 261–): the shape of the source holds by these signs.
// Each reads the source tree as text; a sign that fails names the file and line that breaks it.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');

function sources(dir = join(ROOT, 'src')): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...sources(path));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) found.push(relative(ROOT, path));
  }
  return found.sort();
}

const FILES = sources().map((path) => ({ path, text: readFileSync(join(ROOT, path), 'utf8') }));

/** Every `path:line: text` where `pattern` matches, in files `where` admits. */
function sites(pattern: RegExp, where: (path: string) => boolean = () => true): string[] {
  const found: string[] = [];
  for (const { path, text } of FILES) {
    if (!where(path)) continue;
    text.split('\n').forEach((line, index) => {
      if (pattern.test(line)) found.push(`${path}:${index + 1}: ${line.trim()}`);
    });
  }
  return found;
}

/** Files that register routes: the HTTP consumers. */
const ROUTE_FILE = /\b(app|fastify|instance)\.(get|post|put|patch|delete|route|all)\(/;

describe('consumers are adapters', () => {
  it('the domain vocabulary (principal, unit of work, errors) lives in src/ground, and http/ exports none of it', () => {
    const vocabulary = /^export (?:type |interface |class |function |async function |const )?(Principal|Role|CredentialKind|CapabilityGrant|Work|UnitOfWork|AuditActor|AppError|ERROR_CODES|ErrorCode|systemUnitOfWork)\b/;
    expect(sites(vocabulary, (path) => !path.startsWith('src/ground/'))).toEqual([]);
    for (const name of ['principal.ts', 'work.ts', 'errors.ts']) expect(FILES.some((file) => file.path === `src/ground/${name}`)).toBe(true);
    // The ground room depends on no consumer.
    expect(sites(/from '\.\.\/(http|graphql|agents|web|cli)\//, (path) => path.startsWith('src/ground/'))).toEqual([]);
  });

  it('no re-export shims', () => {
    expect(sites(/^export (type )?\{[^}]*\} from /)).toEqual([]);
  });

  it('auth modes are read as traits: no mode compared by name outside the providers room, and no import circle inside it', () => {
    const outside = (path: string) => !path.startsWith('src/integrations/providers/');
    // A mode's name compared (either side), a list of modes asked, or a definition's `mint` standing for "renewable".
    const byName = /authMode\s*[!=]==|[!=]==\s*[\w?.]*\.authMode\b|ENTERED_MODES|\.authMode\)|\.mint\s*[!=]==\s*undefined/;
    expect(sites(byName, outside)).toEqual([]);
    // What a file of the providers room imports of the room, and what it reaches through those imports.
    const imports = (path: string) => [...(FILES.find((file) => file.path === path)?.text ?? '').matchAll(/^import [^;]*? from '\.\/([\w-]+\.ts)';/gm)].map((match) => `src/integrations/providers/${match[1]}`);
    const reaches = (from: string, to: string) => {
      const seen = new Set<string>();
      const queue = imports(from);
      while (queue.length > 0) {
        const next = queue.shift() as string;
        if (next === to) return true;
        if (seen.has(next)) continue;
        seen.add(next);
        queue.push(...imports(next));
      }
      return false;
    };
    expect(reaches('src/integrations/providers/engine.ts', 'src/integrations/providers/auth-modes.ts')).toBe(true);
    expect(reaches('src/integrations/providers/auth-modes.ts', 'src/integrations/providers/engine.ts')).toBe(false);
  });

  it('no request-input casts: a handler reads its typed schema, or a typed reader (http/form-guard.ts stringFields)', () => {
    expect(sites(/(request|req)\.(body|query|params)\)? as\b/)).toEqual([]);
  });

  it('no systemUnitOfWork in a file that registers routes: a request works in its own unit of work (decision 274)', () => {
    // Form routes register on the form context (`forms.post(…)`) as well as on the app.
    const registers = (path: string) => FILES.some((file) => file.path === path && (ROUTE_FILE.test(file.text) || /\bforms\.(get|post|put|patch|delete)\(/.test(file.text)));
    expect(sites(/\bsystemUnitOfWork\b/, registers)).toEqual([]);
  });

  it('"status, checked live when stale" exists once (integrations/checked-status.ts), and its consumers call it (decision 271)', () => {
    expect(sites(/^export (async )?function checkedStatus\b/)).toEqual([expect.stringMatching(/^src\/integrations\/checked-status\.ts:/)]);
    for (const consumer of ['src/integrations/routes/status.ts', 'src/agents/tools.ts']) {
      expect(sites(/\bcheckedStatus\(/, (path) => path === consumer), consumer).not.toEqual([]);
    }
    // The copies' tell-tales: the age compared with OAUTH_STATUS_MAX_AGE, and a stored sentence compared for its cause (decision 272).
    expect(sites(/\.statusMaxAge\b/)).toEqual([expect.stringMatching(/^src\/integrations\/checked-status\.ts:/)]);
    expect(sites(/lastError\s*[!=]==?\s*(REASONS\b|['"`])/)).toEqual([]);
  });

  it('"finish a connect" exists once (integrations/connect/finish.ts): the callback and entered credentials both end there (decision 273)', () => {
    expect(sites(/^export (async )?function finishConnect\b/)).toEqual([expect.stringMatching(/^src\/integrations\/connect\/finish\.ts:/)]);
    for (const consumer of ['src/integrations/connect/callback.ts', 'src/integrations/credentials/connect.ts']) {
      expect(sites(/\bfinishConnect\(/, (path) => path === consumer), consumer).not.toEqual([]);
    }
    // The copies' tell-tales: storing a connection, or completing its session, anywhere else.
    expect(sites(/\b(storeConnection|completeSession)\(/, (path) => !path.startsWith('src/integrations/sessions/') && !path.endsWith('/connect/store.ts'))).toEqual([
      expect.stringMatching(/^src\/integrations\/connect\/finish\.ts:/),
      expect.stringMatching(/^src\/integrations\/connect\/finish\.ts:/),
    ]);
  });

  it('a verdict is carried out in one place: no caller outside policy.ts and the lifecycle reads its recheck, back-off, reschedule or serve-stale, or rechecks by itself', () => {
    const outside = (path: string) => path !== 'src/integrations/tokens/policy.ts' && path !== 'src/integrations/tokens/lifecycle.ts';
    expect(sites(/(\.verdict|judge\([^)]*\))\.(recheck|serveStored|reschedule)\b|\.recover\(|kind === 'rateLimited'/, outside)).toEqual([]);
    // Backing off a provider is a pass's to do (the lifecycle knows no pass): the validation pass reads it from the verdict.
    expect(sites(/\.backOff\b/, (path) => outside(path) && path !== 'src/integrations/validator.ts')).toEqual([]);
  });

  it('one table of words per error code: no page keeps a copy (src/web/static/error-words.js is the table)', () => {
    const pages = (dir: string): string[] =>
      readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
        entry.isDirectory() ? pages(join(dir, entry.name)) : entry.name.endsWith('.js') && entry.name !== 'error-words.js' ? [join(dir, entry.name)] : [],
      );
    const copies: string[] = [];
    for (const path of [...pages('src/web/static'), 'src/web/credential-form.ts']) {
      readFileSync(join(ROOT, path), 'utf8')
        .split('\n')
        .forEach((line, index) => {
          // A code mapped to words: a `case`, an object key, or an `if (code === …) return`.
          if (/case '[A-Z][A-Z_]+':|^\s*[A-Z][A-Z_]{2,}: [`'"]|code === '[A-Z][A-Z_]+'\) return [`'"]/.test(line)) copies.push(`${path}:${index + 1}: ${line.trim()}`);
        });
    }
    expect(copies).toEqual([]);
  });

  it('a credential kind is a row of identity/credential-kinds.ts: no service_token literal outside it and the schema, no kind switched on by name', () => {
    const outsideTable = (path: string) => path !== 'src/identity/credential-kinds.ts' && !/^src\/db\/schema[^/]*\.ts$/.test(path);
    expect(sites(/'service_token'/, outsideTable)).toEqual([]);
    // The kinds with a prefix are asked for their traits (what they may do), never compared by name.
    expect(sites(/\bkind\s*[!=]==?\s*'(pat|api_token|service_token|capability)'/, outsideTable)).toEqual([]);
    expect(sites(/\bWHEN\s+'(jwt|pat|api_token|service_token|capability)'/, outsideTable)).toEqual([]);
    // The credential kind type is the table's keys, not a list of literals written again.
    expect(sites(/CredentialKind\s*=\s*'/)).toEqual([]);
  });
});
