import { describe, expect, it } from 'vitest';
import type { Executor } from '../src/db/index.js';
import { setCaching, VersionedCache } from '../src/db/versioned-cache.js';

/** The cache only uses its database as the key of the CACHE setting, so any object stands in for one. */
const database = () => ({}) as Executor;

/** Loads through the cache and says whether the loader ran. */
async function read<T>(cache: VersionedCache<T>, version: number, key: string, value: T) {
  let loaded = false;
  const got = await cache.get(version, key, async () => {
    loaded = true;
    return value;
  });
  return { got, loaded };
}

describe('VersionedCache', () => {
  it('serves a kept value while the version stands still, and drops everything when it moves', async () => {
    const cache = new VersionedCache<string>(database(), 10);
    expect(await read(cache, 1, 'k', 'v1')).toEqual({ got: 'v1', loaded: true });
    expect(await read(cache, 1, 'k', 'other')).toEqual({ got: 'v1', loaded: false });
    expect(await read(cache, 2, 'k', 'v2')).toEqual({ got: 'v2', loaded: true });
    expect(await read(cache, 2, 'k', 'other')).toEqual({ got: 'v2', loaded: false });
  });

  it('serves a reader of an older version fresh, and does not keep what it loaded', async () => {
    const cache = new VersionedCache<string>(database(), 10);
    await read(cache, 5, 'k', 'v5');
    expect(await read(cache, 4, 'k', 'v4')).toEqual({ got: 'v4', loaded: true });
    expect(await read(cache, 5, 'k', 'other')).toEqual({ got: 'v5', loaded: false });
  });

  it('evicts the least recently used entries when the total weight passes the capacity', async () => {
    const cache = new VersionedCache<string>(database(), 10, (value) => value.length);
    await read(cache, 1, 'a', 'aaaa');
    await read(cache, 1, 'b', 'bbbb');
    await read(cache, 1, 'a', 'unused'); // a is now the most recently used
    await read(cache, 1, 'c', 'cccc'); // 12 > 10: b goes
    expect((await read(cache, 1, 'b', 'bbbb')).loaded).toBe(true); // back in: a goes (4 + 4 + 4 > 10)
    expect((await read(cache, 1, 'c', 'x')).loaded).toBe(false);
    expect((await read(cache, 1, 'a', 'aaaa')).loaded).toBe(true);
  });

  it('never keeps a value heavier than the whole capacity, and keeps the rest', async () => {
    const cache = new VersionedCache<string>(database(), 10, (value) => value.length);
    await read(cache, 1, 'small', 'ss');
    expect(await read(cache, 1, 'huge', 'h'.repeat(11))).toEqual({ got: 'h'.repeat(11), loaded: true });
    expect((await read(cache, 1, 'huge', 'h'.repeat(11))).loaded).toBe(true);
    expect((await read(cache, 1, 'small', 'x')).loaded).toBe(false);
  });

  it('counts a capacity of entries when no weight is given', async () => {
    const cache = new VersionedCache<number>(database(), 2);
    await read(cache, 1, 'a', 1);
    await read(cache, 1, 'b', 2);
    await read(cache, 1, 'c', 3);
    expect((await read(cache, 1, 'b', 0)).loaded).toBe(false);
    expect((await read(cache, 1, 'c', 0)).loaded).toBe(false);
    expect((await read(cache, 1, 'a', 1)).loaded).toBe(true);
  });

  it('loads on every call, whatever the version, when caching is off for its database', async () => {
    const db = database();
    setCaching(db, false);
    const cache = new VersionedCache<string>(db, 10);
    expect(await read(cache, 1, 'k', 'v1')).toEqual({ got: 'v1', loaded: true });
    expect(await read(cache, 1, 'k', 'again')).toEqual({ got: 'again', loaded: true });
  });
});
