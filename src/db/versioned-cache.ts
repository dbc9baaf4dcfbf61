import { setWithin } from '../bounded-map.js';

/**
 * Values computed from one version of the data. Versions are counters that only grow and move in the same
 * transaction as the rows they cover, so "same version" means "same data": no expiry, no stale reads.
 * A newer version drops every entry; a caller that read an older version (it raced a write) is served
 * fresh and its result is not kept. Least recently used entries go first when full.
 */
export class VersionedCache<T> {
  private readonly entries = new Map<string, T>();
  private version = -Infinity;

  constructor(private readonly capacity: number) {}

  async get(version: number, key: string, load: () => Promise<T>): Promise<T> {
    if (version > this.version) {
      this.entries.clear();
      this.version = version;
    }
    const cached = this.entries.get(key);
    if (cached !== undefined && version === this.version) {
      this.entries.delete(key);
      this.entries.set(key, cached);
      return cached;
    }
    const value = await load();
    // The version may have moved while loading; then this value belongs to a version already dropped.
    if (version === this.version) {
      setWithin(this.entries, this.capacity, key, value);
    }
    return value;
  }
}
