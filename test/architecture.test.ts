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
});
