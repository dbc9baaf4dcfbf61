import { readCounter } from '../../db/counters.js';
import type { Executor } from '../../db/index.js';
import { VersionedCache } from '../../db/versioned-cache.js';
import { byCodePoint } from '../articles/queries.js';

/** Tags on at least one article, by the use counter kept with the links; ties by name in code-point order. */
async function listTags(db: Executor): Promise<string[]> {
  const rows = await db.selectFrom('tags').select(['name', 'article_count']).where('article_count', '>', 0).execute();
  return rows.sort((a, b) => b.article_count - a.article_count || byCodePoint(a.name, b.name)).map((row) => row.name);
}

const cachesByDatabase = new WeakMap<Executor, VersionedCache<string[]>>();

/**
 * The tag list, re-read only when the tag-usage version has moved: every change of a tag's use count moves it
 * in the same transaction, so one primary-key read tells whether the list changed, also for changes made by
 * other processes. The returned list is shared: callers must not change it.
 */
export async function currentTags(db: Executor): Promise<string[]> {
  let cache = cachesByDatabase.get(db);
  if (cache === undefined) {
    cache = new VersionedCache(1);
    cachesByDatabase.set(db, cache);
  }
  return cache.get(await readCounter(db, 'tag_usage_version'), 'tags', () => listTags(db));
}
