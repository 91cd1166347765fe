/** Deepest JSON nesting accepted in a body. */
export const MAX_JSON_DEPTH = 64;

/**
 * What PostgreSQL or our own code cannot take even though JSON allows it: NUL
 * characters (PostgreSQL text refuses U+0000), unpaired UTF-16 surrogates (its json
 * refuses them) and nesting deep enough to exhaust the stack. Returns the problem, or null.
 */
export function unacceptableJson(value: unknown): string | null {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop() as [unknown, number];
    if (typeof node === 'string') {
      if (node.includes('\u0000')) return 'must not contain NUL characters';
      if (!node.isWellFormed()) return 'must not contain unpaired surrogates';
    } else if (node !== null && typeof node === 'object') {
      if (depth >= MAX_JSON_DEPTH) return `is nested deeper than ${MAX_JSON_DEPTH} levels`;
      for (const [key, child] of Object.entries(node)) {
        if (key.includes('\u0000') || !key.isWellFormed()) return 'has an unacceptable property name';
        stack.push([child, depth + 1]);
      }
    }
  }
  return null;
}
