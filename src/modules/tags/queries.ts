import { readCounter } from '../../db/counters.js';
import type { Executor } from '../../db/index.js';
import { byCodePoint } from '../articles/queries.js';

/** Tags on at least one article, by the use counter kept with the links; ties by name in code-point order. */
export async function listTags(db: Executor): Promise<string[]> {
  const rows = await db.selectFrom('tags').select(['name', 'article_count']).where('article_count', '>', 0).execute();
  return rows.sort((a, b) => b.article_count - a.article_count || byCodePoint(a.name, b.name)).map((row) => row.name);
}

interface CachedTags {
  usageVersion: number;
  tags: string[];
}

const cachedByDatabase = new WeakMap<Executor, CachedTags>();

/**
 * The tag list, re-read only when the tag-usage version has moved. Every change of a tag's use
 * count moves that version in the same transaction, so one primary-key read tells whether the list changed,
 * also for changes made by other processes. The version is read before the tags: a list read after it can
 * only be newer, and a newer list is re-read at the next request because the version will have moved too.
 */
export async function currentTags(db: Executor): Promise<readonly string[]> {
  const usageVersion = await readCounter(db, 'tag_usage_version');
  const cached = cachedByDatabase.get(db);
  if (cached?.usageVersion === usageVersion) return cached.tags;
  const tags = await listTags(db);
  cachedByDatabase.set(db, { usageVersion, tags });
  return tags;
}
