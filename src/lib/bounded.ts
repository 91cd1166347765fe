/**
 * Sets `key` in `map` as its newest entry, first dropping the oldest entry when the map
 * already holds `max`: a bounded cache, oldest out (a Map iterates in insertion order, so
 * setting a key again on each use makes it least-recently-used out).
 */
export function remember<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  if (map.size >= max) map.delete(map.keys().next().value as K);
  map.set(key, value);
}
