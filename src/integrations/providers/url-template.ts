/**
 * Entered values in URLs (docs/contract.md §5c): a value a person enters (a site, a region, an
 * account id, kept in metadata) fills a URL template only as a whole host label under a fixed
 * host suffix (`https://api.{site}.example.com`), or as a single percent-encoded path segment or
 * query value. A template whose entered placeholder stands for the scheme, the userinfo, the
 * whole host or the port is refused at start; a URL whose host an entered value chose goes
 * through the outbound guard (lib/outbound.ts).
 */

/** What an entered value filling a host label must be, after lower-casing: an LDH label (no decoding, no IDNA mapping). */
export const HOST_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

const PLACEHOLDER = /\{([A-Za-z][A-Za-z0-9_.]*)\}/g;

/** A template's parts: scheme, authority (userinfo, host, port) and the rest, split as RFC 3986 appendix B does. */
function split(template: string): { scheme: string; userinfo: string; host: string; port: string; restAt: number } | null {
  const match = /^([^:/?#]*):\/\/([^/?#]*)/.exec(template);
  if (!match) return null;
  const authority = match[2] as string;
  const at = authority.lastIndexOf('@');
  const hostPort = authority.slice(at + 1);
  const parts = /^(\[[^\]]*\]|[^:]*)(?::(.*))?$/.exec(hostPort);
  return { scheme: match[1] as string, userinfo: at === -1 ? '' : authority.slice(0, at), host: parts?.[1] ?? hostPort, port: parts?.[2] ?? '', restAt: match[0].length };
}

const names = (text: string) => [...text.matchAll(PLACEHOLDER)].map((match) => match[1] as string);

/**
 * Why `template` may not be filled from the entered fields `entered` (one line each, without
 * the key), or none: a placeholder naming one of them stands for the scheme, userinfo, port or
 * whole host, or for part of a host label.
 */
export function enteredUrlProblems(template: string, entered: readonly string[]): string[] {
  const used = names(template).filter((name) => entered.includes(name));
  if (used.length === 0) return [];
  const parts = split(template);
  if (!parts) return [`{${used[0]}}: an entered value may fill only a host label under a fixed suffix, a path segment or a query value of an absolute URL`];
  const problems: string[] = [];
  const fixed = (text: string, what: string) => {
    for (const name of names(text).filter((n) => entered.includes(n))) problems.push(`{${name}} stands for ${what}: an entered value may fill only a host label under a fixed suffix (https://api.{site}.example.com), a path segment or a query value`);
  };
  fixed(parts.scheme, 'the scheme');
  fixed(parts.userinfo, 'the userinfo');
  fixed(parts.port, 'the port');
  if (names(parts.host).some((name) => entered.includes(name))) {
    const labels = parts.host.split('.');
    const last = labels.reduce((found, label, index) => (names(label).length > 0 ? index : found), -1);
    const suffix = labels.slice(last + 1);
    const tld = suffix.at(-1) ?? '';
    if (parts.host.startsWith('[') || suffix.length < 2 || !/^[a-z][a-z0-9-]*$/i.test(tld)) fixed(parts.host, 'the whole host');
    else {
      for (const label of labels.slice(0, last + 1)) {
        if (names(label).length > 0 && !/^\{[A-Za-z][A-Za-z0-9_.]*\}$/.test(label)) fixed(label, 'part of a host label (it must be the whole label)');
      }
    }
  }
  return problems;
}

/** The entered fields that fill a host label in any of `templates`. */
export function hostLabelFields(templates: readonly string[], entered: readonly string[]): Set<string> {
  const found = new Set<string>();
  for (const template of templates) {
    const parts = split(template);
    if (parts) for (const name of names(parts.host)) if (entered.includes(name)) found.add(name);
  }
  return found;
}

/** A pattern of the hosts `template` builds from entered values (`api.<label>.example.com`), or null when its host is fixed. */
export function enteredHostPattern(template: string, entered: readonly string[]): RegExp | null {
  const parts = split(template);
  if (!parts || !names(parts.host).some((name) => entered.includes(name))) return null;
  const literal = (text: string) => text.replace(/[.*+?^$()|[\]\\/-]/g, '\\$&');
  const host = parts.host
    .split(PLACEHOLDER)
    .map((piece, index) => (index % 2 === 1 ? '[a-z0-9-]{1,63}' : literal(piece.toLowerCase())))
    .join('');
  return new RegExp(`^${host}$`);
}

/** Which entered value filled a host label, and its refusal, when it is not a label: the URL is then left unusable. */
export class EnteredValueRefused extends Error {
  readonly field: string;
  constructor(field: string) {
    super(`the entered value of ${field} is not a host label`);
    this.name = 'EnteredValueRefused';
    this.field = field;
  }
}

/**
 * Fills `template`: an entered value in the host lower-cased and only when it is a label
 * (else EnteredValueRefused), in the path or query percent-encoded as one segment (a `.` or
 * `..` segment refused); any other placeholder (deployment settings, a provider's answer) as
 * `fill` does. Throws naming the first placeholder without a value.
 */
export function fillUrlTemplate(template: string, values: Record<string, unknown>, entered: readonly string[], fill: (template: string, values: Record<string, unknown>) => string): string {
  const parts = split(template);
  const restAt = parts?.restAt ?? 0;
  let out = '';
  let last = 0;
  for (const match of template.matchAll(PLACEHOLDER)) {
    const name = match[1] as string;
    const at = match.index ?? 0;
    out += template.slice(last, at);
    last = at + match[0].length;
    if (!entered.includes(name)) {
      out += fill(match[0], values);
      continue;
    }
    const raw = fill(match[0], values);
    if (at < restAt) {
      const label = raw.toLowerCase();
      if (!HOST_LABEL.test(label)) throw new EnteredValueRefused(name);
      out += label;
    } else {
      if (raw === '.' || raw === '..') throw new EnteredValueRefused(name);
      out += encodeURIComponent(raw);
    }
  }
  return out + template.slice(last);
}
