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
