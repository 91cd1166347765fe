import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { open, SecretDecryptionError, seal } from './crypto.ts';

const keyring = { activeId: 'a', keys: new Map([['a', Buffer.alloc(32, 1)], ['b', Buffer.alloc(32, 2)]]) };
const binding = { organizationId: 'org', recordId: 'int', name: 'github_access_token' };

describe('seal/open', () => {
  it('round-trips any text', () => {
    fc.assert(fc.property(fc.string({ maxLength: 500 }), (text) => open(keyring, binding, seal(keyring, binding, text)) === text));
  });

  it('uses a fresh salt and IV every time', () => {
    const a = seal(keyring, binding, 'same');
    const b = seal(keyring, binding, 'same');
    expect(a.envelope).not.toBe(b.envelope);
    expect(a.envelope.split('.').map((part) => part.length)).toEqual([2, 43, 16, expect.any(Number)]);
  });

  it('refuses any change of binding, key id or bytes', () => {
    const sealed = seal(keyring, binding, 'secret value');
    const variants = [
      { ...binding, organizationId: 'org2' },
      { ...binding, recordId: 'int2' },
      { ...binding, name: 'github_refresh_token' },
      // Length prefixes: moving characters between fields changes the bytes.
      { organizationId: 'or', recordId: 'gint', name: 'github_access_token' },
    ];
    for (const other of variants) expect(() => open(keyring, other, sealed)).toThrow(SecretDecryptionError);
    expect(() => open(keyring, binding, { ...sealed, keyId: 'b' })).toThrow(SecretDecryptionError);
    expect(() => open(keyring, binding, { ...sealed, keyId: 'missing' })).toThrow(/not in ENCRYPTION_KEYS/);
    const parts = sealed.envelope.split('.');
    const body = Buffer.from(parts[3] as string, 'base64url');
    body[0] = (body[0] ?? 0) ^ 1;
    expect(() => open(keyring, binding, { ...sealed, envelope: [...parts.slice(0, 3), body.toString('base64url')].join('.') })).toThrow(SecretDecryptionError);
  });
});
