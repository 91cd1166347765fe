/** Reading provider answers by dot path, and filling `{name}` templates. */

/** Parses a JSON body, or returns undefined. */
export function parseJson(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

/**
 * Every value at a dot path (`owner.user.id`); a `[]` segment fans out over an array's items
 * (`errors[].extensions.type`), a number indexes one (`errors.0.message`).
 */
export function valuesAt(value: unknown, path: string): unknown[] {
  let current: unknown[] = [value];
  for (const raw of path.split('.')) {
    const fanOut = raw.endsWith('[]');
    const key = fanOut ? raw.slice(0, -2) : raw;
    const next: unknown[] = [];
    for (const item of current) {
      if (item === null || typeof item !== 'object') continue;
      const child = key === '' ? item : (item as Record<string, unknown>)[key];
      if (fanOut) {
        if (Array.isArray(child)) next.push(...child);
      } else if (child !== undefined) next.push(child);
    }
    current = next;
  }
  return current;
}

/** The first value at a dot path, or undefined. */
export function valueAt(value: unknown, path: string): unknown {
  return valuesAt(value, path)[0];
}

/** A non-empty string or a finite number at the first of `paths` that holds one, as a string. */
export function textAt(value: unknown, paths: string | readonly string[] | undefined): string | undefined {
  for (const path of typeof paths === 'string' ? [paths] : (paths ?? [])) {
    const found = valueAt(value, path);
    if (typeof found === 'string' && found !== '') return found;
    if (typeof found === 'number' && Number.isFinite(found)) return String(found);
  }
  return undefined;
}

/** Fills `{name}` placeholders from `values`; throws naming the first one that has no value. */
export function fillTemplate(template: string, values: Record<string, unknown>): string {
  return template.replace(/\{([A-Za-z][A-Za-z0-9_.]*)\}/g, (_match, name: string) => {
    const value = name.includes('.') ? valueAt(values, name) : values[name];
    if (typeof value !== 'string' && typeof value !== 'number') throw new Error(`no value for {${name}}`);
    return String(value);
  });
}

/** The `{name}` placeholders of a template. */
export function placeholders(template: string): string[] {
  return [...template.matchAll(/\{([A-Za-z][A-Za-z0-9_.]*)\}/g)].map((match) => match[1] as string);
}
