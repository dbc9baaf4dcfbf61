import type { Executor } from './index.js';

/**
 * The databases whose caches keep nothing (CACHE=off), set by the app from its config when it opens one. Caches
 * are made per database (see perDatabase), where no config reaches, so the setting travels with the database:
 * each app has its own, and two apps in one process (the tests) may differ.
 */
const uncached = new WeakSet<Executor>();

/** Called before the database serves its first request: caches made earlier keep the setting they were made with. */
export function setCaching(db: Executor, on: boolean): void {
  if (on) uncached.delete(db);
  else uncached.add(db);
}

/**
 * Values computed from one version of the data. Versions are counters that only grow and move in the same
 * transaction as the rows they cover, so "same version" means "same data": no expiry, no stale reads.
 * A newer version drops every entry; a caller that read an older version (it raced a write) is served
 * fresh and its result is not kept. Least recently used entries go first when the entries' total weight
 * passes the capacity; by default each entry weighs 1, so the capacity is a number of entries. With caching off
 * for its database, every call loads: the uncached read path, measured and tested as a configuration of its own.
 */
export class VersionedCache<T> {
  private readonly entries = new Map<string, { value: T; weight: number }>();
  private version = -Infinity;
  private weight = 0;
  private readonly capacity: number;

  constructor(
    db: Executor,
    capacity: number,
    private readonly weigh: (value: T) => number = () => 1,
  ) {
    this.capacity = uncached.has(db) ? 0 : capacity;
  }

  async get(version: number, key: string, load: () => Promise<T>): Promise<T> {
    if (this.capacity === 0) return load();
    if (version > this.version) {
      this.entries.clear();
      this.weight = 0;
      this.version = version;
    }
    const cached = this.entries.get(key);
    if (cached !== undefined && version === this.version) {
      this.entries.delete(key);
      this.entries.set(key, cached);
      return cached.value;
    }
    const value = await load();
    // The version may have moved while loading; then this value belongs to a version already dropped.
    if (version === this.version) this.keep(key, value);
    return value;
  }

  private keep(key: string, value: T): void {
    const weight = this.weigh(value);
    if (weight > this.capacity) return;
    const replaced = this.entries.get(key);
    if (replaced !== undefined) {
      this.entries.delete(key);
      this.weight -= replaced.weight;
    }
    for (const [oldest, entry] of this.entries) {
      if (this.weight + weight <= this.capacity) break;
      this.entries.delete(oldest);
      this.weight -= entry.weight;
    }
    this.entries.set(key, { value, weight });
    this.weight += weight;
  }
}
