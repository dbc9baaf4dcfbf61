/**
 * Sets `key` in a Map used as a bounded memo: when it is full, the entry set longest ago goes first
 * (Maps iterate in insertion order, so that is the first key).
 */
export function setWithin<K, V>(map: Map<K, V>, capacity: number, key: K, value: V): void {
  if (!map.has(key) && map.size >= capacity) map.delete(map.keys().next().value as K);
  map.set(key, value);
}
