// @ts-check
import { defaultPathSerializer } from 'openapi-fetch';
import { MULTI_SEGMENT } from './generated/multi-segment.js';

/** @type {Record<string, readonly string[]>} */
const MULTI = MULTI_SEGMENT;

/**
 * Fills a path template's parameters. Those the document marks `x-ms-skip-url-encoding` (the
 * proxy's `{path}`) keep their slashes — each segment is encoded on its own, so `user/repos`
 * stays `user/repos` where openapi-fetch alone would send `user%2Frepos` (which Tessera refuses).
 * @param {string} url the base URL followed by the path template
 * @param {Record<string, unknown>} params
 * @returns {string}
 */
export function pathSerializer(url, params) {
  const template = Object.keys(MULTI).find((candidate) => url.endsWith(candidate));
  const multi = template === undefined ? [] : (MULTI[template] ?? []);
  /** @type {Record<string, unknown>} */
  const rest = {};
  let filled = url;
  for (const [name, value] of Object.entries(params)) {
    if (multi.includes(name) && value !== undefined && value !== null) {
      filled = filled.replace(`{${name}}`, String(value).split('/').map(encodeURIComponent).join('/'));
    } else rest[name] = value;
  }
  return defaultPathSerializer(filled, rest);
}
