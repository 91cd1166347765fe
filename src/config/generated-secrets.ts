import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ConfigError } from './load.ts';

/** The secrets development mode generates when they are not set (docs/contract.md §1). */
export interface DevSecrets {
  encryptionKeys: string;
  jwtSecret: string;
}

/** Generated secrets that start-up must write (`storeGeneratedSecrets`): they exist only in memory so far. */
export interface SecretsToStore {
  file: string;
  secrets: DevSecrets;
}

const FIELD = { ENCRYPTION_KEYS: 'encryptionKeys', JWT_SECRET: 'jwtSecret' } as const;

/**
 * Development mode's stand-ins for unset secrets, as one load sees them: the ones kept in
 * `DATA_DIR/generated-secrets.json` when that file exists, else new ones in memory. Only
 * reads: writing them is start-up's step (`storeGeneratedSecrets`), so loading the
 * configuration has no side effect.
 */
export class GeneratedSecrets {
  /** Names of the settings that took a generated value, in the order they did. */
  readonly used: string[] = [];
  private readonly file: string;
  private readonly persist: boolean;
  private values: DevSecrets | undefined;
  private onDisk = false;

  /** `persist: false` (tests) neither reads the file nor asks start-up to write one. */
  constructor(dataDir: string, persist: boolean) {
    this.file = join(resolve(dataDir), 'generated-secrets.json');
    this.persist = persist;
  }

  /** The generated value standing in for `setting`, which is recorded as generated. */
  take(setting: keyof typeof FIELD): string {
    this.used.push(setting);
    this.values ??= this.read();
    return this.values[FIELD[setting]];
  }

  /** What start-up must still write; null when nothing was generated, or it is on disk already, or nothing persists. */
  toStore(): SecretsToStore | null {
    if (!this.values || this.onDisk || !this.persist) return null;
    return { file: this.file, secrets: this.values };
  }

  private read(): DevSecrets {
    if (this.persist && existsSync(this.file)) {
      this.onDisk = true;
      return parseStored(readFileSync(this.file, 'utf8'), this.file);
    }
    return { encryptionKeys: `dev1:${randomBytes(32).toString('base64')}`, jwtSecret: randomBytes(48).toString('base64url') };
  }
}

/** The stored secrets, or a ConfigError that names the file and quotes none of it (a parse error's message would). */
function parseStored(text: string, file: string): DevSecrets {
  let stored: Partial<Record<keyof DevSecrets, unknown>> | null = null;
  try {
    stored = JSON.parse(text);
  } catch {
    // Reported below, without the parser's message.
  }
  if (typeof stored?.encryptionKeys === 'string' && typeof stored.jwtSecret === 'string') return { encryptionKeys: stored.encryptionKeys, jwtSecret: stored.jwtSecret };
  throw new ConfigError([`${file}: unreadable generated secrets; set ENCRYPTION_KEYS and JWT_SECRET, or delete the file (what it encrypted becomes unreadable)`]);
}

/** Writes generated secrets under DATA_DIR, readable by this user only (0600); refuses to overwrite a file. */
export function storeGeneratedSecrets(pending: SecretsToStore | null): void {
  if (!pending) return;
  mkdirSync(dirname(pending.file), { recursive: true, mode: 0o700 });
  writeFileSync(pending.file, `${JSON.stringify(pending.secrets)}\n`, { mode: 0o600, flag: 'wx' });
  chmodSync(pending.file, 0o600);
}
