/**
 * `tessera service-tokens create|list|revoke` (docs/contract.md §10): the operator's commands on
 * the configured database, like `migrate` — the first service token needs no login, no GraphQL and
 * no other tool. They run identity's own use cases (identity/service-tokens.ts) in a transaction of
 * their own, acting as the operator (audit rows: credential kind `operator`). On the embedded
 * database they need the server stopped: its lock says so (cli/database.ts), and they exit 1.
 */
import type { Db } from '../db/client.ts';
import { AppError } from '../ground/errors.ts';
import type { AuditActor, Work } from '../ground/work.ts';
import type { TokenInfo } from '../identity/access-tokens.ts';
import { createServiceToken, listServiceTokens, revokeServiceToken } from '../identity/service-tokens.ts';
import { loadSettings, openConfiguredDatabase } from './database.ts';
import { CliFailure, line, printFields, printJson, printTable, when } from './output.ts';

const OPERATOR: AuditActor = { principal: null, requestId: null, operator: true };

/** Runs `fn` as the operator in one transaction on the configured database (migrated first, as rotate-keys does). */
async function asOperator<T>(fn: (work: Work) => Promise<T>): Promise<T> {
  const config = loadSettings();
  const database = await openConfiguredDatabase(config);
  try {
    await database.migrate();
    return await database.db.transaction((tx) => fn({ db: tx as unknown as Db, actor: OPERATOR }));
  } catch (error) {
    if (error instanceof AppError) throw new CliFailure(error.message, { code: error.code, details: error.details ?? [] });
    throw error;
  } finally {
    await database.close();
  }
}

const iso = (date: Date | null) => date?.toISOString() ?? null;

/** A token as listed: never its value. */
function listed(token: TokenInfo) {
  return { id: token.id, name: token.name, display: token.display, expiresAt: iso(token.expiresAt), lastUsedAt: iso(token.lastUsedAt), revokedAt: iso(token.revokedAt), createdAt: iso(token.createdAt) };
}

/** `tessera service-tokens create <name> [--expires-in <days>]`: the value printed once, beside its id. */
export async function createCommand(name: string, options: { expiresIn?: number; json?: boolean }): Promise<number> {
  const expiresAt = options.expiresIn === undefined ? null : new Date(Date.now() + options.expiresIn * 86_400_000);
  const created = await asOperator((work) => createServiceToken(work, { name, expiresAt }));
  if (options.json) printJson({ ...listed(created), token: created.token });
  else {
    printFields({ id: created.id, name: created.name, display: created.display, expires: when(iso(created.expiresAt)) || 'never' });
    line();
    line('The token, beside its id (shown this once; store it now):');
    line(`${created.id} ${created.token}`);
  }
  return 0;
}

/** `tessera service-tokens list`: every service token, newest first, without values. */
export async function listCommand(options: { json?: boolean }): Promise<number> {
  const tokens = (await asOperator((work) => listServiceTokens(work))).map(listed);
  if (options.json) printJson({ serviceTokens: tokens });
  else {
    printTable(
      ['ID', 'NAME', 'TOKEN', 'EXPIRES', 'LAST USED', 'REVOKED'],
      tokens.map((token) => [token.id, token.name, token.display, when(token.expiresAt) || 'never', when(token.lastUsedAt), when(token.revokedAt)]),
      'no service tokens',
    );
  }
  return 0;
}

/** `tessera service-tokens revoke <id>`: it answers 401 from the next request on; the connect sessions it minted end with it. */
export async function revokeCommand(id: string, options: { json?: boolean }): Promise<number> {
  const revoked = listed(await asOperator((work) => revokeServiceToken(work, { id })));
  if (options.json) printJson(revoked);
  else line(`revoked service token ${revoked.id} (${revoked.name}): it is refused from its next request on`);
  return 0;
}
