/**
 * A name a person types that other people read (docs/contract.md §3, §5a): an organization's, a
 * user's, a token's, an end user's display name. It may hold any letters, but no control
 * character (`\p{Cc}`: a newline or a NUL re-lays out or cuts what others see) and no
 * bidirectional formatting character — U+061C, U+200E/U+200F, U+202A–U+202E, U+2066–U+2069 —
 * which would make it read as something else (decision 232).
 */
import { Type } from 'typebox';
import { AppError } from './errors.ts';

const REFUSED = '\\p{Cc}\\u061C\\u200E\\u200F\\u202A-\\u202E\\u2066-\\u2069';

/** As a JSON-schema pattern (Ajv compiles it with the `u` flag). */
export const NAME_PATTERN = `^[^${REFUSED}]*$`;
const NAME = new RegExp(NAME_PATTERN, 'u');

/** What a name that breaks the rule is told, in every door's answer. */
export const NAME_MESSAGE = 'must not contain control or bidirectional formatting characters';

/** The schema of a name in a body: `minLength`–`maxLength` characters, none refused. */
export function NameSchema(options: { minLength?: number; maxLength: number; description?: string }) {
  return Type.String({ ...options, pattern: NAME_PATTERN });
}

/**
 * A name, trimmed: `min`–`max` characters after trimming, none refused; else 400 naming `path`.
 * The check every door shares (REST bodies carry `NameSchema` too; GraphQL arguments only this).
 */
export function checkName(value: string, path: string, { min = 1, max }: { min?: number; max: number }): string {
  if (!NAME.test(value)) throw new AppError('INVALID_INPUT', { message: `${path} ${NAME_MESSAGE}`, details: [{ path, message: NAME_MESSAGE }] });
  const trimmed = value.trim();
  if (trimmed.length < min || trimmed.length > max) {
    throw new AppError('INVALID_INPUT', { details: [{ path, message: `must be ${min}–${max} characters after trimming` }] });
  }
  return trimmed;
}
